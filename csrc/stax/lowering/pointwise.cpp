// Pointwise lowerings: arithmetic, comparisons, logical operators, where,
// masked_fill, dtype conversion and the libm-backed float math. Each composes
// its operands' compute functions; nothing is written to memory.
#include <algorithm>
#include <cmath>
#include <optional>

#include "ops/type_promotion.h"
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

// The operands at the output index (broadcast), each converted to `dtype`.
std::vector<Expr> operands_at(const std::vector<Value>& ins, const Index& idx, DType dtype) {
  std::vector<Expr> args;
  args.reserve(ins.size());
  for (auto& x : ins) args.push_back(cast(x.at(broadcast_index(idx, x.sizes)), dtype));
  return args;
}

// Integer division with PyTorch's rounding (CUDA regions only: a zero divisor
// traps on the CPU, where eager raises instead). In a narrow type the C
// operators compute in int and the result wraps at its register's width
// (int8 -128 / -1 is -128, as in PyTorch). C's `/` truncates and `%`
// keeps the dividend's sign (fmod); floor division steps the quotient down and
// remainder moves the rest to the divisor's sign when the signs differ.
enum class IntDiv { Trunc, Floor, Fmod, Remainder };
Expr int_division(IntDiv kind, const Expr& a, const Expr& b, DType dt) {
  const Expr q = call(CallOp::Div, {a, b}, dt);
  if (kind == IntDiv::Trunc) return q;
  const Expr zero = constant(Scalar(int64_t{0}), dt), one = constant(Scalar(int64_t{1}), dt);
  const Expr r = call(CallOp::Sub, {a, call(CallOp::Mul, {q, b}, dt)}, dt);
  if (kind == IntDiv::Fmod) return r;
  const Expr differ = call(CallOp::And,
                           {call(CallOp::Ne, {r, zero}, DType::Bool),
                            call(CallOp::Ne, {call(CallOp::Lt, {r, zero}, DType::Bool),
                                              call(CallOp::Lt, {b, zero}, DType::Bool)}, DType::Bool)},
                           DType::Bool);
  if (kind == IntDiv::Floor) return where(differ, call(CallOp::Sub, {q, one}, dt), q);
  return where(differ, call(CallOp::Add, {r, b}, dt), r);
}

// Floating division rounded to an integer (div's "trunc" and "floor" modes,
// floor_divide, //), eager's algorithm (ops/vec/vec_impl.h floor_family) in
// IR operations: trunc(x / y); floor from the exact fmod: q = (x - r) / y,
// stepped down where r and y have different signs, then floored and moved up
// when the quotient lies more than 0.5 above its floor (so that a quotient one
// ulp below an integer does not lose 1). A zero quotient takes the sign of
// x / y (-0.0 for 0 / -1 or -1e-30 / 1e30), a zero divisor gives x / y itself
// (+-inf or NaN), NaN and inf operands give NaN.
// 16-bit floats (`dt`) compute in float32 (`ct`) with every intermediate
// rounded to dt, as PyTorch's 16-bit arithmetic rounds each operation (its
// trunc of 825.95 in float16 is 826: the quotient rounds first); the CUDA
// printer's fast 16-bit division is never used here.
Expr float_division(bool floor, const Expr& x, const Expr& y, DType dt, DType ct) {
  auto k = [ct](double v) { return constant(Scalar(v), ct); };
  auto rnd = [dt, ct](const Expr& e) { return dt == ct ? e : cast(cast(e, dt), ct); };
  auto c2 = [](CallOp op, const Expr& a, const Expr& b, DType t) { return call(op, {a, b}, t); };
  const Expr q_ieee = rnd(c2(CallOp::Div, x, y, ct));
  if (!floor) return call(CallOp::Trunc, {q_ieee}, ct);
  const Expr zero = k(0.0);
  const Expr r = c2(CallOp::Fmod, x, y, ct);  // exact, so representable in dt
  const Expr adjust = c2(CallOp::And, c2(CallOp::Ne, r, zero, DType::Bool),
                         c2(CallOp::Ne, c2(CallOp::Lt, y, zero, DType::Bool), c2(CallOp::Lt, r, zero, DType::Bool),
                            DType::Bool),
                         DType::Bool);
  const Expr q0 = rnd(c2(CallOp::Div, rnd(c2(CallOp::Sub, x, r, ct)), y, ct));
  const Expr q = where(adjust, rnd(c2(CallOp::Sub, q0, k(1.0), ct)), q0);
  const Expr fq = call(CallOp::Floor, {q}, ct);
  const Expr rounded = where(c2(CallOp::Gt, rnd(c2(CallOp::Sub, q, fq, ct)), k(0.5), DType::Bool),
                             rnd(c2(CallOp::Add, fq, k(1.0), ct)), fq);
  // copysign(0, x / y): negative for a negative quotient and for -0.0 (whose
  // reciprocal is -inf).
  const Expr negative = c2(CallOp::Or, c2(CallOp::Lt, q_ieee, zero, DType::Bool),
                           c2(CallOp::Lt, c2(CallOp::Div, k(1.0), q_ieee, ct), zero, DType::Bool), DType::Bool);
  const Expr signed_zero = where(negative, k(-0.0), zero);
  return where(c2(CallOp::Eq, y, zero, DType::Bool), q_ieee,
               where(c2(CallOp::Ne, q, zero, DType::Bool), rounded, signed_zero));
}

LoweringFn integer_division(IntDiv kind) {
  return [kind](LoweringContext& c) {
    const DType dt = c.out_dtype();
    if (c.inputs().size() != 2) c.fail("unexpected operand count");
    if (is_floating(dt) && (kind == IntDiv::Floor || kind == IntDiv::Trunc)) {
      const DType ct = dt == DType::Float64 ? dt : DType::Float32;
      return c.pointwise([ins = c.inputs(), kind, dt, ct](const Index& idx) {
        std::vector<Expr> a = operands_at(ins, idx, ct);
        return cast(float_division(kind == IntDiv::Floor, a[0], a[1], dt, ct), dt);
      });
    }
    if (is_floating(dt) || dt == DType::Bool) c.fail("only integer division has a rule");
    if (!c.region().cuda) c.fail("integer division is generated for CUDA regions only");
    return c.pointwise([ins = c.inputs(), kind, dt](const Index& idx) {
      std::vector<Expr> a = operands_at(ins, idx, dt);
      return int_division(kind, a[0], a[1], dt);
    });
  };
}

// add/sub/mul/div/maximum/minimum, unary math, comparisons: computed in the
// promoted operand type; comparisons yield bool. A comparison's operands meet
// in PyTorch's result_type (tensor, 0-d tensor and Python-number classes):
// `bool_tensor == 2` compares in int64, never in the tensor's own bool (which
// would turn 2 into true).
LoweringFn arithmetic(CallOp fn) {
  return [fn](LoweringContext& c) {
    const auto& in = c.inputs();
    DType compute = c.out_dtype();
    if (is_comparison(fn)) {
      std::vector<PromotionOperand> operands;
      for (size_t i = 0; i < in.size(); ++i) {
        // A graph value that is a Python number (a lifted float input, `1 - t`) ranks as one.
        const auto* arg = i < c.node().args.size() ? std::get_if<graph::Node*>(&c.node().args[i]) : nullptr;
        const bool number = arg && *arg && (*arg)->meta.wrapped_number;
        operands.push_back(c.constant(i) ? PromotionOperand{c.constant(i)->natural_dtype(), 0, true}
                                         : PromotionOperand{in[i].dtype, static_cast<int64_t>(in[i].sizes.size()), number});
      }
      // Python numbers only (`t > 0.5` of a lifted float): compared as Python does, at full width.
      std::optional<PythonNumberArithmetic> numbers;
      if (std::all_of(operands.begin(), operands.end(), [](const PromotionOperand& o) { return o.wrapped; }))
        numbers.emplace();
      compute = result_type(operands);
    }
    // add/sub(x, y, alpha=a) is x +- a*y; div's rounding modes: floats
    // everywhere, integers in CUDA regions.
    if (!c.attrs().is_none("rounding_mode")) {
      const std::string& mode = c.attrs().get_str("rounding_mode");
      if (fn != CallOp::Div || (mode != "floor" && mode != "trunc")) c.fail("div with rounding_mode");
      return integer_division(mode == "floor" ? IntDiv::Floor : IntDiv::Trunc)(c);
    }
    std::optional<Scalar> alpha;
    if (!c.attrs().is_none("alpha") && c.attrs().get_double("alpha") != 1.0) alpha = c.attrs().get_scalar("alpha");
    DType result = is_comparison(fn) ? DType::Bool : c.out_dtype();
    return c.pointwise([ins = in, fn, compute, result, alpha](const Index& idx) {
      std::vector<Expr> args = operands_at(ins, idx, compute);
      if (alpha) args[1] = call(CallOp::Mul, {args[1], constant(*alpha, compute)}, compute);
      return call(fn, std::move(args), result);
    });
  };
}

// Float math backed by libm in the generated code: computed in the result type
// (a FloatValued op on integers computes in the default float, as eager).
// Integer floor/round/..., fmod/remainder stay eager.
LoweringFn libm(CallOp fn) {
  return [fn](LoweringContext& c) {
    const std::string op = c.op();
    if (static_cast<int>(c.inputs().size()) != info(fn).arity) c.fail("unexpected operand count");
    if ((fn == CallOp::Fmod || fn == CallOp::Remainder) && !is_floating(c.out_dtype()))
      return integer_division(fn == CallOp::Fmod ? IntDiv::Fmod : IntDiv::Remainder)(c);
    if (!is_floating(c.out_dtype())) c.fail("integer " + op + " has no rule yet");
    if (fn == CallOp::Round && !c.attrs().is_none("decimals") && c.attrs().get_int("decimals") != 0)
      c.fail("round with decimals");
    DType dt = c.out_dtype();
    return c.pointwise([ins = c.inputs(), fn, dt](const Index& idx) { return call(fn, operands_at(ins, idx, dt), dt); });
  };
}

// Logical operators read every operand as bool (nonzero = true; NaN is true).
LoweringFn logical(CallOp fn) {
  return [fn](LoweringContext& c) {
    DType dt = c.out_dtype();
    return c.pointwise([ins = c.inputs(), fn, dt](const Index& idx) {
      return cast(call(fn, operands_at(ins, idx, DType::Bool), DType::Bool), dt);
    });
  };
}

// bitwise_and/or/xor/not on bool (the logical operators) or integer tensors;
// shifts (no bool form: on_bool is the shift too) on integers in CUDA regions.
LoweringFn bitwise(CallOp on_bool, CallOp on_int) {
  return [on_bool, on_int](LoweringContext& c) {
    DType dt = c.out_dtype();
    if (dt != DType::Bool && !is_integral(dt, false)) c.fail("bitwise operators need bool or integer tensors");
    const bool shift = on_int == CallOp::Shl || on_int == CallOp::Shr;
    if (shift && (dt == DType::Bool || !c.region().cuda)) c.fail("shifts are generated for CUDA regions only");
    CallOp fn = dt == DType::Bool ? on_bool : on_int;
    return c.pointwise([ins = c.inputs(), fn, dt](const Index& idx) { return call(fn, operands_at(ins, idx, dt), dt); });
  };
}

Value lower_where(LoweringContext& c) {
  DType dt = c.out_dtype();
  return c.pointwise([ins = c.inputs(), dt](const Index& idx) {
    Expr cond = cast(ins[0].at(broadcast_index(idx, ins[0].sizes)), DType::Bool);
    Expr a = cast(ins[1].at(broadcast_index(idx, ins[1].sizes)), dt);
    Expr b = cast(ins[2].at(broadcast_index(idx, ins[2].sizes)), dt);
    return where(cond, a, b);
  });
}

// masked_fill(self, mask, value): the value (a 0-d tensor or a number)
// converted to self's dtype where the mask is true; the result has the
// broadcast shape of self and mask.
Value lower_masked_fill(LoweringContext& c) {
  DType dt = c.out_dtype();
  Value self = c.input(0), mask = c.input(1), value;
  if (c.op() == "masked_fill.Tensor") {
    value = c.input(2);
  } else {
    Scalar s = c.attrs().get_scalar("value");
    value.dtype = dt;
    value.at = [s, dt](const Index&) { return cast(constant(s, s.is_float() ? DType::Float64 : s.natural_dtype()), dt); };
  }
  return c.pointwise([self, mask, value, dt](const Index& idx) {
    Expr cond = cast(mask.at(broadcast_index(idx, mask.sizes)), DType::Bool);
    Expr a = cast(value.at(broadcast_index(idx, value.sizes)), dt);
    Expr b = cast(self.at(broadcast_index(idx, self.sizes)), dt);
    return where(cond, a, b);
  });
}

// isnan / isinf / isfinite: comparisons in the operand's float type (never
// true for integers: the value is then a constant).
enum class Pred { NaN, Inf, Finite };
LoweringFn predicate(Pred p) {
  return [p](LoweringContext& c) {
    const Value& x = c.input(0);
    if (!is_floating(x.dtype)) {
      bool v = p == Pred::Finite;
      return c.pointwise([v](const Index&) { return constant(Scalar(v), DType::Bool); });
    }
    DType ft = x.dtype;
    return c.pointwise([x, p, ft](const Index& idx) {
      Expr v = x.at(idx);
      Expr inf = constant(Scalar(static_cast<double>(INFINITY)), ft);
      switch (p) {
        case Pred::NaN: return call(CallOp::Ne, {v, v}, DType::Bool);
        case Pred::Inf: return call(CallOp::Eq, {call(CallOp::Abs, {v}, ft), inf}, DType::Bool);
        case Pred::Finite: break;
      }
      return call(CallOp::Lt, {call(CallOp::Abs, {v}, ft), inf}, DType::Bool);  // false for NaN
    });
  };
}

Value lower_convert(LoweringContext& c) {
  DType dt = c.out_dtype();
  return c.pointwise([x = c.input(0), dt](const Index& idx) { return cast(x.at(idx), dt); });
}

// _value_check(failed, self, message): self's value behind a Guard on the
// 0-d flag (its reduction is an earlier node), so the call raises
// ValueError(message) after the kernels ran. The condition is one value for
// every element: vector code checks it once per vector (schedule.cpp).
Value lower_value_check(LoweringContext& c) {
  const Value& failed = c.input(0);
  const Value& x = c.input(1);
  if (!failed.sizes.empty()) c.fail("a failure flag that is not 0-d");
  int code = c.check_code(c.attrs().get_str("message"), /*value_error=*/true);
  return c.pointwise([failed, x, code](const Index& idx) {
    return guard(call(CallOp::Not, {failed.at(Index{})}, DType::Bool), x.at(idx), code);
  });
}

}  // namespace

void register_pointwise_lowerings(LoweringTable& t) {
  const std::pair<const char*, CallOp> arith[] = {
      {"add", CallOp::Add},   {"sub", CallOp::Sub},         {"mul", CallOp::Mul},         {"div", CallOp::Div},
      {"maximum", CallOp::Max}, {"minimum", CallOp::Min},   {"neg", CallOp::Neg},         {"relu", CallOp::Relu},
      {"abs", CallOp::Abs},   {"exp", CallOp::Exp},         {"log", CallOp::Log},         {"sqrt", CallOp::Sqrt},
      {"tanh", CallOp::Tanh}, {"sigmoid", CallOp::Sigmoid}, {"eq", CallOp::Eq},           {"ne", CallOp::Ne},
      {"lt", CallOp::Lt},     {"le", CallOp::Le},           {"gt", CallOp::Gt},           {"ge", CallOp::Ge}};
  for (auto& [name, fn] : arith) t[name] = arithmetic(fn);
  // Every libm-backed IR operator lowers the graph operator of the same name.
  for (int i = 0; i <= static_cast<int>(CallOp::Pow); ++i) {
    CallOp fn = static_cast<CallOp>(i);
    if (is_libm(fn)) t[name(fn)] = libm(fn);
  }
  t["logical_and"] = logical(CallOp::And);
  t["logical_or"] = logical(CallOp::Or);
  t["logical_xor"] = logical(CallOp::Xor);
  t["logical_not"] = logical(CallOp::Not);
  t["isnan"] = predicate(Pred::NaN);
  t["isinf"] = predicate(Pred::Inf);
  t["isfinite"] = predicate(Pred::Finite);
  t["bitwise_and"] = bitwise(CallOp::And, CallOp::BitAnd);
  t["bitwise_or"] = bitwise(CallOp::Or, CallOp::BitOr);
  t["bitwise_xor"] = bitwise(CallOp::Xor, CallOp::BitXor);
  t["bitwise_not"] = bitwise(CallOp::Not, CallOp::BitNot);
  t["bitwise_left_shift"] = bitwise(CallOp::Shl, CallOp::Shl);
  t["bitwise_right_shift"] = bitwise(CallOp::Shr, CallOp::Shr);
  t["floor_divide"] = integer_division(IntDiv::Floor);
  t["where"] = lower_where;
  t["masked_fill.Tensor"] = lower_masked_fill;
  t["masked_fill.Scalar"] = lower_masked_fill;
  t["to"] = lower_convert;
  t["clone"] = lower_convert;
  t["_value_check"] = lower_value_check;
}

}  // namespace tp::stax
