// The prelude's float erfc (32- and 64-byte vectors) is eager's: the prelude is
// compiled with the runtime's flags for each ISA the host has, and its vector
// and scalar float forms must give eager's bits (vec::table_for(isa)) on a
// dense sample of bit patterns and the edge values. 16-byte kernels keep
// libmvec, as eager's baseline table does.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ops/vec/vec_kernels.h"
#include "stax/codegen/cpp/prelude.h"

namespace tp::stax::codegen {
namespace {

struct Isa {
  const char* name;  // as vec::table_for names it
  int vector_bytes;
  const char* flags;
};
const Isa kIsas[] = {
    {"avx2", 32, "-mavx2 -mfma"},
    {"avx512", 64, "-mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512"},
};

constexpr const char* kHarness = R"TP(
extern "C" void erfc_vf(const float* x, float* y, long n) { for (long i = 0; i < n; i += TP_LF) tp_store(y + i, tp_erfc(tp_load(x + i))); }
extern "C" void erfc_sf(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = tp_erfc(x[i]); }
extern "C" void erfc_sd(const double* x, double* y, long n) { for (long i = 0; i < n; ++i) y[i] = tp_erfc(x[i]); }
)TP";

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::vector<float> sample(int lanes) {
  std::vector<float> x = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(), 10.0541f, 10.125f, 9.1945f, -3.92f, 0.5f, 1.0f};
  for (uint64_t b = 0; b < (1ull << 32); b += 65521) x.push_back(from_bits(static_cast<uint32_t>(b)));
  while (x.size() % lanes) x.push_back(1.5f);
  return x;
}

class PreludeErfc : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tp_prelude_erfc_XXXXXX";
    const char* d = mkdtemp(tmpl);
    ASSERT_NE(d, nullptr);
    dir_ = d;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PreludeErfc, VectorAndScalarFloatFormsAreEagersBits) {
  int tested = 0;
  for (const Isa& isa : kIsas) {
    const vec::Table* eager = vec::table_for(isa.name);
    if (!eager) continue;  // the CPU lacks the ISA
    ++tested;
    PreludeRequest req;
    req.vector_bytes = isa.vector_bytes;
    req.libm.insert("erfc");
    const std::string text = cpp_prelude(req);
    EXPECT_EQ(text.find("_ZGV"), std::string::npos) << "no libmvec call at " << isa.vector_bytes << " bytes";
    EXPECT_EQ(libmvec_symbol("erfc", isa.vector_bytes), "");
    const std::string base = dir_ + "/" + isa.name, cpp = base + ".cpp", so = base + ".so";
    std::ofstream(cpp) << text << kHarness;
    const std::string cmd = std::string("g++ -O3 -shared -fPIC -fopenmp -fno-math-errno -fno-trapping-math -std=c++17 ") +
                            isa.flags + " " + cpp + " -o " + so + " 2>" + base + ".log";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(base + ".log");
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    using F = void (*)(const float*, float*, long);
    using D = void (*)(const double*, double*, long);
    auto vf = reinterpret_cast<F>(dlsym(h, "erfc_vf"));
    auto sf = reinterpret_cast<F>(dlsym(h, "erfc_sf"));
    auto sd = reinterpret_cast<D>(dlsym(h, "erfc_sd"));
    ASSERT_TRUE(vf && sf && sd);
    const std::vector<float> x = sample(isa.vector_bytes / 4);
    const long n = static_cast<long>(x.size());
    std::vector<float> want(x.size()), got_v(x.size()), got_s(x.size());
    eager->unary_f32[static_cast<int>(vec::UnaryFn::Erfc)](x.data(), want.data(), n, vec::Params{});
    vf(x.data(), got_v.data(), n);
    sf(x.data(), got_s.data(), n);
    int64_t differ_v = 0, differ_s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      differ_v += std::memcmp(&got_v[i], &want[i], 4) != 0 && !(std::isnan(got_v[i]) && std::isnan(want[i]));
      differ_s += std::memcmp(&got_s[i], &want[i], 4) != 0 && !(std::isnan(got_s[i]) && std::isnan(want[i]));
    }
    EXPECT_EQ(differ_v, 0) << isa.name << ": vector form differs from eager";
    EXPECT_EQ(differ_s, 0) << isa.name << ": scalar float form differs from eager";
    // The float64 forms stay libm's erfc.
    const std::vector<double> xd = {0.0, -1.5, 0.3, 4.0, 27.0};
    std::vector<double> yd(xd.size());
    sd(xd.data(), yd.data(), static_cast<long>(xd.size()));
    for (size_t i = 0; i < xd.size(); ++i) EXPECT_EQ(yd[i], std::erfc(xd[i])) << xd[i];
    dlclose(h);
  }
  if (!tested) GTEST_SKIP() << "no AVX2 / AVX-512 on this CPU";
}

TEST(PreludeErfcBaseline, SixteenByteVectorsKeepLibmvec) {
  EXPECT_EQ(libmvec_symbol("erfc", 16), "_ZGVbN4v_erfcf");
  PreludeRequest req;
  req.vector_bytes = 16;
  req.libm.insert("erfc");
  req.libmvec["erfc"] = "_ZGVbN4v_erfcf";
  EXPECT_NE(cpp_prelude(req).find("_ZGVbN4v_erfcf"), std::string::npos);
}

}  // namespace
}  // namespace tp::stax::codegen
