// Host instruction-set detection. Generated kernels are compiled for the best
// vector ISA that both the CPU and the OS support (checked at run time with
// cpuid/xgetbv, never with -march=native, so the choice is explicit and part
// of the cache key). TP_STAX_ISA=avx512|avx2|scalar lowers the choice.
#pragma once
#include <string>
#include <vector>

namespace tp::stax::runtime {

struct IsaInfo {
  std::string name;                // "avx512", "avx2" or "scalar"
  int vector_bytes;                // widest vector register the kernels should target
  std::vector<std::string> flags;  // compiler flags enabling that ISA
};

// The ISA kernels are compiled for: the detected one, or TP_STAX_ISA if set.
// Computed on first call and cached for the process (TP_STAX_ISA is re-read
// only after CodeCache::reset_for_testing()). Throws tp::ValueError if
// TP_STAX_ISA names an unknown ISA or one the host cannot run.
const IsaInfo& host_isa();

// The best ISA this CPU + OS can run, ignoring TP_STAX_ISA.
const std::string& detected_isa_name();

// Table entry for a named ISA (tp::ValueError for an unknown name).
IsaInfo isa_info(const std::string& name);

namespace detail {
// Forget the cached host_isa() so the next call re-reads TP_STAX_ISA. The
// IsaInfo object is updated in place, so earlier references stay valid but see
// the new value; only for tests, not concurrently with other callers.
void reset_host_isa_for_testing();
}  // namespace detail

}  // namespace tp::stax::runtime
