#include "cuda/driver.h"

#include <mutex>
#include <vector>

#include "core/error.h"
#include "cuda/device_status.h"
#include "cuda/dynlib.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

Driver* load() {
  auto* d = new Driver();  // leaked: storage release functions may run during interpreter shutdown
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    d->why_unavailable = "the CUDA driver (libcuda.so.1) was not found";
    return d;
  }
  // The _v2 names are the 64-bit-size entry points cuda.h maps the plain names to.
  bool ok = resolve(lib, d->cuInit, "cuInit") && resolve(lib, d->cuDriverGetVersion, "cuDriverGetVersion") && resolve(lib, d->cuGetErrorString, "cuGetErrorString") &&
            resolve(lib, d->cuDeviceGetCount, "cuDeviceGetCount") && resolve(lib, d->cuDeviceGet, "cuDeviceGet") &&
            resolve(lib, d->cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
            resolve(lib, d->cuDeviceGetName, "cuDeviceGetName") &&
            resolve(lib, d->cuDeviceTotalMem, "cuDeviceTotalMem_v2") &&
            resolve(lib, d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
            resolve(lib, d->cuCtxSetCurrent, "cuCtxSetCurrent") &&
            resolve(lib, d->cuCtxSynchronize, "cuCtxSynchronize") && resolve(lib, d->cuMemAlloc, "cuMemAlloc_v2") &&
            resolve(lib, d->cuMemFree, "cuMemFree_v2") && resolve(lib, d->cuMemAllocHost, "cuMemAllocHost_v2") &&
            resolve(lib, d->cuMemFreeHost, "cuMemFreeHost") && resolve(lib, d->cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
            resolve(lib, d->cuMemcpyDtoH, "cuMemcpyDtoH_v2") && resolve(lib, d->cuMemcpyDtoD, "cuMemcpyDtoD_v2") &&
            resolve(lib, d->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2") &&
            resolve(lib, d->cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2") &&
            resolve(lib, d->cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") &&
            resolve(lib, d->cuMemsetD8, "cuMemsetD8_v2") && resolve(lib, d->cuModuleLoadData, "cuModuleLoadData") &&
            resolve(lib, d->cuModuleGetFunction, "cuModuleGetFunction") &&
            resolve(lib, d->cuLaunchKernel, "cuLaunchKernel") &&
            resolve(lib, d->cuMemsetD8Async, "cuMemsetD8Async") &&
            resolve(lib, d->cuMemsetD32Async, "cuMemsetD32Async") &&
            resolve(lib, d->cuCtxGetCurrent, "cuCtxGetCurrent");
  if (!ok) {
    d->why_unavailable = std::string("the CUDA driver lacks an entry point: ") + dlerror();
    return d;
  }
  d->loaded = true;
  resolve(lib, d->cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
  d->has_streams = resolve(lib, d->cuStreamCreate, "cuStreamCreate") &&
                   resolve(lib, d->cuStreamSynchronize, "cuStreamSynchronize") &&
                   resolve(lib, d->cuStreamQuery, "cuStreamQuery") &&
                   resolve(lib, d->cuStreamWaitEvent, "cuStreamWaitEvent") &&
                   resolve(lib, d->cuEventCreate, "cuEventCreate") &&
                   resolve(lib, d->cuEventDestroy, "cuEventDestroy_v2") &&
                   resolve(lib, d->cuEventRecord, "cuEventRecord") &&
                   resolve(lib, d->cuEventSynchronize, "cuEventSynchronize") &&
                   resolve(lib, d->cuEventQuery, "cuEventQuery") &&
                   (resolve(lib, d->cuEventElapsedTime, "cuEventElapsedTime") ||
                    resolve(lib, d->cuEventElapsedTime, "cuEventElapsedTime_v2"));
  // cuStreamBeginCapture_v2 takes the capture mode (the unversioned one does not).
  d->has_graphs = d->has_streams && resolve(lib, d->cuStreamBeginCapture, "cuStreamBeginCapture_v2") &&
                  resolve(lib, d->cuStreamEndCapture, "cuStreamEndCapture") &&
                  resolve(lib, d->cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags") &&
                  resolve(lib, d->cuGraphLaunch, "cuGraphLaunch") &&
                  resolve(lib, d->cuGraphExecDestroy, "cuGraphExecDestroy") &&
                  resolve(lib, d->cuGraphDestroy, "cuGraphDestroy") &&
                  resolve(lib, d->cuGraphGetNodes, "cuGraphGetNodes");
  if (CUresult r = d->cuInit(0); r != 0) {
    const char* msg = nullptr;
    d->cuGetErrorString(r, &msg);
    d->why_unavailable = std::string("cuInit failed: ") + (msg ? msg : "unknown error");
    return d;
  }
  int n = 0;
  if (d->cuDeviceGetCount(&n) != 0 || n <= 0) {
    d->why_unavailable = "no CUDA GPU was found";
    return d;
  }
  d->initialized = true;
  d->device_count = n;
  return d;
}

thread_local int t_current = 0;
std::mutex g_ctx_mutex;
std::vector<CUcontext>& contexts() {
  static auto* v = new std::vector<CUcontext>();
  return *v;
}

}  // namespace

const Driver& driver() {
  static Driver* d = load();
  return *d;
}
bool is_available() { return driver().initialized; }
int device_count() { return driver().initialized ? driver().device_count : 0; }

void throw_unavailable(const std::string& what) {
  throw Error(str(what, ": CUDA is not available (", driver().why_unavailable,
                  "); TensorPlay runs on the 'cpu' device here"));
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* msg = nullptr;
  if (driver().cuGetErrorString) driver().cuGetErrorString(r, &msg);
  throw Error(str(what, ": CUDA error ", r, " (", msg ? msg : "unknown", ")"));
}

CUcontext context(int index) {
  const Driver& d = driver();
  if (!d.initialized) throw_unavailable("cuda");
  TP_CHECK(index >= 0 && index < d.device_count, Error, "CUDA error: invalid device ordinal ", index, " (",
           d.device_count, " device(s) present)");
  // Each thread keeps the handles it has seen: the lock is taken once per
  // thread and device, not on every operation.
  thread_local std::vector<CUcontext> seen;
  const auto i = static_cast<size_t>(index);
  if (i < seen.size() && seen[i]) return seen[i];
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_ctx_mutex);
    auto& ctxs = contexts();
    if (ctxs.empty()) ctxs.assign(static_cast<size_t>(d.device_count), nullptr);
    if (!ctxs[i]) {
      CUdevice dev = 0;
      check(d.cuDeviceGet(&dev, index), "cuDeviceGet");
      check(d.cuDevicePrimaryCtxRetain(&ctxs[i], dev), "cuDevicePrimaryCtxRetain");
    }
    ctx = ctxs[i];
  }
  if (seen.size() <= i) seen.resize(static_cast<size_t>(d.device_count), nullptr);
  seen[i] = ctx;
  return ctx;
}

void activate(int index) { check(driver().cuCtxSetCurrent(context(index)), "cuCtxSetCurrent"); }

DeviceGuard::DeviceGuard() {
  const Driver& d = driver();
  // No context current yet: nobody's current device to keep, and leaving the
  // one activated current spares later operations a switch.
  active_ = d.initialized && d.cuCtxGetCurrent(&saved_) == 0 && saved_ != nullptr;
}

DeviceGuard::~DeviceGuard() {
  if (!active_) return;
  CUcontext now = nullptr;
  // Never throws (a destructor, possibly during unwinding): a failure leaves the context as it is.
  if (driver().cuCtxGetCurrent(&now) == 0 && now != saved_) driver().cuCtxSetCurrent(saved_);
}

int current_device() { return t_current; }
void set_device(int index) {
  activate(index);
  t_current = index;
}
void synchronize(int index) {
  check_not_capturing("tp.cuda.synchronize");
  activate(index);
  check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  note_host_sync();
  report_device_status();  // a synchronization point of the checked index kernels
}

int compute_capability(int index) {
  activate(index);
  CUdevice dev = 0;
  check(driver().cuDeviceGet(&dev, index), "cuDeviceGet");
  int major = 0, minor = 0;
  check(driver().cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev), "cuDeviceGetAttribute");
  check(driver().cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev), "cuDeviceGetAttribute");
  return major * 10 + minor;
}

int driver_version() {
  int v = 0;
  if (driver().loaded) driver().cuDriverGetVersion(&v);
  return v;
}

int multiprocessor_count(int index) {
  activate(index);
  CUdevice dev = 0;
  check(driver().cuDeviceGet(&dev, index), "cuDeviceGet");
  int n = 0;
  check(driver().cuDeviceGetAttribute(&n, kAttrMultiprocessorCount, dev), "cuDeviceGetAttribute");
  return n;
}

std::string device_name(int index) {
  activate(index);
  CUdevice dev = 0;
  check(driver().cuDeviceGet(&dev, index), "cuDeviceGet");
  char name[256] = {0};
  check(driver().cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  return name;
}

}  // namespace tp::cuda
