// The prelude's Philox group (codegen/cpp/prelude_philox.cpp), compiled with
// the runtime's flags for every ISA the host has, draws exactly what eager's
// random_fill draws from the same generator position — also when the sample is
// added to something (FMA contraction must not absorb the normal's last product).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/generator.h"
#include "stax/codegen/cpp/prelude.h"

namespace tp::stax::codegen {
namespace {

struct Isa {
  const char* name;
  int vector_bytes;
  const char* flags;
  bool supported() const {
    std::string n = name;
    if (n == "scalar") return true;
    if (n == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  }
};
const Isa kIsas[] = {{"scalar", 16, ""},
                     {"avx2", 32, "-mavx2 -mfma"},
                     {"avx512", 64, "-mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512"}};

// which: 0 uniform f32, 1 normal f32, 2 uniform f64, 3 normal f64; y[i] = draw(i) + add[i].
// One loop per function, the draw added directly (as a fused kernel does), so
// the compiler may contract the draw's last product into the add.
constexpr const char* kHarness = R"TP(
#define DRAW(NAME, FN, T) \
extern "C" void NAME(i64 key, i64 first, long n, const T* add, T* y) { \
  for (long i = 0; i < n; ++i) y[i] = FN(key, first, i) + add[i]; \
}
DRAW(uniform_f32, tp_philox_uniform_f32, float) DRAW(normal_f32, tp_philox_normal_f32, float)
DRAW(uniform_f64, tp_philox_uniform_f64, double) DRAW(normal_f64, tp_philox_normal_f64, double)
extern "C" void draw_f32(int which, i64 key, i64 first, long n, const float* add, float* y) {
  (which == 0 ? uniform_f32 : normal_f32)(key, first, n, add, y);
}
extern "C" void draw_f64(int which, i64 key, i64 first, long n, const double* add, double* y) {
  (which == 2 ? uniform_f64 : normal_f64)(key, first, n, add, y);
}
)TP";

using DrawF = void (*)(int, long long, long long, long, const float*, float*);
using DrawD = void (*)(int, long long, long long, long, const double*, double*);

// Eager's samples from a generator positioned at (key, first).
template <class T>
std::vector<T> eager(uint64_t key, uint64_t first, int64_t n, bool normal) {
  const int64_t gen = generator_create(GeneratorState{key, first});
  Tensor t = Tensor::empty({n}, sizeof(T) == 4 ? DType::Float32 : DType::Float64);
  random_fill(t, gen, normal);
  generator_destroy(gen);
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + n);
}

TEST(PreludePhilox, DrawsEqualEagersOnEveryIsa) {
  char tmpl[] = "/tmp/tp_philox_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  ASSERT_NE(dir, nullptr);
  const uint64_t key = 0x0123456789ABCDEFull, first = 1000003;
  const int64_t n = 1001;  // not a multiple of 4: the last block is partial
  std::vector<float> addf(n);
  std::vector<double> addd(n);
  for (int64_t i = 0; i < n; ++i) {
    addf[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    addd[i] = 0.1 * static_cast<double>(i % 7) - 0.3;
  }
  for (const Isa& isa : kIsas) {
    if (!isa.supported()) continue;
    PreludeRequest req;
    req.vector_bytes = isa.vector_bytes;
    req.need_philox = true;
    const std::string base = std::string(dir) + "/philox_" + isa.name;
    std::ofstream(base + ".cpp") << cpp_prelude(req) << kHarness;
    const std::string cmd = std::string("g++ -O3 -shared -fPIC -fopenmp -fno-math-errno -fno-trapping-math -std=c++17 ") +
                            isa.flags + " " + base + ".cpp -o " + base + ".so 2>" + base + ".log";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    void* h = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto draw_f32 = reinterpret_cast<DrawF>(dlsym(h, "draw_f32"));
    auto draw_f64 = reinterpret_cast<DrawD>(dlsym(h, "draw_f64"));
    ASSERT_TRUE(draw_f32 && draw_f64);
    for (int which = 0; which < 4; ++which) {
      const bool normal = which % 2 == 1;
      if (which < 2) {
        std::vector<float> e = eager<float>(key, first, n, normal), y(n);
        draw_f32(which, static_cast<long long>(key), static_cast<long long>(first), n, addf.data(), y.data());
        for (int64_t i = 0; i < n; ++i) {
          const float want = e[i] + addf[i];
          ASSERT_EQ(std::memcmp(&y[i], &want, sizeof want), 0) << isa.name << " which " << which << " i " << i;
        }
      } else {
        std::vector<double> e = eager<double>(key, first, n, normal), y(n);
        draw_f64(which, static_cast<long long>(key), static_cast<long long>(first), n, addd.data(), y.data());
        for (int64_t i = 0; i < n; ++i) {
          const double want = e[i] + addd[i];
          ASSERT_EQ(std::memcmp(&y[i], &want, sizeof want), 0) << isa.name << " which " << which << " i " << i;
        }
      }
    }
    dlclose(h);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tp::stax::codegen
