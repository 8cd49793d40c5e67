// matmul with PyTorch semantics: 1-D operands are promoted to a row (left) or
// a column (right) and the added dim removed from the result; leading dims are
// batch dims and broadcast. The GEMMs run in OpenBLAS (ops/blas.h); transposed
// operands are passed as Trans with their leading dimension instead of copied.
#include <algorithm>

#include "ops/blas.h"
#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

std::vector<TensorMeta> matmul_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta &a = in[0], &b = in[1];
  const size_t da = a.sizes.size(), db = b.sizes.size();
  TP_CHECK(da >= 1 && db >= 1, ValueError, op.name, ": both arguments to matmul need to be at least 1D, but they are ",
           da, "D and ", db, "D");
  TP_CHECK(is_floating(a.dtype) && a.dtype == b.dtype, TypeError, op.name,
           ": expected both operands to be float32 or float64 tensors of the same dtype, but got ",
           dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  const int64_t K = a.sizes.back(), Kb = db == 1 ? b.sizes[0] : b.sizes[db - 2];
  TP_CHECK(K == Kb, ValueError, op.name, ": shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes),
           " cannot be multiplied (", K, " != ", Kb, ")");
  Shape ba(a.sizes.begin(), a.sizes.end() - std::min<size_t>(da, 2));
  Shape bb(b.sizes.begin(), b.sizes.end() - std::min<size_t>(db, 2));
  Shape out = broadcast_shapes(ba, bb, op.name);
  if (da >= 2) out.push_back(a.sizes[da - 2]);
  if (db >= 2) out.push_back(b.sizes[db - 1]);
  return {TensorMeta::contiguous(std::move(out), a.dtype)};
}

// How BLAS can read a rows x cols block with element strides (sr, sc).
struct Layout {
  bool ok = false, trans = false;
  int64_t ld = 0;
};
Layout pick_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  // Row-major: (i, j) at i * ld + j. A stride of a size-1 dim never matters.
  int64_t r_sr = rows == 1 ? std::max<int64_t>(cols, 1) : sr, r_sc = cols == 1 ? 1 : sc;
  if (r_sc == 1 && r_sr >= std::max<int64_t>(cols, 1)) return {true, false, r_sr};
  // Column-major, i.e. the transpose stored row-major: (i, j) at j * ld + i.
  int64_t c_sr = rows == 1 ? 1 : sr, c_sc = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
  if (c_sr == 1 && c_sc >= std::max<int64_t>(rows, 1)) return {true, true, c_sc};
  return {};
}

Layout matrix_layout(const Tensor& t) {
  const int64_t d = t.dim();
  return pick_layout(t.sizes()[d - 2], t.sizes()[d - 1], t.strides()[d - 2], t.strides()[d - 1]);
}

template <class T>
void matmul_kernel(Tensor a, Tensor b, const Tensor& out) {
  if (a.dim() == 1) a = a.as_strided({1, a.sizes()[0]}, {0, a.strides()[0]}, a.offset());
  if (b.dim() == 1) b = b.as_strided({b.sizes()[0], 1}, {b.strides()[0], 0}, b.offset());
  const int64_t M = a.sizes()[a.dim() - 2], K = a.sizes()[a.dim() - 1], N = b.sizes()[b.dim() - 1];
  if (out.numel() == 0) return;
  if (K == 0) {
    fill(out, Scalar(int64_t{0}));
    return;
  }
  Layout la = matrix_layout(a), lb = matrix_layout(b);
  if (!la.ok) {
    a = contiguous_copy(a);
    la = matrix_layout(a);
  }
  if (!lb.ok) {
    b = contiguous_copy(b);
    lb = matrix_layout(b);
  }
  T* c = out.data_as<T>();
  const Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t B = numel(batch);
  // b shared by every batch element and a's batch and rows stacked as one matrix:
  // a single GEMM (x[B, T, C] @ w[C, D] in a linear layer).
  if (B > 1 && numel(bb) == 1 && !la.trans) {
    if (auto st = view_strides(a.sizes(), a.strides(), {B * M, K})) {
      Layout lf = pick_layout(B * M, K, (*st)[0], (*st)[1]);
      if (lf.ok && !lf.trans) {
        blas::gemm(false, lb.trans, B * M, N, K, a.data_as<T>(), lf.ld, b.data_as<T>(), lb.ld, c, N);
        return;
      }
    }
  }
  const Shape sa = broadcast_strides(ba, Shape(a.strides().begin(), a.strides().end() - 2), batch);
  const Shape sb = broadcast_strides(bb, Shape(b.strides().begin(), b.strides().end() - 2), batch);
  const T* pa = a.data_as<T>();
  const T* pb = b.data_as<T>();
  for (int64_t i = 0; i < B; ++i) {
    int64_t oa = 0, ob = 0, rest = i;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      int64_t idx = rest % batch[d];
      rest /= batch[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    blas::gemm(la.trans, lb.trans, M, N, K, pa + oa, la.ld, pb + ob, lb.ld, c + i * M * N, N);
  }
}

std::vector<Tensor> matmul_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() { matmul_kernel<T>(in[0], in[1], out); }));
  return {out};
}

// d(a @ b): grad_a = grad @ b^T, grad_b = a^T @ grad, computed on the 2-D
// promoted operands, summed over broadcast batch dims, then shaped back.
std::vector<Tensor> matmul_backward(const BackwardArgs& args) {
  const Tensor& g = ops::grad_out(args);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &a = args.inputs[0], &b = args.inputs[1];
  Tensor a2 = a.dim() == 1 ? ops::unsqueeze(a, 0) : a;
  Tensor b2 = b.dim() == 1 ? ops::unsqueeze(b, -1) : b;
  Tensor g2 = b.dim() == 1 ? ops::unsqueeze(g, -1) : g;
  if (a.dim() == 1) g2 = ops::unsqueeze(g2, -2);
  Tensor ga, gb;
  if (args.needs_grad[0])
    ga = ops::reshape(ops::sum_to(ops::matmul(g2, ops::transpose(b2, -1, -2)), a2.sizes()), a.sizes());
  if (args.needs_grad[1])
    gb = ops::reshape(ops::sum_to(ops::matmul(ops::transpose(a2, -1, -2), g2), b2.sizes()), b.sizes());
  return {ga, gb};
}

}  // namespace

void register_matmul_ops() {
  OpDef d;
  d.name = "matmul";
  d.num_inputs = 2;
  d.infer = &matmul_infer;
  d.cpu = &matmul_cpu;
  d.backward = &matmul_backward;
  register_op(d);
}

}  // namespace tp
