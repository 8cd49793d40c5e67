// tp.SymInt (dynamic shapes, Section 10.2): what Tensor.shape / size() / numel()
// give for a symbolic dim while a symbolic capture runs. It holds the size's
// expression over the capture's symbols and its hint (the example's value).
// Arithmetic with ints and SymInts stays symbolic; a comparison is decided at the
// hints and recorded as a shape guard with the user's source line; anything that
// needs a plain int (__index__, __int__, hashing, true division, formatting)
// specializes: it records `expr == hint`, which fixes the symbols it mentions.
// It is not an int subclass on purpose: CPython's PyNumber_Index returns int
// subclasses without calling __index__, so specialization could not be seen.
// Outside a capture (a SymInt kept past it) it behaves as its hint.
#include <nanobind/operators.h>

#include <cmath>

#include "common.h"
#include "graph/tracer.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

struct SymInt {
  graph::SymDim expr;
  int64_t hint = 0;
};

using graph::GuardRel;
using graph::SymDim;

bool live() { return graph::symbolic_tracing(); }

// Automatic dynamic ints (compile.cpp, PyCompiled::IntArg): while a capture
// runs, each int argument made symbolic is known by its expression and by a 0-d
// int64 wrapped-number tensor input holding its value. A SymInt used where a
// tensor operand goes (`x + pos`, `pos * x`) is that input (plus a constant),
// so it stays a graph input promoted as a Python int, not a specialization;
// arithmetic with a float (`0.01 * pos`, `pos / 2`) gives a 0-d tensor of the
// graph in place of the Python float.
struct IntValue {
  SymDim size;  // the size symbol that carries it: value + 2
  Tensor value;
};
thread_local std::vector<IntValue> t_int_values;

// The tensor of an affine expression a * value + c of one int argument's
// value (`pos`, `pos + 1`, `2 * pos - 1`); nullopt for anything else (a
// floordiv, two arguments), which then specializes as any SymInt does.
std::optional<Tensor> value_for(const SymDim& e) {
  if (t_int_values.empty() || !live()) return std::nullopt;
  for (const IntValue& iv : t_int_values) {
    int64_t a = 1, b = 0;  // e = a * size + b
    SymDim r = stax::ir::simplify(e - iv.size);
    if (!r.is_const()) {
      if (!iv.size.is_size()) continue;
      const int id = stax::ir::size_var_id(iv.size.size_index());
      auto at = [&](int64_t x) { return stax::ir::simplify(stax::ir::substitute(e, {{id, SymDim(x)}})); };
      SymDim e2 = at(2), e3 = at(3);
      if (!e2.is_const() || !e3.is_const()) continue;
      a = e3.const_value() - e2.const_value();
      r = stax::ir::simplify(e - SymDim(a) * iv.size);
      if (!r.is_const()) continue;  // not affine (the simplifier's normal form decides)
    }
    b = r.const_value();
    // size = value + 2: e = a * value + (2a + b), computed in the graph from the input.
    Tensor t = iv.value;
    if (a != 1) t = ops::mul(t, Tensor::wrapped_scalar(Scalar(a)));
    if (const int64_t c = 2 * a + b; c != 0) t = ops::add(t, Tensor::wrapped_scalar(Scalar(c)));
    return t;
  }
  return std::nullopt;
}

// `a OP b` with a float b as the graph's 0-d tensor (nullopt: no value input).
std::optional<nb::object> float_op(const SymDim& a, nb::handle b, bool reflected, const char* pyop) {
  if (!PyFloat_Check(b.ptr())) return std::nullopt;
  auto t = value_for(a);
  if (!t) return std::nullopt;
  nb::object self = nb::cast(*t);
  nb::object op = nb::module_::import_("operator").attr(pyop);
  nb::object r = reflected ? op(b, self) : op(self, b);
  // Returned by the function as it is, it is a float again (as eager's is).
  if (nb::isinstance<Tensor>(r)) note_capture_item(nb::cast<Tensor>(r));
  return r;
}

int64_t specialize(const SymInt& s) {
  if (!live()) return s.hint;
  return graph::specialize_shape(s.expr, python_source_line());
}

// The other operand as (expr, hint); nullopt when it is not an int / SymInt.
std::optional<std::pair<SymDim, int64_t>> operand(nb::handle o) {
  if (nb::isinstance<SymInt>(o)) {
    const SymInt& s = nb::cast<const SymInt&>(o);
    return std::make_pair(s.expr, s.hint);
  }
  if (PyLong_Check(o.ptr()) && !PyBool_Check(o.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
    if (overflow) return std::nullopt;
    return std::make_pair(SymDim(static_cast<int64_t>(v)), static_cast<int64_t>(v));
  }
  return std::nullopt;
}

nb::object result(const SymDim& e, int64_t hint) {
  SymDim r = stax::ir::simplify(e);
  if (r.is_const()) return nb::int_(r.const_value());
  return nb::cast(SymInt{r, hint});
}

nb::object binary(const SymInt& a, nb::handle b, bool reflected, const char* pyop,
                  SymDim (*sym)(SymDim, SymDim), int64_t (*val)(int64_t, int64_t)) {
  auto o = operand(b);
  if (!o) {
    if (auto r = float_op(a.expr, b, reflected, pyop)) return *r;
    // A float (or another type): the size as a plain int (specialized), then Python's own operator.
    nb::object self = nb::int_(specialize(a));
    nb::object op = nb::module_::import_("operator").attr(pyop);
    return reflected ? op(b, self) : op(self, b);
  }
  SymDim x = a.expr, y = o->first;
  int64_t hx = a.hint, hy = o->second;
  if (reflected) {
    std::swap(x, y);
    std::swap(hx, hy);
  }
  return result(sym(x, y), val(hx, hy));
}

bool compare(const SymInt& a, nb::handle b, GuardRel rel, bool swap, int64_t offset, bool* ok) {
  // a REL b as (x - y + offset) REL 0, with x, y swapped for < and <=.
  auto o = operand(b);
  *ok = o.has_value();
  if (!o) return false;
  SymDim x = a.expr, y = o->first;
  int64_t hx = a.hint, hy = o->second;
  if (swap) {
    std::swap(x, y);
    std::swap(hx, hy);
  }
  SymDim e = x - y + SymDim(offset);
  if (!live()) {
    int64_t v = hx - hy + offset;
    return rel == GuardRel::Eq ? v == 0 : rel == GuardRel::Ne ? v != 0 : v >= 0;
  }
  return graph::decide_shape(e, rel, python_source_line());
}

}  // namespace

void push_int_value(const graph::SymDim& size, const Tensor& value) { t_int_values.push_back({size, value}); }
void clear_int_values() { t_int_values.clear(); }

std::optional<Tensor> symint_value_tensor(nb::handle h) {
  if (t_int_values.empty() || !nb::isinstance<SymInt>(h)) return std::nullopt;
  return value_for(nb::cast<const SymInt&>(h).expr);
}

bool is_symint(nb::handle h) { return nb::isinstance<SymInt>(h); }
graph::SymDim symint_expr(nb::handle h) { return nb::cast<const SymInt&>(h).expr; }
int64_t symint_hint(nb::handle h) { return nb::cast<const SymInt&>(h).hint; }
int64_t symint_specialize(nb::handle h) { return specialize(nb::cast<const SymInt&>(h)); }

nb::object make_size(const graph::SymDim& e, int64_t hint) {
  if (e.is_const()) return nb::int_(e.const_value());
  return nb::cast(SymInt{e, hint});
}

void bind_symint(nb::module_& m) {
  // tp.tensor(pos) / tp.tensor([pos, 0]) in a capture (_tensor.py): the int
  // argument's value input, or None for any other SymInt.
  m.def("_symint_value", [](nb::handle h) -> nb::object {
    if (auto t = symint_value_tensor(h)) return nb::cast(*t);
    return nb::none();
  });
  using SD = SymDim;
  auto add = [](SD x, SD y) { return x + y; };
  auto sub = [](SD x, SD y) { return x - y; };
  auto mul = [](SD x, SD y) { return x * y; };
  auto fdiv = [](SD x, SD y) { return stax::ir::floordiv(x, y); };
  auto fmod = [](SD x, SD y) { return stax::ir::mod(x, y); };
  auto vadd = [](int64_t x, int64_t y) { return x + y; };
  auto vsub = [](int64_t x, int64_t y) { return x - y; };
  auto vmul = [](int64_t x, int64_t y) { return x * y; };
  auto vdiv = [](int64_t x, int64_t y) { return stax::ir::detail::floor_div(x, y); };
  auto vmod = [](int64_t x, int64_t y) { return stax::ir::detail::floor_mod(x, y); };
  struct Op {
    const char* name;
    const char* pyop;
    SD (*sym)(SD, SD);
    int64_t (*val)(int64_t, int64_t);
    bool reflected, divides;
  };
  const Op ops[] = {
      {"__add__", "add", add, vadd, false, false},           {"__radd__", "add", add, vadd, true, false},
      {"__sub__", "sub", sub, vsub, false, false},           {"__rsub__", "sub", sub, vsub, true, false},
      {"__mul__", "mul", mul, vmul, false, false},           {"__rmul__", "mul", mul, vmul, true, false},
      {"__floordiv__", "floordiv", fdiv, vdiv, false, true}, {"__rfloordiv__", "floordiv", fdiv, vdiv, true, true},
      {"__mod__", "mod", fmod, vmod, false, true},           {"__rmod__", "mod", fmod, vmod, true, true},
  };
  auto cls = nb::class_<SymInt>(m, "SymInt",
                                "A size of a traced tensor that is symbolic (tp.compile with dynamic shapes).");
  for (const Op& op : ops) {
    cls.def(op.name, [op](const SymInt& a, nb::handle b) -> nb::object {
      if (nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);  // Tensor's reflected operator
      auto o = operand(b);
      if (o && op.divides && (op.reflected ? a.hint : o->second) == 0)
        throw nb::builtin_exception(nb::exception_type::value_error, "integer division or modulo by zero");
      return binary(a, b, op.reflected, op.pyop, op.sym, op.val);
    });
  }
  struct Cmp {
    const char* name;
    GuardRel rel;
    bool swap;
    int64_t offset;
    const char* pyop;
  };
  // a == b: a - b == 0; a != b; a >= b: a - b >= 0; a > b: a - b - 1 >= 0; a <= b: b - a >= 0; a < b: b - a - 1 >= 0.
  const Cmp cmps[] = {{"__eq__", GuardRel::Eq, false, 0, "eq"},  {"__ne__", GuardRel::Ne, false, 0, "ne"},
                      {"__ge__", GuardRel::Ge, false, 0, "ge"},  {"__gt__", GuardRel::Ge, false, -1, "gt"},
                      {"__le__", GuardRel::Ge, true, 0, "le"},   {"__lt__", GuardRel::Ge, true, -1, "lt"}};
  for (const Cmp& c : cmps) {
    cls.def(c.name, [c](const SymInt& a, nb::handle b) -> nb::object {
      if (nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);
      bool ok = false;
      bool r = compare(a, b, c.rel, c.swap, c.offset, &ok);
      if (ok) return nb::bool_(r);
      if (PyFloat_Check(b.ptr())) return nb::module_::import_("operator").attr(c.pyop)(nb::int_(specialize(a)), b);
      return nb::borrow(Py_NotImplemented);
    });
  }
  cls.def("__neg__", [](const SymInt& a) { return result(-a.expr, -a.hint); })
      .def("__pos__", [](const SymInt& a) { return a; })
      .def("__abs__", [](const SymInt& a) -> nb::object {
        bool nonneg = live() ? graph::decide_shape(a.expr, GuardRel::Ge, python_source_line()) : a.hint >= 0;
        return nonneg ? result(a.expr, a.hint) : result(-a.expr, -a.hint);
      })
      .def("__bool__", [](const SymInt& a) {
        return live() ? graph::decide_shape(a.expr, GuardRel::Ne, python_source_line()) : a.hint != 0;
      })
      .def("__index__", [](const SymInt& a) { return specialize(a); })
      .def("__int__", [](const SymInt& a) { return specialize(a); })
      .def("__float__", [](const SymInt& a) { return static_cast<double>(specialize(a)); })
      .def("__hash__", [](const SymInt& a) { return nb::hash(nb::int_(specialize(a))); })
      .def("__truediv__", [](const SymInt& a, nb::handle b) -> nb::object {
        if (nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);  // Tensor's operator
        if (auto t = value_for(a.expr); t && (PyFloat_Check(b.ptr()) || PyLong_Check(b.ptr()))) {
          nb::object r = nb::module_::import_("operator").attr("truediv")(nb::cast(*t), b);
          if (nb::isinstance<Tensor>(r)) note_capture_item(nb::cast<Tensor>(r));
          return r;
        }
        return nb::module_::import_("operator").attr("truediv")(nb::int_(specialize(a)), b);
      })
      .def("__rtruediv__", [](const SymInt& a, nb::handle b) -> nb::object {
        if (nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);  // Tensor's operator
        if (auto t = value_for(a.expr); t && (PyFloat_Check(b.ptr()) || PyLong_Check(b.ptr()))) {
          nb::object r = nb::module_::import_("operator").attr("truediv")(b, nb::cast(*t));
          if (nb::isinstance<Tensor>(r)) note_capture_item(nb::cast<Tensor>(r));
          return r;
        }
        return nb::module_::import_("operator").attr("truediv")(b, nb::int_(specialize(a)));
      })
      .def("__pow__", [](const SymInt& a, nb::handle b) {
        return nb::module_::import_("operator").attr("pow")(nb::int_(specialize(a)), b);
      })
      .def("__format__", [](const SymInt& a, nb::handle spec) {
        return nb::module_::import_("builtins").attr("format")(nb::int_(specialize(a)), spec);
      })
      .def("__repr__", [](const SymInt& a) { return live() ? graph::describe_shape(a.expr) : std::to_string(a.hint); })
      .def_prop_ro("node_hint", [](const SymInt& a) { return a.hint; },
                   "The example call's value (reading it records no guard).");
}

}  // namespace tp::py
