#include "stax/runtime/loaded_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"
#include "stax/runtime/fs_util.h"

namespace tp::stax::runtime {
namespace {

std::atomic<int64_t> g_live{0};

std::string last_dl_error() {
  const char* msg = ::dlerror();
  return msg ? msg : "unknown dlerror";
}

// Why a memfd and not dlopen("/proc/self/fd/N") of the verified cache file:
// the cache file can still be changed in place by its owner (or root) after
// we hashed it, and a mapped file that shrinks raises SIGBUS; a sealed memfd
// is a private copy nobody can change. Copying ~20 KB costs microseconds.
// MFD_EXEC (Linux 6.3+) is asked for because vm.memfd_noexec may otherwise
// make the memfd unmappable as code; older kernels reject the flag (EINVAL).
fs::UniqueFd make_sealed_memfd(const std::string& bytes, const std::string& so_path) {
#ifndef MFD_EXEC
  constexpr unsigned kMfdExec = 0x0010U;
#else
  constexpr unsigned kMfdExec = MFD_EXEC;
#endif
  const unsigned base = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  fs::UniqueFd fd(::memfd_create("tp-stax-kernel", base | kMfdExec));
  if (!fd.valid() && errno == EINVAL) fd = fs::UniqueFd(::memfd_create("tp-stax-kernel", base));
  if (!fd.valid()) {
    throw BackendError(str("cannot load kernel library '", so_path, "': memfd_create failed: ",
                           fs::errno_message(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw BackendError(str("cannot load kernel library '", so_path, "': writing its memfd failed: ",
                             fs::errno_message(errno)));
    }
    done += static_cast<size_t>(n);
  }
  ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

}  // namespace

std::shared_ptr<LoadedLibrary> LoadedLibrary::load_verified(const std::string& bytes, const std::string& so_path,
                                                            const std::string& source_path) {
  fs::UniqueFd memfd = make_sealed_memfd(bytes, so_path);
  // glibc returns an already loaded object whose name equals the one asked
  // for. Our memfd stays open while its library is loaded, so no live kernel
  // has this fd number; but a library dlclose() could not unload keeps its
  // old name, and reusing that name would hand back the wrong code. So: pick
  // a spelling of the path that nothing loaded answers to (RTLD_NOLOAD).
  std::string name;
  for (int dots = 0; dots < 16 && name.empty(); ++dots) {
    std::string candidate = "/proc/self/fd/";
    for (int i = 0; i < dots; ++i) candidate += "./";
    candidate += std::to_string(memfd.get());
    if (void* old = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      ::dlclose(old);
      continue;
    }
    name = candidate;
  }
  if (name.empty()) throw BackendError(str("cannot load kernel library '", so_path, "': no unused name"));
  ::dlerror();
  void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw BackendError(str("cannot load kernel library '", so_path, "' (source '", source_path,
                           "'): ", last_dl_error()));
  }
  // Not make_shared: the constructor is private.
  return std::shared_ptr<LoadedLibrary>(new LoadedLibrary(handle, memfd.release(), so_path, source_path));
}

LoadedLibrary::LoadedLibrary(void* handle, int memfd, std::string so_path, std::string source_path)
    : handle_(handle), memfd_(memfd), so_path_(std::move(so_path)), source_path_(std::move(source_path)) {
  g_live.fetch_add(1);
}

LoadedLibrary::~LoadedLibrary() {
  ::dlclose(handle_);
  ::close(memfd_);
  g_live.fetch_sub(1);
}

int64_t LoadedLibrary::live_count() { return g_live.load(); }

void* LoadedLibrary::symbol(const std::string& name) const {
  ::dlerror();  // clear a stale error so the one below belongs to this dlsym
  void* address = ::dlsym(handle_, name.c_str());
  if (address == nullptr) {
    throw BackendError(str("symbol '", name, "' not found in kernel library '", so_path_, "' (source '",
                           source_path_, "'): ", last_dl_error()));
  }
  return address;
}

}  // namespace tp::stax::runtime
