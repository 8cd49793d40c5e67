// A kernel shared library opened with dlopen. Shared ownership keeps the
// handle (and so every function pointer obtained from it) valid for as long
// as someone holds the shared_ptr; the last owner dlclose()s it.
#pragma once
#include <memory>
#include <string>

namespace tp::stax::runtime {

class LoadedLibrary {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL): unresolved symbols fail here, not at the
  // first call, and kernels cannot clash with each other's symbols.
  // Throws tp::BackendError naming the file and dlerror().
  static std::shared_ptr<LoadedLibrary> open(const std::string& so_path, const std::string& source_path);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  void* symbol(const std::string& name) const;  // throws tp::BackendError if missing
  const std::string& so_path() const { return so_path_; }
  const std::string& source_path() const { return source_path_; }

 private:
  LoadedLibrary(void* handle, std::string so_path, std::string source_path);

  void* handle_;
  std::string so_path_;
  std::string source_path_;
};

}  // namespace tp::stax::runtime
