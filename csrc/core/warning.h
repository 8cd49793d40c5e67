// Warnings from the C++ layers reach the user through a handler the binding
// installs (Python's warnings module); without one they go to stderr.
#pragma once
#include <string>

namespace tp {
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
void warn(const std::string& message);
}  // namespace tp
