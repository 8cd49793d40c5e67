// Warnings from the C++ layers reach the user through a handler the binding
// installs (Python's warnings module); without one they go to stderr.
#pragma once
#include <string>
#include <vector>

namespace tp {
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
void warn(const std::string& message);

// While alive, warnings raised on this thread are kept instead of reported:
// a compile worker may not call the handler (Python's warnings need the
// interpreter lock, which the waiting caller holds); the thread that waits for
// the worker reports them with warn() afterwards.
class DeferredWarnings {
 public:
  DeferredWarnings();
  ~DeferredWarnings();
  DeferredWarnings(const DeferredWarnings&) = delete;
  DeferredWarnings& operator=(const DeferredWarnings&) = delete;
  std::vector<std::string> take();

 private:
  std::vector<std::string> kept_;
  std::vector<std::string>* previous_;
};
}  // namespace tp
