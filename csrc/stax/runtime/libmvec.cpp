#include "stax/runtime/libmvec.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

namespace tp::stax::runtime {

namespace {
void* handle() {
  static void* h = dlopen("libmvec.so.1", RTLD_LAZY | RTLD_LOCAL);  // never closed
  return h;
}
}  // namespace

bool libmvec_has(const std::string& symbol) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(symbol);
  if (it != known.end()) return it->second;
  bool has = handle() && dlsym(handle(), symbol.c_str());
  known.emplace(symbol, has);
  return has;
}

const char* const* libmvec_link_flags() {
  static const char* const with[] = {"-Wl,--as-needed", "-lmvec", nullptr};
  static const char* const without[] = {nullptr};
  return handle() ? with : without;
}

}  // namespace tp::stax::runtime
