// Where compiled kernels live on disk. Code loaded from the cache runs in the
// user's process, so the directory must be one nobody else can write to;
// if the configured one is unusable, kernels go to a private temporary
// directory instead (compilation keeps working, reuse across runs does not).
#pragma once
#include <string>

namespace tp::stax::runtime {

// The directory the user configured: $TP_CACHE_DIR, else
// $XDG_CACHE_HOME/tensorplay, else ~/.cache/tensorplay ("" if there is no home).
std::string configured_cache_dir();

// Why `dir` must not hold loadable code ("" if it is fine): it must be a
// directory owned by the effective uid, not group/other-writable, and
// writable by us.
std::string cache_dir_problem(const std::string& dir);

struct ResolvedCacheDir {
  std::string path;     // absolute, canonical directory to use
  std::string warning;  // non-empty when we fell back to a temporary directory
};

// Creates the configured directory (mode 0700, parents too) and vets it; on
// any problem returns a fresh mkdtemp() directory (mode 0700, removed at exit
// by the process that created it) plus a warning for the caller to emit.
// Throws tp::BackendError only if even the temporary directory fails.
ResolvedCacheDir resolve_cache_dir();

}  // namespace tp::stax::runtime
