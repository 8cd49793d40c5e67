#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "runtime_test_util.h"
#include "stax/runtime/compiler.h"
#include "stax/runtime/isa.h"
#include "stax/runtime/sha256.h"

namespace tp::stax::runtime::testing {
namespace {

using CodeCacheTest = RuntimeTest;

const std::string kSource = "extern \"C\" int tp_test_fn(){return 42;}\n";

// Independent re-statement of the key format documented in code_cache.h.
std::string expected_key(const std::string& source) {
  const auto argv = CodeCache::instance().compile_command("kernel.cpp", "kernel.so");
  std::string command;
  for (const auto& arg : argv) command += (command.empty() ? "" : " ") + arg;
  auto field = [](const std::string& s) { return std::to_string(s.size()) + ":" + s + ","; };
  return sha256_hex("tp-stax-kernel-v1\n" + field(source) + field(command) + field(host_compiler().identity));
}

TEST_F(CodeCacheTest, BuildLoadAndHit) {
  BuildResult first = cache().load_or_build(kSource);
  EXPECT_FALSE(first.disk_hit);
  EXPECT_FALSE(first.memory_hit);
  EXPECT_GT(first.compile_seconds, 0.0);
  EXPECT_EQ(call_int_fn(first), 42);

  BuildResult again = cache().load_or_build(kSource);  // same process: no second dlopen
  EXPECT_TRUE(again.disk_hit);
  EXPECT_TRUE(again.memory_hit);
  EXPECT_EQ(again.library, first.library);
  EXPECT_EQ(again.compile_seconds, 0.0);

  cache().reset_for_testing();  // like a new process: only the disk remains
  BuildResult fresh = cache().load_or_build(kSource);
  EXPECT_TRUE(fresh.disk_hit);
  EXPECT_FALSE(fresh.memory_hit);
  EXPECT_EQ(fresh.compile_seconds, 0.0);
  EXPECT_EQ(fresh.key, first.key);
  EXPECT_EQ(call_int_fn(fresh), 42);
  EXPECT_EQ(call_int_fn(first), 42);  // the old handle is still alive
}

TEST_F(CodeCacheTest, ArtifactLayoutAndKey) {
  BuildResult r = cache().load_or_build(kSource);
  EXPECT_EQ(r.key, expected_key(kSource));
  EXPECT_EQ(r.key.size(), 64u);
  EXPECT_EQ(cache().directory(), cache_dir_);

  const std::string dir = artifact_dir(r.key);
  EXPECT_EQ(r.library->so_path(), dir + "/kernel.so");
  EXPECT_EQ(r.library->source_path(), dir + "/kernel.cpp");
  EXPECT_EQ(read_text(dir + "/kernel.cpp"), kSource);
  EXPECT_EQ(list_dir(dir), (std::set<std::string>{"kernel.cpp", "kernel.so", "kernel.manifest", "kernel.lock"}));
  EXPECT_EQ(list_dir(cache_dir_), (std::set<std::string>{r.key.substr(0, 2)}));

  EXPECT_EQ(mode_of(cache_dir_), 0700u);
  EXPECT_EQ(mode_of(cache_dir_ + "/" + r.key.substr(0, 2)), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
}

TEST_F(CodeCacheTest, CreatesMissingParents) {
  cache_dir_ = root_ + "/a/b/c";
  cache_env_.set(cache_dir_.c_str());
  cache().reset_for_testing();
  EXPECT_EQ(call_int_fn(cache().load_or_build(kSource)), 42);
  EXPECT_EQ(cache().directory(), cache_dir_);
  EXPECT_EQ(mode_of(root_ + "/a"), 0700u);
  EXPECT_EQ(mode_of(cache_dir_), 0700u);
}

TEST_F(CodeCacheTest, DifferentSourceDifferentKey) {
  BuildResult a = cache().load_or_build(kSource);
  BuildResult b = cache().load_or_build("extern \"C\" int tp_test_fn(){return 7;}\n");
  EXPECT_NE(a.key, b.key);
  EXPECT_FALSE(b.disk_hit);
  EXPECT_EQ(call_int_fn(a), 42);
  EXPECT_EQ(call_int_fn(b), 7);
}

TEST_F(CodeCacheTest, CompileCommand) {
  const auto argv = cache().compile_command("/x/k.cpp", "/x/k.so");
  EXPECT_EQ(argv.front(), host_compiler().path);
  for (const char* flag : {"-O3", "-shared", "-fPIC", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
                           "-std=c++17"}) {
    EXPECT_NE(std::find(argv.begin(), argv.end(), flag), argv.end()) << flag;
  }
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "-ffast-math"), argv.end());
  // "-x c++" must come before the source; the output follows "-o".
  auto x = std::find(argv.begin(), argv.end(), "-x");
  auto src = std::find(argv.begin(), argv.end(), "/x/k.cpp");
  ASSERT_NE(x, argv.end());
  EXPECT_EQ(*(x + 1), "c++");
  EXPECT_LT(x, src);
  auto o = std::find(argv.begin(), argv.end(), "-o");
  ASSERT_NE(o, argv.end());
  EXPECT_EQ(*(o + 1), "/x/k.so");
  EXPECT_LT(src, o);
  // Libraries after the source (the linker resolves left to right).
  auto mvec = std::find(argv.begin(), argv.end(), "-lmvec");
  if (mvec != argv.end()) EXPECT_LT(src, mvec);
}

TEST_F(CodeCacheTest, CompileErrorRaisesBackendError) {
  const std::string broken = "extern \"C\" int tp_test_fn( { return undeclared_name; }\n";
  const std::string key = cache().key_for(broken);
  try {
    cache().load_or_build(broken);
    FAIL() << "expected tp::BackendError";
  } catch (const tp::BackendError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;           // compiler output
    EXPECT_NE(msg.find("undeclared_name"), std::string::npos) << msg;  // ... about our code
    EXPECT_NE(msg.find(host_compiler().path), std::string::npos) << msg;  // the command
    EXPECT_NE(msg.find("-fopenmp"), std::string::npos) << msg;
    EXPECT_NE(msg.find(artifact_dir(key) + "/kernel.cpp"), std::string::npos) << msg;  // kept source
  }
  const std::string dir = artifact_dir(key);
  EXPECT_EQ(list_dir(dir), (std::set<std::string>{"kernel.cpp", "kernel.lock", "compile.log"}));
  EXPECT_EQ(read_text(dir + "/kernel.cpp"), broken);
  // A failure is not cached: the next call compiles (and fails) again.
  EXPECT_THROW(cache().load_or_build(broken), tp::BackendError);
}

TEST_F(CodeCacheTest, MissingSymbolRaisesBackendError) {
  BuildResult r = cache().load_or_build(kSource);
  try {
    r.library->symbol("no_such_symbol");
    FAIL() << "expected tp::BackendError";
  } catch (const tp::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_symbol"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(r.library->so_path()), std::string::npos);
  }
}

TEST_F(CodeCacheTest, LoadFailureNamesTheFile) {
  const std::string bogus = root_ + "/not_a_library.so";
  try {
    LoadedLibrary::load_verified("not an ELF file", bogus, "src.cpp");
    FAIL() << "expected tp::BackendError";
  } catch (const tp::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find(bogus), std::string::npos) << e.what();
  }
}

TEST_F(CodeCacheTest, MissingCompilerRaisesBackendError) {
  ScopedEnv cxx("CXX", "tp-no-such-compiler-xyz");
  cache().reset_for_testing();
  try {
    cache().load_or_build(kSource);
    FAIL() << "expected tp::BackendError";
  } catch (const tp::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("tp-no-such-compiler-xyz"), std::string::npos) << e.what();
  }
}

TEST_F(CodeCacheTest, CompilerIdentityIsCheapAndSpecific) {
  const CompilerInfo& cc = host_compiler();
  EXPECT_EQ(cc.path.front(), '/');
  EXPECT_EQ(::access(cc.path.c_str(), X_OK), 0);
  char real[PATH_MAX];
  ASSERT_NE(::realpath(cc.path.c_str(), real), nullptr);
  EXPECT_NE(cc.identity.find(real), std::string::npos) << cc.identity;
  EXPECT_NE(cc.identity.find("mtime="), std::string::npos) << cc.identity;
}

// A stand-in compiler that writes its output the way a slow linker might:
// first a fragment, then (0.5 s later) the whole file. If the cache let the
// compiler write kernel.so directly, a reader would see the fragment.
std::string write_slow_compiler(const std::string& dir, const std::string& real_compiler) {
  const std::string path = dir + "/slowcc";
  write_text(path,
             "#!/bin/sh\n"
             "out=''; prev=''\n"
             "for a in \"$@\"; do [ \"$prev\" = -o ] && out=\"$a\"; prev=\"$a\"; done\n"
             "echo \"$out\" > '" + dir + "/out_path'\n"
             "'" + real_compiler + "' \"$@\" || exit $?\n"
             "cp \"$out\" '" + dir + "/full.so'\n"
             "head -c 100 '" + dir + "/full.so' > \"$out\"\n"
             "sleep 0.5\n"
             "cat '" + dir + "/full.so' > \"$out\"\n"
             "stat -c %i \"$out\" > '" + dir + "/out_inode'\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST_F(CodeCacheTest, KernelSoAppearsOnlyWhole) {
  const std::string slowcc = write_slow_compiler(root_, host_compiler().path);
  ScopedEnv cxx("CXX", slowcc.c_str());
  cache().reset_for_testing();
  const std::string source = unique_kernel(5);
  const std::string so_path = artifact_dir(cache().key_for(source)) + "/kernel.so";

  std::atomic<bool> done{false};
  std::vector<off_t> sizes_seen;  // sizes of kernel.so while the build ran
  int polls = 0;
  std::thread watcher([&] {
    while (!done.load()) {
      struct stat st;
      if (::stat(so_path.c_str(), &st) == 0) sizes_seen.push_back(st.st_size);
      ++polls;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  BuildResult r;
  try {
    r = cache().load_or_build(source);
  } catch (...) {
    done = true;
    watcher.join();
    throw;
  }
  done = true;
  watcher.join();

  ASSERT_FALSE(r.disk_hit);
  EXPECT_EQ(call_int_fn(r), 5);
  EXPECT_GT(polls, 100);  // the watcher really watched through the 0.5 s write
  struct stat final_st;
  ASSERT_EQ(::stat(so_path.c_str(), &final_st), 0);
  for (off_t size : sizes_seen) EXPECT_EQ(size, final_st.st_size) << "a partial kernel.so was visible";

  // The compiler wrote a temp name in the same directory (so rename is atomic),
  // and kernel.so is that very file (same inode), renamed into place.
  std::string out_path = read_text(root_ + "/out_path");
  out_path.erase(out_path.find_last_not_of('\n') + 1);
  EXPECT_NE(out_path, so_path);
  EXPECT_EQ(out_path.substr(0, out_path.rfind('/')), so_path.substr(0, so_path.rfind('/')));
  EXPECT_NE(out_path.find(".tmp."), std::string::npos) << out_path;
  EXPECT_EQ(std::stoull(read_text(root_ + "/out_inode")), static_cast<unsigned long long>(final_st.st_ino));
  EXPECT_EQ(list_dir(so_path.substr(0, so_path.rfind('/'))),
            (std::set<std::string>{"kernel.cpp", "kernel.so", "kernel.manifest", "kernel.lock"}));
}

TEST_F(CodeCacheTest, StaleTempFilesAreCleanedOnBuild) {
  const std::string source = unique_kernel(9);
  const std::string dir = artifact_dir(cache().key_for(source));
  std::filesystem::create_directories(dir);
  write_text(dir + "/kernel.so.tmp.ABCDEF", "left by a crashed build");
  EXPECT_EQ(call_int_fn(cache().load_or_build(source)), 9);
  EXPECT_EQ(list_dir(dir), (std::set<std::string>{"kernel.cpp", "kernel.so", "kernel.manifest", "kernel.lock"}));
}

TEST_F(CodeCacheTest, ThreadsBuildOnce) {
  const std::string source = unique_kernel(11);
  constexpr int kThreads = 4;
  std::vector<BuildResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        results[i] = cache().load_or_build(source);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  int misses = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.library);
    misses += r.disk_hit ? 0 : 1;
    EXPECT_EQ(r.library, results[0].library);  // one dlopen'd object per key
    EXPECT_EQ(call_int_fn(r), 11);
  }
  EXPECT_EQ(misses, 1);
}

// How fast a warm load is belongs to the benchmark harness (section 3 of
// `python -m tensorplay.bench`); here: a warm load never runs the compiler.
TEST_F(CodeCacheTest, WarmLoadDoesNotRunTheCompiler) {
  const std::string source = unique_kernel(3);
  cache().load_or_build(source);
  cache().reset_for_testing();  // forget everything but the disk, like a new process
  BuildResult r = cache().load_or_build(source);
  EXPECT_TRUE(r.disk_hit);
  EXPECT_FALSE(r.memory_hit);
  EXPECT_EQ(r.compile_seconds, 0.0);
}

TEST(RunCommand, ExitStatusAndCapturedOutput) {
  char dir[] = "/tmp/tp_run_command_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/log";
  EXPECT_EQ(run_command({"/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 3"}, log), 3);
  EXPECT_EQ(read_text(log), "to-out\nto-err\n");
  EXPECT_THROW(run_command({"/nonexistent/tp-binary"}, log), tp::BackendError);
  std::filesystem::remove_all(dir);
}

TEST(RunCommand, FormatCommandQuotes) {
  EXPECT_EQ(format_command({"/usr/bin/g++", "-O3", "a b.cpp", "it's"}), "/usr/bin/g++ -O3 'a b.cpp' 'it'\\''s'");
}

}  // namespace
}  // namespace tp::stax::runtime::testing
