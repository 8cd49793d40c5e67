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
