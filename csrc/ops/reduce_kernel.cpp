#include "ops/reduce_kernel.h"

namespace tp::reduce {

#define TP_ISA_CLONES __attribute__((target_clones("avx2", "default")))
TP_ISA_CLONES double contig_sum_f32(const float* p, int64_t n) { return reduce_contig<SumPolicy<float>>(p, n); }
TP_ISA_CLONES float contig_max_f32(const float* p, int64_t n) { return reduce_contig<MaxPolicy<float>>(p, n); }
TP_ISA_CLONES float contig_min_f32(const float* p, int64_t n) { return reduce_contig<MinPolicy<float>>(p, n); }

Rows rows_last(const Tensor& in, const std::vector<bool>& mask) {
  Shape sizes, strides;
  Rows r;
  for (int pass = 0; pass < 2; ++pass)  // kept dims, then reduced dims
    for (int64_t d = 0; d < in.dim(); ++d)
      if (mask[d] == (pass == 1)) {
        sizes.push_back(in.sizes()[d]);
        strides.push_back(in.strides()[d]);
        (pass == 0 ? r.rows : r.row_len) *= in.sizes()[d];
      }
  r.data = as_contiguous(in.as_strided(sizes, strides, in.offset()));
  return r;
}

}  // namespace tp::reduce
