#include "stax/runtime/cache_dir.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
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

// Creates and vets `dir`; returns its canonical path, or "" and sets `*why`.
std::string prepare_configured_dir(const std::string& dir, std::string* why) {
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
  *why = cache_dir_problem(real);
  return why->empty() ? std::string(real) : "";
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

std::string cache_dir_problem(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return str("cannot stat it: ", fs::errno_message(errno));
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid()) {
    return str("it is owned by uid ", st.st_uid, ", not by the current user (uid ", ::geteuid(), ")");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return str("it is writable by other users (mode ", mode, "), so its code could be replaced");
  }
  // AT_EACCESS: check with the effective uid, the one that will write.
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    return str("it is not writable: ", fs::errno_message(errno));
  }
  return "";
}

ResolvedCacheDir resolve_cache_dir() {
  const std::string configured = configured_cache_dir();
  std::string why;
  std::string path = prepare_configured_dir(configured, &why);
  if (!path.empty()) return {path, ""};

  const std::string fallback = make_private_temp_dir();
  return {fallback, str("tensorplay: cannot use kernel cache directory '", configured, "': ", why,
                        ". Compiled kernels go to the private temporary directory '", fallback,
                        "' for the rest of this process and will not be reused by later runs; set "
                        "TP_CACHE_DIR to a directory you own that only you can write (mode 0700).")};
}

}  // namespace tp::stax::runtime
