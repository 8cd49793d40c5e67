// Several processes asking for the same new kernel at once must compile it
// exactly once (file lock + second look) and all get a working library.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime_test_util.h"

namespace tp::stax::runtime::testing {
namespace {

enum ChildExit { kHit = 10, kMiss = 11, kWrongValue = 12, kThrew = 13 };

int child_main(const std::string& source, int expected) {
  try {
    BuildResult r = CodeCache::instance().load_or_build(source);
    if (call_int_fn(r) != expected) return kWrongValue;
    return r.disk_hit ? kHit : kMiss;
  } catch (...) {
    return kThrew;
  }
}

using ConcurrencyTest = RuntimeTest;

TEST_F(ConcurrencyTest, ProcessesCompileOnce) {
  constexpr int kChildren = 4;
  const int expected = 1000 + ::getpid() % 1000;
  const std::string source = unique_kernel(expected);
  const std::string key = cache().key_for(source);

  // Children block reading `gate` until the parent closes its end, so they
  // all start load_or_build at the same moment.
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char byte;
      while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
      }
      ::_exit(child_main(source, expected));  // _exit: skip the parent's atexit/gtest teardown
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);

  int hits = 0, misses = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child killed by a signal";
    const int code = WEXITSTATUS(status);
    if (code == kHit) ++hits;
    else if (code == kMiss) ++misses;
    else ADD_FAILURE() << "child exited with " << code;
  }
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(hits, kChildren - 1);

  // No temp files anywhere, only the artifact.
  EXPECT_EQ(list_dir(cache_dir_), (std::set<std::string>{key.substr(0, 2)}));
  EXPECT_EQ(list_dir(cache_dir_ + "/" + key.substr(0, 2)), (std::set<std::string>{key}));
  EXPECT_EQ(list_dir(artifact_dir(key)), (std::set<std::string>{"kernel.cpp", "kernel.so", "kernel.manifest", "kernel.lock"}));

  BuildResult parent = cache().load_or_build(source);
  EXPECT_TRUE(parent.disk_hit);
  EXPECT_EQ(call_int_fn(parent), expected);
}

}  // namespace
}  // namespace tp::stax::runtime::testing
