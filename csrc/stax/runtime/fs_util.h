// Small POSIX file helpers for the kernel cache: directory creation with a
// given mode, atomic file replacement (temp file + rename in the same
// directory, so readers see either no file or a whole one) and an exclusive
// inter-process lock. Failures throw tp::BackendError naming the path.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace tp::stax::runtime::fs {

// Temp files are named "<name>.tmp.XXXXXX"; this marker identifies them.
inline constexpr const char* kTempMarker = ".tmp.";

std::string errno_message(int err);
bool exists(const std::string& path);

// mkdir -p: every missing component is created with `mode`. Returns "" on
// success (also when the directory already existed), else the reason.
std::string make_dirs(const std::string& path, mode_t mode);

// Creates an empty, unique, mode-0600 file "<dir>/<name>.tmp.XXXXXX" and
// returns its path.
std::string make_temp_file(const std::string& dir, const std::string& name);

// Replace `path` with `data` atomically: write a temp file next to it, fsync,
// rename over `path`.
void write_file_atomic(const std::string& path, const std::string& data);

void fsync_file(const std::string& path);
void rename_file(const std::string& from, const std::string& to);

// The first `max_lines` lines of a text file ("" if it cannot be read), plus a
// note with the number of lines left out.
std::string read_head_lines(const std::string& path, int max_lines);

// Deletes "*.tmp.*" files in `dir` left by a writer that died mid-write. Only
// safe while holding the FileLock that guards all writes to `dir`.
void remove_stale_temp_files(const std::string& dir);

// Unlinks a file when it goes out of scope unless release()d: keeps error
// paths from leaving temp files behind.
class ScopedUnlink {
 public:
  explicit ScopedUnlink(std::string path) : path_(std::move(path)) {}
  ~ScopedUnlink();
  ScopedUnlink(const ScopedUnlink&) = delete;
  ScopedUnlink& operator=(const ScopedUnlink&) = delete;
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// Exclusive flock() on `path` (created if missing) for the object's lifetime.
// flock locks belong to the open file description, so they exclude other
// threads of this process as well as other processes.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// ---- Descriptor-based access (the code cache's trust path) ----------------
// Everything that decides whether code is loaded works on open descriptors
// (openat + O_NOFOLLOW, then fstat), so the object that was checked is the
// object that is used, whatever happens to the path in between.

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// Why an object with this stat may not hold or lead to loadable code ("" if
// fine): it must be owned by the effective uid and not writable by group or
// others. `what` names the object in the reason ("it", "kernel.so", ...).
std::string private_problem(const struct stat& st, const std::string& what);

// "0755"-style octal rendering of the permission bits.
std::string mode_string(mode_t mode);

// Opens (creating with mode 0700 if missing) the directory `name` inside
// `parent_fd` and checks that it is private (private_problem). Anything else
// found under that name (a file, a symlink, a directory owned by someone else
// or writable by others) is moved aside (move_aside) and replaced by a fresh
// directory; each such repair appends "'<shown>': <what was wrong>" to
// `*repairs`. Throws tp::BackendError if no private directory can be made.
UniqueFd open_private_dir_at(int parent_fd, const std::string& name, const std::string& shown,
                             std::vector<std::string>* repairs);

// Opens the existing regular file `name` in `dir_fd` for reading without ever
// blocking (O_NONBLOCK: a FIFO in its place opens at once and is rejected)
// and without following a symlink, then checks with fstat that it is a
// private regular file. Returns an invalid fd with *missing = true if there is
// no such entry, or with *problem set if there is one that is unusable.
UniqueFd open_private_file_at(int dir_fd, const std::string& name, struct stat* st, bool* missing,
                              std::string* problem);

// Reads exactly `size` bytes of fd from offset 0 (false if fewer are there:
// read(), never mmap, so a file truncated under us cannot raise SIGBUS).
bool read_exact(int fd, size_t size, std::string* out);

// Renames what is at `name` in `dir_fd` to a unique "<name>.tmp.damaged-*"
// name (so it is gone from `name` atomically) and then deletes it, a
// directory with its contents, as far as permissions allow (leftovers carry
// the temp marker, so remove_stale_temp_files_at() retries them later).
// With `seen`, only if it is still that object (same device and inode):
// another process may already have repaired it and be using the new one.
void move_aside(int dir_fd, const std::string& name, const struct stat* seen);

// Removes `name` in `dir_fd` (recursively if a directory; never follows
// symlinks). Best effort.
void remove_tree_at(int dir_fd, const std::string& name);

// Creates a unique, empty, mode-0600 "<name>.tmp.XXXXXX" in dir_fd
// (O_EXCL|O_NOFOLLOW) and returns its name; *fd receives it open for writing.
std::string make_temp_file_at(int dir_fd, const std::string& name, UniqueFd* fd, const std::string& shown_dir);

// Atomically replaces `name` in dir_fd with `data` (temp file, fsync,
// renameat). A directory or other non-file in the way is moved aside first.
void write_file_atomic_at(int dir_fd, const std::string& name, const std::string& data,
                          const std::string& shown_dir);

// renameat within one directory; a directory sitting at `to` is moved aside
// first (rename cannot replace a directory by a file).
void rename_at(int dir_fd, const std::string& from, const std::string& to, const std::string& shown_dir);

// Deletes "*.tmp.*" entries of dir_fd left by a writer that died mid-write.
// Only safe while holding the FileLock that guards all writes to the dir.
void remove_stale_temp_files_at(int dir_fd);

// Unlinks `name` in dir_fd when it goes out of scope unless release()d.
class ScopedUnlinkAt {
 public:
  ScopedUnlinkAt(int dir_fd, std::string name) : dir_fd_(dir_fd), name_(std::move(name)) {}
  ~ScopedUnlinkAt();
  ScopedUnlinkAt(const ScopedUnlinkAt&) = delete;
  ScopedUnlinkAt& operator=(const ScopedUnlinkAt&) = delete;
  void release() { name_.clear(); }

 private:
  int dir_fd_;
  std::string name_;
};

// Exclusive flock() on the regular file `name` in dir_fd (created mode 0600
// if missing). A directory, FIFO, symlink or foreign file in its place is
// moved aside and replaced; such a repair appends to `*repairs`.
class FileLockAt {
 public:
  FileLockAt(int dir_fd, const std::string& name, const std::string& shown, std::vector<std::string>* repairs);
  FileLockAt(const FileLockAt&) = delete;
  FileLockAt& operator=(const FileLockAt&) = delete;

 private:
  UniqueFd fd_;
};

}  // namespace tp::stax::runtime::fs
