// The CUDA driver API, loaded at run time. The package is built with no CUDA
// toolkit and must import on machines without a GPU, so nothing links against
// libcuda: driver() dlopens libcuda.so.1 on first use and resolves the few
// entry points we call. The types and signatures below are the driver API's
// stable C ABI (CUresult is an int, handles are opaque pointers, device
// pointers are 64-bit integers), declared here instead of taken from cuda.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tp::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

// Driver enum values used here.
constexpr CUresult kErrorNotReady = 600;     // CUDA_ERROR_NOT_READY (query of pending work)
constexpr unsigned kStreamNonBlocking = 1;   // CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream
constexpr unsigned kEventDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
constexpr int kCaptureModeRelaxed = 2;       // CU_STREAM_CAPTURE_MODE_RELAXED

// cuDeviceGetAttribute codes used here (values of the driver API's enum).
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMultiprocessorCount = 16;

struct Driver {
  bool loaded = false;    // libcuda.so.1 found and every symbol resolved
  bool initialized = false;  // cuInit succeeded (false on machines with the library but no GPU)
  std::string why_unavailable;
  int device_count = 0;

  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemAllocHost)(void**, size_t) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  // Copies between two devices' memory (staged by the driver when the GPUs
  // cannot reach each other); optional: without it such copies go through the host.
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream) = nullptr;

  // Streams, events and graphs: resolved apart from the rest, so a driver
  // without them still runs everything on the legacy stream.
  bool has_streams = false;
  bool has_graphs = false;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamQuery)(CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  CUresult (*cuGraphGetNodes)(CUgraph, void**, size_t*) = nullptr;
};

// Loads the library and calls cuInit once; never throws.
const Driver& driver();
bool is_available();
int device_count();
// Throws tp::Error with the driver's message when `r` is not CUDA_SUCCESS.
void check(CUresult r, const char* what);
// Makes `index`'s primary context current on this thread (retained once per
// device) and validates the index; throws when CUDA is unavailable. Every
// driver call that depends on the current context (allocations, launches,
// the legacy stream 0, synchronous copies) is preceded by one.
void activate(int index);
// `index`'s primary context (retained, as activate does).
CUcontext context(int index);
// tp.cuda.current_device(): per thread, the device "cuda" without an index
// names. It is a TensorPlay notion; the driver's current context is whatever
// the last activate() left (see DeviceGuard).
int current_device();
// Makes `index` the thread's current device and its context current.
void set_device(int index);
void synchronize(int index);

// Restores the thread's current driver context when it goes out of scope, so
// that an operation on cuda:1 does not leave device 1 current for code that
// reads the driver's (or the CUDA runtime's) current device — PyTorch in the
// same thread (torch.cuda.current_device(), torch.zeros(device="cuda")), like
// PyTorch's own device guard. Used at the entry points (the dispatcher's CUDA
// hook, moves, synchronize, DLPack); cheap: one cuCtxGetCurrent, and one
// cuCtxSetCurrent only when the context changed. A thread with no context
// current keeps the one activated (nobody else's current device to keep).
class DeviceGuard {
 public:
  DeviceGuard();
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  CUcontext saved_ = nullptr;
  bool active_ = false;
};
// Compute capability as major*10+minor (90 for an H100/H200).
int compute_capability(int index);
std::string device_name(int index);
// The driver's CUDA version (e.g. 13000): part of the CUBIN cache key.
int driver_version();
// Streaming multiprocessors of the device (sizes grids of generated kernels).
int multiprocessor_count(int index);
// The clear error every CUDA entry point raises on a machine without one.
[[noreturn]] void throw_unavailable(const std::string& what);

}  // namespace tp::cuda
