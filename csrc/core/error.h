// Errors raised by every layer. The binding maps each class to the Python
// exception a PyTorch user would expect (TypeError, ValueError, IndexError,
// RuntimeError), so messages can name the operator and the shapes/dtypes.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tp {

class Error : public std::runtime_error {  // -> RuntimeError
 public:
  using std::runtime_error::runtime_error;
};
class TypeError : public Error {  // -> TypeError (bad dtype, wrong argument kind/count)
 public:
  using Error::Error;
};
class ValueError : public Error {  // -> ValueError (bad shape, bad argument value)
 public:
  using Error::Error;
};
class IndexError : public Error {  // -> IndexError (dimension or index out of range)
 public:
  using Error::Error;
};
// An operator has no kernel for the device of its inputs (CUDA tensors reach
// only the operators with CUDA kernels; never a silent copy to the CPU).
class NotImplementedError : public Error {  // -> NotImplementedError
 public:
  using Error::Error;
};
// A linear-algebra routine met a matrix it cannot factor (singular, not
// positive-definite, no convergence): PyTorch's torch.linalg.LinAlgError, a
// RuntimeError subclass, so `except RuntimeError` keeps working.
class LinAlgError : public Error {  // -> tensorplay.linalg.LinAlgError
 public:
  using Error::Error;
};
// A function could not be captured into a graph (Section 11.3: raised, never hidden).
class CaptureError : public Error {
 public:
  using Error::Error;
};
// Stax could not lower / schedule / generate a region; the front end falls back
// to eager unless strict_native is set.
class BackendError : public Error {
 public:
  using Error::Error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T>
void append_one(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
template <class T>
void append_one(std::ostringstream& os, const T& v) {
  os << v;
}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  append_one(os, first);
  append(os, rest...);
}
}  // namespace detail

// str("shape ", sizes, " vs ", other) -> "shape [2, 3] vs [4]"
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

}  // namespace tp

#define TP_CHECK(cond, ErrorClass, ...)                 \
  do {                                                  \
    if (!(cond)) throw ::tp::ErrorClass(::tp::str(__VA_ARGS__)); \
  } while (0)
