// Where compiled kernels live on disk. Code loaded from the cache runs in the
// user's process, so nobody else may be able to change what is in it: the
// directory must be the user's and private, and so must the way to it (like
// ssh's StrictModes: every ancestor is owned by root or the user and is not
// writable by group/others unless sticky, as /tmp is; otherwise another user
// could rename the directory away and put their own in its place). The
// directory is opened once, component by component (openat + O_NOFOLLOW +
// O_DIRECTORY), and vetted on that descriptor; the cache then reaches its
// entries only through it, so what was checked is what is used.
// If the configured directory is unusable, kernels go to a private temporary
// directory instead (compilation keeps working, reuse across runs does not).
#pragma once
#include <memory>
#include <string>

#include "stax/runtime/fs_util.h"

namespace tp::stax::runtime {

// The directory the user configured: $TP_CACHE_DIR, else
// $XDG_CACHE_HOME/tensorplay, else ~/.cache/tensorplay ("" if there is no home).
std::string configured_cache_dir();

// Why `dir` must not hold loadable code ("" if it is fine): it must be a
// directory owned by the effective uid, not group/other-writable, writable by
// us, and every ancestor of its canonical path must be owned by root or the
// effective uid and not group/other-writable unless it has the sticky bit.
std::string cache_dir_problem(const std::string& dir);

// Opens the canonical (absolute, symlink-free) directory `dir` from "/"
// down, one component at a time with O_NOFOLLOW, checking each as
// cache_dir_problem describes. Returns the descriptor, or an invalid one and
// the reason in *why.
fs::UniqueFd open_vetted_dir(const std::string& canonical_dir, std::string* why);

struct ResolvedCacheDir {
  std::string path;                       // absolute, canonical directory to use (for messages and the compiler)
  std::shared_ptr<const fs::UniqueFd> fd;  // the vetted directory itself
  std::string warning;                    // non-empty when we fell back to a temporary directory
};

// Creates the configured directory (mode 0700, parents too) and vets it; on
// any problem returns a fresh mkdtemp() directory (mode 0700, removed at exit
// by the process that created it, vetted the same way) plus a warning for
// the caller to emit. Throws tp::BackendError if even the temporary directory
// fails.
ResolvedCacheDir resolve_cache_dir();

}  // namespace tp::stax::runtime
