#include "stax/runtime/isa.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TP_STAX_X86 1
#else
#define TP_STAX_X86 0
#endif

namespace tp::stax::runtime {
namespace {

// Order of the ISAs, so TP_STAX_ISA can only go down from the detected one.
// -1 for an unknown name.
int isa_rank(const std::string& name) {
  if (name == "scalar") return 0;
  if (name == "avx2") return 1;
  if (name == "avx512") return 2;
  return -1;
}

#if TP_STAX_X86
// XCR0: which register states the OS saves on a context switch. A CPU that
// has AVX is not enough: if the OS does not save the YMM/ZMM state, AVX code
// faults or silently corrupts registers.
uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  // Raw opcode form of xgetbv (ecx=0): needs no -mxsave on this TU.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string detect_x86() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return "scalar";
  // OSXSAVE means the OS enabled XGETBV, so XCR0 can be read at all.
  if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || !(c & bit_FMA)) return "scalar";
  const uint64_t xcr0 = read_xcr0();
  constexpr uint64_t kYmmState = 0x6;   // bit 1 XMM, bit 2 upper YMM halves
  constexpr uint64_t kZmmState = 0xE0;  // bit 5 opmask, 6 upper ZMM0-15, 7 ZMM16-31
  if ((xcr0 & kYmmState) != kYmmState) return "scalar";

  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return "scalar";
  if (!(b & bit_AVX2)) return "scalar";
  constexpr unsigned k512 = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
  if ((b & k512) == k512 && (xcr0 & kZmmState) == kZmmState) return "avx512";
  return "avx2";
}
#endif

std::string detect() {
#if TP_STAX_X86
  return detect_x86();
#else
  return "scalar";  // no vector ISA flags for non-x86 builds (yet)
#endif
}

IsaInfo resolve_host_isa() {
  const std::string& best = detected_isa_name();
  const char* env = std::getenv("TP_STAX_ISA");
  if (env == nullptr || *env == '\0') return isa_info(best);
  const std::string requested = env;
  TP_CHECK(isa_rank(requested) >= 0, ValueError, "TP_STAX_ISA='", requested,
           "' is not a known ISA; expected one of avx512, avx2, scalar");
  TP_CHECK(isa_rank(requested) <= isa_rank(best), ValueError, "TP_STAX_ISA='", requested,
           "' requests ISA ", requested, ", which this host does not support (best: ", best, ")");
  return isa_info(requested);
}

std::mutex g_mutex;
IsaInfo g_isa;  // assigned in place, so references handed out stay valid
bool g_isa_valid = false;

}  // namespace

IsaInfo isa_info(const std::string& name) {
  if (name == "avx512") {
    return {"avx512", 64,
            {"-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma",
             "-mprefer-vector-width=512"}};
  }
  if (name == "avx2") return {"avx2", 32, {"-mavx2", "-mfma"}};
  // SSE2 is the x86-64 baseline, so even "scalar" code has 16-byte vectors.
  if (name == "scalar") return {"scalar", 16, {}};
  throw ValueError(str("unknown ISA '", name, "'; expected one of avx512, avx2, scalar"));
}

const std::string& detected_isa_name() {
  static const std::string name = detect();  // the hardware does not change
  return name;
}

const IsaInfo& host_isa() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_isa_valid) {
    g_isa = resolve_host_isa();  // throws without caching on a bad TP_STAX_ISA
    g_isa_valid = true;
  }
  return g_isa;
}

namespace detail {
void reset_host_isa_for_testing() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_isa_valid = false;
}
}  // namespace detail

}  // namespace tp::stax::runtime
