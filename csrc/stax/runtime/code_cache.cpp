#include "stax/runtime/code_cache.h"

#include <unistd.h>

#include <chrono>

#include "core/error.h"
#include "core/warning.h"
#include "stax/runtime/cache_dir.h"
#include "stax/runtime/compiler.h"
#include "stax/runtime/fs_util.h"
#include "stax/runtime/isa.h"
#include "stax/runtime/sha256.h"

namespace tp::stax::runtime {
namespace {

constexpr int kLogLinesInError = 40;

// -fno-math-errno / -fno-trapping-math let the compiler vectorize math calls
// and hoist loads; -ffast-math is deliberately absent, since kernels must keep
// IEEE NaN/inf semantics (torch parity). -fno-plt: direct GOT calls into
// libgomp/libm, the library is bound eagerly (RTLD_NOW) anyway.
const std::vector<std::string>& base_flags() {
  static const std::vector<std::string> flags = {
      "-O3", "-shared", "-fPIC", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-fno-plt", "-std=c++17"};
  return flags;
}

std::string length_prefixed(const std::string& field) { return str(field.size(), ":", field, ","); }

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += sep;
    out += part;
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CodeCache& CodeCache::instance() {
  // Never destroyed: dlclose()ing kernels during static destruction would pull
  // code out from under other statics (or OpenMP threads) that may still use it.
  static CodeCache* cache = new CodeCache();
  return *cache;
}

std::vector<std::string> CodeCache::compile_command(const std::string& src_path, const std::string& out_path) const {
  std::vector<std::string> argv = {host_compiler().path};
  const auto& base = base_flags();
  argv.insert(argv.end(), base.begin(), base.end());
  const auto& isa = host_isa().flags;
  argv.insert(argv.end(), isa.begin(), isa.end());
  // "-x c++" so the language never depends on the file name.
  for (const char* arg : {"-x", "c++"}) argv.emplace_back(arg);
  argv.push_back(src_path);
  argv.emplace_back("-o");
  argv.push_back(out_path);
  return argv;
}

std::string CodeCache::key_for(const std::string& source) const {
  const std::string command = join(compile_command("kernel.cpp", "kernel.so"), ' ');
  return sha256_hex("tp-stax-kernel-v1\n" + length_prefixed(source) + length_prefixed(command) +
                    length_prefixed(host_compiler().identity));
}

std::string CodeCache::directory() {
  std::string warning, dir;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dir_.empty()) {
      ResolvedCacheDir resolved = resolve_cache_dir();
      dir_ = resolved.path;
      warning = resolved.warning;
    }
    dir = dir_;
  }
  // Outside the lock: the handler is user code (Python's warnings module).
  if (!warning.empty()) warn(warning);
  return dir;
}

std::string CodeCache::artifact_dir(const std::string& key) {
  const std::string dir = directory() + "/" + key.substr(0, 2) + "/" + key;
  const std::string problem = fs::make_dirs(dir, 0700);
  TP_CHECK(problem.empty(), BackendError, "kernel cache: ", problem);
  return dir;
}

std::shared_ptr<LoadedLibrary> CodeCache::find_loaded(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find(key);
  return it == loaded_.end() ? nullptr : it->second;
}

std::shared_ptr<LoadedLibrary> CodeCache::remember(const std::string& key, std::shared_ptr<LoadedLibrary> library) {
  std::lock_guard<std::mutex> lock(mutex_);
  // If another thread got here first, keep its object (same dlopen handle).
  return loaded_.emplace(key, std::move(library)).first->second;
}

BuildResult CodeCache::load_or_build(const std::string& source) {
  BuildResult result;
  result.key = key_for(source);
  if ((result.library = find_loaded(result.key))) {
    result.disk_hit = result.memory_hit = true;
    return result;
  }

  const std::string dir = artifact_dir(result.key);
  const std::string so_path = dir + "/kernel.so";
  result.disk_hit = fs::exists(so_path);  // renamed into place, so complete if present
  if (!result.disk_hit) {
    fs::FileLock lock(dir + "/kernel.lock");
    // Second look: another process may have built it while we waited.
    result.disk_hit = fs::exists(so_path);
    if (!result.disk_hit) result.compile_seconds = build_locked(source, dir, result.key);
  }
  result.library = remember(result.key, LoadedLibrary::open(so_path, dir + "/kernel.cpp"));
  return result;
}

// Writes kernel.cpp and compiles it to kernel.so. Caller holds the dir's lock.
double CodeCache::build_locked(const std::string& source, const std::string& dir, const std::string& key) const {
  fs::remove_stale_temp_files(dir);  // from a process that died mid-build
  const std::string src_path = dir + "/kernel.cpp";
  const std::string log_path = dir + "/compile.log";
  fs::write_file_atomic(src_path, source);

  // The compiler writes a temp name; kernel.so only ever appears by rename.
  const std::string tmp_so = fs::make_temp_file(dir, "kernel.so");
  fs::ScopedUnlink tmp_so_cleanup(tmp_so);
  const std::vector<std::string> argv = compile_command(src_path, tmp_so);

  const auto start = std::chrono::steady_clock::now();
  const int status = run_command(argv, log_path);
  const double seconds = seconds_since(start);
  if (status != 0) {
    throw BackendError(str("C++ compiler failed (exit status ", status, ") on kernel ", key,
                           "\n  command: ", format_command(argv), "\n  source kept at: ", src_path,
                           "\n  compiler output (", log_path, "):\n",
                           fs::read_head_lines(log_path, kLogLinesInError)));
  }
  fs::fsync_file(tmp_so);  // durable before it becomes visible under its final name
  fs::rename_file(tmp_so, dir + "/kernel.so");
  tmp_so_cleanup.release();
  ::unlink(log_path.c_str());  // only failures keep a log
  return seconds;
}

void CodeCache::reset_for_testing() {
  std::lock_guard<std::mutex> lock(mutex_);
  dir_.clear();
  loaded_.clear();
  detail::reset_host_isa_for_testing();
  detail::reset_host_compiler_for_testing();
}

}  // namespace tp::stax::runtime
