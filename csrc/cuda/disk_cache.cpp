#include "cuda/disk_cache.h"

#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <vector>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "stax/runtime/cache_dir.h"
#include "stax/runtime/fs_util.h"
#include "stax/runtime/sha256.h"

namespace tp::cuda {
namespace {
namespace rt = tp::stax::runtime;

struct Dir {
  std::shared_ptr<const rt::fs::UniqueFd> parent;  // keeps the vetted cache directory open
  rt::fs::UniqueFd fd;
  std::string shown;
};

// The "cuda" folder of the cache directory, opened once (nullptr: unusable).
Dir* cuda_dir() {
  static std::once_flag once;
  static Dir* dir = nullptr;
  std::call_once(once, [] {
    try {
      rt::ResolvedCacheDir root = rt::resolve_cache_dir();
      auto* d = new Dir();  // leaked: used until exit
      d->parent = root.fd;
      d->shown = root.path + "/cuda";
      std::vector<std::string> repairs;
      d->fd = rt::fs::open_private_dir_at(root.fd->get(), "cuda", d->shown, &repairs);
      if (d->fd.valid()) dir = d;
    } catch (const std::exception&) {
    }
  });
  return dir;
}
}  // namespace

std::string cubin_key(const std::string& source, int arch) {
  return rt::sha256_hex(source + "\n--gpu-architecture=sm_" + std::to_string(arch) + "\nnvrtc " + nvrtc_version() +
                        "\ndriver " + std::to_string(driver_version()));
}

namespace {
std::optional<std::string> load_file(const std::string& name) {
  Dir* d = cuda_dir();
  if (!d) return std::nullopt;
  struct stat st {};
  bool missing = false;
  std::string problem;
  rt::fs::UniqueFd fd = rt::fs::open_private_file_at(d->fd.get(), name, &st, &missing, &problem);
  if (!fd.valid()) return std::nullopt;
  std::string data;
  if (!rt::fs::read_exact(fd.get(), static_cast<size_t>(st.st_size), &data)) return std::nullopt;
  return data;
}

void store_file(const std::string& name, const std::string& data) {
  Dir* d = cuda_dir();
  if (!d) return;
  try {
    rt::fs::write_file_atomic_at(d->fd.get(), name, data, d->shown);
  } catch (const std::exception&) {  // a full disk must not fail the operator
  }
}
}  // namespace

std::optional<std::string> load_cubin(const std::string& key) {
  std::optional<std::string> data = load_file(key + ".cubin");
  if (!data || data->size() < 4 || data->compare(0, 4, "\x7f" "ELF") != 0) return std::nullopt;
  return data;
}

void store_cubin(const std::string& key, const std::string& cubin) { store_file(key + ".cubin", cubin); }

std::string tuning_key(const std::string& source, const std::string& device_name) {
  return rt::sha256_hex("launch tuning v1\n" + device_name + "\n" + source);
}

std::optional<std::string> load_tuning(const std::string& key) { return load_file(key + ".tune"); }

void store_tuning(const std::string& key, const std::string& value) { store_file(key + ".tune", value); }

}  // namespace tp::cuda
