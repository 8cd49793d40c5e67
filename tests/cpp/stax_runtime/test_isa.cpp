#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "runtime_test_util.h"
#include "stax/runtime/isa.h"

namespace tp::stax::runtime::testing {
namespace {

bool has_flag(const std::vector<std::string>& args, const std::string& prefix) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a.rfind(prefix, 0) == 0; });
}

// The kernel reports the widest vector ISA its compiler flags enabled.
const char* kIsaProbe = R"(
extern "C" int tp_vector_bytes() {
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  return 64;
#elif defined(__AVX2__) && defined(__FMA__)
  return 32;
#else
  return 16;
#endif
}
)";

using IsaTest = RuntimeTest;

TEST_F(IsaTest, HostIsaIsOneOfTheThree) {
  const IsaInfo& isa = host_isa();
  const std::set<std::string> names = {"avx512", "avx2", "scalar"};
  EXPECT_TRUE(names.count(isa.name)) << isa.name;
  EXPECT_EQ(isa.name, detected_isa_name());  // no TP_STAX_ISA in this test
  const IsaInfo expected = isa_info(isa.name);
  EXPECT_EQ(isa.vector_bytes, expected.vector_bytes);
  EXPECT_EQ(isa.flags, expected.flags);
  EXPECT_EQ(isa_info("avx512").vector_bytes, 64);
  EXPECT_EQ(isa_info("avx2").vector_bytes, 32);
  EXPECT_EQ(isa_info("scalar").vector_bytes, 16);
}

#if defined(__linux__) && defined(__x86_64__)
// Linux lists a feature in /proc/cpuinfo only if the CPU has it and the
// kernel enabled its register state, the same test our cpuid/xgetbv code does.
TEST_F(IsaTest, DetectionAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  auto all = [&](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n) > 0; });
  };
  std::string expected = "scalar";
  if (all({"avx", "avx2", "fma"})) expected = "avx2";
  if (expected == "avx2" && all({"avx512f", "avx512dq", "avx512bw", "avx512vl"})) expected = "avx512";
  EXPECT_EQ(detected_isa_name(), expected);
}
#endif

TEST_F(IsaTest, ScalarOverride) {
  isa_env_.set("scalar");
  cache().reset_for_testing();
  const IsaInfo& isa = host_isa();
  EXPECT_EQ(isa.name, "scalar");
  EXPECT_EQ(isa.vector_bytes, 16);
  EXPECT_TRUE(isa.flags.empty());
  const auto argv = cache().compile_command("a.cpp", "a.so");
  EXPECT_FALSE(has_flag(argv, "-mavx"));
  EXPECT_FALSE(has_flag(argv, "-mfma"));

  // The flags reach the compiler: the probe kernel sees no AVX macros.
  BuildResult r = cache().load_or_build(kIsaProbe);
  EXPECT_EQ(call_int_fn(r, "tp_vector_bytes"), 16);
}

TEST_F(IsaTest, HostFlagsReachTheCompiler) {
  BuildResult r = cache().load_or_build(kIsaProbe);
  EXPECT_EQ(call_int_fn(r, "tp_vector_bytes"), host_isa().vector_bytes);
  const auto argv = cache().compile_command("a.cpp", "a.so");
  for (const auto& flag : host_isa().flags) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), flag), argv.end()) << flag;
  }
}

TEST_F(IsaTest, OverrideIsPartOfTheKey) {
  if (detected_isa_name() == "scalar") GTEST_SKIP() << "host is scalar-only";
  const std::string source = "extern \"C\" int f() { return 1; }\n";
  const std::string native_key = cache().key_for(source);
  isa_env_.set("scalar");
  cache().reset_for_testing();
  EXPECT_NE(cache().key_for(source), native_key);
}

TEST_F(IsaTest, Avx2OverrideOnAvx512Host) {
  if (detected_isa_name() != "avx512") GTEST_SKIP() << "host is not avx512";
  isa_env_.set("avx2");
  cache().reset_for_testing();
  EXPECT_EQ(host_isa().name, "avx2");
  EXPECT_EQ(host_isa().vector_bytes, 32);
  EXPECT_FALSE(has_flag(host_isa().flags, "-mavx512"));
  EXPECT_EQ(call_int_fn(cache().load_or_build(kIsaProbe), "tp_vector_bytes"), 32);
}

TEST_F(IsaTest, UnknownOverrideRaisesValueError) {
  isa_env_.set("sse9000");
  cache().reset_for_testing();
  try {
    host_isa();
    FAIL() << "expected tp::ValueError";
  } catch (const tp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("sse9000"), std::string::npos) << e.what();
  }
}

TEST_F(IsaTest, OverrideAboveHostRaisesValueError) {
  const std::string best = detected_isa_name();
  if (best == "avx512") GTEST_SKIP() << "host supports every ISA";
  const char* request = best == "avx2" ? "avx512" : "avx2";
  isa_env_.set(request);
  cache().reset_for_testing();
  try {
    host_isa();
    FAIL() << "expected tp::ValueError";
  } catch (const tp::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(request), std::string::npos) << e.what();
  }
}

TEST_F(IsaTest, CachedUntilReset) {
  const std::string first = host_isa().name;
  isa_env_.set("scalar");
  EXPECT_EQ(host_isa().name, first);  // env is not re-read on the hot path
  cache().reset_for_testing();
  EXPECT_EQ(host_isa().name, "scalar");
}

}  // namespace
}  // namespace tp::stax::runtime::testing
