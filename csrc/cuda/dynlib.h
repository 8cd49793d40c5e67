// Loading a CUDA library at run time (the driver, NVRTC, cuBLASLt): nothing
// CUDA is linked, so each table of entry points is resolved with dlopen/dlsym.
#pragma once
#include <dlfcn.h>

#include <string>
#include <vector>

namespace tp::cuda {

// fn <- the symbol `name` of `lib`; false when the library lacks it.
template <class F>
bool resolve(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

// The first of `names` (paths or sonames, in order) that dlopen loads, its
// name in *path; nullptr when none does.
inline void* open_first(const std::vector<std::string>& names, std::string* path) {
  for (const std::string& name : names)
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = name;
      return lib;
    }
  return nullptr;
}

}  // namespace tp::cuda
