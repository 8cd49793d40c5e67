// A compiled kernel that stays callable for as long as its owner lives,
// while the library behind it may be unloaded and loaded again.
//
// The code cache bounds how many kernel libraries a process keeps mapped (an
// LRU, see code_cache.h); a compiled function with 200 specializations must
// not pin 200 libraries. So an owner does not hold the library itself: it
// holds a CachedKernel, and each call pins the library (shared ownership) for
// the duration of the call. An in-flight call therefore never runs unmapped
// code; an idle kernel whose library was evicted reloads it on its next call
// (verified from disk, or rebuilt if the entry has since been damaged).
#pragma once
#include <memory>
#include <future>
#include <mutex>
#include <vector>
#include <string>

#include "stax/runtime/code_cache.h"

namespace tp::stax::runtime {

struct BackgroundBuild {
  BuildResult built;
  std::vector<std::string> warnings;
};

class CachedKernel {
 public:
  // Loads or builds `source` now through CodeCache::load_or_build (and throws
  // what it throws), and looks up `symbol_name` (tp::BackendError if absent).
  CachedKernel(std::string source, std::string symbol_name);
  // Builds on a compile-pool worker (Section 11.2: submit every build, then
  // wait): the constructor returns at once; wait() -- and the first pin() or
  // any accessor of the build's result -- waits for it and throws what the
  // build threw (every time), and reports its warnings on the waiting thread.
  struct InBackground {};
  CachedKernel(std::string source, std::string symbol_name, InBackground);
  // A region printed as several translation units (CodeCache::load_or_build_units),
  // built now or in the background; `source` is the whole region's text (for source()).
  CachedKernel(std::string source, std::vector<std::string> units, std::string symbol_name);
  CachedKernel(std::string source, std::vector<std::string> units, std::string symbol_name, InBackground);
  void wait() const;
  CachedKernel(const CachedKernel&) = delete;
  CachedKernel& operator=(const CachedKernel&) = delete;

  struct Pinned {
    std::shared_ptr<LoadedLibrary> library;  // keeps `symbol` mapped while held
    void* symbol = nullptr;
  };
  // Thread-safe. Cheap when the library is loaded (a mutex, a weak_ptr lock);
  // otherwise reloads it (no lock held meanwhile) and may throw like
  // load_or_build.
  Pinned pin() const;

  const std::string& source() const { return source_; }
  const std::string& source_path() const { wait(); return source_path_; }
  const std::string& key() const { wait(); return key_; }
  bool disk_hit() const { wait(); return disk_hit_; }               // of the first load
  double compile_seconds() const { wait(); return compile_seconds_; }  // of the first load

 private:
  void adopt(BuildResult built);
  void start_background();
  std::string source_;
  std::vector<std::string> units_;  // what is compiled: {source_}, or the region's translation units
  std::string symbol_name_;
  // Background build: the result, taken over by the first wait().
  mutable std::once_flag waited_;
  mutable std::shared_future<BackgroundBuild> pending_;
  mutable std::exception_ptr build_error_;
  mutable std::string key_;
  mutable std::string source_path_;
  mutable bool disk_hit_ = false;
  mutable double compile_seconds_ = 0.0;

  mutable std::mutex mutex_;                      // guards the two members below
  mutable std::weak_ptr<LoadedLibrary> library_;  // the cache's LRU (or a running call) owns it
  mutable void* symbol_ = nullptr;
};

}  // namespace tp::stax::runtime
