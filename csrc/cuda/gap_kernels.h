// CUDA kernels for operators that had a CPU kernel but no CUDA path
// (found by scripts/cuda_op_audit.py; issue 12), one concept per file:
//   fill_kernels.cpp    fill_ (any dtype, any strides); normal_, uniform_ and
//                       bernoulli_.float, drawn on the host by the CPU
//                       kernel (random factories draw there too, so one seed
//                       gives the same numbers on both devices) and copied up;
//   lookup_kernels.cpp  one_hot (min/max read back once, for the class count
//                       and the range check) and searchsorted / bucketize
//                       (binary search per value, NaN above every number,
//                       sorter taken through gather), repeat_interleave's
//                       index (the CUDA cumsum of the counts, its total read
//                       back once; thread i writes i over its run);
//   select_kernels.cpp  kthvalue and median.dim (and median through it): the
//                       stable CUDA sort along dim, then the k-th entry of
//                       each slice — the CPU's pick, since it ranks by
//                       (value, position) too; median takes the first NaN of a
//                       slice holding one;
//   special_kernels.cpp lgamma, digamma, polygamma, i0, special_i1 (the CPU's
//                       algorithms in double), erfinv (CUDA's erfinvf /
//                       erfinv; 16-bit through float32), float64 erf and
//                       erf-GELU, round with decimals;
//   composite_kernels.cpp native_layer_norm (var_mean, rsqrt, ...: generated
//                       eager operators) and select/slice/as_strided_scatter
//                       (device copies through the view operator's kernel);
//   cum_kernels.cpp     _cumprod_backward and cummax / cummin (one thread per
//                       slice, the CPU's order and rules);
//   host_kernels.cpp    bincount, histc, histogram, mode, multinomial,
//                       bernoulli(p), the linalg primitives and the Bessel /
//                       erfcx / zeta / gammainc / polynomial tp.special ops: the CPU kernel
//                       on host copies of the inputs, results uploaded
//                       (data-dependent sizes; the random ones draw the CPU's
//                       numbers for one seed); _value_check reads only its flag.
// Each returns false for a call it does not cover (NotImplementedError naming
// the operator and the device, unless Stax generates it).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool fill_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool lookup_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool select_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool host_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool special_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                    const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
// Made only of run_kernel calls (no allocation or launch of its own), so the
// fake-device tests run it on the CPU (_testing_fake_device(True, composites=True)).
bool composite_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                      const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool cum_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

inline bool gap_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                       const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  return fill_kernel(op, inputs, attrs, out_meta, out) || lookup_kernel(op, inputs, attrs, out_meta, out) ||
         select_kernel(op, inputs, attrs, out_meta, out) ||
         special_kernel(op, inputs, attrs, out_meta, out) || composite_kernel(op, inputs, attrs, out_meta, out) ||
         cum_kernel(op, inputs, attrs, out_meta, out) || host_kernel(op, inputs, attrs, out_meta, out);
}

// self (any strides) <- src (contiguous, self's dtype and element count): element i of
// src goes to row-major position i of self. False for a rank over the kernel's limit.
bool put_strided(const Tensor& self, const Tensor& src);
std::vector<std::pair<std::string, std::string>> fill_kernel_sources();
std::vector<std::pair<std::string, std::string>> lookup_kernel_sources();
std::vector<std::pair<std::string, std::string>> select_kernel_sources();
std::vector<std::pair<std::string, std::string>> special_kernel_sources();
std::vector<std::pair<std::string, std::string>> cum_kernel_sources();

// A C type of each integer dtype (bool and uint8: unsigned char), or nullptr.
const char* int_ctype(DType d);

}  // namespace tp::cuda
