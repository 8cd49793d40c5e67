// Tensors on a CUDA device: allocation through the caching allocator and the
// copies between host and device (the only way data crosses: no CPU kernel
// ever reads device memory, the dispatcher refuses that).
#pragma once
#include "core/tensor.h"

namespace tp::cuda {

Device cuda_device(int index);
// Uninitialized contiguous tensor on cuda:index.
Tensor empty(const Shape& sizes, DType dtype, int index);
// A contiguous copy of a CPU tensor on cuda:index (pageable host memory: the
// driver stages it; the call returns once the source may be reused).
// non_blocking with a pinned source: an async copy on the legacy stream (the
// call returns at once; later work on the device is ordered after it).
Tensor to_device(const Tensor& cpu, int index, bool non_blocking = false);
// Page-locked host memory (cuMemAllocHost): a contiguous CPU tensor whose
// uploads can be asynchronous and run at full PCIe/NVLink-C2C speed.
Tensor pin_memory(const Tensor& cpu);
bool is_pinned(const Tensor& t);
// A contiguous CPU copy of a CUDA tensor (any strides: the covered span of the
// storage comes over and is gathered on the host). Synchronous.
Tensor to_cpu(const Tensor& t);
// dst <- src for two contiguous tensors of the same bytes, on one device or
// two (then a peer copy: see copy_to_device).
void copy_device_to_device(const Tensor& dst, const Tensor& src);
// A contiguous copy of a CUDA tensor on cuda:index (src itself when it is
// already there). Between two GPUs it is cuMemcpyPeerAsync on the target's
// current stream, ordered after the source stream's pending work, and the
// source's stream then waits for the copy (so its memory is not reused
// before the copy has read it); the host does not wait. Without the peer
// entry point or streams, it goes through the host (synchronous).
Tensor copy_to_device(const Tensor& src, int index);

}  // namespace tp::cuda
