// The generated-kernel prelude: compiled with g++ for every ISA the host has
// (the same flags the runtime uses), dlopen'ed, and checked against libm.
#include "stax/codegen/cpp/prelude.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace tp::stax::codegen {
namespace {

using i64 = long long;

// ---------------------------------------------------------------- ISAs ----

struct Isa {
  const char* name;
  int vector_bytes;
  const char* flags;
  bool supported() const {
    std::string n = name;
    if (n == "scalar") return true;
    if (n == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
};

const Isa kIsas[] = {
    {"scalar", 16, ""},
    {"avx2", 32, "-mavx2 -mfma"},
    {"avx512", 64,
     "-mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512"},
};

const char* kBaseFlags = "-O3 -shared -fPIC -fopenmp -fno-math-errno -fno-trapping-math -std=c++17";

// One scratch directory per test process, removed when the tests end.
std::string g_temp_dir;
std::string temp_dir() {
  if (g_temp_dir.empty()) {
    char tmpl[] = "/tmp/tp_prelude_XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) throw std::runtime_error("mkdtemp failed");
    g_temp_dir = d;
  }
  return g_temp_dir;
}
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!g_temp_dir.empty()) std::filesystem::remove_all(g_temp_dir);
  }
};
[[maybe_unused]] ::testing::Environment* const g_cleanup =
    ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compiles `src` with the runtime's flags (+extra); returns "" or the error text.
std::string compile(const Isa& isa, const std::string& src, const std::string& out,
                    const std::string& extra = "") {
  std::string cpp = out + ".cpp", log = out + ".log";
  write_file(cpp, src);
  std::string cmd = std::string("g++ ") + kBaseFlags + " " + isa.flags + " " + extra + " " + cpp +
                    " -o " + out + " 2>" + log;
  if (std::system(cmd.c_str()) != 0) return "compile failed: " + cmd + "\n" + read_file(log);
  return "";
}

PreludeRequest full_request(int vector_bytes) {
  PreludeRequest r;
  r.vector_bytes = vector_bytes;
  r.need_exp = r.need_log = r.need_tanh = r.need_sigmoid = r.need_floordiv = true;
  return r;
}

// --------------------------------------------------------- the harness ----

// Vector entry points (n a multiple of the lanes) and scalar-overload entry points.
constexpr const char* kHarness = R"TP(
#define UN(NAME, FN) \
extern "C" void NAME##_vf(const float* x, float* y, long n) { for (long i = 0; i < n; i += TP_LF) tp_store(y + i, FN(tp_load(x + i))); } \
extern "C" void NAME##_vd(const double* x, double* y, long n) { for (long i = 0; i < n; i += TP_LD) tp_store(y + i, FN(tp_load(x + i))); } \
extern "C" void NAME##_sf(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = FN(x[i]); } \
extern "C" void NAME##_sd(const double* x, double* y, long n) { for (long i = 0; i < n; ++i) y[i] = FN(x[i]); }
UN(exp, tp_exp) UN(log, tp_log) UN(tanh, tp_tanh) UN(sigmoid, tp_sigmoid)
UN(sqrt, tp_sqrt) UN(abs, tp_abs) UN(neg, tp_neg) UN(relu, tp_relu)
#define BIN(NAME, FN) \
extern "C" void NAME##_vf(const float* a, const float* b, float* y, long n) { for (long i = 0; i < n; i += TP_LF) tp_store(y + i, FN(tp_load(a + i), tp_load(b + i))); } \
extern "C" void NAME##_vd(const double* a, const double* b, double* y, long n) { for (long i = 0; i < n; i += TP_LD) tp_store(y + i, FN(tp_load(a + i), tp_load(b + i))); } \
extern "C" void NAME##_sf(const float* a, const float* b, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = FN(a[i], b[i]); } \
extern "C" void NAME##_sd(const double* a, const double* b, double* y, long n) { for (long i = 0; i < n; ++i) y[i] = FN(a[i], b[i]); }
static inline vf tp_sel_lt(vf a, vf b) { return tp_where(a < b, a, b); }
static inline vd tp_sel_lt(vd a, vd b) { return tp_where(a < b, a, b); }
static inline float tp_sel_lt(float a, float b) { return tp_where(a < b, a, b); }
static inline double tp_sel_lt(double a, double b) { return tp_where(a < b, a, b); }
BIN(max, tp_max) BIN(min, tp_min) BIN(where, tp_sel_lt)
extern "C" float hsum_vf(const float* x) { return tp_hsum(tp_load(x)); }
extern "C" float hmax_vf(const float* x) { return tp_hmax(tp_load(x)); }
extern "C" float hmin_vf(const float* x) { return tp_hmin(tp_load(x)); }
extern "C" double hsum_vd(const double* x) { return tp_hsum(tp_load(x)); }
extern "C" double hmax_vd(const double* x) { return tp_hmax(tp_load(x)); }
extern "C" double hmin_vd(const double* x) { return tp_hmin(tp_load(x)); }
extern "C" i64 hsum_vl(const i64* x) { return tp_hsum(tp_load(x)); }
extern "C" i64 hmax_vl(const i64* x) { return tp_hmax(tp_load(x)); }
extern "C" i64 hmin_vl(const i64* x) { return tp_hmin(tp_load(x)); }
extern "C" void splat(float f, double d, i64 l, float* yf, double* yd, i64* yl) {
  tp_store(yf, tp_splat_vf(f)); tp_store(yd, tp_splat_vd(d)); tp_store(yl, tp_splat_vl(l));
}
// i64 lanes: y0 = |x|, y1 = max(x, b), y2 = min(x, b), y3 = relu(x), y4 = -x, y5 = where(x < b, x, b)
extern "C" void ops_vl(const i64* x, const i64* b, i64* y) {
  vl v = tp_load(x), w = tp_load(b);
  tp_store(y, tp_abs(v)); tp_store(y + TP_LD, tp_max(v, w)); tp_store(y + 2 * TP_LD, tp_min(v, w));
  tp_store(y + 3 * TP_LD, tp_relu(v)); tp_store(y + 4 * TP_LD, tp_neg(v)); tp_store(y + 5 * TP_LD, tp_where(v < w, v, w));
}
extern "C" i64 floordiv(i64 a, i64 b) { return tp_floordiv(a, b); }
extern "C" i64 mod(i64 a, i64 b) { return tp_mod(a, b); }
extern "C" int lanes(int which) { return which == 0 ? TP_LF : TP_LD; }
// where(mask, a, b) with the mask read from bool bytes (n a multiple of the lanes).
extern "C" void mask_where_vf(const bool* m, const float* a, const float* b, float* y, long n) { for (long i = 0; i < n; i += TP_LF) tp_store(y + i, tp_where(tp_load_mask(m + i, vf{}), tp_load(a + i), tp_load(b + i))); }
extern "C" void mask_where_vd(const bool* m, const double* a, const double* b, double* y, long n) { for (long i = 0; i < n; i += TP_LD) tp_store(y + i, tp_where(tp_load_mask(m + i, vd{}), tp_load(a + i), tp_load(b + i))); }
)TP";

using UnF = void (*)(const float*, float*, long);
using UnD = void (*)(const double*, double*, long);
using BinF = void (*)(const float*, const float*, float*, long);
using BinD = void (*)(const double*, const double*, double*, long);

class Lib {
 public:
  explicit Lib(const Isa& isa) {
    std::string so = temp_dir() + "/harness_" + isa.name + ".so";
    error_ = compile(isa, cpp_prelude(full_request(isa.vector_bytes)) + kHarness, so);
    if (error_.empty()) {
      handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle_) error_ = std::string("dlopen: ") + dlerror();
    }
  }
  const std::string& error() const { return error_; }
  template <class F>
  F fn(const std::string& name) const {
    void* p = dlsym(handle_, name.c_str());
    if (!p) throw std::runtime_error("missing symbol " + name);
    return reinterpret_cast<F>(p);
  }

 private:
  void* handle_ = nullptr;
  std::string error_;
};

const Lib& lib_for(const Isa& isa) {
  static std::map<std::string, std::unique_ptr<Lib>> cache;
  auto& slot = cache[isa.name];
  if (!slot) slot = std::make_unique<Lib>(isa);
  return *slot;
}

// ------------------------------------------------------------ ulp math ----

int64_t ordered(float x) {
  int32_t i;
  std::memcpy(&i, &x, 4);
  return i < 0 ? int64_t(INT32_MIN) - i : i;
}
int64_t ordered(double x) {
  int64_t i;
  std::memcpy(&i, &x, 8);
  return i < 0 ? INT64_MIN - i : i;
}
// Distance in representable values; NaN matches only NaN.
template <class T>
double ulp_dist(T got, T want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : 1e30;
  int64_t a = ordered(got), b = ordered(want);
  return a > b ? double(uint64_t(a) - uint64_t(b)) : double(uint64_t(b) - uint64_t(a));
}

float bits_f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double bits_d(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Inputs padded to a multiple of 16 lanes (every ISA's vector width divides it).
template <class T>
void pad(std::vector<T>& v) {
  while (v.size() % 16) v.push_back(T(1));
}

struct Stat {
  double max_ulp = 0;
  double at = 0;
  int64_t bad = 0;
};

// Runs `vec` over x, compares every lane with ref(x) in ulps.
template <class T>
Stat measure(void (*vec)(const T*, T*, long), std::vector<T> x, const std::function<T(T)>& ref,
             double bound, const char* what, const char* isa) {
  pad(x);
  std::vector<T> y(x.size());
  vec(x.data(), y.data(), long(x.size()));
  Stat s;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = ulp_dist(y[i], ref(x[i]));
    if (d > s.max_ulp) s.max_ulp = d, s.at = double(x[i]);
    if (d > bound && s.bad++ < 5)
      ADD_FAILURE() << isa << " " << what << "(" << std::hexfloat << x[i] << " = "
                    << std::defaultfloat << x[i] << ") = " << y[i] << ", want " << ref(x[i])
                    << " (" << d << " ulp)";
  }
  return s;
}

void report(const char* isa, const char* what, const Stat& s) {
  std::printf("[ accuracy ] %-7s %-22s max %.0f ulp (at x = %.9g)\n", isa, what, s.max_ulp, s.at);
}

// Specials shared by all float sweeps.
std::vector<float> float_specials() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, nan, -nan, 1.0f, -1.0f,
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::max(), 88.72283f, 88.7228394f, 88.722839f,
                          88.72284f, -87.33654f, -103.27893f, -103.97207f, -103.972084f, -104.0f,
                          -110.0f, 1e-30f, -1e-30f, 1e-7f, 0.625f, -0.625f, 9.0f, 10.0f, -9.0f,
                          0.693147f, 0.3465736f, -0.3465736f};
  for (uint32_t m : {1u, 2u, 0x1234u, 0x400000u, 0x7fffffu}) v.push_back(bits_f(m));
  return v;
}

std::vector<double> double_specials() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<double> v = {0.0, -0.0, inf, -inf, nan, -nan, 1.0, -1.0,
                           std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::max(),
                           709.782712893384, 709.7827128933841, 709.79, 710.0, -708.39641853226408,
                           -744.44007192138121, -745.13321910194110, -745.1332191019412, -746.0,
                           -800.0, 1e-300, -1e-300, 1e-17, 0.625, -0.625, 19.0, 20.0, -19.0,
                           0.34657359027997264, -0.34657359027997264};
  for (uint64_t m : {1ull, 2ull, 0x123456789ull, 0x8000000000000ull, 0xfffffffffffffull}) v.push_back(bits_d(m));
  return v;
}

std::vector<float> uniform_f(float lo, float hi, int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * float((i + 0.5) / n);
  return v;
}
std::vector<double> uniform_d(double lo, double hi, int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * ((i + 0.5) / n);
  return v;
}
// Every `stride`-th bit pattern from 0 to 0xffffffff (both signs, NaNs, denormals).
std::vector<float> bit_sweep_f(uint32_t stride, uint32_t offset = 0) {
  std::vector<float> v;
  for (uint64_t u = offset; u <= 0xffffffffull; u += stride) v.push_back(bits_f(uint32_t(u)));
  return v;
}
std::vector<double> random_bits_d(int n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> v(n);
  for (auto& d : v) d = bits_d(g());
  return v;
}
// Positive doubles with exponents spread over the whole range, denormals included.
std::vector<double> positive_sweep_d(int n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = bits_d((uint64_t(i) * (0x7ff0000000000000ull / n)) + (g() & 0xffffffff));
  return v;
}

template <class T>
std::vector<T> cat(std::initializer_list<std::vector<T>> parts) {
  std::vector<T> v;
  for (auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

// ---------------------------------------------------------------- tests ----

TEST(Prelude, TextHasNoIncludesAndOnlyRequestedGroups) {
  for (int vb : {16, 32, 64}) {
    PreludeRequest none;
    none.vector_bytes = vb;
    std::string base = cpp_prelude(none), full = cpp_prelude(full_request(vb));
    EXPECT_EQ(base.find("#include"), std::string::npos);
    EXPECT_EQ(full.find("#include"), std::string::npos);
    EXPECT_NE(base.find("vector_size(" + std::to_string(vb) + ")"), std::string::npos);
    for (const char* f : {"tp_exp", "tp_log", "tp_tanh", "tp_sigmoid", "tp_floordiv", "tp_mod"}) {
      EXPECT_EQ(base.find(f), std::string::npos) << f;
      EXPECT_NE(full.find(f), std::string::npos) << f;
    }
    PreludeRequest tanh_only = none;
    tanh_only.need_tanh = true;
    std::string t = cpp_prelude(tanh_only);
    EXPECT_NE(t.find("tp_exp(vf"), std::string::npos);  // tanh is built on exp
    EXPECT_EQ(t.find("tp_log"), std::string::npos);
    EXPECT_EQ(t.find("tp_sigmoid"), std::string::npos);
    std::printf("[ size     ] vector_bytes %d: base prelude %zu bytes, full %zu bytes\n", vb,
                base.size(), full.size());
  }
  EXPECT_EQ(lanes_f32(64), 16);
  EXPECT_EQ(lanes_f64(64), 8);
  EXPECT_EQ(lanes_i64(64), 8);
  EXPECT_EQ(lanes_f32(32), 8);
  EXPECT_EQ(lanes_f64(16), 2);
  PreludeRequest bad;
  bad.vector_bytes = 24;
  EXPECT_THROW(cpp_prelude(bad), tp::ValueError);
}

class PreludeIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!GetParam().supported()) GTEST_SKIP() << GetParam().name << " not supported by this CPU";
    const Lib& l = lib_for(GetParam());
    ASSERT_EQ(l.error(), "");
    lib = &l;
    isa = GetParam().name;
  }
  const Lib* lib = nullptr;
  const char* isa = "";
};

TEST_P(PreludeIsa, Lanes) {
  auto lanes = lib->fn<int (*)(int)>("lanes");
  EXPECT_EQ(lanes(0), lanes_f32(GetParam().vector_bytes));
  EXPECT_EQ(lanes(1), lanes_f64(GetParam().vector_bytes));
}

TEST_P(PreludeIsa, ExpFloat) {
  auto fv = lib->fn<UnF>("exp_vf");
  std::function<float(float)> exact = [](float x) { return float(std::exp(double(x))); };
  std::function<float(float)> libm = [](float x) { return std::exp(x); };
  auto x = cat<float>({uniform_f(-104.0f, 89.0f, 1000000), bit_sweep_f(1021), float_specials()});
  report(isa, "exp(vf) vs exact", measure(fv, x, exact, 2, "exp", isa));
  report(isa, "exp(vf) vs libm expf", measure(fv, x, libm, 2, "exp", isa));
  const float inf = INFINITY;
  std::vector<float> sp = {-inf, inf, NAN, 0.0f, -0.0f, 89.0f, 1000.0f, -1000.0f, -104.0f, 88.7229f};
  pad(sp);
  std::vector<float> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[4], 1.0f);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], 0.0f);
  EXPECT_EQ(y[8], 0.0f);
  EXPECT_EQ(y[9], inf);
  // gradual underflow: denormal results are produced, not flushed
  std::vector<float> den = uniform_f(-103.9f, -87.4f, 4096);
  std::vector<float> yd(den.size());
  fv(den.data(), yd.data(), long(den.size()));
  for (size_t i = 0; i < den.size(); ++i) EXPECT_GT(yd[i], 0.0f) << den[i];
  // scalar overload (libm)
  std::vector<float> s = float_specials(), ys(s.size());
  lib->fn<UnF>("exp_sf")(s.data(), ys.data(), long(s.size()));
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(ulp_dist(ys[i], std::exp(s[i])), 0) << s[i];
}

TEST_P(PreludeIsa, ExpDouble) {
  auto fv = lib->fn<UnD>("exp_vd");
  std::function<double(double)> exact = [](double x) { return double(std::exp((long double)x)); };
  std::function<double(double)> libm = [](double x) { return std::exp(x); };
  auto x = cat<double>({uniform_d(-746.0, 710.0, 1000000), uniform_d(-1.0, 1.0, 200000),
                        random_bits_d(500000, 1), double_specials()});
  report(isa, "exp(vd) vs exact", measure(fv, x, exact, 2, "exp", isa));
  report(isa, "exp(vd) vs libm exp", measure(fv, x, libm, 2, "exp", isa));
  const double inf = INFINITY;
  std::vector<double> sp = {-inf, inf, NAN, 0.0, -0.0, 710.0, 1e5, -1e5, -746.0, 709.8};
  pad(sp);
  std::vector<double> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 1.0);
  EXPECT_EQ(y[4], 1.0);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], inf);
  EXPECT_EQ(y[7], 0.0);
  EXPECT_EQ(y[8], 0.0);
  EXPECT_EQ(y[9], inf);
}

TEST_P(PreludeIsa, LogFloat) {
  auto fv = lib->fn<UnF>("log_vf");
  std::function<float(float)> exact = [](float x) { return float(std::log(double(x))); };
  std::function<float(float)> libm = [](float x) { return std::log(x); };
  // bit sweep covers every binade of both signs (denormals, inf, NaN); plus dense around 1
  auto x = cat<float>({bit_sweep_f(1009), bit_sweep_f(4099, 0x3f000000u >> 4),
                       uniform_f(0.5f, 2.0f, 1000000), uniform_f(0.99f, 1.01f, 200000), float_specials()});
  report(isa, "log(vf) vs exact", measure(fv, x, exact, 2, "log", isa));
  report(isa, "log(vf) vs libm logf", measure(fv, x, libm, 2, "log", isa));
  const float inf = INFINITY;
  std::vector<float> sp = {0.0f, -0.0f, -1.0f, -inf, inf, NAN, 1.0f, bits_f(1), -bits_f(1)};
  pad(sp);
  std::vector<float> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], -inf);
  EXPECT_EQ(y[1], -inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[4], inf);
  EXPECT_TRUE(std::isnan(y[5]));
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_FALSE(std::signbit(y[6]));
  EXPECT_EQ(y[7], std::log(bits_f(1)));
  EXPECT_TRUE(std::isnan(y[8]));
}

TEST_P(PreludeIsa, LogDouble) {
  auto fv = lib->fn<UnD>("log_vd");
  std::function<double(double)> exact = [](double x) { return double(std::log((long double)x)); };
  std::function<double(double)> libm = [](double x) { return std::log(x); };
  auto x = cat<double>({positive_sweep_d(1000000, 2), uniform_d(0.5, 2.0, 500000),
                        uniform_d(0.999, 1.001, 100000), random_bits_d(200000, 3), double_specials()});
  report(isa, "log(vd) vs exact", measure(fv, x, exact, 2, "log", isa));
  report(isa, "log(vd) vs libm log", measure(fv, x, libm, 2, "log", isa));
  const double inf = INFINITY;
  std::vector<double> sp = {0.0, -0.0, -1.0, -inf, inf, NAN, 1.0, bits_d(1), -bits_d(1)};
  pad(sp);
  std::vector<double> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], -inf);
  EXPECT_EQ(y[1], -inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[4], inf);
  EXPECT_TRUE(std::isnan(y[5]));
  EXPECT_EQ(y[6], 0.0);
  EXPECT_FALSE(std::signbit(y[6]));
  EXPECT_EQ(y[7], std::log(bits_d(1)));
  EXPECT_TRUE(std::isnan(y[8]));
}

std::vector<float> tiny_magnitudes_f(int n) {  // +-[1e-30, 1], log-uniform
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    float m = float(std::pow(10.0, -30.0 + 30.0 * (i + 0.5) / n));
    v.push_back(m);
    v.push_back(-m);
  }
  return v;
}
std::vector<double> tiny_magnitudes_d(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    double m = std::pow(10.0, -300.0 + 300.0 * (i + 0.5) / n);
    v.push_back(m);
    v.push_back(-m);
  }
  return v;
}

TEST_P(PreludeIsa, TanhFloat) {
  auto fv = lib->fn<UnF>("tanh_vf");
  std::function<float(float)> exact = [](float x) { return float(std::tanh(double(x))); };
  auto x = cat<float>({uniform_f(-12.0f, 12.0f, 1000000), uniform_f(-1.0f, 1.0f, 200000),
                       tiny_magnitudes_f(100000), bit_sweep_f(4093), float_specials()});
  report(isa, "tanh(vf) vs exact", measure(fv, x, exact, 4, "tanh", isa));
  std::vector<float> sp = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 20.0f, -20.0f, 1e-40f};
  pad(sp);
  std::vector<float> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_TRUE(std::signbit(y[4]));
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[6], -1.0f);
  EXPECT_EQ(y[7], 1e-40f);
}

TEST_P(PreludeIsa, TanhDouble) {
  auto fv = lib->fn<UnD>("tanh_vd");
  std::function<double(double)> exact = [](double x) { return double(std::tanh((long double)x)); };
  std::function<double(double)> libm = [](double x) { return std::tanh(x); };
  auto x = cat<double>({uniform_d(-25.0, 25.0, 1000000), uniform_d(-1.0, 1.0, 200000),
                        tiny_magnitudes_d(100000), random_bits_d(200000, 4), double_specials()});
  report(isa, "tanh(vd) vs exact", measure(fv, x, exact, 4, "tanh", isa));
  report(isa, "tanh(vd) vs libm tanh", measure(fv, x, libm, 4, "tanh", isa));
  std::vector<double> sp = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 40.0, -40.0, 1e-310};
  pad(sp);
  std::vector<double> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], -1.0);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0);
  EXPECT_TRUE(std::signbit(y[4]));
  EXPECT_EQ(y[5], 1.0);
  EXPECT_EQ(y[6], -1.0);
  EXPECT_EQ(y[7], 1e-310);
}

long double sigmoid_ref(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

TEST_P(PreludeIsa, SigmoidFloat) {
  auto fv = lib->fn<UnF>("sigmoid_vf");
  std::function<float(float)> exact = [](float x) { return float(sigmoid_ref(x)); };
  auto x = cat<float>({uniform_f(-110.0f, 110.0f, 1000000), uniform_f(-5.0f, 5.0f, 200000),
                       bit_sweep_f(4093), float_specials()});
  report(isa, "sigmoid(vf) vs exact", measure(fv, x, exact, 4, "sigmoid", isa));
  report(isa, "sigmoid(float) vs exact", measure(lib->fn<UnF>("sigmoid_sf"), x, exact, 4, "sigmoid", isa));
  std::vector<float> sp = {INFINITY, -INFINITY, NAN, 0.0f, -200.0f, 200.0f};
  pad(sp);
  std::vector<float> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 1.0f);
}

TEST_P(PreludeIsa, SigmoidDouble) {
  auto fv = lib->fn<UnD>("sigmoid_vd");
  std::function<double(double)> exact = [](double x) { return double(sigmoid_ref(x)); };
  auto x = cat<double>({uniform_d(-750.0, 750.0, 1000000), uniform_d(-5.0, 5.0, 200000),
                        random_bits_d(200000, 5), double_specials()});
  report(isa, "sigmoid(vd) vs exact", measure(fv, x, exact, 4, "sigmoid", isa));
  report(isa, "sigmoid(double) vs exact", measure(lib->fn<UnD>("sigmoid_sd"), x, exact, 4, "sigmoid", isa));
  std::vector<double> sp = {INFINITY, -INFINITY, NAN, 0.0, -1000.0, 1000.0};
  pad(sp);
  std::vector<double> y(sp.size());
  fv(sp.data(), y.data(), long(sp.size()));
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.5);
  EXPECT_EQ(y[4], 0.0);
  EXPECT_EQ(y[5], 1.0);
}

// Scalar overloads of the transcendental functions are libm (or, for sigmoid, a
// stable formula on libm exp): check they are wired to the right function.
TEST_P(PreludeIsa, ScalarTranscendentalOverloads) {
  std::vector<float> xf = cat<float>({float_specials(), uniform_f(-20.0f, 20.0f, 1000)});
  std::vector<double> xd = cat<double>({double_specials(), uniform_d(-20.0, 20.0, 1000)});
  std::vector<float> yf(xf.size());
  std::vector<double> yd(xd.size());
  struct {
    const char* name;
    float (*f)(float);
    double (*d)(double);
  } fns[] = {{"exp", [](float x) { return std::exp(x); }, [](double x) { return std::exp(x); }},
             {"log", [](float x) { return std::log(x); }, [](double x) { return std::log(x); }},
             {"tanh", [](float x) { return std::tanh(x); }, [](double x) { return std::tanh(x); }},
             {"sqrt", [](float x) { return std::sqrt(x); }, [](double x) { return std::sqrt(x); }}};
  for (auto& f : fns) {
    lib->fn<UnF>(std::string(f.name) + "_sf")(xf.data(), yf.data(), long(xf.size()));
    lib->fn<UnD>(std::string(f.name) + "_sd")(xd.data(), yd.data(), long(xd.size()));
    for (size_t i = 0; i < xf.size(); ++i) EXPECT_EQ(ulp_dist(yf[i], f.f(xf[i])), 0) << f.name << " " << xf[i];
    for (size_t i = 0; i < xd.size(); ++i) EXPECT_EQ(ulp_dist(yd[i], f.d(xd[i])), 0) << f.name << " " << xd[i];
  }
}

// abs / neg / relu / sqrt / max / min / where: vector and scalar overloads agree
// with the obvious reference, bit for bit (NaN: any NaN).
TEST_P(PreludeIsa, Elementwise) {
  const float nan = NAN, inf = INFINITY;
  std::vector<float> a = {1.5f, -2.0f, 0.0f, -0.0f, nan, 3.0f, -inf, inf, nan, 1e-40f, -1e-40f, 7.0f, 2.0f, -3.0f, 4.0f, 0.25f};
  std::vector<float> b = {2.5f, -3.0f, -0.0f, 0.0f, 1.0f, nan, 0.0f, 1.0f, nan, -1e-40f, 1e-40f, 7.0f, -2.0f, 3.0f, -4.0f, 0.5f};
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  auto same = [](double got, double want) {
    return std::isnan(want) ? std::isnan(got) : got == want;
  };
  auto relu = [](double x) { return std::isnan(x) ? x : x > 0 ? x : 0.0; };
  auto mx = [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); };
  auto mn = [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); };
  for (const char* kind : {"v", "s"}) {
    std::string k = kind;
    std::vector<float> yf(16);
    std::vector<double> yd(16);
    struct U {
      const char* name;
      std::function<double(double)> ref;
    } uns[] = {{"abs", [](double x) { return std::fabs(x); }},
               {"neg", [](double x) { return -x; }},
               {"relu", relu},
               {"sqrt", [](double x) { return std::sqrt(x); }}};
    for (auto& u : uns) {
      lib->fn<UnF>(std::string(u.name) + "_" + k + "f")(a.data(), yf.data(), 16);
      lib->fn<UnD>(std::string(u.name) + "_" + k + "d")(ad.data(), yd.data(), 16);
      for (int i = 0; i < 16; ++i) {
        EXPECT_TRUE(same(yf[i], float(u.ref(a[i])))) << k << " " << u.name << "(" << a[i] << ") = " << yf[i];
        EXPECT_TRUE(same(yd[i], u.ref(ad[i]))) << k << " " << u.name << "(" << ad[i] << ") = " << yd[i];
        if (std::string(u.name) != "relu" && !std::isnan(yf[i])) {
          EXPECT_EQ(std::signbit(yf[i]), std::signbit(float(u.ref(a[i])))) << u.name << a[i];
        }
      }
    }
    struct B {
      const char* name;
      std::function<double(double, double)> ref;
    } bins[] = {{"max", mx}, {"min", mn}, {"where", [](double x, double y) { return x < y ? x : y; }}};
    for (auto& bn : bins) {
      lib->fn<BinF>(std::string(bn.name) + "_" + k + "f")(a.data(), b.data(), yf.data(), 16);
      lib->fn<BinD>(std::string(bn.name) + "_" + k + "d")(ad.data(), bd.data(), yd.data(), 16);
      for (int i = 0; i < 16; ++i) {
        bool zeros = a[i] == 0 && b[i] == 0;  // max(+0,-0): either zero is fine
        EXPECT_TRUE(same(yf[i], float(bn.ref(a[i], b[i])))) << k << " " << bn.name << "(" << a[i] << ", " << b[i] << ") = " << yf[i];
        EXPECT_TRUE(same(yd[i], bn.ref(ad[i], bd[i]))) << k << " " << bn.name << "(" << ad[i] << ", " << bd[i] << ") = " << yd[i];
        (void)zeros;
      }
    }
  }
  // i64 lanes
  std::vector<i64> x = {5, -7, 0, INT64_MAX, -3, 9, 2, -1}, w = {-5, -6, 1, 0, -3, 10, 2, 4};
  std::vector<i64> y(6 * 8);
  lib->fn<void (*)(const i64*, const i64*, i64*)>("ops_vl")(x.data(), w.data(), y.data());
  int ld = lanes_i64(GetParam().vector_bytes);
  for (int i = 0; i < ld; ++i) {
    EXPECT_EQ(y[i], x[i] < 0 ? -x[i] : x[i]);
    EXPECT_EQ(y[ld + i], std::max(x[i], w[i]));
    EXPECT_EQ(y[2 * ld + i], std::min(x[i], w[i]));
    EXPECT_EQ(y[3 * ld + i], std::max<i64>(x[i], 0));
    EXPECT_EQ(y[4 * ld + i], -x[i]);
    EXPECT_EQ(y[5 * ld + i], x[i] < w[i] ? x[i] : w[i]);
  }
  // splat
  std::vector<float> sf(16);
  std::vector<double> sd(8);
  std::vector<i64> sl(8);
  lib->fn<void (*)(float, double, i64, float*, double*, i64*)>("splat")(-0.0f, 2.5, -9, sf.data(), sd.data(), sl.data());
  for (int i = 0; i < lanes_f32(GetParam().vector_bytes); ++i) {
    EXPECT_EQ(sf[i], 0.0f);
    EXPECT_TRUE(std::signbit(sf[i]));
  }
  for (int i = 0; i < lanes_f64(GetParam().vector_bytes); ++i) EXPECT_EQ(sd[i], 2.5);
  for (int i = 0; i < lanes_i64(GetParam().vector_bytes); ++i) EXPECT_EQ(sl[i], -9);
}

TEST_P(PreludeIsa, HorizontalReductions) {
  const int lf = lanes_f32(GetParam().vector_bytes), ld = lanes_f64(GetParam().vector_bytes);
  auto hsum_f = lib->fn<float (*)(const float*)>("hsum_vf");
  auto hmax_f = lib->fn<float (*)(const float*)>("hmax_vf");
  auto hmin_f = lib->fn<float (*)(const float*)>("hmin_vf");
  auto hsum_d = lib->fn<double (*)(const double*)>("hsum_vd");
  auto hmax_d = lib->fn<double (*)(const double*)>("hmax_vd");
  auto hmin_d = lib->fn<double (*)(const double*)>("hmin_vd");
  std::mt19937 g(7);
  std::uniform_real_distribution<double> u(-100, 100);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> f(16);
    std::vector<double> d(16);
    for (int i = 0; i < 16; ++i) d[i] = f[i] = float(u(g));
    double sf = 0, sd = 0;
    float mxf = -INFINITY, mnf = INFINITY;
    double mxd = -INFINITY, mnd = INFINITY;
    for (int i = 0; i < lf; ++i) sf += f[i], mxf = std::max(mxf, f[i]), mnf = std::min(mnf, f[i]);
    for (int i = 0; i < ld; ++i) sd += d[i], mxd = std::max(mxd, d[i]), mnd = std::min(mnd, d[i]);
    EXPECT_NEAR(hsum_f(f.data()), sf, 1e-4);
    EXPECT_NEAR(hsum_d(d.data()), sd, 1e-12);
    EXPECT_EQ(hmax_f(f.data()), mxf);
    EXPECT_EQ(hmin_f(f.data()), mnf);
    EXPECT_EQ(hmax_d(d.data()), mxd);
    EXPECT_EQ(hmin_d(d.data()), mnd);
  }
  // exact on integers, every lane counted once
  std::vector<float> f(16);
  std::vector<double> d(16);
  for (int i = 0; i < 16; ++i) f[i] = float(1 << i), d[i] = double(1 << i);
  EXPECT_EQ(hsum_f(f.data()), float((1 << lf) - 1));
  EXPECT_EQ(hsum_d(d.data()), double((1 << ld) - 1));
  EXPECT_EQ(hmax_f(f.data()), float(1 << (lf - 1)));
  EXPECT_EQ(hmin_d(d.data()), 1.0);
  // NaN in any lane propagates through max / min / sum
  for (int pos = 0; pos < lf; ++pos) {
    std::vector<float> v(16, 1.0f);
    v[pos] = NAN;
    EXPECT_TRUE(std::isnan(hmax_f(v.data()))) << pos;
    EXPECT_TRUE(std::isnan(hmin_f(v.data()))) << pos;
    EXPECT_TRUE(std::isnan(hsum_f(v.data()))) << pos;
  }
  for (int pos = 0; pos < ld; ++pos) {
    std::vector<double> v(16, 1.0);
    v[pos] = NAN;
    EXPECT_TRUE(std::isnan(hmax_d(v.data()))) << pos;
    EXPECT_TRUE(std::isnan(hmin_d(v.data()))) << pos;
  }
  std::vector<i64> l = {5, -9, 3, 1LL << 40, 7, -2, 11, 4};
  i64 sl = 0, mxl = INT64_MIN, mnl = INT64_MAX;
  for (int i = 0; i < ld; ++i) sl += l[i], mxl = std::max(mxl, l[i]), mnl = std::min(mnl, l[i]);
  EXPECT_EQ(lib->fn<i64 (*)(const i64*)>("hsum_vl")(l.data()), sl);
  EXPECT_EQ(lib->fn<i64 (*)(const i64*)>("hmax_vl")(l.data()), mxl);
  EXPECT_EQ(lib->fn<i64 (*)(const i64*)>("hmin_vl")(l.data()), mnl);
  // pairwise tree: 1 + 16 * 2^-24 sums exactly (sequential summation would lose them all)
  std::vector<float> t(16, 0x1p-24f);
  t[0] = 1.0f;
  float tree = hsum_f(t.data());
  EXPECT_GT(tree, 1.0f);
}

TEST_P(PreludeIsa, FloorDivMod) {
  auto fd = lib->fn<i64 (*)(i64, i64)>("floordiv");
  auto md = lib->fn<i64 (*)(i64, i64)>("mod");
  auto py_div = [](i64 a, i64 b) {
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  for (i64 a = -20; a <= 20; ++a)
    for (i64 b = -7; b <= 7; ++b) {
      if (b == 0) continue;
      i64 q = fd(a, b), r = md(a, b);
      EXPECT_EQ(q, py_div(a, b)) << a << " // " << b;
      EXPECT_EQ(q * b + r, a) << a << " % " << b;
      if (r != 0) {
        EXPECT_EQ(r < 0, b < 0) << a << " % " << b;
      }
      EXPECT_LT(std::abs(r), std::abs(b));
    }
  EXPECT_EQ(fd(-7, 2), -4);
  EXPECT_EQ(md(-7, 2), 1);
  EXPECT_EQ(fd(7, -2), -4);
  EXPECT_EQ(md(7, -2), -1);
  EXPECT_EQ(fd(-7, -2), 3);
  EXPECT_EQ(md(-7, -2), -1);
  EXPECT_EQ(fd(INT64_MIN, -1), INT64_MIN);  // wraps, no SIGFPE
  EXPECT_EQ(md(INT64_MIN, -1), 0);
  EXPECT_EQ(fd(INT64_MIN, 3), -3074457345618258603LL);
  EXPECT_EQ(md(INT64_MIN, 3), 1);
}

// A bool buffer read as lane masks selects per lane, and reads exactly the
// lanes' bytes: the last vector ends at the buffer's last byte (a page end
// under ASan / a guard page would fault on a wider read).
TEST_P(PreludeIsa, BoolMaskLoadSelectsPerLane) {
  auto wf = lib->fn<void (*)(const bool*, const float*, const float*, float*, long)>("mask_where_vf");
  auto wd = lib->fn<void (*)(const bool*, const double*, const double*, double*, long)>("mask_where_vd");
  const long n = 64;
  std::vector<unsigned char> bytes(n);
  for (long i = 0; i < n; ++i) bytes[i] = (i * 7 + i / 5) % 3 == 0;
  std::unique_ptr<bool[]> m(new bool[n]);  // exactly n bytes
  std::memcpy(m.get(), bytes.data(), n);
  std::vector<float> af(n), bf(n), yf(n);
  std::vector<double> ad(n), bd(n), yd(n);
  for (long i = 0; i < n; ++i) af[i] = ad[i] = i + 1, bf[i] = bd[i] = -(i + 1);
  wf(m.get(), af.data(), bf.data(), yf.data(), n);
  wd(m.get(), ad.data(), bd.data(), yd.data(), n);
  for (long i = 0; i < n; ++i) {
    EXPECT_EQ(yf[i], bytes[i] ? af[i] : bf[i]) << isa << " float lane " << i;
    EXPECT_EQ(yd[i], bytes[i] ? ad[i] : bd[i]) << isa << " double lane " << i;
  }
}

// The lane loop in tp_sqrt must become one packed sqrt, not calls to sqrtf.
TEST_P(PreludeIsa, SqrtIsOnePackedInstruction) {
  const Isa& is = GetParam();
  std::string src = cpp_prelude(full_request(is.vector_bytes)) +
                    "extern \"C\" void k(const float* x, float* y, const double* a, double* b) {"
                    " tp_store(y, tp_sqrt(tp_load(x))); tp_store(b, tp_sqrt(tp_load(a))); }\n";
  std::string out = temp_dir() + "/sqrt_" + is.name + ".s";
  ASSERT_EQ(compile(is, src, out, "-S"), "");
  std::string s = read_file(out);
  std::string reg = is.vector_bytes == 64 ? "zmm" : is.vector_bytes == 32 ? "ymm" : "xmm";
  EXPECT_NE(s.find("sqrtps"), std::string::npos) << s;
  EXPECT_NE(s.find("sqrtpd"), std::string::npos) << s;
  EXPECT_NE(s.find(reg), std::string::npos) << s;
  EXPECT_EQ(s.find("call"), std::string::npos) << s;
  EXPECT_EQ(s.find("sqrtss"), std::string::npos) << s;
}

// Not asserted: cold g++ time of a TU made of the full prelude + one trivial kernel.
TEST_P(PreludeIsa, CompileTime) {
  const Isa& is = GetParam();
  const char* kernel =
      "extern \"C\" void k(const float* x, float* y, long n) {\n"
      "  long i = 0;\n"
      "  for (; i + TP_LF <= n; i += TP_LF) tp_store(y + i, tp_load(x + i) * 2.0f);\n"
      "  for (; i < n; ++i) y[i] = x[i] * 2.0f;\n}\n";
  auto time_it = [&](const std::string& prelude, const char* tag) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      std::string out = temp_dir() + "/ct_" + tag + "_" + is.name + ".so";
      auto t0 = std::chrono::steady_clock::now();
      std::string err = compile(is, prelude + kernel, out);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(err, "");
      best = std::min(best, s);
    }
    return best;
  };
  PreludeRequest none;
  none.vector_bytes = is.vector_bytes;
  double full = time_it(cpp_prelude(full_request(is.vector_bytes)), "full");
  double base = time_it(cpp_prelude(none), "base");
  double empty = time_it("typedef float vf __attribute__((vector_size(16))); enum { TP_LF = 4 };"
                         "static inline vf tp_load(const float* p) { vf v; __builtin_memcpy(&v, p, 16); return v; }"
                         "static inline void tp_store(float* p, vf v) { __builtin_memcpy(p, &v, 16); }\n",
                         "empty");
  const char* heavy =
      "extern \"C\" void h(const float* x, float* y, const double* a, double* b, long n) {\n"
      "  long i = 0;\n"
      "  for (; i + TP_LF <= n; i += TP_LF) { vf v = tp_load(x + i);\n"
      "    tp_store(y + i, tp_exp(v) + tp_log(v) + tp_tanh(v) + tp_sigmoid(v)); }\n"
      "  for (; i < n; ++i) y[i] = tp_exp(x[i]) + tp_log(x[i]) + tp_tanh(x[i]) + tp_sigmoid(x[i]);\n"
      "  for (i = 0; i + TP_LD <= n; i += TP_LD) { vd v = tp_load(a + i);\n"
      "    tp_store(b + i, tp_exp(v) + tp_log(v) + tp_tanh(v) + tp_sigmoid(v)); }\n"
      "  for (; i < n; ++i) b[i] = tp_exp(a[i]) + tp_log(a[i]) + tp_tanh(a[i]) + tp_sigmoid(a[i]);\n}\n";
  double all = time_it(cpp_prelude(full_request(is.vector_bytes)) + heavy, "all");
  std::printf("[ compile  ] %-7s full prelude + trivial kernel %.3f s, base prelude + trivial kernel "
              "%.3f s, trivial kernel alone %.3f s, full prelude + kernel using exp/log/tanh/sigmoid "
              "(vf, vd, scalar tails) %.3f s (best of 3, -O3 -shared -fopenmp)\n",
              is.name, full, base, empty, all);
}

INSTANTIATE_TEST_SUITE_P(Isas, PreludeIsa, ::testing::ValuesIn(kIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace tp::stax::codegen
