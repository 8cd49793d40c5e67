// The message of an error raised by an operator's part, renamed for the
// operator the user called (see named_message).
#pragma once
#include <cctype>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tp {

// An error raised inside an operator's parts names the part ("mul: shapes ...")
// but the user called `called` (multiply, mse_loss, cross_entropy, ...): the
// message leads with the called name and keeps the part that raised it in
// brackets. Used by the Python binding of operators and by a compiled call,
// whose graph holds the parts of the composites its function called.
inline std::string named_message(const char* what, const std::string& called) {
  const std::string_view m(what);
  size_t i = 0;
  while (i < m.size() && (std::isalnum(static_cast<unsigned char>(m[i])) || m[i] == '_' || m[i] == '.')) ++i;
  size_t j = i;
  if (m.substr(j, 2) == "()") j += 2;
  if (i > 0 && m.substr(j, 2) == ": ") {
    const std::string_view inner = m.substr(0, i);
    // The op itself, or one of its overloads ("max.dim" for max).
    if (inner == called || (inner.size() > called.size() && inner.substr(0, called.size()) == called &&
                            inner[called.size()] == '.'))
      return std::string(m);
    return str(called, ": ", m.substr(j + 2), " (in ", inner, ")");
  }
  return str(called, ": ", m);
}

}  // namespace tp
