// The host C++ compiler that turns generated kernels into shared libraries:
// which one ($CXX, else g++, else c++, looked up on PATH), a cheap identity
// for the cache key, and running it without a shell.
#pragma once
#include <string>
#include <vector>

namespace tp::stax::runtime {

struct CompilerInfo {
  std::string path;      // absolute path as found on PATH; this is what we execute
  std::string identity;  // changes whenever the installed compiler changes
};

// Resolved once per process (CXX is re-read only after
// CodeCache::reset_for_testing()). Throws tp::BackendError if no compiler is
// found. CXX must name a single program; arguments in it are not supported.
const CompilerInfo& host_compiler();

// Runs argv (argv[0] an absolute path) with posix_spawn, no shell; stdin is
// /dev/null and stdout+stderr go to log_path. Returns the exit status, or
// 128+N if killed by signal N. Throws tp::BackendError if it cannot start.
int run_command(const std::vector<std::string>& argv, const std::string& log_path);
// The same with stdout+stderr going to the open file `log_fd` (the child gets
// a copy; ours stays open). The code cache passes a temp file it created
// itself, so a FIFO planted at compile.log cannot block the compiler.
int run_command(const std::vector<std::string>& argv, int log_fd);

// argv as one line a user can paste into a shell (arguments quoted as needed).
std::string format_command(const std::vector<std::string>& argv);

namespace detail {
// Forget host_compiler() so the next call re-reads CXX. The object is updated
// in place; only for tests, not concurrently with other callers.
void reset_host_compiler_for_testing();
}  // namespace detail

}  // namespace tp::stax::runtime
