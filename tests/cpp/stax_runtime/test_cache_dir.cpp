#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime_test_util.h"
#include "stax/runtime/cache_dir.h"

namespace tp::stax::runtime::testing {
namespace {

class CacheDirTest : public RuntimeTest {
 protected:
  // Builds a kernel with TP_CACHE_DIR=`dir` and checks that it worked from a
  // private fallback directory, with exactly one warning naming `dir`.
  void expect_fallback(const std::string& dir, const std::string& reason_fragment) {
    cache_env_.set(dir.c_str());
    cache().reset_for_testing();
    tp::set_warning_handler(&capture_warning);

    BuildResult r = cache().load_or_build(unique_kernel(42));
    EXPECT_FALSE(r.disk_hit);
    EXPECT_EQ(call_int_fn(r), 42);
    EXPECT_EQ(call_int_fn(cache().load_or_build(unique_kernel(43))), 43);  // still works, no new warning

    ASSERT_EQ(captured_warnings().size(), 1u);
    const std::string& warning = captured_warnings()[0];
    EXPECT_NE(warning.find("'" + dir + "'"), std::string::npos) << warning;
    EXPECT_NE(warning.find(reason_fragment), std::string::npos) << warning;

    const std::string used = cache().directory();
    EXPECT_NE(used, dir);
    EXPECT_NE(warning.find(used), std::string::npos) << warning;  // says where kernels go instead
    EXPECT_EQ(r.library->so_path().rfind(used + "/", 0), 0u) << r.library->so_path();
    EXPECT_EQ(mode_of(used), 0700u);
    EXPECT_EQ(cache_dir_problem(used), "");
    EXPECT_EQ(captured_warnings().size(), 1u);
  }
};

TEST_F(CacheDirTest, WorldWritableDirectoryFallsBack) {
  const std::string open_dir = root_ + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  EXPECT_NE(cache_dir_problem(open_dir), "");
  expect_fallback(open_dir, "writable by other users");
  EXPECT_TRUE(list_dir(open_dir).empty());  // nothing was written there
}

TEST_F(CacheDirTest, GroupWritableDirectoryFallsBack) {
  const std::string dir = root_ + "/group";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
  expect_fallback(dir, "mode 0770");
}

TEST_F(CacheDirTest, PathUnderARegularFileFallsBack) {
  const std::string file = root_ + "/plain_file";
  write_text(file, "x");
  expect_fallback(file + "/cache", "not a directory");
}

TEST_F(CacheDirTest, DirectoryOwnedByAnotherUserFallsBack) {
  std::string dir;
  if (::geteuid() == 0) {  // root can hand a directory to "nobody"
    dir = root_ + "/foreign";
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  } else {
    dir = "/";  // owned by root, not group/other-writable
  }
  expect_fallback(dir, "owned by uid");
}

TEST_F(CacheDirTest, ExistingPrivateDirectoryIsUsedWithoutWarning) {
  ASSERT_EQ(::mkdir(cache_dir_.c_str(), 0755), 0);  // readable by others is fine; writable is not
  tp::set_warning_handler(&capture_warning);
  EXPECT_EQ(call_int_fn(cache().load_or_build(unique_kernel(1))), 1);
  EXPECT_EQ(cache().directory(), cache_dir_);
  EXPECT_TRUE(captured_warnings().empty());
}

TEST_F(CacheDirTest, SymlinkIsResolved) {
  const std::string real_dir = root_ + "/real";
  const std::string link = root_ + "/link";
  ASSERT_EQ(::mkdir(real_dir.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real_dir.c_str(), link.c_str()), 0);
  cache_env_.set(link.c_str());
  cache().reset_for_testing();
  EXPECT_EQ(cache().directory(), real_dir);
}

TEST_F(CacheDirTest, DefaultLocations) {
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
  ScopedEnv home("HOME", "/home/someone");
  cache_env_.set("/explicit");
  EXPECT_EQ(configured_cache_dir(), "/explicit");
  cache_env_.set(nullptr);
  EXPECT_EQ(configured_cache_dir(), "/xdg/cache/tensorplay");
  xdg.set("relative/ignored");  // the XDG spec says relative paths are invalid
  EXPECT_EQ(configured_cache_dir(), "/home/someone/.cache/tensorplay");
  xdg.set(nullptr);
  EXPECT_EQ(configured_cache_dir(), "/home/someone/.cache/tensorplay");
}

}  // namespace
}  // namespace tp::stax::runtime::testing
