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
// A region split into several translation units (Section 11.2) is compiled
// unit by unit into objects, each a content-addressed entry of its own
// (kernel.cpp, kernel.o, kernel.manifest: a unit shared by two regions is
// compiled once), concurrently on the compile pool, then linked into the
// region's entry (kernel.so, as above; its kernel.cpp lists the units). The
// warm path is the one-unit path: one entry, one verified dlopen.
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
#include <functional>
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
  // The same for a region printed as several translation units (one library
  // linking them all). One unit: exactly load_or_build(units[0]). A unit that
  // fails to compile throws tp::BackendError naming it ("translation unit i of
  // n") with its compiler output.
  BuildResult load_or_build_units(const std::vector<std::string>& units);

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
  // Object of one unit: compile_command with -c instead of -shared; the link:
  // the objects into a shared library. Their keys (same scheme, other
  // prefixes: "tp-stax-object-v1", "tp-stax-units-v1" + every unit's object
  // key + the link command) never equal a one-unit key.
  std::vector<std::string> object_command(const std::string& src_path, const std::string& out_path) const;
  std::vector<std::string> link_command(const std::vector<std::string>& objects, const std::string& out_path) const;
  std::string key_for_object(const std::string& source) const;
  std::string key_for_units(const std::vector<std::string>& units) const;

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
  // An entry's directory <root>/<key[0:2]>/<key>, created private if missing.
  struct EntryDir {
    std::string path;
    fs::UniqueFd fd;
  };
  EntryDir open_entry(const std::string& key, std::vector<std::string>* repairs);
  // Builds an entry's artifact under its lock: (key_fd, dir, *seconds) -> the artifact's bytes.
  using Builder = std::function<std::string(int key_fd, const std::string& dir, double* seconds)>;
  BuildResult load_or_build_with(const std::string& key, const Builder& build);
  std::shared_ptr<LoadedLibrary> load_or_build_on_disk(const Builder& build, BuildResult* result,
                                                       std::vector<std::string>* repairs);
  // Writes `source` as kernel.cpp, runs make_argv(src_path, temp output) and
  // renames the output to `artifact`, then writes the manifest; returns the
  // artifact's bytes. Caller holds the dir's lock.
  std::string build_locked(const std::string& source, const std::string& artifact,
                           const std::function<std::vector<std::string>(const std::string&, const std::string&)>& make_argv,
                           int key_fd, const std::string& dir, const std::string& key, double* seconds) const;
  // The verified bytes of one unit's object, built if needed (under its own lock).
  std::string object_bytes(const std::string& unit, std::vector<std::string>* repairs);
  std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key);
  std::shared_ptr<LoadedLibrary> remember(const std::string& key, std::shared_ptr<LoadedLibrary> library);
  static std::optional<std::string> verify_entry(int key_fd, const std::string& key, const std::string& artifact,
                                                 std::string* problem);
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
