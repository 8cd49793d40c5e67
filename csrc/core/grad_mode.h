// Thread-local switch for gradient recording (no_grad / enable_grad).
#pragma once

namespace tp {
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
class AutoGradMode {  // RAII: sets the mode, restores the previous one
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;
 private:
  bool prev_;
};
}  // namespace tp
