// cumsum / cumprod, sort (argsort, msort through it) and topk on CUDA
// (cuda/scan_sort.cpp): the reductions of training loops and metrics that
// Stax does not generate (the CUDA printer has no scan; sort and topk have no
// loop form). Each returns false for a call it does not cover, and the
// dispatcher then tries Stax's generated operators or raises NotImplementedError.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

// The exact type the scans, sorts and unique compute in for a stored dtype
// (16-bit floats in float32, integers and bool in int64), its C spelling in
// kernel source, and its tag in kernel names.
DType scan_compute_type(DType d);
const char* scan_ctype(DType c);
std::string scan_type_tag(DType c);

bool scan_sort_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                      const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
// Every source above, as (kernel name, source): compiled by the NVRTC tests without a GPU.
std::vector<std::pair<std::string, std::string>> scan_sort_kernel_sources();

}  // namespace tp::cuda
