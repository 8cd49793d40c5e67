#include "stax/runtime/cache_dir.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "stax/runtime/fs_util.h"

namespace tp::stax::runtime {
namespace {

std::string home_dir() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  // No $HOME (daemons, some containers): ask the password database.
  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir) {
    return found->pw_dir;
  }
  return "";
}

// Fallback directories are private to one process: the process that made
// them deletes them at exit. The pid check keeps a fork()ed child that exits
// normally from deleting its parent's directory.
class TempDirJanitor {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back({dir, ::getpid()});
  }
  ~TempDirJanitor() {
    for (const auto& [dir, owner] : dirs_) {
      if (owner != ::getpid()) continue;
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::string, pid_t>> dirs_;
};

std::string make_private_temp_dir() {
  static TempDirJanitor janitor;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tensorplay-cache-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {  // mkdtemp creates it with mode 0700
    throw BackendError(str("cannot create a private temporary kernel cache directory '", pattern,
                           "': ", fs::errno_message(errno), "; set TP_CACHE_DIR to a writable directory"));
  }
  janitor.add(pattern);
  return pattern;
}

// Creates and vets `dir`; returns its canonical path and descriptor, or ""
// and sets `*why`.
std::string prepare_configured_dir(const std::string& dir, fs::UniqueFd* fd, std::string* why) {
  if (dir.empty()) {
    *why = "no home directory and neither TP_CACHE_DIR nor XDG_CACHE_HOME is set";
    return "";
  }
  *why = fs::make_dirs(dir, 0700);
  if (!why->empty()) return "";
  // Vet and use the canonical path: if `dir` is a symlink, the check applies
  // to what it points at now, and a later re-pointing cannot redirect us.
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) {
    *why = str("cannot resolve path: ", fs::errno_message(errno));
    return "";
  }
  *fd = open_vetted_dir(real, why);
  return fd->valid() ? std::string(real) : "";
}

// An ancestor may be root's or ours; writable by others only if sticky
// (others can then add entries but not rename or delete ours).
std::string ancestor_problem(const struct stat& st, const std::string& path) {
  if (!S_ISDIR(st.st_mode)) return str("its ancestor '", path, "' is not a directory");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return str("its ancestor '", path, "' is owned by uid ", st.st_uid, ", neither root nor the current user (uid ",
               ::geteuid(), "), who could replace the cache directory");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
    return str("its ancestor '", path, "' is writable by other users and not sticky (mode ",
               fs::mode_string(st.st_mode), "), so they could replace the cache directory");
  }
  return "";
}

}  // namespace

std::string configured_cache_dir() {
  const char* explicit_dir = std::getenv("TP_CACHE_DIR");
  if (explicit_dir != nullptr && *explicit_dir != '\0') return explicit_dir;
  // The XDG spec says relative values are invalid and must be ignored.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/tensorplay";
  const std::string home = home_dir();
  return home.empty() ? "" : home + "/.cache/tensorplay";
}

fs::UniqueFd open_vetted_dir(const std::string& canonical_dir, std::string* why) {
  if (canonical_dir.empty() || canonical_dir[0] != '/') {
    *why = "it is not an absolute path";
    return fs::UniqueFd();
  }
  fs::UniqueFd fd(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string path = "/";
  struct stat st;
  size_t pos = 1;
  while (true) {
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
      *why = str("cannot open '", path, "': ", fs::errno_message(errno));
      return fs::UniqueFd();
    }
    const size_t end = canonical_dir.find('/', pos);
    const std::string name = canonical_dir.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (name.empty()) break;  // trailing '/' or the root itself
    // `path` is an ancestor of the cache directory.
    *why = ancestor_problem(st, path);
    if (!why->empty()) return fs::UniqueFd();
    fs::UniqueFd next(::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    path = path == "/" ? "/" + name : path + "/" + name;
    if (!next.valid() && (errno == ENOTDIR || errno == ELOOP)) {
      *why = str("'", path, "' is not a directory (or is a symbolic link)");
      return fs::UniqueFd();
    }
    fd = std::move(next);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
    *why = str("cannot open it: ", fs::errno_message(errno));
    return fs::UniqueFd();
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = "it is not a directory";
    return fs::UniqueFd();
  }
  *why = fs::private_problem(st, "it");
  if (!why->empty()) return fs::UniqueFd();
  // AT_EACCESS: check with the effective uid, the one that will write.
  if (::faccessat(fd.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    *why = str("it is not writable: ", fs::errno_message(errno));
    return fs::UniqueFd();
  }
  return fd;
}

std::string cache_dir_problem(const std::string& dir) {
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return str("cannot stat it: ", fs::errno_message(errno));
  std::string why;
  fs::UniqueFd fd = open_vetted_dir(real, &why);
  return fd.valid() ? "" : why;
}

ResolvedCacheDir resolve_cache_dir() {
  const std::string configured = configured_cache_dir();
  std::string why;
  fs::UniqueFd fd;
  std::string path = prepare_configured_dir(configured, &fd, &why);
  if (!path.empty()) return {path, std::make_shared<const fs::UniqueFd>(std::move(fd)), ""};

  const std::string fallback = make_private_temp_dir();
  std::string fallback_why;
  char real[PATH_MAX];
  fs::UniqueFd fallback_fd;
  if (::realpath(fallback.c_str(), real) != nullptr) fallback_fd = open_vetted_dir(real, &fallback_why);
  if (!fallback_fd.valid()) {
    throw BackendError(str("cannot use kernel cache directory '", configured, "': ", why,
                           "; and the private temporary directory '", fallback, "' is not safe either: ",
                           fallback_why, ". Set TP_CACHE_DIR to a directory you own that only you can write."));
  }
  return {real, std::make_shared<const fs::UniqueFd>(std::move(fallback_fd)),
          str("tensorplay: cannot use kernel cache directory '", configured, "': ", why,
              ". Compiled kernels go to the private temporary directory '", real,
              "' for the rest of this process and will not be reused by later runs; set "
              "TP_CACHE_DIR to a directory you own that only you can write (mode 0700).")};
}

}  // namespace tp::stax::runtime
