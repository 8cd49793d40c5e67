// glibc's libmvec (SIMD versions of the libm functions, e.g. _ZGVeN16v_sinf)
// as seen by generated kernels. Eager float32 kernels call it at the vector
// width of the host ISA; generated code calls the same functions, so both give
// the same values, and a kernel links it only when it uses it.
#pragma once
#include <string>

namespace tp::stax::runtime {

// Whether libmvec can be loaded and exports `symbol` (checked once per symbol).
bool libmvec_has(const std::string& symbol);
// Linker arguments that make libmvec available to a kernel that calls it (none
// when the system has no libmvec); `--as-needed` keeps other kernels free of it.
const char* const* libmvec_link_flags();

}  // namespace tp::stax::runtime
