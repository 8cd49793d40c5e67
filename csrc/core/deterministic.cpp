#include "core/deterministic.h"

#include <atomic>

#include "core/error.h"
#include "core/warning.h"

namespace tp {
namespace {
// Process-wide, as the setting is in PyTorch: bit 0 on, bit 1 warn only. One
// word, so a kernel launched from another thread never sees half a change.
std::atomic<int> g_mode{0};
}  // namespace

void set_deterministic_algorithms(bool on, bool warn_only) {
  g_mode.store((on ? 1 : 0) | (warn_only ? 2 : 0), std::memory_order_relaxed);
}
bool deterministic_algorithms() { return (g_mode.load(std::memory_order_relaxed) & 1) != 0; }
bool deterministic_algorithms_warn_only() { return (g_mode.load(std::memory_order_relaxed) & 2) != 0; }

void alert_not_deterministic(const std::string& what) {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (!(m & 1)) return;
  const std::string msg = str(what, " has no deterministic implementation and tp.use_deterministic_algorithms(True) "
                                    "is set: turn the mode off around this call, or set it with warn_only=True to be "
                                    "warned instead");
  if (m & 2) {
    warn(msg);
    return;
  }
  throw Error(msg);
}

}  // namespace tp
