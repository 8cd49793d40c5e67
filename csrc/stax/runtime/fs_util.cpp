#include "stax/runtime/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <atomic>
#include <chrono>
#include <system_error>
#include <vector>

#include "core/error.h"

namespace tp::stax::runtime::fs {
namespace {

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  throw BackendError(str(what, " '", path, "': ", errno_message(err)));
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot write", path, errno);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string errno_message(int err) { return std::error_code(err, std::generic_category()).message(); }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return "empty path";
  if (is_directory(path)) return "";  // the common case: one stat, no mkdir calls
  // Create each prefix in turn; EEXIST is fine as long as it is a directory.
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (prefix.empty() || prefix.back() == '/') continue;  // "a//b" or trailing '/'
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return str("cannot create directory '", prefix, "': ", errno_message(errno));
    }
    if (!is_directory(prefix)) return str("'", prefix, "' exists but is not a directory");
  }
  return "";
}

std::string make_temp_file(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name + kTempMarker + "XXXXXX";
  int fd = ::mkostemp(path.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) throw_errno("cannot create a temporary file in", dir, errno);
  ::close(fd);
  return path;
}

void write_file_atomic(const std::string& path, const std::string& data) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  const std::string tmp = make_temp_file(dir, name);
  ScopedUnlink cleanup(tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", tmp, errno);
  try {
    write_all(fd, data, tmp);
    // fsync before rename: otherwise a crash can leave a renamed but empty file.
    if (::fsync(fd) != 0) throw_errno("cannot fsync", tmp, errno);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  rename_file(tmp, path);
  cleanup.release();
}

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw_errno("cannot fsync", path, err);
}

void rename_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw BackendError(str("cannot rename '", from, "' to '", to, "': ", errno_message(errno)));
  }
}

std::string read_head_lines(const std::string& path, int max_lines) {
  std::ifstream in(path);
  std::string out, line;
  int count = 0;
  while (std::getline(in, line)) {
    if (count++ < max_lines) out += line + "\n";
  }
  if (count > max_lines) out += str("... (", count - max_lines, " more lines in ", path, ")\n");
  return out;
}

void remove_stale_temp_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(d)) {
    if (std::strstr(entry->d_name, kTempMarker) != nullptr) stale.push_back(dir + "/" + entry->d_name);
  }
  ::closedir(d);
  for (const auto& path : stale) ::unlink(path.c_str());
}

ScopedUnlink::~ScopedUnlink() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

FileLock::FileLock(const std::string& path) {
  // O_CLOEXEC: a compiler we spawn must not inherit (and so prolong) the lock.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw_errno("cannot open lock file", path, errno);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    throw_errno("cannot lock", path, err);
  }
}

FileLock::~FileLock() {
  ::close(fd_);  // closing the last descriptor releases the lock
}

}  // namespace tp::stax::runtime::fs

namespace tp::stax::runtime::fs {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// A short random suffix for temp names (no mkstemp: it takes a path, not a
// directory descriptor).
std::string random_suffix() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static std::atomic<uint64_t> counter{0};
  uint64_t x = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull);
  std::string out(6, 'x');
  for (char& c : out) {
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    c = kChars[x % (sizeof kChars - 1)];
  }
  return out;
}

std::string describe_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string mode_string(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string private_problem(const struct stat& st, const std::string& what) {
  if (st.st_uid != ::geteuid()) {
    return str(what, " is owned by uid ", st.st_uid, ", not by the current user (uid ", ::geteuid(), ")");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return str(what, " is writable by other users (mode ", mode_string(st.st_mode), "), so its code could be replaced");
  }
  return "";
}

UniqueFd open_private_dir_at(int parent_fd, const std::string& name, const std::string& shown,
                             std::vector<std::string>* repairs) {
  std::string last_error;
  for (int attempt = 0; attempt < 4; ++attempt) {
    UniqueFd fd(::openat(parent_fd, name.c_str(), kDirFlags));
    std::string problem;
    struct stat st {};
    bool have_st = false;
    if (fd.valid()) {
      if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat", shown, errno);
      have_st = true;
      problem = private_problem(st, "it");
      if (problem.empty()) return fd;
    } else if (errno == ENOENT) {
      if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot create directory", shown, errno);
      continue;  // open what is there now (ours, or a concurrent creator's)
    } else if (errno == ENOTDIR || errno == ELOOP) {
      have_st = ::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      problem = have_st ? str("it is ", describe_type(st.st_mode), ", not a directory") : "it is not a directory";
    } else {
      throw_errno("cannot open directory", shown, errno);
    }
    repairs->push_back(str("'", shown, "': ", problem));
    last_error = problem;
    move_aside(parent_fd, name, have_st ? &st : nullptr);
  }
  throw BackendError(str("kernel cache: cannot make '", shown, "' a private directory: ", last_error));
}

UniqueFd open_private_file_at(int dir_fd, const std::string& name, struct stat* st, bool* missing,
                              std::string* problem) {
  *missing = false;
  problem->clear();
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      *missing = true;
    } else if (errno == ELOOP) {
      *problem = str(name, " is a symbolic link");
    } else {
      *problem = str(name, " cannot be opened: ", errno_message(errno));
    }
    return UniqueFd();
  }
  if (::fstat(fd.get(), st) != 0) {
    *problem = str(name, " cannot be examined: ", errno_message(errno));
    return UniqueFd();
  }
  if (!S_ISREG(st->st_mode)) {
    *problem = str(name, " is ", describe_type(st->st_mode), ", not a regular file");
    return UniqueFd();
  }
  *problem = private_problem(*st, name);
  if (!problem->empty()) return UniqueFd();
  return fd;
}

bool read_exact(int fd, size_t size, std::string* out) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out->data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void remove_tree_at(int dir_fd, const std::string& name) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return;
  UniqueFd sub(::openat(dir_fd, name.c_str(), kDirFlags));
  if (!sub.valid()) return;
  std::vector<std::string> children;
  if (DIR* d = ::fdopendir(::dup(sub.get()))) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) children.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  for (const auto& child : children) remove_tree_at(sub.get(), child);
  ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR);
}

void move_aside(int dir_fd, const std::string& name, const struct stat* seen) {
  auto same = [seen](int fd, const std::string& n) {
    struct stat now;
    return seen == nullptr || (::fstatat(fd, n.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                               now.st_dev == seen->st_dev && now.st_ino == seen->st_ino);
  };
  // Another process may have repaired it already (and be using the new one).
  if (!same(dir_fd, name)) return;
  const std::string aside = name + kTempMarker + "damaged-" + random_suffix();
  if (::renameat(dir_fd, name.c_str(), dir_fd, aside.c_str()) != 0) return;  // the caller looks again
  if (!same(dir_fd, aside)) {
    // Replaced between the check and the rename: that was not the bad object,
    // so put it back unless something newer took its place.
    ::renameat2(dir_fd, aside.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE);
    return;
  }
  remove_tree_at(dir_fd, aside);
}

std::string make_temp_file_at(int dir_fd, const std::string& name, UniqueFd* fd, const std::string& shown_dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = name + kTempMarker + random_suffix();
    UniqueFd f(::openat(dir_fd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.valid()) {
      *fd = std::move(f);
      return tmp;
    }
    if (errno != EEXIST) throw_errno("cannot create a temporary file in", shown_dir, errno);
  }
  throw BackendError(str("cannot create a temporary file in '", shown_dir, "': too many name collisions"));
}

void rename_at(int dir_fd, const std::string& from, const std::string& to, const std::string& shown_dir) {
  struct stat st;
  if (::fstatat(dir_fd, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) move_aside(dir_fd, to, &st);
  if (::renameat(dir_fd, from.c_str(), dir_fd, to.c_str()) != 0) {
    throw BackendError(str("cannot rename '", shown_dir, "/", from, "' to '", shown_dir, "/", to,
                           "': ", errno_message(errno)));
  }
}

void write_file_atomic_at(int dir_fd, const std::string& name, const std::string& data,
                          const std::string& shown_dir) {
  UniqueFd fd;
  const std::string tmp = make_temp_file_at(dir_fd, name, &fd, shown_dir);
  try {
    write_all(fd.get(), data, shown_dir + "/" + tmp);
    if (::fsync(fd.get()) != 0) throw_errno("cannot fsync", shown_dir + "/" + tmp, errno);
    rename_at(dir_fd, tmp, name, shown_dir);
  } catch (...) {
    ::unlinkat(dir_fd, tmp.c_str(), 0);
    throw;
  }
}

void remove_stale_temp_files_at(int dir_fd) {
  std::vector<std::string> stale;
  if (DIR* d = ::fdopendir(::dup(dir_fd))) {
    while (const dirent* entry = ::readdir(d)) {
      if (std::strstr(entry->d_name, kTempMarker) != nullptr) stale.emplace_back(entry->d_name);
    }
    ::closedir(d);
  }
  for (const auto& name : stale) remove_tree_at(dir_fd, name);
}

ScopedUnlinkAt::~ScopedUnlinkAt() {
  if (!name_.empty()) ::unlinkat(dir_fd_, name_.c_str(), 0);
}

FileLockAt::FileLockAt(int dir_fd, const std::string& name, const std::string& shown,
                       std::vector<std::string>* repairs) {
  for (int attempt = 0; attempt < 4 && !fd_.valid(); ++attempt) {
    // O_NONBLOCK: a FIFO put in its place must not hang the open. O_CLOEXEC:
    // a compiler we spawn must not inherit (and so prolong) the lock.
    UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
    std::string problem;
    struct stat st {};
    bool have_st = true;
    if (!fd.valid()) {
      if (errno != EISDIR && errno != ELOOP && errno != ENXIO && errno != ETXTBSY && errno != EACCES) {
        throw_errno("cannot open lock file", shown, errno);
      }
      const int err = errno;
      have_st = ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      problem = have_st ? str("it is ", describe_type(st.st_mode), ", not a regular file")
                        : str("it cannot be opened: ", errno_message(err));
    } else if (::fstat(fd.get(), &st) != 0) {
      throw_errno("cannot stat lock file", shown, errno);
    } else if (!S_ISREG(st.st_mode)) {
      problem = str("it is ", describe_type(st.st_mode), ", not a regular file");
    } else {
      problem = private_problem(st, "it");
    }
    if (problem.empty()) {
      fd_ = std::move(fd);
      break;
    }
    repairs->push_back(str("'", shown, "': ", problem));
    fd.reset();
    move_aside(dir_fd, name, have_st ? &st : nullptr);
  }
  if (!fd_.valid()) throw BackendError(str("kernel cache: cannot create a usable lock file '", shown, "'"));
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    throw_errno("cannot lock", shown, errno);
  }
}

}  // namespace tp::stax::runtime::fs
