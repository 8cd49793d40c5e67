#include "stax/runtime/code_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "core/warning.h"
#include "stax/runtime/cache_dir.h"
#include "stax/runtime/compile_pool.h"
#include "stax/runtime/compiler.h"
#include "stax/runtime/libmvec.h"
#include "stax/runtime/fs_util.h"
#include "stax/runtime/isa.h"
#include "stax/runtime/manifest.h"
#include "stax/runtime/sha256.h"

namespace tp::stax::runtime {
namespace {

constexpr int kLogLinesInError = 40;
constexpr size_t kDefaultMaxLoaded = 64;

// -fno-math-errno / -fno-trapping-math let the compiler vectorize math calls
// and hoist loads; -ffast-math is deliberately absent, since kernels must keep
// IEEE NaN/inf semantics (torch parity). -fno-plt: direct GOT calls into
// libgomp/libm, the library is bound eagerly (RTLD_NOW) anyway.
// -fno-tree-loop-if-convert: GCC 12.2 at -O3 with AVX2 or AVX-512 vectorizes
// the if-converted scalar loop `t = x < 0 ? 0 : x; out = t > 0 ? g : 0` over
// a small 2-D nest (relu's backward, inner extent 5 or 10) into wrong code:
// compiled training of a width-10 ReLU layer got garbage gradients. The
// printer vectorizes its main loops itself, so this only keeps GCC from
// vectorizing conditional scalar loops (narrow inner dims, tails).
const std::vector<std::string>& base_flags() {
  static const std::vector<std::string> flags = {"-O3",
                                                 "-shared",
                                                 "-fPIC",
                                                 "-fopenmp",
                                                 "-fno-math-errno",
                                                 "-fno-trapping-math",
                                                 "-fno-tree-loop-if-convert",
                                                 "-fno-plt",
                                                 "-std=c++17"};
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
  for (const char* const* f = libmvec_link_flags(); *f; ++f) argv.emplace_back(*f);  // after the source: -l order
  return argv;
}

std::vector<std::string> CodeCache::object_command(const std::string& src_path, const std::string& out_path) const {
  std::vector<std::string> argv = {host_compiler().path};
  for (const std::string& flag : base_flags())
    if (flag != "-shared") argv.push_back(flag);
  const auto& isa = host_isa().flags;
  argv.insert(argv.end(), isa.begin(), isa.end());
  for (const char* arg : {"-c", "-x", "c++"}) argv.emplace_back(arg);
  argv.push_back(src_path);
  argv.emplace_back("-o");
  argv.push_back(out_path);
  return argv;
}

std::vector<std::string> CodeCache::link_command(const std::vector<std::string>& objects, const std::string& out_path) const {
  std::vector<std::string> argv = {host_compiler().path, "-shared", "-fPIC", "-fopenmp", "-fno-plt"};
  argv.insert(argv.end(), objects.begin(), objects.end());
  argv.emplace_back("-o");
  argv.push_back(out_path);
  for (const char* const* f = libmvec_link_flags(); *f; ++f) argv.emplace_back(*f);
  return argv;
}

std::string CodeCache::key_for_object(const std::string& source) const {
  const std::string command = join(object_command("kernel.cpp", "kernel.o"), ' ');
  return sha256_hex("tp-stax-object-v1\n" + length_prefixed(source) + length_prefixed(command) +
                    length_prefixed(host_compiler().identity));
}

std::string CodeCache::key_for_units(const std::vector<std::string>& units) const {
  std::string text = "tp-stax-units-v1\n";
  std::vector<std::string> names;
  for (const std::string& unit : units) {
    text += length_prefixed(key_for_object(unit));
    names.push_back(str("unit", names.size(), ".o"));
  }
  text += length_prefixed(join(link_command(names, "kernel.so"), ' '));
  return sha256_hex(text);
}

std::string CodeCache::key_for(const std::string& source) const {
  const std::string command = join(compile_command("kernel.cpp", "kernel.so"), ' ');
  return sha256_hex("tp-stax-kernel-v1\n" + length_prefixed(source) + length_prefixed(command) +
                    length_prefixed(host_compiler().identity));
}

CodeCache::Root CodeCache::root() {
  std::string warning;
  Root r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dir_.empty()) {
      ResolvedCacheDir resolved = resolve_cache_dir();
      dir_ = resolved.path;
      dir_fd_ = resolved.fd;
      warning = resolved.warning;
    }
    r = {dir_, dir_fd_};
  }
  // Outside the lock: the handler is user code (Python's warnings module).
  if (!warning.empty()) warn(warning);
  return r;
}

std::string CodeCache::directory() { return root().path; }

size_t CodeCache::max_loaded_locked() {
  if (max_loaded_ == 0) {
    max_loaded_ = kDefaultMaxLoaded;
    if (const char* env = std::getenv("TP_STAX_MAX_LOADED_LIBRARIES"); env != nullptr && *env != '\0') {
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(env, &end, 10);
      TP_CHECK(errno == 0 && *end == '\0' && n >= 1, ValueError, "TP_STAX_MAX_LOADED_LIBRARIES='", env,
               "' is not a positive integer");
      max_loaded_ = static_cast<size_t>(n);
    }
  }
  return max_loaded_;
}

size_t CodeCache::max_loaded_libraries() {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_loaded_locked();
}

void CodeCache::set_max_loaded_libraries(size_t n) {
  TP_CHECK(n >= 1, ValueError, "the number of loaded kernel libraries must be at least 1, got ", n);
  std::vector<std::shared_ptr<LoadedLibrary>> evicted;  // declared first: unloaded after the lock is released
  std::lock_guard<std::mutex> lock(mutex_);
  max_loaded_ = n;
  evict_locked("", &evicted);
}

size_t CodeCache::loaded_library_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.size();
}

std::shared_ptr<LoadedLibrary> CodeCache::find_loaded(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = loaded_.find(key);
  if (it == loaded_.end()) return nullptr;
  touch(*it->second);
  return it->second;
}

std::shared_ptr<LoadedLibrary> CodeCache::remember(const std::string& key, std::shared_ptr<LoadedLibrary> library) {
  std::vector<std::shared_ptr<LoadedLibrary>> evicted;  // unloaded after the lock is released
  std::lock_guard<std::mutex> lock(mutex_);
  // If another thread got here first, keep its object (same dlopen handle);
  // `library` is then dlclose()d when this function returns.
  auto [it, inserted] = loaded_.try_emplace(key, library);
  if (inserted) epoch_.fetch_add(1, std::memory_order_relaxed);
  touch(*it->second);
  evict_locked(key, &evicted);
  return it->second;
}

// Drops the least recently used libraries beyond the cap from the map. Only
// the map's reference goes: a library a caller still holds (a running
// kernel, a BuildResult) stays mapped until that reference is released.
void CodeCache::evict_locked(const std::string& keep, std::vector<std::shared_ptr<LoadedLibrary>>* dropped) {
  const size_t cap = max_loaded_locked();
  while (loaded_.size() > cap) {
    auto victim = loaded_.end();
    for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
      if (it->first == keep) continue;
      if (victim == loaded_.end() ||
          it->second->last_use().load(std::memory_order_relaxed) < victim->second->last_use().load(std::memory_order_relaxed)) {
        victim = it;
      }
    }
    if (victim == loaded_.end()) return;
    dropped->push_back(std::move(victim->second));
    loaded_.erase(victim);
  }
}

void CodeCache::emit_repair_warnings(const std::vector<std::string>& repairs, bool swallow_errors) {
  std::vector<std::string> fresh;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& r : repairs) {
      if (warned_.insert(r).second) fresh.push_back(r);
    }
  }
  for (const auto& r : fresh) {
    const std::string message =
        str("tensorplay: damaged kernel cache entry ", r, "; it is replaced by a fresh build");
    if (!swallow_errors) {
      warn(message);
      continue;
    }
    try {
      warn(message);
    } catch (...) {  // already unwinding another error: that one is what the caller must see
    }
  }
}

// Reads the entry's manifest and kernel.so through key_fd and checks them.
// Returns kernel.so's bytes if all is well; otherwise nullopt and, if the
// entry is damaged rather than merely absent or unfinished, *problem.
std::optional<std::string> CodeCache::verify_entry(int key_fd, const std::string& key, const std::string& artifact,
                                                   std::string* problem) {
  problem->clear();
  struct stat st;
  bool missing = false;
  fs::UniqueFd manifest_fd = fs::open_private_file_at(key_fd, kManifestName, &st, &missing, problem);
  // No manifest: a miss, or a build that died between kernel.so and its
  // manifest. Either way a plain (re)build, nothing to warn about.
  if (missing) return std::nullopt;
  if (!manifest_fd.valid()) return std::nullopt;
  std::string text;
  if (static_cast<uint64_t>(st.st_size) > kMaxManifestBytes || !fs::read_exact(manifest_fd.get(), st.st_size, &text)) {
    *problem = str(kManifestName, " is not a manifest (", st.st_size, " bytes)");
    return std::nullopt;
  }
  const std::optional<KernelManifest> manifest = parse_manifest(text);
  if (!manifest) {
    *problem = str(kManifestName, " is malformed");
    return std::nullopt;
  }
  if (manifest->key != key) {
    *problem = str(kManifestName, " belongs to another kernel (key ", manifest->key, "): entries were swapped");
    return std::nullopt;
  }
  fs::UniqueFd so_fd = fs::open_private_file_at(key_fd, artifact, &st, &missing, problem);
  if (missing) *problem = artifact + " is missing";
  if (!so_fd.valid()) return std::nullopt;
  if (static_cast<uint64_t>(st.st_size) != manifest->size) {
    *problem = str(artifact, " has ", st.st_size, " bytes but its manifest says ", manifest->size,
                   " (truncated or replaced)");
    return std::nullopt;
  }
  std::string bytes;
  if (!fs::read_exact(so_fd.get(), manifest->size, &bytes)) {
    *problem = artifact + " could not be read in full";
    return std::nullopt;
  }
  if (sha256_hex(bytes) != manifest->sha256) {
    *problem = artifact + " does not match the SHA-256 in its manifest (corrupted, or another entry's file)";
    return std::nullopt;
  }
  return bytes;
}

BuildResult CodeCache::load_or_build(const std::string& source) {
  const std::string key = key_for(source);
  return load_or_build_with(key, [&](int key_fd, const std::string& dir, double* seconds) {
    return build_locked(
        source, "kernel.so",
        [this](const std::string& src, const std::string& out) { return compile_command(src, out); }, key_fd, dir,
        key, seconds);
  });
}

BuildResult CodeCache::load_or_build_units(const std::vector<std::string>& units) {
  TP_CHECK(!units.empty(), BackendError, "internal: a region with no translation unit");
  if (units.size() == 1) return load_or_build(units[0]);
  const std::string key = key_for_units(units);
  return load_or_build_with(key, [&](int key_fd, const std::string& dir, double* seconds) {
    const auto start = std::chrono::steady_clock::now();
    // Every unit's object, concurrently (the compiler is a subprocess; only it
    // runs on the workers). Repairs per unit: the vectors are not shared.
    std::vector<std::string> objects(units.size());
    std::vector<std::vector<std::string>> unit_repairs(units.size());
    try {
      run_parallel(units.size(), [&](size_t i) {
        try {
          objects[i] = object_bytes(units[i], &unit_repairs[i]);
        } catch (const BackendError& e) {
          throw BackendError(str("translation unit ", i + 1, " of ", units.size(), " of kernel ", key, ": ", e.what()));
        }
      });
    } catch (...) {
      for (auto& r : unit_repairs) emit_repair_warnings(r, /*swallow_errors=*/true);
      throw;
    }
    for (auto& r : unit_repairs) emit_repair_warnings(r, /*swallow_errors=*/false);
    // The linker reads copies of the verified bytes, private to this entry
    // (under its lock), not the unit entries another process may repair.
    std::vector<std::string> names;
    std::vector<std::unique_ptr<fs::ScopedUnlinkAt>> cleanup;
    for (size_t i = 0; i < objects.size(); ++i) {
      names.push_back(str("unit", i, ".o"));
      fs::write_file_atomic_at(key_fd, names.back(), objects[i], dir);
      cleanup.push_back(std::make_unique<fs::ScopedUnlinkAt>(key_fd, names.back()));
    }
    std::string listing = "// Stax region linked from these translation units (object cache keys):\n";
    for (const std::string& unit : units) listing += "//   " + key_for_object(unit) + "\n";
    double link_seconds = 0.0;
    std::string bytes = build_locked(
        listing, "kernel.so",
        [&](const std::string&, const std::string& out) {
          std::vector<std::string> paths;
          for (const std::string& n : names) paths.push_back(dir + "/" + n);
          return link_command(paths, out);
        },
        key_fd, dir, key, &link_seconds);
    *seconds = seconds_since(start);
    return bytes;
  });
}

CodeCache::EntryDir CodeCache::open_entry(const std::string& key, std::vector<std::string>* repairs) {
  const Root r = root();
  const std::string prefix_dir = r.path + "/" + key.substr(0, 2);
  EntryDir e;
  e.path = prefix_dir + "/" + key;
  const fs::UniqueFd prefix_fd = fs::open_private_dir_at(r.fd->get(), key.substr(0, 2), prefix_dir, repairs);
  e.fd = fs::open_private_dir_at(prefix_fd.get(), key, e.path, repairs);
  return e;
}

std::string CodeCache::object_bytes(const std::string& unit, std::vector<std::string>* repairs) {
  const std::string key = key_for_object(unit);
  const EntryDir entry = open_entry(key, repairs);
  const std::string& dir = entry.path;
  const fs::UniqueFd& key_fd = entry.fd;
  std::string problem;
  if (std::optional<std::string> bytes = verify_entry(key_fd.get(), key, "kernel.o", &problem)) return *bytes;
  fs::FileLockAt lock(key_fd.get(), "kernel.lock", dir + "/kernel.lock", repairs);
  if (std::optional<std::string> bytes = verify_entry(key_fd.get(), key, "kernel.o", &problem)) return *bytes;
  if (!problem.empty()) repairs->push_back(str("'", dir, "': ", problem));
  double seconds = 0.0;
  return build_locked(
      unit, "kernel.o", [this](const std::string& src, const std::string& out) { return object_command(src, out); },
      key_fd.get(), dir, key, &seconds);
}

BuildResult CodeCache::load_or_build_with(const std::string& key, const Builder& build) {
  BuildResult result;
  result.key = key;
  if ((result.library = find_loaded(result.key))) {
    result.disk_hit = result.memory_hit = true;
    return result;
  }
  std::vector<std::string> repairs;
  std::shared_ptr<LoadedLibrary> library;
  try {
    library = load_or_build_on_disk(build, &result, &repairs);
  } catch (...) {
    emit_repair_warnings(repairs, /*swallow_errors=*/true);
    throw;
  }
  result.library = remember(result.key, std::move(library));
  emit_repair_warnings(repairs, /*swallow_errors=*/false);
  return result;
}

std::shared_ptr<LoadedLibrary> CodeCache::load_or_build_on_disk(const Builder& build, BuildResult* result,
                                                                std::vector<std::string>* repairs) {
  const std::string& key = result->key;
  const EntryDir entry = open_entry(key, repairs);
  const std::string& dir = entry.path;
  const fs::UniqueFd& key_fd = entry.fd;

  // The warm path takes no lock: files appear only by rename, and whatever
  // fails the checks is looked at again under the lock before any repair.
  std::string problem;
  std::optional<std::string> bytes = verify_entry(key_fd.get(), key, "kernel.so", &problem);
  bool force_rebuild = false;
  for (int attempt = 0;; ++attempt) {
    result->disk_hit = bytes.has_value();
    if (!bytes) {
      fs::FileLockAt lock(key_fd.get(), "kernel.lock", dir + "/kernel.lock", repairs);
      // Second look: another process may have built or repaired it meanwhile.
      if (!force_rebuild) bytes = verify_entry(key_fd.get(), key, "kernel.so", &problem);
      result->disk_hit = bytes.has_value();
      if (!bytes) {
        if (!problem.empty()) repairs->push_back(str("'", dir, "': ", problem));
        bytes = build(key_fd.get(), dir, &result->compile_seconds);
      }
    }
    try {
      return LoadedLibrary::load_verified(*bytes, dir + "/kernel.so", dir + "/kernel.cpp");
    } catch (const BackendError& e) {
      // A fresh build that cannot be loaded is a real error. A cached one
      // (consistent with its manifest, yet unloadable) is rebuilt once.
      if (!result->disk_hit || attempt > 0) throw;
      problem = str("kernel.so cannot be loaded: ", e.what());
      bytes.reset();
      force_rebuild = true;
    }
  }
}

// Writes kernel.cpp, compiles it to `artifact` and writes the manifest;
// returns the artifact's bytes as read back and hashed. Caller holds the
// dir's lock.
std::string CodeCache::build_locked(
    const std::string& source, const std::string& artifact,
    const std::function<std::vector<std::string>(const std::string&, const std::string&)>& make_argv, int key_fd,
    const std::string& dir, const std::string& key, double* seconds) const {
  fs::remove_stale_temp_files_at(key_fd);  // from a process that died mid-build
  const std::string src_path = dir + "/kernel.cpp";
  fs::write_file_atomic_at(key_fd, "kernel.cpp", source, dir);

  // The compiler writes a temp name; the artifact only ever appears by rename.
  // (Only the name is reserved: a linker may replace the file it writes.)
  fs::UniqueFd reserved;
  const std::string tmp_so = fs::make_temp_file_at(key_fd, artifact, &reserved, dir);
  reserved.reset();
  fs::ScopedUnlinkAt tmp_so_cleanup(key_fd, tmp_so);
  fs::UniqueFd log_fd;
  const std::string tmp_log = fs::make_temp_file_at(key_fd, "compile.log", &log_fd, dir);
  fs::ScopedUnlinkAt tmp_log_cleanup(key_fd, tmp_log);
  const std::vector<std::string> argv = make_argv(src_path, dir + "/" + tmp_so);

  const auto start = std::chrono::steady_clock::now();
  const int status = run_command(argv, log_fd.get());
  *seconds = seconds_since(start);
  if (status != 0) {
    const std::string log_path = dir + "/compile.log";
    fs::rename_at(key_fd, tmp_log, "compile.log", dir);
    tmp_log_cleanup.release();
    throw BackendError(str("C++ compiler failed (exit status ", status, ") on kernel ", key,
                           "\n  command: ", format_command(argv), "\n  source kept at: ", src_path,
                           "\n  compiler output (", log_path, "):\n",
                           fs::read_head_lines(log_path, kLogLinesInError)));
  }

  struct stat st;
  bool missing = false;
  std::string problem;
  const fs::UniqueFd so_fd = fs::open_private_file_at(key_fd, tmp_so, &st, &missing, &problem);
  TP_CHECK(so_fd.valid(), BackendError, "the compiler's output '", dir, "/", tmp_so,
           "' is unusable: ", missing ? "it is missing" : problem);
  std::string bytes;
  TP_CHECK(fs::read_exact(so_fd.get(), static_cast<size_t>(st.st_size), &bytes), BackendError,
           "cannot read the compiler's output '", dir, "/", tmp_so, "'");
  // Durable before it becomes visible under its final name.
  TP_CHECK(::fsync(so_fd.get()) == 0, BackendError, "cannot fsync '", dir, "/", tmp_so, "'");
  fs::rename_at(key_fd, tmp_so, artifact, dir);
  tmp_so_cleanup.release();
  // The manifest comes last: an entry is complete once it is there.
  fs::write_file_atomic_at(key_fd, kManifestName, format_manifest({key, bytes.size(), sha256_hex(bytes)}), dir);
  return bytes;  // tmp_log_cleanup removes the log: only failures keep one
}

void CodeCache::reset_for_testing() {
  std::unordered_map<std::string, std::shared_ptr<LoadedLibrary>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dir_.clear();
    dir_fd_.reset();
    dropped.swap(loaded_);
    max_loaded_ = 0;
    warned_.clear();
    detail::reset_host_isa_for_testing();
    detail::reset_host_compiler_for_testing();
  }
}

}  // namespace tp::stax::runtime
