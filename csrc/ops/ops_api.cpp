// The C++ operator API (ops.h): every function is a call through the
// dispatcher, so C++ callers are traced and differentiated like Python ones.
// Composite conveniences (reshape, transpose, squeeze, sum_to, ...) are built
// here from the registered operators.
#include "ops/ops.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "ops/dispatch.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"

namespace tp::ops {
namespace {

AttrValue optional_int(std::optional<int64_t> v) { return v ? AttrValue(*v) : AttrValue(std::monostate{}); }
AttrValue optional_dtype(std::optional<DType> v) { return v ? AttrValue(*v) : AttrValue(std::monostate{}); }
}  // namespace

// ---- pointwise ----
Tensor add(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("add"), {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("sub"), {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("mul"), {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("div"), {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("maximum"), {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("minimum"), {a, b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("eq"), {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("ne"), {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("lt"), {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("le"), {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("gt"), {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("ge"), {a, b}); }
Tensor neg(const Tensor& x) { return call_op1(TP_OP("neg"), {x}); }
Tensor relu(const Tensor& x) { return call_op1(TP_OP("relu"), {x}); }
Tensor abs(const Tensor& x) { return call_op1(TP_OP("abs"), {x}); }
Tensor exp(const Tensor& x) { return call_op1(TP_OP("exp"), {x}); }
Tensor log(const Tensor& x) { return call_op1(TP_OP("log"), {x}); }
Tensor sqrt(const Tensor& x) { return call_op1(TP_OP("sqrt"), {x}); }
Tensor tanh(const Tensor& x) { return call_op1(TP_OP("tanh"), {x}); }
Tensor sigmoid(const Tensor& x) { return call_op1(TP_OP("sigmoid"), {x}); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call_op1(TP_OP("where"), {cond, a, b});
}

// ---- reductions ----
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op1(TP_OP("sum"), {x}, {{"dim", dims}, {"keepdim", keepdim}});
}
Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op1(TP_OP("amax"), {x}, {{"dim", dims}, {"keepdim", keepdim}});
}
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op1(TP_OP("mean"), {x}, {{"dim", dims}, {"keepdim", keepdim}});
}
Tensor softmax(const Tensor& x, int64_t dim) { return call_op1(TP_OP("softmax"), {x}, {{"dim", dim}}); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  const int64_t nd = x.dim(), ns = static_cast<int64_t>(shape.size()), lead = nd - ns;
  TP_CHECK(lead >= 0, ValueError, "sum_to: shape ", shape_str(shape), " is not broadcastable from ",
           shape_str(x.sizes()));
  Dims dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t have = x.sizes()[lead + i];
    if (shape[i] == 1 && have != 1) dims.push_back(lead + i);
    else
      TP_CHECK(shape[i] == have, ValueError, "sum_to: shape ", shape_str(shape), " is not broadcastable from ",
               shape_str(x.sizes()));
  }
  if (dims.empty()) return x;
  return view(sum(x, dims, /*keepdim=*/true), shape);
}

// ---- linear algebra ----
Tensor matmul(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("matmul"), {a, b}); }

// ---- views ----
Tensor view(const Tensor& x, const Shape& shape) { return call_op1(TP_OP("view"), {x}, {{"size", shape}}); }

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape size = infer_view_size(shape, x.numel(), "reshape");
  if (view_strides(x.sizes(), x.strides(), size)) return view(x, size);
  // A copy: no view of anything the caller has (Tensor._base None, as PyTorch).
  Tensor r = view(contiguous(x), size);
  r.impl()->view_base.reset();
  r.impl()->base_py.reset();
  return r;
}

Tensor permute(const Tensor& x, const Dims& dims) { return call_op1(TP_OP("permute"), {x}, {{"dims", dims}}); }

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  const int64_t nd = x.dim();
  d0 = wrap_dim(d0, nd, "transpose");
  d1 = wrap_dim(d1, nd, "transpose");
  Dims perm(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) perm[i] = i;
  if (nd > 0) std::swap(perm[d0], perm[d1]);
  return permute(x, perm);
}

Tensor expand(const Tensor& x, const Shape& shape) { return call_op1(TP_OP("expand"), {x}, {{"size", shape}}); }

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  return call_op1(TP_OP("slice"), {x},
                  {{"dim", dim}, {"start", optional_int(start)}, {"end", optional_int(end)}, {"step", step}});
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return call_op1(TP_OP("select"), {x}, {{"dim", dim}, {"index", index}});
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.sizes();
  s.insert(s.begin() + d, 1);
  return view(x, s);
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  Shape s;
  if (dim) {
    int64_t d = wrap_dim(*dim, x.dim(), "squeeze");
    s = x.sizes();
    if (x.dim() > 0 && s[d] == 1) s.erase(s.begin() + d);
  } else {
    for (auto v : x.sizes())
      if (v != 1) s.push_back(v);
  }
  return view(x, s);
}

// ---- copies and conversions ----
Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return call_op1(TP_OP("to"), {x}, {{"dtype", dtype}});
}
Tensor clone(const Tensor& x) { return call_op1(TP_OP("clone"), {x}); }
Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

// ---- in-place ----
Tensor& add_(Tensor& x, const Tensor& y) {
  call_op(TP_OP("add_"), {x, y});
  return x;
}
Tensor& sub_(Tensor& x, const Tensor& y) {
  call_op(TP_OP("sub_"), {x, y});
  return x;
}
Tensor& mul_(Tensor& x, const Tensor& y) {
  call_op(TP_OP("mul_"), {x, y});
  return x;
}
Tensor& div_(Tensor& x, const Tensor& y) {
  call_op(TP_OP("div_"), {x, y});
  return x;
}
Tensor& fill_(Tensor& x, const Scalar& v) {
  call_op(TP_OP("fill_"), {x}, {{"value", v}});
  return x;
}
Tensor& zero_(Tensor& x) { return fill_(x, Scalar(int64_t{0})); }
Tensor& copy_(Tensor& dst, const Tensor& src) {
  call_op(TP_OP("copy_"), {dst, src});
  return dst;
}

// ---- factories ----
Tensor empty(const Shape& shape, DType dtype) {
  return call_op1(TP_OP("empty"), {}, {{"size", shape}, {"dtype", dtype}});
}
Tensor zeros(const Shape& shape, DType dtype) {
  return call_op1(TP_OP("zeros"), {}, {{"size", shape}, {"dtype", dtype}});
}
Tensor ones(const Shape& shape, DType dtype) { return call_op1(TP_OP("ones"), {}, {{"size", shape}, {"dtype", dtype}}); }
Tensor full(const Shape& shape, const Scalar& value, std::optional<DType> dtype) {
  return call_op1(TP_OP("full"), {}, {{"size", shape}, {"fill_value", value}, {"dtype", optional_dtype(dtype)}});
}
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  return call_op1(TP_OP("arange"), {},
                  {{"start", start}, {"end", end}, {"step", step}, {"dtype", optional_dtype(dtype)}});
}
Tensor randn(const Shape& shape, DType dtype) {
  return call_op1(TP_OP("randn"), {}, {{"size", shape}, {"dtype", dtype}});
}
Tensor rand(const Shape& shape, DType dtype) { return call_op1(TP_OP("rand"), {}, {{"size", shape}, {"dtype", dtype}}); }
void manual_seed(uint64_t seed) { generator_manual_seed(seed); }

}  // namespace tp::ops
