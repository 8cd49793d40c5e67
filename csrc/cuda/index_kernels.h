// Integer-indexed operators on CUDA (cuda/index_kernels.cpp). Readers:
// embedding, index_select, gather, advanced indexing x[i] / x[:, i] with one
// index tensor. Writers: index_put(_) with one index tensor (accumulate=True
// is the gradient of embedding and of x[i]), index_add(_) (index_select's
// gradient), scatter_add(_) (gather's) and scatter(_) with a src, a value or
// reduce='add'. Moved elements travel as raw bits (any dtype of 1, 2, 4 or 8
// bytes); accumulation is atomic (repeated indices add up, in no fixed order)
// for float32/64, float16/bfloat16 (a compare-and-swap on the 32-bit word)
// and int32/64. A plain scatter with repeated positions keeps one of the
// values, as on PyTorch's CUDA. With tp.use_deterministic_algorithms(True)
// float accumulations sort the destinations and fold each run in index order
// (the same bits every run, and the CPU's), and plain puts / scatters of a
// src write each position's last occurrence. An index out of range is caught on the
// device (the position clamped, never read or written outside a buffer) and
// raised as IndexError naming the operator, the index and the size, as on the
// CPU (cuda/device_status.h: after the kernel eagerly, after the replay in a
// CUDA graph); the good positions of an in-place writer may have been written
// by then. A call it does not cover (reduce='multiply', several index
// tensors, bool masks, other index dtypes; gather / scatter / scatter_add widen
// a uint8 / int8 / int16 index to int64 first) returns false, and the dispatcher
// then tries Stax's generated operators or raises NotImplementedError naming
// the operator and the device.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool index_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> index_kernel_sources();

// Shared with the data-dependent indexing kernels (cuda/mask_kernels.cpp,
// cuda/scatter_reduce.cpp), so that every index kernel records bad indices and
// accumulates the same way (bad indices: status_device_code() of
// cuda/device_status.h):
// - typedefs E (stored) and C (computed), tp_ld and an atomic tp_acc for `dt`
//   ("" when `dt` has no atomic accumulation);
std::string accumulate_prelude(DType dt);
// - the deterministic form of a float accumulation (tp.use_deterministic_algorithms):
//   accumulate_prelude plus tp_st (C back to E) and tp_add / tp_mul, which
//   round every step and are never fused into an FMA ("" unless `dt` is a
//   float dtype), and a stable ascending sort of int64 keys on the device
//   (the CUDA sort): equal keys keep their order, so a run of equal
//   destinations is folded in index order, as the CPU does;
std::string deterministic_prelude(DType dt);
void sort_keys_stable(const Tensor& keys, Tensor& sorted, Tensor& order);
// - a 0-d value (a Python number, a fill value) as a 0-d tensor of `dt` on
//   the device; a larger value must already have `dt` there (else undefined).
Tensor device_value(const Tensor& v, DType dt, int dev);
// - the C type of an element moved as bits (1, 2, 4 or 8 bytes; else nullptr)
const char* bits_ctype(size_t bytes);
// - the C type of an int64/int32 index tensor (else nullptr)
const char* index_ctype(DType d);

}  // namespace tp::cuda
