#include "cuda/nvrtc.h"

#include <mutex>

#include "core/error.h"
#include "cuda/dynlib.h"

namespace tp::cuda {
namespace {

using nvrtcProgram = struct _nvrtcProgram*;
using nvrtcResult = int;

struct Nvrtc {
  bool loaded = false;
  std::string why;
  std::string path;
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*) = nullptr;
};

std::mutex g_mutex;
std::vector<std::string>& candidates() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

Nvrtc* load() {
  auto* n = new Nvrtc();  // leaked with the library: kernels compiled from it live as long
  std::vector<std::string> names = candidates();
  for (const char* s : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}) names.push_back(s);
  void* lib = open_first(names, &n->path);
  if (!lib) {
    n->why = "NVRTC (libnvrtc.so) was not found; install it with `pip install tensorplay[cuda]` (nvidia-cuda-nvrtc)";
    return n;
  }
  bool ok = resolve(lib, n->GetErrorString, "nvrtcGetErrorString") && resolve(lib, n->Version, "nvrtcVersion") &&
            resolve(lib, n->CreateProgram, "nvrtcCreateProgram") &&
            resolve(lib, n->DestroyProgram, "nvrtcDestroyProgram") &&
            resolve(lib, n->CompileProgram, "nvrtcCompileProgram") &&
            resolve(lib, n->GetProgramLogSize, "nvrtcGetProgramLogSize") &&
            resolve(lib, n->GetProgramLog, "nvrtcGetProgramLog") && resolve(lib, n->GetCUBINSize, "nvrtcGetCUBINSize") &&
            resolve(lib, n->GetCUBIN, "nvrtcGetCUBIN");
  if (!ok) {
    n->why = "NVRTC at " + n->path + " lacks an entry point";
    return n;
  }
  n->loaded = true;
  return n;
}

// Loaded on first use, after tensorplay.cuda registered the wheel's paths.
const Nvrtc& nvrtc() {
  static Nvrtc* n = load();
  return *n;
}

const Nvrtc& require() {
  const Nvrtc& n = nvrtc();
  TP_CHECK(n.loaded, Error, n.why);
  return n;
}

}  // namespace

void add_nvrtc_candidates(const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& p : paths) candidates().push_back(p);
}
bool nvrtc_available() { return nvrtc().loaded; }
std::string nvrtc_why_unavailable() { return nvrtc().why; }

std::string nvrtc_version() {
  const Nvrtc& n = require();
  int major = 0, minor = 0;
  n.Version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_compile(const std::string& source, const std::string& name, int arch) {
  const Nvrtc& n = require();
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.CreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  TP_CHECK(r == 0, Error, "nvrtcCreateProgram: ", n.GetErrorString(r));
  // sm_XY (not compute_XY): a CUBIN for the device's exact architecture, so
  // the driver does no PTX JIT at load time.
  const std::string gpu_arch = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {gpu_arch.c_str(), "--std=c++17", "-default-device"};
  r = n.CompileProgram(prog, 3, opts);
  if (r != 0) {
    size_t log_size = 0;
    n.GetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) n.GetProgramLog(prog, log.data());
    n.DestroyProgram(&prog);
    throw Error(str("NVRTC failed to compile CUDA kernel ", name, " for sm_", arch, ": ", n.GetErrorString(r),
                    "\n", log));
  }
  size_t size = 0;
  n.GetCUBINSize(prog, &size);
  std::string cubin(size, '\0');
  n.GetCUBIN(prog, cubin.data());
  n.DestroyProgram(&prog);
  return cubin;
}

}  // namespace tp::cuda
