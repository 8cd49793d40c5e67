// Damaged or planted cache entries (outside fault injection): the next
// process must never crash, hang, run the wrong code or run someone else's
// code; it must warn once, naming the path and the problem, and rebuild the
// entry so that later processes hit it again.
//
// Every "next process" runs in a fork()ed child with an alarm, so a fault
// that crashes (SIGBUS, SIGTRAP) or hangs (a FIFO) fails the test instead of
// killing or stalling the test binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "core/error.h"
#include "runtime_test_util.h"
#include "stax/runtime/cache_dir.h"
#include "stax/runtime/cached_kernel.h"
#include "stax/runtime/manifest.h"
#include "stax/runtime/sha256.h"

namespace tp::stax::runtime::testing {
namespace {

constexpr uid_t kOtherUid = 12345;

struct ChildResult {
  std::string status;  // "" if the child exited normally; else how it died
  std::string error;   // what load_or_build threw, if anything
  int value = -1;
  bool disk_hit = false;
  std::vector<std::string> warnings;
};

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

// Like a new process: forget everything in memory, load `source`, call it.
ChildResult load_in_child(const std::string& source, unsigned timeout_s = 60) {
  int out[2];
  EXPECT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    ::alarm(timeout_s);  // a hang becomes SIGALRM
    std::string report;
    try {
      CodeCache::instance().reset_for_testing();
      captured_warnings().clear();
      tp::set_warning_handler(&capture_warning);
      BuildResult r = CodeCache::instance().load_or_build(source);
      report = "value " + std::to_string(call_int_fn(r)) + " hit " + std::to_string(r.disk_hit) + "\n";
    } catch (const std::exception& e) {
      report = "error " + one_line(e.what()) + "\n";
    }
    for (const auto& w : captured_warnings()) report += "warning " + one_line(w) + "\n";
    size_t done = 0;
    while (done < report.size()) {
      ssize_t n = ::write(out[1], report.data() + done, report.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ChildResult r;
  if (WIFSIGNALED(status)) {
    r.status = std::string("killed by signal ") + ::strsignal(WTERMSIG(status));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.status = "exited with " + std::to_string(WEXITSTATUS(status));
  }
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("value ", 0) == 0) {
      std::istringstream fields(line);
      std::string word;
      int hit = 0;
      fields >> word >> r.value >> word >> hit;
      r.disk_hit = hit != 0;
    } else if (line.rfind("error ", 0) == 0) {
      r.error = line.substr(6);
    } else if (line.rfind("warning ", 0) == 0) {
      r.warnings.push_back(line.substr(8));
    }
  }
  return r;
}

void truncate_to(const std::string& path, off_t size) { ASSERT_EQ(::truncate(path.c_str(), size), 0) << path; }

off_t size_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_size;
}

void overwrite(const std::string& path, const std::function<void(std::string&)>& edit) {
  std::string bytes = read_text(path);
  edit(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void replace_with_dir(const std::string& path) {
  std::filesystem::remove_all(path);
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  write_text(path + "/inner", "x");
}

class CacheFaultTest : public RuntimeTest {
 protected:
  // Builds a fresh kernel returning `value` and forgets it in memory.
  std::string build(int value) {
    std::string source = unique_kernel(value);
    BuildResult r = cache().load_or_build(source);
    EXPECT_FALSE(r.disk_hit);
    EXPECT_EQ(call_int_fn(r), value);
    cache().reset_for_testing();
    return source;
  }
  std::string dir_of(const std::string& source) { return artifact_dir(cache().key_for(source)); }

  // The next process gets the right answer from a rebuild, with exactly one
  // warning that names `path` and contains `problem`; the process after it
  // hits the repaired entry silently.
  void expect_repaired(const std::string& source, int value, const std::string& path, const std::string& problem) {
    ChildResult r = load_in_child(source);
    ASSERT_EQ(r.status, "") << "the next process died";
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.value, value);
    EXPECT_FALSE(r.disk_hit) << "the damaged entry was not rebuilt";
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("'" + path + "'"), std::string::npos) << r.warnings[0];
    EXPECT_NE(r.warnings[0].find(problem), std::string::npos) << r.warnings[0];

    ChildResult after = load_in_child(source);
    ASSERT_EQ(after.status, "");
    ASSERT_EQ(after.error, "");
    EXPECT_EQ(after.value, value);
    EXPECT_TRUE(after.disk_hit) << "the repaired entry is not reused";
    EXPECT_TRUE(after.warnings.empty()) << after.warnings[0];
  }
};

TEST_F(CacheFaultTest, TruncatedLibraryIsRebuilt) {
  const std::string source = build(21);
  const std::string so = dir_of(source) + "/kernel.so";
  const off_t full = size_of(so);
  ASSERT_GT(full, 8192);
  for (off_t size : {off_t{4096}, full / 4, full / 2, 3 * full / 4, off_t{0}, off_t{16}, off_t{100}}) {
    SCOPED_TRACE("truncated to " + std::to_string(size));
    truncate_to(so, size);
    expect_repaired(source, 21, dir_of(source), "truncated");
  }
}

TEST_F(CacheFaultTest, FlippedGarbageOrZeroBytesAreRebuilt) {
  const std::string source = build(22);
  const std::string so = dir_of(source) + "/kernel.so";
  std::mt19937 rng(7);
  const std::vector<std::pair<std::string, std::function<void(std::string&)>>> damages = {
      {"flipped code bytes", [](std::string& b) { for (size_t i = 0; i < 64; ++i) b[b.size() / 3 + i] ^= 0xCC; }},
      {"garbage", [&](std::string& b) { for (char& c : b) c = static_cast<char>(rng()); }},
      {"zeros", [](std::string& b) { std::fill(b.begin(), b.end(), '\0'); }},
      {"garbage of another size", [](std::string& b) { b = "not a library at all"; }},
  };
  for (const auto& [name, damage] : damages) {
    SCOPED_TRACE(name);
    overwrite(so, damage);
    expect_repaired(source, 22, dir_of(source), "kernel.so");
  }
}

// Several processes meet the same damaged entry at once: one rebuilds it
// (under the lock), the others wait and load the repaired entry.
TEST_F(CacheFaultTest, ConcurrentProcessesRepairOnce) {
  const std::string source = build(42);
  truncate_to(dir_of(source) + "/kernel.so", 100);
  enum { kHit = 10, kMiss = 11, kWrong = 12, kThrew = 13 };
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      ::alarm(60);
      char byte;
      while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
      }
      int code = kThrew;
      try {
        CodeCache::instance().reset_for_testing();
        BuildResult r = CodeCache::instance().load_or_build(source);
        code = call_int_fn(r) != 42 ? kWrong : r.disk_hit ? kHit : kMiss;
      } catch (...) {
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  int hits = 0, misses = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "a process died of signal " << WTERMSIG(status);
    const int code = WEXITSTATUS(status);
    if (code == kHit) ++hits;
    else if (code == kMiss) ++misses;
    else ADD_FAILURE() << "child exited with " << code;
  }
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(hits, 3);
}

TEST_F(CacheFaultTest, SwappedLibrariesAreDetected) {
  const std::string a = build(31), b = build(32);
  const std::string so_a = dir_of(a) + "/kernel.so", so_b = dir_of(b) + "/kernel.so";
  ASSERT_EQ(::rename(so_a.c_str(), (so_a + ".x").c_str()), 0);
  ASSERT_EQ(::rename(so_b.c_str(), so_a.c_str()), 0);
  ASSERT_EQ(::rename((so_a + ".x").c_str(), so_b.c_str()), 0);
  expect_repaired(a, 31, dir_of(a), "SHA-256");
  expect_repaired(b, 32, dir_of(b), "SHA-256");
}

TEST_F(CacheFaultTest, SwappedLibraryAndManifestAreDetected) {
  const std::string a = build(33), b = build(34);
  for (const char* name : {"/kernel.so", "/kernel.manifest"}) {
    const std::string pa = dir_of(a) + name, pb = dir_of(b) + name;
    ASSERT_EQ(::rename(pa.c_str(), (pa + ".x").c_str()), 0);
    ASSERT_EQ(::rename(pb.c_str(), pa.c_str()), 0);
    ASSERT_EQ(::rename((pa + ".x").c_str(), pb.c_str()), 0);
  }
  expect_repaired(a, 33, dir_of(a), "belongs to another kernel");
}

TEST_F(CacheFaultTest, FifoInPlaceOfLibraryDoesNotHang) {
  const std::string source = build(23);
  const std::string so = dir_of(source) + "/kernel.so";
  ASSERT_EQ(::unlink(so.c_str()), 0);
  ASSERT_EQ(::mkfifo(so.c_str(), 0600), 0);
  expect_repaired(source, 23, dir_of(source), "FIFO");
}

TEST_F(CacheFaultTest, FifoInPlaceOfManifestDoesNotHang) {
  const std::string source = build(24);
  const std::string manifest = dir_of(source) + "/kernel.manifest";
  ASSERT_EQ(::unlink(manifest.c_str()), 0);
  ASSERT_EQ(::mkfifo(manifest.c_str(), 0600), 0);
  expect_repaired(source, 24, dir_of(source), "FIFO");
}

TEST_F(CacheFaultTest, DirectoryInPlaceOfLibraryIsReplaced) {
  const std::string source = build(25);
  replace_with_dir(dir_of(source) + "/kernel.so");
  expect_repaired(source, 25, dir_of(source), "directory");
}

TEST_F(CacheFaultTest, LockThatIsADirectoryIsReplaced) {
  const std::string source = unique_kernel(26);
  const std::string dir = dir_of(source);
  std::filesystem::create_directories(dir);
  replace_with_dir(dir + "/kernel.lock");
  expect_repaired(source, 26, dir + "/kernel.lock", "directory");
}

TEST_F(CacheFaultTest, LockThatIsAFifoIsReplaced) {
  const std::string source = unique_kernel(27);
  const std::string dir = dir_of(source);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir + "/kernel.lock").c_str(), 0600), 0);
  expect_repaired(source, 27, dir + "/kernel.lock", "FIFO");
}

TEST_F(CacheFaultTest, KeyDirectoryThatIsAFileIsReplaced) {
  const std::string source = unique_kernel(28);
  const std::string dir = dir_of(source);
  std::filesystem::create_directories(dir.substr(0, dir.rfind('/')));
  write_text(dir, "not a directory");
  expect_repaired(source, 28, dir, "not a directory");
}

TEST_F(CacheFaultTest, PrefixDirectoryThatIsAFileIsReplaced) {
  const std::string source = unique_kernel(29);
  const std::string dir = dir_of(source);
  const std::string prefix = dir.substr(0, dir.rfind('/'));
  std::filesystem::create_directories(cache_dir_);
  write_text(prefix, "not a directory");
  expect_repaired(source, 29, prefix, "not a directory");
}

TEST_F(CacheFaultTest, SourceThatIsADirectoryDoesNotBlockTheBuild) {
  const std::string source = unique_kernel(30);
  const std::string dir = dir_of(source);
  std::filesystem::create_directories(dir);
  replace_with_dir(dir + "/kernel.cpp");
  ChildResult r = load_in_child(source);
  ASSERT_EQ(r.status, "");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.value, 30);
}

TEST_F(CacheFaultTest, FifoAtCompileLogDoesNotHangAFailingBuild) {
  const std::string broken = "extern \"C\" int tp_test_fn( { return nope; }\n// " + unique_kernel(0);
  const std::string dir = dir_of(broken);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir + "/compile.log").c_str(), 0600), 0);
  ChildResult r = load_in_child(broken);
  ASSERT_EQ(r.status, "");
  EXPECT_NE(r.error.find("nope"), std::string::npos) << r.error;  // the compiler's message came through
}

// An entry without a manifest is unfinished (a build killed between the
// library and its manifest, or a cache written by an older version): it is
// rebuilt like a miss, without a warning.
TEST_F(CacheFaultTest, EntryWithoutManifestIsRebuiltSilently) {
  const std::string source = build(43);
  ASSERT_EQ(::unlink((dir_of(source) + "/kernel.manifest").c_str()), 0);
  ChildResult r = load_in_child(source);
  ASSERT_EQ(r.status, "");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.value, 43);
  EXPECT_FALSE(r.disk_hit);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
  EXPECT_TRUE(load_in_child(source).disk_hit);
}

TEST_F(CacheFaultTest, MalformedManifestIsRebuilt) {
  const std::string source = build(35);
  write_text(dir_of(source) + "/kernel.manifest", "tp-stax-manifest-v1\nkey zz\n");
  expect_repaired(source, 35, dir_of(source), "malformed");
}

// A library that matches its manifest and still cannot be loaded (both files
// rewritten consistently) is rebuilt once rather than failing forever.
TEST_F(CacheFaultTest, ConsistentButUnloadableEntryIsRebuilt) {
  const std::string source = build(36);
  const std::string dir = dir_of(source);
  const std::string junk = "consistent junk";
  write_text(dir + "/kernel.so", junk);
  write_text(dir + "/kernel.manifest", format_manifest({cache().key_for(source), junk.size(), sha256_hex(junk)}));
  expect_repaired(source, 36, dir, "cannot be loaded");
}

// ---------------------------------------------------------------- ownership

// Someone else's library with a manifest that matches it: only the owner
// check stands between it and our process.
void plant_foreign_entry(const std::string& dir, const std::string& key, const std::string& planted_so) {
  const std::string bytes = read_text(planted_so);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(planted_so, dir + "/kernel.so", std::filesystem::copy_options::overwrite_existing);
  write_text(dir + "/kernel.manifest", format_manifest({key, bytes.size(), sha256_hex(bytes)}));
  for (const char* name : {"/kernel.so", "/kernel.manifest"}) {
    ASSERT_EQ(::chown((dir + name).c_str(), kOtherUid, kOtherUid), 0);
  }
}

TEST_F(CacheFaultTest, ForeignOwnedLibraryIsNotLoaded) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another uid";
  const std::string evil = build(666);
  const std::string source = unique_kernel(37);
  const std::string dir = dir_of(source);
  plant_foreign_entry(dir, cache().key_for(source), dir_of(evil) + "/kernel.so");
  expect_repaired(source, 37, dir, "owned by uid 12345");
}

TEST_F(CacheFaultTest, ForeignOwnedKeyDirectoryIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another uid";
  // The cache root used to be 0777 and is now 0700, but still holds an entry
  // another user made back then.
  const std::string evil = build(666);
  const std::string source = unique_kernel(38);
  const std::string dir = dir_of(source);
  plant_foreign_entry(dir, cache().key_for(source), dir_of(evil) + "/kernel.so");
  for (const char* name : {"/kernel.so", "/kernel.manifest"}) ::chown((dir + name).c_str(), 0, 0);
  ASSERT_EQ(::chown(dir.c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(mode_of(cache_dir_), 0700u);
  expect_repaired(source, 38, dir, "owned by uid 12345");
}

TEST_F(CacheFaultTest, OthersWritableLibraryOrDirectoryIsNotUsed) {
  const std::string source = build(39);
  const std::string dir = dir_of(source);
  ASSERT_EQ(::chmod((dir + "/kernel.so").c_str(), 0666), 0);
  expect_repaired(source, 39, dir, "writable by other users");
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  expect_repaired(source, 39, dir, "writable by other users");
  const std::string prefix = dir.substr(0, dir.rfind('/'));
  ASSERT_EQ(::chmod(prefix.c_str(), 0770), 0);
  expect_repaired(source, 39, prefix, "mode 0770");
}

// ---------------------------------------------------------------- ancestors

TEST_F(CacheFaultTest, WorldWritableNonStickyAncestorIsRejected) {
  const std::string open_parent = root_ + "/shared";
  ASSERT_EQ(::mkdir(open_parent.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_parent.c_str(), 0777), 0);
  const std::string dir = open_parent + "/private";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string problem = cache_dir_problem(dir);
  EXPECT_NE(problem.find("ancestor '" + open_parent + "'"), std::string::npos) << problem;
  EXPECT_NE(problem.find("not sticky"), std::string::npos) << problem;

  cache_env_.set(dir.c_str());
  cache().reset_for_testing();
  tp::set_warning_handler(&capture_warning);
  BuildResult r = cache().load_or_build(unique_kernel(40));
  EXPECT_EQ(call_int_fn(r), 40);
  EXPECT_NE(cache().directory(), dir);  // fell back to a private temporary directory
  ASSERT_EQ(captured_warnings().size(), 1u);
  EXPECT_NE(captured_warnings()[0].find(open_parent), std::string::npos) << captured_warnings()[0];
  EXPECT_TRUE(list_dir(dir).empty());
}

TEST_F(CacheFaultTest, StickyWorldWritableAncestorIsAccepted) {
  const std::string tmp_like = root_ + "/tmp_like";
  ASSERT_EQ(::mkdir(tmp_like.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(tmp_like.c_str(), 01777), 0);
  ASSERT_EQ(::mkdir((tmp_like + "/mine").c_str(), 0700), 0);
  EXPECT_EQ(cache_dir_problem(tmp_like + "/mine"), "");
}

TEST_F(CacheFaultTest, AncestorOwnedByAnotherUserIsRejected) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another uid";
  const std::string theirs = root_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((theirs + "/mine").c_str(), 0700), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherUid), 0);
  const std::string problem = cache_dir_problem(theirs + "/mine");
  EXPECT_NE(problem.find("owned by uid 12345"), std::string::npos) << problem;
}

// The directory is checked once and then used through its descriptor:
// swapping another directory in under the same path afterwards (here with a
// complete, self-consistent entry computing the wrong thing) changes nothing.
TEST_F(CacheFaultTest, DirectoryReplacedAfterTheCheckIsNotFollowed) {
  const std::string evil = build(666);
  const std::string evil_so = root_ + "/evil.so";
  std::filesystem::copy_file(dir_of(evil) + "/kernel.so", evil_so);
  const std::string source = build(41);
  const std::string key = cache().key_for(source);

  EXPECT_EQ(cache().directory(), cache_dir_);  // checked and opened now
  ASSERT_EQ(::rename(cache_dir_.c_str(), (root_ + "/moved").c_str()), 0);
  ASSERT_EQ(::mkdir(cache_dir_.c_str(), 0700), 0);
  const std::string planted_dir = artifact_dir(key);
  std::filesystem::create_directories(planted_dir);
  const std::string bytes = read_text(evil_so);
  std::filesystem::copy_file(evil_so, planted_dir + "/kernel.so");
  write_text(planted_dir + "/kernel.manifest", format_manifest({key, bytes.size(), sha256_hex(bytes)}));

  BuildResult r = cache().load_or_build(source);
  EXPECT_TRUE(r.disk_hit);
  EXPECT_EQ(call_int_fn(r), 41);
}

// --------------------------------------------------------- loaded libraries

TEST_F(CacheFaultTest, LoadedLibrariesAreBounded) {
  cache().set_max_loaded_libraries(3);
  const int64_t before = LoadedLibrary::live_count();
  std::vector<std::unique_ptr<CachedKernel>> kernels;
  for (int i = 0; i < 8; ++i) {
    kernels.push_back(std::make_unique<CachedKernel>(unique_kernel(100 + i), "tp_test_fn"));
    EXPECT_LE(cache().loaded_library_count(), 3u);
    EXPECT_LE(LoadedLibrary::live_count() - before, 3);
  }
  // Every kernel still runs (evicted ones are reloaded from disk, verified),
  // and the bound holds throughout.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 8; ++i) {
      CachedKernel::Pinned p = kernels[i]->pin();
      EXPECT_EQ(reinterpret_cast<int (*)()>(p.symbol)(), 100 + i);
    }
    EXPECT_LE(LoadedLibrary::live_count() - before, 3);
  }
}

TEST_F(CacheFaultTest, APinnedLibraryOutlivesEviction) {
  cache().set_max_loaded_libraries(1);
  CachedKernel first(unique_kernel(50), "tp_test_fn");
  CachedKernel::Pinned running = first.pin();  // a call in flight
  std::vector<std::unique_ptr<CachedKernel>> others;
  for (int i = 0; i < 3; ++i) others.push_back(std::make_unique<CachedKernel>(unique_kernel(60 + i), "tp_test_fn"));
  EXPECT_EQ(cache().loaded_library_count(), 1u);
  EXPECT_EQ(reinterpret_cast<int (*)()>(running.symbol)(), 50);  // still mapped
  const std::weak_ptr<LoadedLibrary> weak = running.library;
  running = {};
  EXPECT_TRUE(weak.expired());  // unloaded once the call is over
  EXPECT_EQ(reinterpret_cast<int (*)()>(first.pin().symbol)(), 50);
}

// Threads call kernels while others' loads keep evicting them: every call
// runs mapped code and gets its own kernel's answer.
TEST_F(CacheFaultTest, ThreadsCallingWhileEvictingAlwaysRunMappedCode) {
  cache().set_max_loaded_libraries(2);
  std::vector<std::unique_ptr<CachedKernel>> kernels;
  for (int i = 0; i < 6; ++i) kernels.push_back(std::make_unique<CachedKernel>(unique_kernel(200 + i), "tp_test_fn"));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        const int k = (i * 5 + t) % 6;
        CachedKernel::Pinned p = kernels[k]->pin();
        if (reinterpret_cast<int (*)()>(p.symbol)() != 200 + k) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache().loaded_library_count(), 2u);
}

TEST_F(CacheFaultTest, LeastRecentlyUsedIsEvicted) {
  cache().set_max_loaded_libraries(2);
  CachedKernel a(unique_kernel(70), "tp_test_fn");
  CachedKernel b(unique_kernel(71), "tp_test_fn");
  std::weak_ptr<LoadedLibrary> a_lib = a.pin().library, b_lib = b.pin().library;
  a.pin();  // a is now more recent than b
  CachedKernel c(unique_kernel(72), "tp_test_fn");
  EXPECT_FALSE(a_lib.expired());
  EXPECT_TRUE(b_lib.expired());
}

TEST_F(CacheFaultTest, MaxLoadedLibrariesFromEnvironment) {
  ScopedEnv env("TP_STAX_MAX_LOADED_LIBRARIES", "5");
  cache().reset_for_testing();
  EXPECT_EQ(cache().max_loaded_libraries(), 5u);
  env.set("zero");
  cache().reset_for_testing();
  EXPECT_THROW(cache().max_loaded_libraries(), tp::ValueError);
  env.set(nullptr);
  cache().reset_for_testing();
  EXPECT_EQ(cache().max_loaded_libraries(), 64u);
}

TEST(KernelManifest, RoundTripAndStrictParse) {
  KernelManifest m{std::string(64, 'a'), 12345, std::string(64, '0')};
  auto parsed = parse_manifest(format_manifest(m));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->key, m.key);
  EXPECT_EQ(parsed->size, m.size);
  EXPECT_EQ(parsed->sha256, m.sha256);
  EXPECT_FALSE(parse_manifest(format_manifest(m) + "x"));
  EXPECT_FALSE(parse_manifest(""));
  m.key = "short";
  EXPECT_FALSE(parse_manifest(format_manifest(m)));
}

}  // namespace
}  // namespace tp::stax::runtime::testing
