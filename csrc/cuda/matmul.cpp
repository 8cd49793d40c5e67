#include "cuda/matmul.h"

#include "cuda/copy.h"
#include "cuda/cublas.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "ops/blas.h"
#include "ops/dispatch.h"
#include "ops/kernel_util.h"

namespace tp::cuda {
namespace {

// Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T[N,M] = B^T A^T, and a
// row-major matrix is its transpose column-major: so cuBLASLt's first operand
// is our B and its second our A, each read in place (a transposed or sliced
// operand only changes its op flag and leading dimension, never copied).
LtMatrix lt_operand(const Tensor& t, const blas::MatrixLayout& l, int64_t rows, int64_t cols, int64_t batch_stride) {
  LtMatrix m;
  m.data = t.data();
  m.trans = l.trans;
  m.rows = l.trans ? rows : cols;  // row-major (rows x cols) is column-major (cols x rows)
  m.cols = l.trans ? cols : rows;
  m.ld = l.ld;
  m.batch_stride = batch_stride;
  return m;
}

blas::MatrixLayout layout_of(const Tensor& t) {
  const int64_t d = t.dim();
  return blas::matrix_layout(t.sizes()[d - 2], t.sizes()[d - 1], t.strides()[d - 2], t.strides()[d - 1]);
}

// A compact copy on the device (an operand with a step in both matrix dims).
Tensor compact(const Tensor& t) {
  Tensor c = empty(t.sizes(), t.dtype(), t.device().index);
  run_kernel(get_op("copy_"), {c, t}, {});
  return c;
}

// t's matrix layout for cuBLASLt, after compacting t in place when no layout
// reads it (a step in both matrix dims).
blas::MatrixLayout lt_ready(Tensor& t) {
  blas::MatrixLayout l = layout_of(t);
  if (!l.ok) {
    t = compact(t);
    l = layout_of(t);
  }
  return l;
}

// One stride per operand walks the whole (broadcast) batch when its dims
// chain like a contiguous layout; nullopt otherwise.
std::optional<int64_t> single_batch_stride(const Shape& batch, const Shape& strides) {
  std::optional<int64_t> s;
  int64_t inner = 1;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (!s) s = strides[d];
    else if (strides[d] != *s * inner) return std::nullopt;
    inner *= batch[d];
  }
  return s.value_or(0);
}

// out[batch..., M, N] = alpha * a @ b + beta * out (+ bias per column), a and
// b at least 2-D, `out` contiguous and, when beta != 0, holding the added term.
void gemm(Tensor a, Tensor b, const Tensor& out, double alpha, double beta, const void* bias, const char* what,
          LtActivation act = LtActivation::None) {
  const int64_t M = a.sizes()[a.dim() - 2], K = a.sizes()[a.dim() - 1], N = b.sizes()[b.dim() - 1];
  const int dev = out.device().index;
  const size_t item = itemsize(out.dtype());
  if (out.numel() == 0) return;
  const Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, what);
  const int64_t B = numel(batch);
  blas::MatrixLayout lb = lt_ready(b);
  // b shared by the whole batch and a's rows stacked as one matrix: a single
  // GEMM (x[B, T, C] @ w[C, D] in a linear layer).
  if (B > 1 && numel(bb) == 1) {
    if (auto st = view_strides(a.sizes(), a.strides(), {B * M, K})) {
      const blas::MatrixLayout lf = blas::matrix_layout(B * M, K, (*st)[0], (*st)[1]);
      if (lf.ok && !lf.trans) {
        Tensor flat = a.as_strided({B * M, K}, *st, a.offset());
        lt_matmul(dev, out.dtype(), lt_operand(b, lb, K, N, 0), lt_operand(flat, lf, B * M, K, 0), out.data(), N,
                  B * M, N, 0, 1, alpha, beta, bias, what, act);
        return;
      }
    }
  }
  blas::MatrixLayout la = lt_ready(a);
  Shape sa = broadcast_strides(ba, Shape(a.strides().begin(), a.strides().end() - 2), batch);
  Shape sb = broadcast_strides(bb, Shape(b.strides().begin(), b.strides().end() - 2), batch);
  auto ssa = single_batch_stride(batch, sa), ssb = single_batch_stride(batch, sb);
  // Many matrices that no single stride walks (attention's [B, heads, T, d]
  // read through a transpose): one compacting copy costs far less than a GEMM
  // launch per matrix (256 of them in a 32 x 8-head block).
  if (B >= 8 && !(ssa && ssb)) {
    if (!ssa && numel(ba) == B) {
      a = compact(a);
      la = layout_of(a);
      sa = broadcast_strides(ba, Shape(a.strides().begin(), a.strides().end() - 2), batch);
      ssa = single_batch_stride(batch, sa);
    }
    if (!ssb && numel(bb) == B) {
      b = compact(b);
      lb = layout_of(b);
      sb = broadcast_strides(bb, Shape(b.strides().begin(), b.strides().end() - 2), batch);
      ssb = single_batch_stride(batch, sb);
    }
  }
  if (ssa && ssb) {  // one strided-batched call
    lt_matmul(dev, out.dtype(), lt_operand(b, lb, K, N, *ssb), lt_operand(a, la, M, K, *ssa), out.data(), N, M, N,
              M * N, B, alpha, beta, bias, what, act);
    return;
  }
  // A batch that no single stride walks: one call per matrix.
  for (int64_t i = 0; i < B; ++i) {
    int64_t oa = 0, ob = 0, rest = i;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    Tensor ai = a.as_strided({M, K}, {a.strides()[a.dim() - 2], a.strides()[a.dim() - 1]}, a.offset() + oa);
    Tensor bi = b.as_strided({K, N}, {b.strides()[b.dim() - 2], b.strides()[b.dim() - 1]}, b.offset() + ob);
    lt_matmul(dev, out.dtype(), lt_operand(bi, lb, K, N, 0), lt_operand(ai, la, M, K, 0),
              static_cast<char*>(out.data()) + static_cast<size_t>(i * M * N) * item, N, M, N, 0, 1, alpha, beta,
              bias, what, act);
  }
}

Tensor as_row(const Tensor& a) { return a.as_strided({1, a.sizes()[0]}, {0, a.strides()[0]}, a.offset()); }
Tensor as_col(const Tensor& b) { return b.as_strided({b.sizes()[0], 1}, {b.strides()[0], 0}, b.offset()); }

bool covered(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
}

void same_device(const Tensor& t, int dev, const char* what) {
  TP_CHECK(t.device().kind == Device::Kind::CUDA && t.device().index == dev, Error, what,
           ": Expected all tensors to be on the same device, but found at least two devices, cuda:", dev, " and ",
           t.device().str(), "!");
}

// _gemm_epilogue(bias?, a, b, act) (stax/backend/gemm_epilogue.h): act(a @ b +
// bias) as one cuBLASLt call with the BIAS / RELU / GELU epilogue. The bias is
// read as a contiguous, 16-byte aligned row (copied when it is not); an empty
// sum (K = 0) or float64 runs the unfused operators.
bool gemm_epilogue_kernel(const std::vector<Tensor>& inputs, const Attrs& attrs, const std::vector<TensorMeta>& out_meta,
                          std::vector<Tensor>& out) {
  const char* what = "_gemm_epilogue";
  Tensor bias = inputs[0];
  const Tensor &a = inputs[1], &b = inputs[2];
  const int dev = a.device().index;
  same_device(a, dev, what);
  same_device(b, dev, what);
  if (bias.defined()) same_device(bias, dev, what);
  const std::string& act = attrs.get_str("act");
  const DType dt = out_meta[0].dtype;
  const int64_t K = a.sizes()[1];
  auto unfused = [&] {
    Tensor r = run_kernel(get_op("mm"), {a, b}, {})[0];
    if (bias.defined()) r = run_kernel(get_op("add"), {r, bias}, {})[0];
    if (act == "relu") r = run_kernel(get_op("relu"), {r}, {})[0];
    else if (act == "gelu_tanh") r = run_kernel(get_op("gelu"), {r}, {{"approximate", std::string("tanh")}})[0];
    out = {r};
    return true;
  };
  if (dt == DType::Float64 || K == 0) return unfused();
  if (bias.defined() && (!bias.is_contiguous() || reinterpret_cast<uintptr_t>(bias.data()) % 16 != 0)) bias = compact(bias);
  Tensor r = empty(out_meta[0].sizes, dt, dev);
  const LtActivation la = act == "relu" ? LtActivation::Relu : act == "gelu_tanh" ? LtActivation::GeluTanh : LtActivation::None;
  try {
    gemm(a, b, r, 1.0, 0.0, bias.defined() ? bias.data() : nullptr, what, la);
  } catch (const Error&) {
    // No cuBLASLt algorithm with this epilogue for the problem (the heuristic
    // refuses before anything runs): the same result from the separate steps.
    return unfused();
  }
  out = {r};
  return true;
}

Tensor k_op(const char* name, const std::vector<Tensor>& in, const Attrs& attrs = {}) {
  return run_kernel(get_op(name), in, attrs)[0];
}
Tensor num(double v) { return Tensor::wrapped_scalar(Scalar(v)); }

// gelu_tanh'(x) from the eager CUDA operators (the unfused path of _gemm_dgelu).
Tensor gelu_tanh_derivative(const Tensor& x) {
  constexpr double k = 0.7978845608028654, c = 0.044715;
  Tensor x2 = k_op("mul", {x, x});
  Tensor t = k_op("tanh", {k_op("mul", {k_op("add", {x, k_op("mul", {k_op("mul", {x2, x}), num(c)})}), num(k)})});
  Tensor left = k_op("mul", {k_op("add", {t, num(1.0)}), num(0.5)});
  Tensor one_minus = k_op("sub", {num(1.0), k_op("mul", {t, t})});
  Tensor dinner = k_op("mul", {k_op("add", {k_op("mul", {x2, num(3 * c)}), num(1.0)}), num(k)});
  Tensor right = k_op("mul", {k_op("mul", {k_op("mul", {x, num(0.5)}), one_minus}), dinner});
  return k_op("add", {left, right});
}

// The GELU auxiliary matrix: column-major with the result's rows (N) as its
// leading dimension, which cuBLASLt wants a multiple of 8, 16-byte aligned.
bool aux_fits(const Tensor& aux, int64_t N) {
  return N % 8 == 0 && aux.is_contiguous() && reinterpret_cast<uintptr_t>(aux.data()) % 16 == 0;
}

// _gemm_epilogue(bias?, a, b, act = "gelu_tanh_aux") -> (gelu(y), y), y = a @ b
// (+ bias): GELU_AUX(_BIAS) writes the pre-activation the backward reads beside
// the activation.
bool gelu_aux_kernel(const std::vector<Tensor>& inputs, const std::vector<TensorMeta>& out_meta,
                     std::vector<Tensor>& out) {
  const char* what = "_gemm_epilogue";
  Tensor bias = inputs[0];
  Tensor a = inputs[1], b = inputs[2];
  const int dev = a.device().index;
  same_device(a, dev, what);
  same_device(b, dev, what);
  if (bias.defined()) same_device(bias, dev, what);
  const DType dt = out_meta[0].dtype;
  const int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  auto unfused = [&] {
    Tensor y = k_op("mm", {a, b});
    if (bias.defined()) y = k_op("add", {y, bias});
    out = {k_op("gelu", {y}, {{"approximate", std::string("tanh")}}), y};
    return true;
  };
  if (dt == DType::Float64 || K == 0 || M == 0 || N % 8 != 0) return unfused();
  if (bias.defined() && (!bias.is_contiguous() || reinterpret_cast<uintptr_t>(bias.data()) % 16 != 0)) bias = compact(bias);
  const blas::MatrixLayout la = lt_ready(a), lb = lt_ready(b);
  Tensor r = empty(out_meta[0].sizes, dt, dev), y = empty(out_meta[1].sizes, dt, dev);
  LtEpilogue e{bias.defined() ? LtEpilogueKind::GeluAuxBias : LtEpilogueKind::GeluAux};
  e.bias = bias.defined() ? bias.data() : nullptr;
  e.aux = y.data();
  e.aux_ld = N;
  try {
    lt_matmul_epilogue(dev, dt, lt_operand(b, lb, K, N, 0), lt_operand(a, la, M, K, 0), r.data(), N, M, N, e, what);
  } catch (const Error&) {
    return unfused();
  }
  out = {r, y};
  return true;
}

// _gemm_dgelu(a, b, aux) = (a @ b) * gelu_tanh'(aux): DGELU with the saved
// pre-activation as the auxiliary input.
bool gemm_dgelu_kernel(const std::vector<Tensor>& inputs, const std::vector<TensorMeta>& out_meta,
                       std::vector<Tensor>& out) {
  const char* what = "_gemm_dgelu";
  Tensor a = inputs[0], b = inputs[1];
  const Tensor& aux = inputs[2];
  const int dev = a.device().index;
  same_device(a, dev, what);
  same_device(b, dev, what);
  same_device(aux, dev, what);
  const DType dt = out_meta[0].dtype;
  const int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  auto unfused = [&] {
    out = {k_op("mul", {k_op("mm", {a, b}), gelu_tanh_derivative(aux)})};
    return true;
  };
  if (dt == DType::Float64 || K == 0 || M == 0 || !aux_fits(aux, N)) return unfused();
  const blas::MatrixLayout la = lt_ready(a), lb = lt_ready(b);
  Tensor r = empty(out_meta[0].sizes, dt, dev);
  LtEpilogue e{LtEpilogueKind::DGelu};
  e.aux = aux.data();
  e.aux_ld = N;
  try {
    lt_matmul_epilogue(dev, dt, lt_operand(b, lb, K, N, 0), lt_operand(a, la, M, K, 0), r.data(), N, M, N, e, what);
  } catch (const Error&) {
    return unfused();
  }
  out = {r};
  return true;
}

// The unfused reference of the bias-gradient product: a @ b and the sum of b
// over its rows (bias_grad_b) or of a over its columns (bias_grad_a).
std::vector<Tensor> bgrad_unfused(const Tensor& a, const Tensor& b, bool of_b, const Shape& bias_sizes) {
  Tensor r = run_kernel(get_op("mm"), {a, b}, {})[0];
  Tensor g = run_kernel(get_op("sum"), {of_b ? b : a}, {{"dim", std::vector<int64_t>{of_b ? 0 : 1}}, {"keepdim", false}})[0];
  if (!g.is_contiguous()) g = compact(g);
  return {r, g.as_strided(bias_sizes, contiguous_strides(bias_sizes), g.offset())};
}

// _gemm_bgrad(a, b, *, act, keepdim) (stax/backend/gemm_epilogue.h): the
// product and a linear layer's bias gradient in one cuBLASLt call. Row-major
// C = a b is column-major C^T = b^T a^T, so cuBLASLt's A is our b and its B
// our a: the sum of b over k is BGRADA (one value per row of C^T), the sum of
// a over k is BGRADB (one per column of C^T). A problem the heuristic refuses,
// float64 and K = 0 run the separate operators.
bool gemm_bgrad_kernel(const std::vector<Tensor>& inputs, const Attrs& attrs, const std::vector<TensorMeta>& out_meta,
                       std::vector<Tensor>& out) {
  const char* what = "_gemm_bgrad";
  Tensor a = inputs[0], b = inputs[1];
  const int dev = a.device().index;
  same_device(a, dev, what);
  same_device(b, dev, what);
  const bool of_b = attrs.get_str("act") == "bias_grad_b";
  const DType dt = out_meta[0].dtype;
  const int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  if (dt == DType::Float64 || K == 0 || M == 0 || N == 0) {
    out = bgrad_unfused(a, b, of_b, out_meta[1].sizes);
    return true;
  }
  const blas::MatrixLayout la = lt_ready(a), lb = lt_ready(b);
  Tensor r = empty(out_meta[0].sizes, dt, dev);
  Tensor g = empty(out_meta[1].sizes, dt, dev);
  LtEpilogue e{of_b ? LtEpilogueKind::BGradA : LtEpilogueKind::BGradB};
  e.bias = g.data();
  try {
    lt_matmul_epilogue(dev, dt, lt_operand(b, lb, K, N, 0), lt_operand(a, la, M, K, 0), r.data(), N, M, N, e, what);
  } catch (const Error&) {
    out = bgrad_unfused(a, b, of_b, out_meta[1].sizes);  // no algorithm with this epilogue for the problem
    return true;
  }
  out = {r, g};
  return true;
}

}  // namespace

bool matmul_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name == "_gemm_epilogue" && out_meta.size() == 1 && covered(out_meta[0].dtype))
    return gemm_epilogue_kernel(inputs, attrs, out_meta, out);
  if (name == "_gemm_epilogue" && out_meta.size() == 2 && covered(out_meta[0].dtype) &&
      attrs.get_str("act") == "gelu_tanh_aux")
    return gelu_aux_kernel(inputs, out_meta, out);
  if (name == "_gemm_dgelu" && out_meta.size() == 1 && covered(out_meta[0].dtype))
    return gemm_dgelu_kernel(inputs, out_meta, out);
  if (name == "_gemm_bgrad" && out_meta.size() == 2 && covered(out_meta[0].dtype))
    return gemm_bgrad_kernel(inputs, attrs, out_meta, out);
  const bool add = name == "addmm" || name == "baddbmm";
  if (!add && name != "matmul" && name != "mm" && name != "bmm") return false;
  if (out_meta.size() != 1 || !covered(out_meta[0].dtype)) return false;
  const size_t k = add ? 1 : 0;
  Tensor a = inputs[k], b = inputs[k + 1];
  const int dev = (a.device().kind == Device::Kind::CUDA ? a : b).device().index;
  same_device(a, dev, op.name);
  same_device(b, dev, op.name);
  Tensor r = empty(out_meta[0].sizes, out_meta[0].dtype, dev);
  if (a.dim() == 1) a = as_row(a);
  if (b.dim() == 1) b = as_col(b);
  double alpha = 1.0, beta = 0.0;
  const void* bias = nullptr;
  if (add) {
    alpha = attrs.get_scalar("alpha").to_double();
    const double self_beta = attrs.get_scalar("beta").to_double();
    Tensor self = inputs[0];
    // A number (a constant in a compiled region) comes as a 0-d CPU tensor.
    if (self.device().kind == Device::Kind::CPU && self.dim() == 0)
      self = to_device(Tensor::scalar_tensor(self.item(), r.dtype()), dev);
    const int64_t N = b.sizes()[b.dim() - 1], K = a.sizes()[a.dim() - 1];
    if (self_beta != 0.0 && r.numel() > 0) {
      same_device(self, dev, op.name);
      // A bias row (linear's addmm): cuBLASLt's BIAS epilogue adds it in the
      // GEMM itself, so the output is written once.
      const bool bias_row = self_beta == 1.0 && name == "addmm" && self.dim() == 1 && self.sizes()[0] == N &&
                            (N == 1 || self.strides()[0] == 1) && K > 0 && alpha != 0.0 && self.dtype() == r.dtype() &&
                            reinterpret_cast<uintptr_t>(self.data()) % 16 == 0;
      if (bias_row) {
        bias = self.data();
      } else {
        run_kernel(get_op("copy_"), {r, self}, {});  // self broadcast into the result, scaled by the GEMM
        beta = self_beta;
      }
    }
  }
  const int64_t K = a.sizes()[a.dim() - 1];
  if (K == 0 || alpha == 0.0) {  // no product term: 0, or beta * self
    if (beta == 0.0 && bias == nullptr) {
      if (r.numel() > 0) {
        activate(dev);
        check(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(r.data()), 0, r.numel() * itemsize(r.dtype()),
                                      current_stream(dev)),
              op.name);
      }
    } else if (beta != 1.0) {
      Tensor s = run_kernel(get_op("mul"), {r, Tensor::wrapped_scalar(Scalar(beta))}, {})[0];
      run_kernel(get_op("copy_"), {r, s}, {});
    }
    out = {r};
    return true;
  }
  gemm(a, b, r, alpha, beta, bias, op.name);
  out = {r};
  return true;
}

}  // namespace tp::cuda
