// The content-addressed kernel cache: generated C++ source in, loaded shared
// library out.
//
//   key = SHA-256 over (source, full compiler command, compiler identity)
//   <cache_dir>/<key[0:2]>/<key>/kernel.cpp   the source, kept for debugging
//                                /kernel.so    written once, via rename
//                                /kernel.lock  flock() guarding the build
//                                /compile.log  compiler output, on failure only
//
// A build happens under the lock with a second look for kernel.so, so
// concurrent processes compile a kernel once; every file appears by rename,
// so readers never see a partial one. See cache_dir.h for the directory choice.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "stax/runtime/loaded_library.h"

namespace tp::stax::runtime {

struct BuildResult {
  std::shared_ptr<LoadedLibrary> library;
  // true: kernel.so already existed (on disk, or loaded earlier in this
  // process, or built by another process while we waited for the lock).
  // false: a miss, this call ran the compiler.
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
  // TP_STAX_ISA.
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

  // Forget the resolved directory (re-read TP_CACHE_DIR etc.), drop the
  // in-process map, and re-read TP_STAX_ISA and CXX on next use.
  void reset_for_testing();

 private:
  CodeCache() = default;
  std::string artifact_dir(const std::string& key);  // creates it
  double build_locked(const std::string& source, const std::string& dir, const std::string& key) const;
  std::shared_ptr<LoadedLibrary> find_loaded(const std::string& key);
  std::shared_ptr<LoadedLibrary> remember(const std::string& key, std::shared_ptr<LoadedLibrary> library);

  std::mutex mutex_;  // guards dir_ and loaded_
  std::string dir_;   // empty until resolved
  std::unordered_map<std::string, std::shared_ptr<LoadedLibrary>> loaded_;
};

}  // namespace tp::stax::runtime
