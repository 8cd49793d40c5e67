// Small POSIX file helpers for the kernel cache: directory creation with a
// given mode, atomic file replacement (temp file + rename in the same
// directory, so readers see either no file or a whole one) and an exclusive
// inter-process lock. Failures throw tp::BackendError naming the path.
#pragma once
#include <sys/types.h>

#include <string>
#include <utility>

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

}  // namespace tp::stax::runtime::fs
