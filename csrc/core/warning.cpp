#include "core/warning.h"

#include <atomic>
#include <cstdio>

namespace tp {
namespace {
std::atomic<WarningHandler> g_handler{nullptr};
}
void set_warning_handler(WarningHandler handler) { g_handler.store(handler); }
void warn(const std::string& message) {
  if (auto h = g_handler.load()) {
    h(message);
  } else {
    std::fprintf(stderr, "tensorplay warning: %s\n", message.c_str());
  }
}
}  // namespace tp
