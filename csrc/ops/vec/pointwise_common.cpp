#include "ops/vec/pointwise_common.h"

#include <cmath>

#include "core/half.h"

namespace tp::pw {

Shape broadcast_all(const std::vector<TensorMeta>& in, const char* op) {
  Shape s;
  bool first = true;
  for (const auto& m : in) {
    if (!m.defined) continue;
    s = first ? m.sizes : broadcast_shapes(s, m.sizes, op);
    first = false;
  }
  return s;
}

void throw_dtype(const char* op, const std::vector<TensorMeta>& in, const char* what) {
  std::string dts;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].defined) dts += std::string(dts.empty() ? "" : " and ") + dtype_name(in[i].dtype);
  throw TypeError(str(op, ": ", what, " (got dtype ", dts, ")"));
}

void throw_zero_division(const char* op) {
  // The operator leads (it is what the binding's renaming reads as the raiser: with
  // "ZeroDivisionError: " first, `a // 0` said "floor_divide: floor_divide: integer division by
  // zero (in ZeroDivisionError)"); PyTorch's word for it stays in the message.
  throw Error(str(op, ": integer division by zero (ZeroDivisionError)"));
}

namespace {
void check_writable(const TensorMeta& self, const char* op) {
  for (size_t d = 0; d < self.sizes.size(); ++d)
    TP_CHECK(self.sizes[d] <= 1 || self.strides[d] != 0, Error, op,
             ": unsupported operation: more than one element of the written-to tensor (shape ",
             shape_str(self.sizes), ", strides ", shape_str(self.strides),
             ") refers to a single memory location; clone() it first");
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.offset() == b.offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}
}  // namespace

std::vector<TensorMeta> inplace_infer_checked(const OpDef& op, const std::vector<TensorMeta>& in,
                                              const std::vector<TensorMeta>& result) {
  const TensorMeta& self = in[0];
  const TensorMeta& r = result[0];
  TP_CHECK(r.sizes == self.sizes, ValueError, op.name, ": output with shape ", shape_str(self.sizes),
           " doesn't match the broadcast shape ", shape_str(r.sizes));
  TP_CHECK(can_cast(r.dtype, self.dtype), TypeError, op.name, ": result type ", dtype_name(r.dtype),
           " can't be cast to the desired output type ", dtype_name(self.dtype));
  check_writable(self, op.name);
  return {self};
}

std::vector<Tensor> inplace_run(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om, IntoFn into, InferFn infer) {
  const Tensor& self = in[0];
  std::vector<TensorMeta> metas;
  for (const auto& t : in) {
    if (t.defined()) {
      metas.push_back(t.meta());
    } else {
      TensorMeta m;
      m.defined = false;
      metas.push_back(m);
    }
  }
  const TensorMeta r = infer(op, metas, attrs)[0];
  // Operands other than self that share memory with it in any other way than
  // being the same view would be overwritten before they are read.
  std::vector<Tensor> args = in;
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i].defined() && may_overlap(self, args[i]) && !same_view(self, args[i])) args[i] = contiguous_copy(args[i]);
  if (r.dtype == self.dtype()) {
    into(op, self, args, attrs);
  } else {
    Tensor tmp = Tensor::empty(self.sizes(), r.dtype);
    into(op, tmp, args, attrs);
    copy_into(self, tmp);
  }
  (void)om;
  return {self};
}

namespace {
template <class H>
float narrow_round(float v) {
  return static_cast<float>(H(v));
}

// Python's floor division step by step: the quotient of (a - fmod(a, b)) / b,
// one less when the remainder's sign differs from b's, then the nearest
// integer below it (up when the fraction left exceeds one half).
template <class H>
float floor_div_narrow(float a, float b) {
  auto r = narrow_round<H>;
  if (b == 0) return r(a / b);
  const float mod = r(std::fmod(a, b));
  float div = r(r(a - mod) / b);
  if (mod != 0 && ((b < 0) != (mod < 0))) div = r(div - 1);
  if (div == 0) return std::copysign(0.0f, r(a / b));
  float fl = std::floor(div);
  if (r(div - fl) > 0.5f) fl = r(fl + 1);
  return fl;
}
}  // namespace

void div_round_narrow(const Tensor& out, const Tensor& a, const Tensor& b, bool floor, DType narrow) {
  const bool half = narrow == DType::Float16;
  binary_loop<float, float>(out, a, b, [floor, half](float x, float y) -> float {
    x = half ? narrow_round<Half>(x) : narrow_round<BFloat16>(x);
    y = half ? narrow_round<Half>(y) : narrow_round<BFloat16>(y);
    if (floor) return half ? floor_div_narrow<Half>(x, y) : floor_div_narrow<BFloat16>(x, y);
    return std::trunc(half ? narrow_round<Half>(x / y) : narrow_round<BFloat16>(x / y));
  });
}

}  // namespace tp::pw
