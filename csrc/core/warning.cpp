#include "core/warning.h"

#include <atomic>
#include <cstdio>
#include <utility>

namespace tp {
namespace {
std::atomic<WarningHandler> g_handler{nullptr};
thread_local std::vector<std::string>* t_deferred = nullptr;
}  // namespace
void set_warning_handler(WarningHandler handler) { g_handler.store(handler); }
void warn(const std::string& message) {
  if (t_deferred) {
    t_deferred->push_back(message);
    return;
  }
  if (auto h = g_handler.load()) {
    h(message);
  } else {
    std::fprintf(stderr, "tensorplay warning: %s\n", message.c_str());
  }
}

DeferredWarnings::DeferredWarnings() : previous_(t_deferred) { t_deferred = &kept_; }
DeferredWarnings::~DeferredWarnings() { t_deferred = previous_; }
std::vector<std::string> DeferredWarnings::take() { return std::exchange(kept_, {}); }
}  // namespace tp
