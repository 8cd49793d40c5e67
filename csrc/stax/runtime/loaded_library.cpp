#include "stax/runtime/loaded_library.h"

#include <dlfcn.h>

#include "core/error.h"

namespace tp::stax::runtime {
namespace {
std::string last_dl_error() {
  const char* msg = ::dlerror();
  return msg ? msg : "unknown dlerror";
}
}  // namespace

std::shared_ptr<LoadedLibrary> LoadedLibrary::open(const std::string& so_path, const std::string& source_path) {
  void* handle = ::dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw BackendError(str("cannot load kernel library '", so_path, "' (source '", source_path,
                           "'): ", last_dl_error()));
  }
  // Not make_shared: the constructor is private.
  return std::shared_ptr<LoadedLibrary>(new LoadedLibrary(handle, so_path, source_path));
}

LoadedLibrary::LoadedLibrary(void* handle, std::string so_path, std::string source_path)
    : handle_(handle), so_path_(std::move(so_path)), source_path_(std::move(source_path)) {}

LoadedLibrary::~LoadedLibrary() { ::dlclose(handle_); }

void* LoadedLibrary::symbol(const std::string& name) const {
  ::dlerror();  // clear a stale error so the one below belongs to this dlsym
  void* address = ::dlsym(handle_, name.c_str());
  if (address == nullptr) {
    throw BackendError(str("symbol '", name, "' not found in kernel library '", so_path_, "' (source '",
                           source_path_, "'): ", last_dl_error()));
  }
  return address;
}

}  // namespace tp::stax::runtime
