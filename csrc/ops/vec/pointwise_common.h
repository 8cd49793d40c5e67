// Shared machinery of the pointwise operator families (pointwise_ops.cpp,
// unary_math_ops.cpp, binary_math_ops.cpp):
//   - drivers that run a contiguous-array kernel of vec_kernels.h over any
//     strided layout (contiguous rows go straight to the kernel; other rows
//     are gathered into a small buffer, computed, scattered back),
//   - scalar element loops for the integer and bool dtypes,
//   - the generic in-place variant `name_` of an out-of-place operator: the
//     operator computes straight into self when its result dtype is self's
//     dtype, else into a temporary that is cast into self (PyTorch's
//     "result type ... can't be cast to the desired output type" otherwise).
#pragma once
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ops/tensor_iterator.h"
#include "ops/type_promotion.h"
#include "ops/vec/vec_kernels.h"

namespace tp::pw {

// Elements per gather buffer for rows that are not contiguous.
constexpr int64_t kChunk = 256;

template <class T>
void run_unary_float(vec::UnaryFn fn, const Tensor& out, const Tensor& x, const vec::Params& p) {
  auto f = vec::unary_fn<T>(fn);
  TensorIterator it({out, x});
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      f(reinterpret_cast<const T*>(d[1]), reinterpret_cast<T*>(d[0]), n, p);
      return;
    }
    T buf[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      const char* px = d[1] + i0 * s[1];
      for (int64_t i = 0; i < m; ++i) buf[i] = *reinterpret_cast<const T*>(px + i * s[1]);
      f(buf, buf, m, p);
      char* po = d[0] + i0 * s[0];
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(po + i * s[0]) = buf[i];
    }
  });
}

template <class T>
void run_binary_float(vec::BinaryFn fn, const Tensor& out, const Tensor& a, const Tensor& b, const vec::Params& p) {
  auto f = vec::binary_fn<T>(fn);
  TensorIterator it({out, a, b});
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    constexpr int64_t z = sizeof(T);
    if (s[0] == z && (s[1] == z || s[1] == 0) && (s[2] == z || s[2] == 0)) {
      f(reinterpret_cast<const T*>(d[1]), s[1] / z, reinterpret_cast<const T*>(d[2]), s[2] / z,
        reinterpret_cast<T*>(d[0]), n, p);
      return;
    }
    T ba[kChunk], bb[kChunk], bo[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      const char* pa = d[1] + i0 * s[1];
      const char* pb = d[2] + i0 * s[2];
      for (int64_t i = 0; i < m; ++i) ba[i] = *reinterpret_cast<const T*>(pa + i * s[1]);
      for (int64_t i = 0; i < m; ++i) bb[i] = *reinterpret_cast<const T*>(pb + i * s[2]);
      f(ba, 1, bb, 1, bo, m, p);
      char* po = d[0] + i0 * s[0];
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(po + i * s[0]) = bo[i];
    }
  });
}

// out[i] = f(x[i]) with a contiguous fast path GCC can vectorize.
template <class Out, class In, class F>
void unary_loop(const Tensor& out, const Tensor& x, F f) {
  TensorIterator it({out, x});
  it.for_each([f](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      Out* o = reinterpret_cast<Out*>(d[0]);
      const In* a = reinterpret_cast<const In*>(d[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(d[0] + i * s[0]) = f(*reinterpret_cast<const In*>(d[1] + i * s[1]));
  });
}

// out[i] = f(a[i], b[i]) with contiguous and broadcast-scalar fast paths.
template <class Out, class T, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  TensorIterator it({out, a, b});
  it.for_each([f](char** d, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(d[0]);
    const T* x = reinterpret_cast<const T*>(d[1]);
    const T* y = reinterpret_cast<const T*>(d[2]);
    if (s[0] == sizeof(Out)) {
      if (s[1] == sizeof(T) && s[2] == sizeof(T)) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
        return;
      }
      if (s[1] == sizeof(T) && s[2] == 0) {
        const T yv = *y;
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(T)) {
        const T xv = *x;
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(d[0] + i * s[0]) =
          f(*reinterpret_cast<const T*>(d[1] + i * s[1]), *reinterpret_cast<const T*>(d[2] + i * s[2]));
  });
}

// Integer arithmetic that wraps like PyTorch's (through uint64_t: signed
// overflow would be undefined behaviour).
inline int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

// The dtype a float-valued operator (exp, sin, true division, ...) computes
// and returns for an input dtype: integers and bool -> the default float.
inline DType float_result(DType t) { return is_floating(t) ? t : default_float_dtype(); }

// ---- shared inference pieces ----
Shape broadcast_all(const std::vector<TensorMeta>& in, const char* op);
// Raises PyTorch's error for a bool/integer operand of a bitwise-only or
// float-only operator, naming the operator and the dtypes.
[[noreturn]] void throw_dtype(const char* op, const std::vector<TensorMeta>& in, const char* what);
// Integer division by zero: PyTorch raises RuntimeError("ZeroDivisionError").
[[noreturn]] void throw_zero_division(const char* op);

// ---- in-place variants ----
// Writes the operator's result for inputs `in` into `out` (out has the
// inferred shape and dtype; it may be strided and may be input 0 itself).
using IntoFn = void (*)(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& attrs);

template <IntoFn Into>
std::vector<Tensor> out_of_place_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  Into(op, out, in, attrs);
  return {out};
}

std::vector<TensorMeta> inplace_infer_checked(const OpDef& op, const std::vector<TensorMeta>& in,
                                              const std::vector<TensorMeta>& result);
std::vector<Tensor> inplace_run(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om, IntoFn into, InferFn infer);

template <InferFn Infer>
std::vector<TensorMeta> inplace_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return inplace_infer_checked(op, in, Infer(op, in, attrs));
}
template <IntoFn Into, InferFn Infer>
std::vector<Tensor> inplace_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  return inplace_run(op, in, attrs, om, Into, Infer);
}

// Registers `name` (out of place) and, when `inplace_schema` is given, `name_`.
// A `decompose` (into operators the Stax lowering knows) makes the out-of-place
// operator kComposite; eager calls still run its kernel.
template <IntoFn Into, InferFn Infer>
void register_pointwise(const char* name, const char* schema, int num_inputs, BackwardFn backward,
                        const char* inplace_name = nullptr, const char* inplace_schema = nullptr,
                        uint32_t extra_tags = 0, DecomposeFn decompose = nullptr) {
  const uint32_t tags = kPointwise | extra_tags | (decompose ? kComposite : 0u);
  register_op({.name = name, .schema = schema, .tags = tags, .num_inputs = num_inputs, .infer = Infer,
               .cpu = &out_of_place_cpu<Into>, .backward = backward, .decompose = decompose, .pointwise_fn = name});
  if (inplace_name)
    register_op({.name = inplace_name, .schema = inplace_schema, .tags = kInplace, .num_inputs = num_inputs,
                 .infer = &inplace_infer<Infer>, .cpu = &inplace_cpu<Into, Infer>});
}

// Floor (floor = true) or trunc division rounded to `narrow` (float16 /
// bfloat16) after every step, as PyTorch's CPU kernels for those dtypes do (one
// rounding of the float32 quotient differs from it in about 1% of cases). The
// operands are float32 tensors holding the values; a Python-number dividend is
// rounded to `narrow` first, as PyTorch casts it. Used when attrs carry
// kNarrowDTypeAttr and the divisor is not 0-d: PyTorch divides by a 0-d tensor
// or a Python number in float32 and rounds once, as the plain path does.
void div_round_narrow(const Tensor& out, const Tensor& a, const Tensor& b, bool floor, DType narrow);
inline bool rounds_narrow(const std::vector<Tensor>& in) { return in[1].dim() > 0; }

}  // namespace tp::pw
