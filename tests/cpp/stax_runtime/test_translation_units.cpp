// A region as several translation units (CodeCache::load_or_build_units):
// objects compiled at once on the compile pool, cached by content, linked
// into one library; run_parallel never deadlocks when called from a worker.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "core/error.h"
#include "runtime_test_util.h"
#include "stax/runtime/compile_pool.h"

namespace tp::stax::runtime::testing {
namespace {

using TranslationUnitsTest = RuntimeTest;

// Two units: the second calls a hidden function of the first.
const std::vector<std::string> kUnits = {
    "__attribute__((visibility(\"hidden\"))) int tp_part(int x) { return 40 + x; }\n",
    "__attribute__((visibility(\"hidden\"))) int tp_part(int x);\n"
    "extern \"C\" int tp_test_fn() { return tp_part(2); }\n"};

TEST_F(TranslationUnitsTest, UnitsLinkIntoOneLibraryAndAreReused) {
  BuildResult built = cache().load_or_build_units(kUnits);
  EXPECT_FALSE(built.disk_hit);
  EXPECT_EQ(call_int_fn(built), 42);
  EXPECT_EQ(built.key, cache().key_for_units(kUnits));
  for (const std::string& unit : kUnits) {
    struct stat st;
    EXPECT_EQ(::stat((artifact_dir(cache().key_for_object(unit)) + "/kernel.o").c_str(), &st), 0);
  }
  // A hidden symbol of a unit is not exported from the library.
  EXPECT_THROW(built.library->symbol("_Z7tp_parti"), BackendError);

  // Another process (fresh in-memory state): a hit on the linked library.
  cache().reset_for_testing();
  BuildResult again = cache().load_or_build_units(kUnits);
  EXPECT_TRUE(again.disk_hit);
  EXPECT_EQ(call_int_fn(again), 42);

  // One unit is exactly the one-library path (same key, same entry).
  EXPECT_EQ(cache().load_or_build_units({kUnits[0] + kUnits[1]}).key, cache().key_for(kUnits[0] + kUnits[1]));
}

TEST_F(TranslationUnitsTest, AFailingUnitIsNamed) {
  std::vector<std::string> units = kUnits;
  units[0] = "int tp_part(int x) { return x +; }\n";  // a syntax error in unit 1
  try {
    cache().load_or_build_units(units);
    FAIL() << "expected a BackendError";
  } catch (const BackendError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("translation unit 1 of 2"), std::string::npos) << what;
    EXPECT_NE(what.find("C++ compiler failed"), std::string::npos) << what;
  }
}

TEST_F(TranslationUnitsTest, RunParallelFromEveryWorkerAtOnceFinishes) {
  // As many callers as workers, each on a worker, each spreading tasks over
  // the (fully busy) pool: the callers run their own tasks.
  const int n = compile_pool_size();
  std::atomic<int> ran{0};
  std::vector<std::shared_ptr<std::promise<void>>> done;
  for (int i = 0; i < n; ++i) {
    auto p = std::make_shared<std::promise<void>>();
    done.push_back(p);
    submit_build([&ran, p] {
      run_parallel(5, [&ran](size_t) { ran.fetch_add(1); });
      p->set_value();
    });
  }
  for (auto& p : done) {
    ASSERT_EQ(p->get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  }
  EXPECT_EQ(ran.load(), 5 * n);
}

TEST_F(TranslationUnitsTest, RunParallelRethrowsTheLowestFailingTask) {
  try {
    run_parallel(4, [](size_t i) {
      if (i == 1 || i == 3) throw ValueError("task " + std::to_string(i));
    });
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "task 1");
  }
}

}  // namespace
}  // namespace tp::stax::runtime::testing
