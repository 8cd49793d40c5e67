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
//   erfinv.cpp          erfinv (CUDA's erfinvf / erfinv; 16-bit through float32);
//   host_kernels.cpp    bincount, histc, histogram, mode, multinomial and
//                       bernoulli(p): the CPU kernel on host copies of the
//                       inputs, results uploaded (data-dependent sizes; the
//                       random ones draw the CPU's numbers for one seed).
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
bool erfinv_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool host_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

inline bool gap_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                       const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  return fill_kernel(op, inputs, attrs, out_meta, out) || lookup_kernel(op, inputs, attrs, out_meta, out) ||
         select_kernel(op, inputs, attrs, out_meta, out) || erfinv_kernel(op, inputs, attrs, out_meta, out) ||
         host_kernel(op, inputs, attrs, out_meta, out);
}

// self (any strides) <- src (contiguous, self's dtype and element count): element i of
// src goes to row-major position i of self. False for a rank over the kernel's limit.
bool put_strided(const Tensor& self, const Tensor& src);
std::vector<std::pair<std::string, std::string>> fill_kernel_sources();
std::vector<std::pair<std::string, std::string>> lookup_kernel_sources();
std::vector<std::pair<std::string, std::string>> select_kernel_sources();
std::vector<std::pair<std::string, std::string>> erfinv_kernel_sources();

// A C type of each integer dtype (bool and uint8: unsigned char), or nullptr.
const char* int_ctype(DType d);

}  // namespace tp::cuda
