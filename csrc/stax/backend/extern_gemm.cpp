#include "stax/backend/extern_gemm.h"

#include <algorithm>

#include "core/parallel.h"
#include "ops/blas.h"

namespace tp::stax {

namespace {

// How BLAS reads the last two dims of t: stored as itself (row-major) or as
// its transpose, with leading dimension ld.
struct MatrixLayout {
  bool trans = false;
  int64_t ld = 1;
};

MatrixLayout matrix_layout(const Tensor& t, const char* op) {
  size_t nd = static_cast<size_t>(t.dim());
  int64_t r = t.sizes()[nd - 2], c = t.sizes()[nd - 1];
  int64_t sr = t.strides()[nd - 2], sc = t.strides()[nd - 1];
  if ((c == 1 || sc == 1) && (r == 1 || sr >= std::max<int64_t>(c, 1)))
    return {false, r == 1 ? std::max<int64_t>(c, 1) : std::max<int64_t>({sr, c, 1})};
  if ((r == 1 || sr == 1) && (c == 1 || sc >= std::max<int64_t>(r, 1)))
    return {true, c == 1 ? std::max<int64_t>(r, 1) : std::max<int64_t>({sc, r, 1})};
  throw Error(str("internal: ", op, " extern operand with sizes ", shape_str(t.sizes()), " and strides ",
                  shape_str(t.strides()), " is not a BLAS matrix layout"));
}

// Strides of t's leading (batch) dims broadcast to `batch` (right-aligned; a
// missing or size-1 dim has stride 0).
Shape batch_strides(const Tensor& t, const Shape& batch) {
  Shape s(batch.size(), 0);
  size_t tb = static_cast<size_t>(t.dim()) - 2;
  for (size_t d = 0; d < tb; ++d) {
    size_t o = batch.size() - tb + d;
    s[o] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  }
  return s;
}

template <class T>
void fill_bias(const Tensor& bias, const Tensor& out) {
  // out is contiguous; bias broadcasts to it (right-aligned, stride 0 where it repeats).
  const Shape& os = out.sizes();
  const size_t nd = os.size();
  Shape bs(nd, 0);
  const size_t off = nd - static_cast<size_t>(bias.dim());
  for (size_t d = 0; d < static_cast<size_t>(bias.dim()); ++d)
    bs[off + d] = bias.sizes()[d] == 1 ? 0 : bias.strides()[d];
  const T* src = bias.data_as<T>();
  T* dst = out.data_as<T>();
  const int64_t n = os[nd - 1], sn = bs[nd - 1];
  const int64_t rows = out.numel() / n;
  // Rows in parallel: a 4096 x 1024 output is 16 MB to write.
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / n), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t base = 0, rem = r;
      for (size_t d = nd - 1; d-- > 0;) {
        base += (rem % os[d]) * bs[d];
        rem /= os[d];
      }
      T* row = dst + r * n;
      if (sn == 1) std::copy(src + base, src + base + n, row);
      else for (int64_t j = 0; j < n; ++j) row[j] = src[base + j * sn];
    }
  });
}

template <class T>
void gemm_typed(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in, const Tensor& out) {
  const bool has_bias = in.size() == 3;
  const Tensor& A = in[has_bias ? 1 : 0];
  const Tensor& B = in[has_bias ? 2 : 1];
  const T alpha = static_cast<T>(attrs.has("alpha") ? attrs.get_double("alpha") : 1.0);
  T beta = static_cast<T>(attrs.has("beta") ? attrs.get_double("beta") : 1.0);
  const Shape& os = out.sizes();
  const size_t nd = os.size();
  const int64_t M = os[nd - 2], N = os[nd - 1], K = A.sizes()[static_cast<size_t>(A.dim()) - 1];
  const Shape batch(os.begin(), os.end() - 2);
  if (out.numel() == 0) return;
  if (has_bias && beta != T(0)) {
    fill_bias<T>(in[0], out);
  } else {
    beta = T(0);  // PyTorch: beta == 0 ignores self (NaN in it does not propagate)
  }
  T* C = out.data_as<T>();
  if (K == 0) {  // an empty sum: C = beta * C
    for (int64_t i = 0; i < out.numel(); ++i) C[i] = beta == T(0) ? T(0) : beta * C[i];
    return;
  }
  MatrixLayout la = matrix_layout(A, op.c_str()), lb = matrix_layout(B, op.c_str());
  Shape sa = batch_strides(A, batch), sb = batch_strides(B, batch);
  const T* pa = A.data_as<T>();
  const T* pb = B.data_as<T>();
  // x @ W with a batched x and one W: the batch rows of x are one matrix when
  // its batch dims and rows collapse into a single strided dim (as PyTorch folds).
  bool b_shared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
  if (!batch.empty() && b_shared && !la.trans) {
    std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride) of batch dims + rows, size > 1
    for (size_t d = 0; d < batch.size(); ++d)
      if (batch[d] > 1) dims.push_back({batch[d], sa[d]});
    if (M > 1) dims.push_back({M, A.strides()[static_cast<size_t>(A.dim()) - 2]});
    bool collapses = true;
    for (size_t i = 0; i + 1 < dims.size(); ++i) collapses = collapses && dims[i].second == dims[i + 1].second * dims[i + 1].first;
    int64_t ld = dims.empty() ? std::max<int64_t>(K, 1) : dims.back().second;
    if (collapses && ld >= K && (dims.empty() || std::all_of(dims.begin(), dims.end(), [](auto& p) { return p.second > 0; }))) {
      blas::gemm(false, lb.trans, numel(batch) * M, N, K, alpha, pa, ld, pb, lb.ld, beta, C, N);
      return;
    }
  }
  // A batch of products (attention's per-head GEMMs) runs one product per
  // thread when they share out evenly among the threads; otherwise one after
  // another, each split across the threads by blas::gemm.
  const int64_t count = numel(batch);
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      int64_t oa = 0, ob = 0, rest = b;
      for (size_t d = batch.size(); d-- > 0;) {
        const int64_t i = rest % batch[d];
        rest /= batch[d];
        oa += i * sa[d];
        ob += i * sb[d];
      }
      blas::gemm(la.trans, lb.trans, M, N, K, alpha, pa + oa, la.ld, pb + ob, lb.ld, beta, C + b * M * N, N);
    }
  };
  const int64_t nt = num_threads();
  if (count > 1 && nt > 1 && (count % nt == 0 || count >= 4 * nt) && !in_parallel_region()) {
    blas::use_one_thread();
    parallel_for(0, count, 1, run);
  } else {
    run(0, count);
  }
}

}  // namespace

void run_gemm_extern(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in, const Tensor& out) {
  if (out.dtype() == DType::Float32) gemm_typed<float>(op, attrs, in, out);
  else if (out.dtype() == DType::Float64) gemm_typed<double>(op, attrs, in, out);
  else throw Error(str("internal: ", op, " GEMM extern on ", dtype_name(out.dtype())));
}

}  // namespace tp::stax
