// Picks the kernel table for this CPU once: the widest ISA whose instructions
// the CPU has and whose register state the OS saves (cpuid + xgetbv, the same
// test as stax/runtime/isa.cpp, which this layer cannot link against).
// TP_VEC_ISA=avx512|avx2|base may lower the choice (tests, benchmarks).
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "ops/vec/vec_kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tp::vec {
namespace base { const Table& get_table(); }
#if defined(__x86_64__)
namespace avx2 { const Table& get_table(); }
namespace avx512 { const Table& get_table(); }
#endif

namespace {

int rank(const char* isa) {
  if (std::strcmp(isa, "base") == 0) return 0;
  if (std::strcmp(isa, "avx2") == 0) return 1;
  if (std::strcmp(isa, "avx512") == 0) return 2;
  return -1;
}

#if defined(__x86_64__)
uint64_t xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));  // xgetbv
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

const char* detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return "base";
  if (!(c & bit_OSXSAVE) || !(c & bit_AVX) || !(c & bit_FMA)) return "base";
  const uint64_t x = xcr0();
  if ((x & 0x6) != 0x6) return "base";  // XMM + YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2)) return "base";
  constexpr unsigned k512 = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
  if ((b & k512) == k512 && (x & 0xE0) == 0xE0) return "avx512";  // opmask + ZMM state
  return "avx2";
}
#else
const char* detect() { return "base"; }
#endif

const Table* lookup(const char* isa) {
  if (rank(isa) < 0 || rank(isa) > rank(detect())) return nullptr;
#if defined(__x86_64__)
  if (rank(isa) == 2) return &avx512::get_table();
  if (rank(isa) == 1) return &avx2::get_table();
#endif
  return &base::get_table();
}

const Table& choose() {
  const char* env = std::getenv("TP_VEC_ISA");
  if (env && *env) {
    const Table* t = lookup(env);
    TP_CHECK(t, ValueError, "TP_VEC_ISA='", env, "' is not an ISA this CPU runs (best: ", detect(),
             "; choices: avx512, avx2, base)");
    return *t;
  }
  return *lookup(detect());
}

}  // namespace

const Table& table() {
  static const Table& t = choose();
  return t;
}

const Table* table_for(const char* isa) { return lookup(isa); }

}  // namespace tp::vec
