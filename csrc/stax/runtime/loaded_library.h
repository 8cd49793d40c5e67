// A kernel shared library opened with dlopen. Shared ownership keeps the
// handle (and so every function pointer obtained from it) valid for as long
// as someone holds the shared_ptr; the last owner dlclose()s it.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace tp::stax::runtime {

class LoadedLibrary {
 public:
  // Loads a library from bytes the caller has already verified (the code
  // cache checks them against the entry's manifest), so that what was hashed
  // is exactly what gets mapped: the bytes are copied into a private, sealed
  // memfd and dlopen()ed through /proc/self/fd. Nobody else holds that file,
  // so neither a later change to the cache entry nor a truncation of it can
  // reach the mapped code (a truncated mapped file would raise SIGBUS).
  // dlopen(RTLD_NOW | RTLD_LOCAL): unresolved symbols fail here, not at the
  // first call, and kernels cannot clash with each other's symbols.
  // `so_path` / `source_path` are for messages only. Throws tp::BackendError
  // naming so_path and dlerror().
  static std::shared_ptr<LoadedLibrary> load_verified(const std::string& bytes, const std::string& so_path,
                                                      const std::string& source_path);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  void* symbol(const std::string& name) const;  // throws tp::BackendError if missing
  const std::string& so_path() const { return so_path_; }
  const std::string& source_path() const { return source_path_; }

  // Recency stamp for the code cache's LRU of loaded libraries.
  std::atomic<uint64_t>& last_use() { return last_use_; }

  // Libraries currently loaded by this process (for tests and diagnostics).
  static int64_t live_count();

 private:
  LoadedLibrary(void* handle, int memfd, std::string so_path, std::string source_path);

  void* handle_;
  int memfd_;  // kept open while loaded: its /proc/self/fd name stays unique (see load_verified)
  std::string so_path_;
  std::string source_path_;
  std::atomic<uint64_t> last_use_{0};
};

}  // namespace tp::stax::runtime
