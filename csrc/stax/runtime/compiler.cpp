#include "stax/runtime/compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "stax/runtime/fs_util.h"

extern char** environ;

namespace tp::stax::runtime {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string make_absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// Like the shell: a name with a '/' is used as is, otherwise each PATH entry
// is tried in order (an empty entry means the current directory).
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? make_absolute(name) : "";
  const char* env_path = std::getenv("PATH");
  const std::string path_list = env_path ? env_path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= path_list.size()) {
    size_t end = path_list.find(':', begin);
    if (end == std::string::npos) end = path_list.size();
    std::string dir = path_list.substr(begin, end - begin);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return make_absolute(candidate);
    begin = end + 1;
  }
  return "";
}

std::string find_compiler() {
  const char* cxx = std::getenv("CXX");
  if (cxx != nullptr && *cxx != '\0') {
    std::string path = find_program(cxx);
    TP_CHECK(!path.empty(), BackendError, "the C++ compiler named by CXX='", cxx,
             "' was not found or is not executable (CXX must name a single program, without arguments)");
    return path;
  }
  for (const char* name : {"g++", "c++"}) {
    std::string path = find_program(name);
    if (!path.empty()) return path;
  }
  throw BackendError("no C++ compiler found: neither g++ nor c++ is on PATH; install one or set CXX");
}

// Why not `g++ --version`: spawning the compiler costs ~10 ms, too much for a
// warm-cache process that must reach its first kernel within 50 ms. Installing,
// upgrading or switching a compiler replaces the driver binary (distribution
// packages put the version in its real name, e.g. x86_64-linux-gnu-g++-12, and
// set size and mtime), so realpath + size + mtime identify it for a few
// syscalls. The invoked path is kept too: wrappers such as ccache behave
// according to the name they were called by. Known blind spot: changing the
// compiler's internals (cc1plus, headers) without touching the driver.
std::string compiler_identity(const std::string& path) {
  char real[PATH_MAX];
  const std::string real_path = ::realpath(path.c_str(), real) ? std::string(real) : path;
  struct stat st {};
  ::stat(real_path.c_str(), &st);
  return str(path, " -> ", real_path, " size=", static_cast<long long>(st.st_size),
             " mtime=", static_cast<long long>(st.st_mtim.tv_sec), ".", st.st_mtim.tv_nsec);
}

std::mutex g_mutex;
CompilerInfo g_compiler;  // assigned in place, so references handed out stay valid
bool g_compiler_valid = false;

// posix_spawn file actions that route the child's stdio; owns the object.
class StdioRedirect {
 public:
  explicit StdioRedirect(int log_fd) {
    ::posix_spawn_file_actions_init(&actions_);
    ::posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    // dup2 clears FD_CLOEXEC on the child's copy; log_fd itself may be CLOEXEC.
    ::posix_spawn_file_actions_adddup2(&actions_, log_fd, 1);
    ::posix_spawn_file_actions_adddup2(&actions_, 1, 2);
  }
  ~StdioRedirect() { ::posix_spawn_file_actions_destroy(&actions_); }
  StdioRedirect(const StdioRedirect&) = delete;
  StdioRedirect& operator=(const StdioRedirect&) = delete;
  const posix_spawn_file_actions_t* get() const { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

const CompilerInfo& host_compiler() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_compiler_valid) {
    const std::string path = find_compiler();  // throws without caching
    g_compiler = CompilerInfo{path, compiler_identity(path)};
    g_compiler_valid = true;
  }
  return g_compiler;
}

int run_command(const std::vector<std::string>& argv, const std::string& log_path) {
  // O_NONBLOCK: never wait on a FIFO; O_NOFOLLOW: never write through a link.
  fs::UniqueFd fd(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) throw BackendError(str("cannot open log file '", log_path, "': ", fs::errno_message(errno)));
  return run_command(argv, fd.get());
}

int run_command(const std::vector<std::string>& argv, int log_fd) {
  TP_CHECK(!argv.empty(), BackendError, "run_command: empty argv");
  std::vector<char*> c_argv;
  for (const auto& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  // posix_spawn rather than fork: glibc uses vfork-like clone, so it is cheap
  // and safe in a large multi-threaded process.
  StdioRedirect redirect(log_fd);
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, argv[0].c_str(), redirect.get(), nullptr, c_argv.data(), environ);
  if (err != 0) {
    throw BackendError(str("cannot start '", argv[0], "': ", fs::errno_message(err),
                           "\n  command: ", format_command(argv)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    throw BackendError(str("waitpid failed for '", argv[0], "': ", fs::errno_message(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string format_command(const std::vector<std::string>& argv) {
  static const std::string kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=+,:@%";
  std::string out;
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    if (!arg.empty() && arg.find_first_not_of(kSafe) == std::string::npos) {
      out += arg;
      continue;
    }
    out += '\'';  // single quotes; an embedded ' becomes '\''
    for (char c : arg) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

namespace detail {
void reset_host_compiler_for_testing() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_compiler_valid = false;
}
}  // namespace detail

}  // namespace tp::stax::runtime
