// Shared fixture for the Stax runtime tests: every test gets its own
// temporary TP_CACHE_DIR and a clean CodeCache, and the environment variables
// the runtime reads are restored afterwards.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/warning.h"
#include "stax/runtime/code_cache.h"

namespace tp::stax::runtime::testing {

// Sets (or unsets, with nullptr) an environment variable; restores it on scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_ ? old_->c_str() : nullptr); }
  void set(const char* value) {
    if (value) {
      ::setenv(name_.c_str(), value, 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

inline std::vector<std::string>& captured_warnings() {
  static std::vector<std::string> warnings;
  return warnings;
}
inline void capture_warning(const std::string& message) { captured_warnings().push_back(message); }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline std::set<std::string> list_dir(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.insert(name);
    }
    ::closedir(d);
  }
  return names;
}

inline unsigned mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

// A kernel source no earlier run has compiled: a unique token in a comment.
inline std::string unique_kernel(int value, const std::string& name = "tp_test_fn") {
  static std::atomic<int> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return "// unique " + std::to_string(::getpid()) + "-" + std::to_string(now) + "-" +
         std::to_string(counter++) + "\nextern \"C\" int " + name + "() { return " + std::to_string(value) +
         "; }\n";
}

inline int call_int_fn(const BuildResult& result, const std::string& name = "tp_test_fn") {
  auto fn = reinterpret_cast<int (*)()>(result.library->symbol(name));
  return fn();
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tp_stax_runtime_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    char real[PATH_MAX];
    ASSERT_NE(::realpath(pattern, real), nullptr);
    root_ = real;
    cache_dir_ = root_ + "/cache";
    cache_env_.set(cache_dir_.c_str());
    captured_warnings().clear();
    cache().reset_for_testing();
  }
  void TearDown() override {
    tp::set_warning_handler(nullptr);
    cache().reset_for_testing();
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  static CodeCache& cache() { return CodeCache::instance(); }
  std::string artifact_dir(const std::string& key) { return cache_dir_ + "/" + key.substr(0, 2) + "/" + key; }

  std::string root_;       // private scratch directory, removed after the test
  std::string cache_dir_;  // TP_CACHE_DIR for this test (not created up front)
  ScopedEnv cache_env_{"TP_CACHE_DIR", nullptr};
  ScopedEnv isa_env_{"TP_STAX_ISA", nullptr};
  ScopedEnv cxx_env_{"CXX", std::getenv("CXX")};
};

}  // namespace tp::stax::runtime::testing
