// The content-addressed kernel cache: generated C++ source in, loaded shared
// library out.
//
//   key = SHA-256 over (source, full compiler command, compiler identity)
//   <cache_dir>/<key[0:2]>/<key>/kernel.cpp       the source, kept for debugging
//                                /kernel.so        written once, via rename
//                                /kernel.manifest  key, size and SHA-256 of kernel.so, renamed in after it
//                                /kernel.lock      flock() guarding the build
//                                /compile.log      compiler output, on failure only
//
// A build happens under the lock with a second look, so concurrent processes
// compile a kernel once; every file appears by rename, so readers never see a
// partial one.
//
// Nothing is loaded unless it checks out, and nothing that fails the checks
// is fatal or permanent: the cache directory is reached through a vetted
// descriptor (cache_dir.h); the key directories and files are opened with
// openat + O_NOFOLLOW (+ O_NONBLOCK, so a FIFO cannot hang us), must be
// regular files / directories owned by the user and not writable by others,
// and kernel.so's bytes must match the manifest's size and SHA-256. The bytes
// that were hashed are the ones loaded (LoadedLibrary::load_verified). An
// entry that fails (truncated, corrupted, swapped, foreign, a directory or
// FIFO in place of a file, a file in place of a directory) is moved aside and
// rebuilt under the lock, with one warning naming the path and the problem.
//
// Loaded libraries are kept in an LRU of at most max_loaded_libraries()
// (TP_STAX_MAX_LOADED_LIBRARIES, default 64). Callers that keep a kernel for
// long hold a CachedKernel (cached_kernel.h), which pins the library only
// while it runs and reloads it if it was evicted.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "stax/runtime/fs_util.h"
#include "stax/runtime/loaded_library.h"

namespace tp::stax::runtime {

struct BuildResult {
  std::shared_ptr<LoadedLibrary> library;
  // true: a verified kernel.so already existed (on disk, or loaded earlier in
  // this process, or built by another process while we waited for the lock).
  // false: a miss (or a damaged entry), this call ran the compiler.
  bool disk_hit = false;
  std::string key;               // 64 hex chars
  double compile_seconds = 0.0;  // wall time of the compiler run; 0 on a hit
  bool memory_hit = false;       // served from this process's map, no disk access
};

class CodeCache {
 public:
  static CodeCache& instance();  // process-wide; resolves the directory lazily on first use

  // Thread-safe. Throws tp::BackendError on compile or load errors (with the
  // command, compiler output and kept source path), tp::ValueError for a bad
  // TP_STAX_ISA or TP_STAX_MAX_LOADED_LIBRARIES.
  BuildResult load_or_build(const std::string& source);

  // The directory actually in use (after any fallback); resolves it if needed.
  std::string directory();

  // Full argv: compiler, base flags, host_isa() flags, -x c++ src -o out.
  std::vector<std::string> compile_command(const std::string& src_path, const std::string& out_path) const;

  // The cache key of `source`: sha256_hex of
  //   "tp-stax-kernel-v1\n" + N(source) + N(command) + N(host_compiler().identity)
  // where N(s) = decimal length of s + ":" + s + "," (so no field can run into
  // the next) and command = compile_command("kernel.cpp", "kernel.so") joined
  // by single spaces. Fixed names instead of real paths: the key must not
  // depend on where the cache lives, or the cache could not be moved.
  std::string key_for(const std::string& source) const;

  // The LRU of loaded libraries: this process keeps at most this many in its
  // map (libraries still pinned by a running kernel stay mapped until it
  // returns). Default from TP_STAX_MAX_LOADED_LIBRARIES, else 64.
  size_t max_loaded_libraries();
  void set_max_loaded_libraries(size_t n);  // n >= 1; evicts at once if needed
  size_t loaded_library_count();

  // Marks `library` as used now (cheap: one relaxed load, rarely a store).
  void touch(LoadedLibrary& library) {
    const uint64_t now = epoch_.load(std::memory_order_relaxed);
    if (library.last_use().load(std::memory_order_relaxed) != now) library.last_use().store(now, std::memory_order_relaxed);
  }

  // Forget the resolved directory (re-read TP_CACHE_DIR etc.), drop the
  // in-process map and the warnings already given, and re-read TP_STAX_ISA,
  // CXX and TP_STAX_MAX_LOADED_LIBRARIES on next use.
  void reset_for_testing();

 private:
  struct Root {
    std::string path;
    std::shared_ptr<const fs::UniqueFd> fd;
  };
  CodeCache() = default;
  Root root();  // resolves (and warns about a fallback) on first use
  std::shared_ptr<LoadedLibrary> load_or_build_on_disk(const std::string& source, BuildResult* result,
                                                       std::vector<std::string>* repairs);
  std::string build_locked(const std::string& source, int key_fd, const std::string& dir, const std::string& key,
                           double* seconds) const;
  std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key);
  std::shared_ptr<LoadedLibrary> remember(const std::string& key, std::shared_ptr<LoadedLibrary> library);
  static std::optional<std::string> verify_entry(int key_fd, const std::string& key, std::string* problem);
  // Drops least recently used entries beyond the cap (never `keep`) into
  // *dropped, so the caller can unload them after releasing the mutex.
  void evict_locked(const std::string& keep, std::vector<std::shared_ptr<LoadedLibrary>>* dropped);
  size_t max_loaded_locked();
  void emit_repair_warnings(const std::vector<std::string>& repairs, bool swallow_errors);

  std::mutex mutex_;  // guards everything below except epoch_
  std::string dir_;   // empty until resolved
  std::shared_ptr<const fs::UniqueFd> dir_fd_;
  std::unordered_map<std::string, std::shared_ptr<LoadedLibrary>> loaded_;
  size_t max_loaded_ = 0;  // 0: not read yet
  std::set<std::string> warned_;
  std::atomic<uint64_t> epoch_{1};  // advances on every load; LRU stamps are epochs
};

}  // namespace tp::stax::runtime
