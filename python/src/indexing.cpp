// Tensor.__getitem__ / __setitem__ with PyTorch's indexing rules, and the
// shape methods whose Python forms (varargs, a dtype for view, as_tuple) a
// schema cannot describe.
//
// An index is split in two passes: the basic part (ints, slices, None,
// Ellipsis) becomes a view of self; the advanced part (integer/bool tensors,
// lists, NumPy arrays, Python bools) then goes through the index operator
// (a copy) or index_put_ (a write). As in PyTorch, an int next to an advanced
// index is a select (NumPy would treat it as an advanced index too).
#include "common.h"
#include "graph/tracer.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

enum class Kind { Int, Slice, None, Ellipsis, Mask, Index };

struct Item {
  Kind kind;
  int64_t value = 0;  // Int
  nb::handle slice;   // Slice
  Tensor tensor;      // Mask (bool, >= 1 dim) / Index (integer)
  nb::handle symint;  // Int given as a tp.SymInt (value: its hint): kept symbolic
  bool user_mask = false;  // Mask: a 0-d bool tensor the caller passed (not a Python bool)
};

bool is_int_like(nb::handle h) {
  if (PyBool_Check(h.ptr())) return false;
  if (PyLong_Check(h.ptr())) return true;
  // NumPy integer scalars (and anything else with __index__), but not tensors or arrays.
  return !nb::isinstance<Tensor>(h) && PyIndex_Check(h.ptr()) && !PyObject_HasAttrString(h.ptr(), "shape");
}

bool is_sequence(nb::handle h) {
  return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()) ||
         (PyObject_HasAttrString(h.ptr(), "__array__") && !nb::isinstance<Tensor>(h));
}

// A list, tuple or array used as an index, as a tensor (flat int lists skip NumPy).
Tensor sequence_to_tensor(nb::handle h) {
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    nb::sequence seq = nb::borrow<nb::sequence>(h);
    const size_t n = nb::len(seq);
    bool flat_ints = true;
    for (nb::handle x : seq) flat_ints = flat_ints && is_int_like(x);
    if (flat_ints) {
      Tensor t = Tensor::empty({static_cast<int64_t>(n)}, DType::Int64);
      int64_t* p = t.data_as<int64_t>();
      size_t i = 0;
      for (nb::handle x : seq) p[i++] = nb::cast<int64_t>(nb::int_(x));
      return t;
    }
  }
  nb::object t = nb::module_::import_("tensorplay").attr("tensor")(h);
  return nb::cast<Tensor>(t);
}

Item classify(nb::handle h) {
  if (h.is_none()) return {Kind::None};
  if (h.ptr() == Py_Ellipsis) return {Kind::Ellipsis};
  if (PySlice_Check(h.ptr())) return {Kind::Slice, 0, h};
  if (PyBool_Check(h.ptr())) return {Kind::Mask, 0, {}, Tensor::scalar_tensor(Scalar(h.ptr() == Py_True), DType::Bool)};
  if (is_symint(h)) return {Kind::Int, symint_hint(h), {}, {}, h};
  if (is_int_like(h)) return {Kind::Int, nb::cast<int64_t>(nb::int_(h))};
  Tensor t;
  if (nb::isinstance<Tensor>(h)) t = nb::cast<Tensor>(h);
  else if (is_sequence(h)) t = sequence_to_tensor(h);
  else
    throw IndexError(str("only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors are valid "
                         "indices (got ",
                         nb::inst_name(h).c_str(), ")"));
  if (t.dtype() == DType::Bool) return {Kind::Mask, 0, {}, t, {}, t.dim() == 0};
  // PyTorch reads a uint8 index tensor as a mask (deprecated); taking its values as positions
  // gave other elements than PyTorch, silently. Refused, naming both meanings.
  TP_CHECK(t.dtype() != DType::UInt8, IndexError,
           "indexing with a uint8 tensor is ambiguous (PyTorch reads it as a mask, deprecated): use .bool() for a "
           "mask or .long() for positions (index of shape ", shape_str(t.sizes()), ")");
  TP_CHECK(is_integral(t.dtype(), false), IndexError,
           "tensors used as indices must be long, int, byte or bool tensors, got ", dtype_name(t.dtype()));
  // A 0-d integer tensor acts like the int it holds (a select), as in PyTorch.
  // Inside a capture its value is a data gate: read as a plain number it was
  // baked into the graph, and a compiled `x[i]` returned x[first i] for every i.
  if (t.dim() == 0) return {Kind::Int, gate(t, "index").to_int()};  // a CUDA 0-d index: read on the host
  return {Kind::Index, 0, {}, t};
}

// PyTorch's rule for a list at the top level: it is a tuple of indices when it
// holds a slice, None, Ellipsis, a tensor or another sequence; else one index.
bool list_is_tuple(nb::handle idx) {
  if (!PyList_Check(idx.ptr()) || nb::len(idx) >= 32) return false;
  for (nb::handle x : idx)
    if (x.is_none() || x.ptr() == Py_Ellipsis || PySlice_Check(x.ptr()) || nb::isinstance<Tensor>(x) ||
        is_sequence(x))
      return true;
  return false;
}

std::vector<Item> parse(nb::handle idx) {
  std::vector<Item> items;
  if (PyTuple_Check(idx.ptr()) || list_is_tuple(idx)) {
    for (nb::handle h : idx) items.push_back(classify(h));
  } else {
    items.push_back(classify(idx));
  }
  return items;
}

std::optional<int64_t> slice_part(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  return nb::cast<int64_t>(nb::int_(nb::handle(o)));
}

struct Indexed {
  Tensor view;                  // self after the basic part
  std::vector<Tensor> indices;  // advanced part, one entry per dim of view (undefined: whole dim)
  bool advanced = false;
};

Indexed apply_index(const Tensor& self, const std::vector<Item>& items) {
  int64_t consumed = 0, ellipses = 0;
  for (auto& it : items) {
    if (it.kind == Kind::Int || it.kind == Kind::Slice || it.kind == Kind::Index) consumed += 1;
    if (it.kind == Kind::Mask) consumed += it.tensor.dim();
    if (it.kind == Kind::Ellipsis) ellipses += 1;
  }
  TP_CHECK(ellipses <= 1, IndexError, "an index can only have a single ellipsis ('...')");
  TP_CHECK(consumed <= self.dim(), IndexError, "too many indices for tensor of dimension ", self.dim(), " (got ",
           consumed, ")");
  Indexed r{self};
  std::vector<std::pair<int64_t, Tensor>> adv;  // (dim of the view, index or mask)
  int64_t dim = 0, self_dim = 0;  // position in the view, and the dim of self it came from
  for (auto& it : items) {
    switch (it.kind) {
      case Kind::Int: {
        const int64_t n = r.view.sizes()[dim];
        TP_CHECK(it.value >= -n && it.value < n, IndexError, "index ", it.value, " is out of bounds for dimension ",
                 self_dim, " with size ", n);
        if (graph::symbolic_tracing()) {
          // The user wrote the index: a literal, not a size computed from a symbol
          // (the symbolic rule keeps the dim symbolic, guarded by the bound).
          // x[n - 1] with a SymInt: the select node evaluates the index per call.
          graph::UserCall call;
          call.op = &get_op("select");
          call.where_fn = &python_source_line;
          if (it.symint) call.sym_attrs["index"] = {symint_expr(it.symint)};
          else call.literals.push_back(it.value);
          graph::UserCallScope scope(std::move(call));
          r.view = ops::select(r.view, dim, it.value);
          break;
        }
        r.view = ops::select(r.view, dim, it.value);
        break;
      }
      case Kind::Slice: {
        auto* s = reinterpret_cast<PySliceObject*>(it.slice.ptr());
        const int64_t step = slice_part(s->step).value_or(1);
        TP_CHECK(step > 0, ValueError, "slice step must be greater than zero (got ", step, ")");
        if (graph::symbolic_tracing() && (is_symint(s->start) || is_symint(s->stop))) {
          // x[a:b] with symbolic bounds: the slice node evaluates them per call.
          graph::UserCall call;
          call.op = &get_op("slice");
          call.where_fn = &python_source_line;
          std::optional<int64_t> start, stop;
          if (is_symint(s->start)) {
            start = symint_hint(s->start);
            call.sym_attrs["start"] = {symint_expr(s->start)};
          } else {
            start = slice_part(s->start);
          }
          if (is_symint(s->stop)) {
            stop = symint_hint(s->stop);
            call.sym_attrs["end"] = {symint_expr(s->stop)};
          } else {
            stop = slice_part(s->stop);
          }
          graph::UserCallScope scope(std::move(call));
          r.view = ops::slice(r.view, dim++, start, stop, step);
          break;
        }
        if (graph::symbolic_tracing()) {  // literal bounds, as for an integer index above
          graph::UserCall call;
          call.op = &get_op("slice");
          call.where_fn = &python_source_line;
          for (auto b : {slice_part(s->start), slice_part(s->stop)})
            if (b) call.literals.push_back(*b);
          call.literals.push_back(step);
          graph::UserCallScope scope(std::move(call));
          r.view = ops::slice(r.view, dim++, slice_part(s->start), slice_part(s->stop), step);
          break;
        }
        r.view = ops::slice(r.view, dim++, slice_part(s->start), slice_part(s->stop), step);
        break;
      }
      case Kind::None:
        r.view = ops::unsqueeze(r.view, dim++);
        break;
      case Kind::Ellipsis:
        dim += self.dim() - consumed;
        self_dim += self.dim() - consumed;
        break;
      case Kind::Index:
        adv.emplace_back(dim++, it.tensor);
        break;
      case Kind::Mask:
        if (it.tensor.dim() == 0) {  // True/False: a new dim of length 1 or 0
          r.view = ops::unsqueeze(r.view, dim);
          const bool keep = it.user_mask ? gate(it.tensor, "bool").to_bool() : host_copy(it.tensor).item().to_bool();
          Tensor pick = Tensor::empty({keep ? 1 : 0}, DType::Int64);
          if (keep) *pick.data_as<int64_t>() = 0;
          adv.emplace_back(dim++, pick);
        } else {
          adv.emplace_back(dim, it.tensor);
          dim += it.tensor.dim();
        }
        break;
    }
    if (it.kind == Kind::Int || it.kind == Kind::Slice || it.kind == Kind::Index) self_dim += 1;
    if (it.kind == Kind::Mask) self_dim += it.tensor.dim();
  }
  if (adv.empty()) return r;
  r.advanced = true;
  size_t k = 0;
  for (int64_t d = 0; d < r.view.dim() && k < adv.size();) {
    if (adv[k].first == d) {
      const Tensor& t = adv[k++].second;
      r.indices.push_back(t);
      d += t.dtype() == DType::Bool ? t.dim() : 1;
    } else {
      r.indices.emplace_back();
      ++d;
    }
  }
  return r;
}

Tensor getitem(const Tensor& self, nb::handle idx) {
  Indexed r = apply_index(self, parse(idx));
  return r.advanced ? ops::index(r.view, r.indices) : r.view;
}

// A value's leading size-1 dims beyond the destination's rank are dropped (as PyTorch does).
Tensor strip_leading_ones(Tensor v, int64_t rank) {
  while (v.dim() > rank && v.sizes()[0] == 1) v = ops::select(v, 0, 0);
  return v;
}

void setitem(Tensor& self, nb::handle idx, nb::handle value) {
  Indexed r = apply_index(self, parse(idx));
  std::optional<Scalar> s = nb::isinstance<Tensor>(value) ? std::nullopt : to_scalar(value);
  Tensor v;
  if (!s && nb::isinstance<Tensor>(value)) {
    v = nb::cast<Tensor>(value);
  } else if (!s) {  // nested lists: built in self's dtype, so Python floats are rounded once (float64 keeps them)
    v = nb::cast<Tensor>(nb::module_::import_("tensorplay").attr("tensor")(value, nb::arg("dtype") = self.dtype()));
  }
  if (!r.advanced) {
    if (s) ops::fill_(r.view, *s);
    else ops::copy_(r.view, strip_leading_ones(v, r.view.dim()));
    return;
  }
  // x[mask] = number with a mask over the leading dims: one masked_fill_, no nonzero().
  if (s && r.indices.size() == 1 && r.indices[0].dtype() == DType::Bool) {
    Tensor mask = r.indices[0];
    Shape ms = mask.sizes();
    ms.resize(static_cast<size_t>(r.view.dim()), 1);
    Shape want(r.view.sizes().begin(), r.view.sizes().begin() + mask.dim());
    if (mask.sizes() == want) {
      ops::masked_fill_(r.view, ops::view(mask, ms), *s);
      return;
    }
  }
  if (s) v = Tensor::scalar_tensor(*s, r.view.dtype());
  ops::index_put_(r.view, r.indices, strip_leading_ones(v, r.view.dim()), false);
}

// ---- conveniences ----
// Replaces a method defined earlier (nanobind would otherwise append an overload after it).
template <class F, class... Extra>
void redefine(nb::handle cls, const char* name, F&& f, const Extra&... extra) {
  if (nb::hasattr(cls, name)) nb::delattr(cls, name);
  nb::cpp_function_def(std::forward<F>(f), nb::scope(cls), nb::name(name), nb::is_method(), extra...);
}

std::vector<int64_t> ints_from_args(const nb::args& args, const char* op,
                                    std::vector<graph::SymDim>* syms = nullptr) {
  std::vector<int64_t> out;
  nb::handle src = args;
  if (args.size() == 1 && !is_int_like(args[0])) src = args[0];
  for (nb::handle x : src) {
    TP_CHECK(is_int_like(x), TypeError, op, ": expected a sequence of ints, got an element of type ",
             nb::inst_name(x).c_str());
    if (syms && is_symint(x)) {  // dynamic shapes: kept symbolic for the recorded node
      if (syms->empty())  // the plain ints before the first SymInt
        for (int64_t v : out) syms->push_back(graph::SymDim(v));
      out.push_back(symint_hint(x));
      syms->push_back(symint_expr(x));
      continue;
    }
    out.push_back(nb::cast<int64_t>(nb::int_(x)));
    if (syms && !syms->empty()) syms->push_back(graph::SymDim(out.back()));
  }
  return out;
}

nb::object tuple_of(const std::vector<Tensor>& ts) {
  nb::list l;
  for (auto& t : ts) l.append(nb::cast(t));
  return nb::tuple(l);
}

nb::object nonzero_py(const Tensor& t, bool as_tuple) {
  return as_tuple ? tuple_of(ops::nonzero_tuple(t)) : nb::cast(ops::nonzero(t));
}

std::vector<Tensor> indices_from(nb::handle indices) {
  std::vector<Tensor> out;
  for (nb::handle h : indices) {
    if (h.is_none()) out.emplace_back();
    else if (nb::isinstance<Tensor>(h)) out.push_back(nb::cast<Tensor>(h));
    else out.push_back(sequence_to_tensor(h));
  }
  return out;
}

Tensor matrix_transpose(const Tensor& t) {
  TP_CHECK(t.dim() >= 2, ValueError, "tensor.mT is only supported on matrices or batches of matrices, got a ",
           t.dim(), "-D tensor");
  return ops::transpose(t, -2, -1);
}

// view(*shape) or view(dtype): the same bits read as another dtype of equal size.
Tensor view_of(const Tensor& t, nb::args a) {
  if (a.size() == 1 && nb::isinstance<DType>(a[0])) return ops::view_dtype(t, nb::cast<DType>(a[0]));
  if (!graph::symbolic_tracing()) return ops::view(t, ints_from_args(a, "view"));
  std::vector<graph::SymDim> syms;
  std::vector<int64_t> size = ints_from_args(a, "view", &syms);
  graph::UserCall call;
  call.op = &get_op("view");
  call.where_fn = &python_source_line;
  for (size_t j = 0; j < size.size(); ++j)
    if (syms.empty() || syms[j].is_const()) call.literals.push_back(size[j]);
  if (!syms.empty()) call.sym_attrs["size"] = std::move(syms);
  graph::UserCallScope scope(std::move(call));
  return ops::view(t, size);
}

Tensor squeeze_of(const Tensor& t, nb::handle dim) {
  if (dim.is_none()) return ops::squeeze(t);
  if (is_int_like(dim)) return ops::squeeze_dims(t, {nb::cast<int64_t>(nb::int_(dim))});
  return ops::squeeze_dims(t, nb::cast<std::vector<int64_t>>(dim));
}

// A view method's result names the Python object it was made from as `_base`.
Tensor noted(nb::handle self, Tensor r) {
  if (r.defined() && r.impl()->view_base) note_base_object(self, r);
  return r;
}

void bind_shape_conveniences(nb::module_& m) {
  nb::handle cls = nb::type<Tensor>();
  redefine(cls, "view", [](nb::handle self, nb::args a) { return noted(self, view_of(nb::cast<const Tensor&>(self), a)); });
  redefine(cls, "flatten", [](nb::handle self, int64_t start_dim, int64_t end_dim) {
    return noted(self, ops::flatten(nb::cast<const Tensor&>(self), start_dim, end_dim));
  }, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1);
  redefine(cls, "squeeze", [](nb::handle self, nb::handle dim) {
    return noted(self, squeeze_of(nb::cast<const Tensor&>(self), dim));
  }, nb::arg("dim").none() = nb::none());
  // The counts are the user's ints (a SymInt among them is specialized), so
  // a symbolic capture records them as literals: repeat's rule keeps the
  // repeated dims symbolic.
  auto with_literals = [](const char* op, const std::vector<int64_t>& ints, auto&& fn) {
    if (!graph::symbolic_tracing()) return fn();
    graph::UserCall call;
    call.op = &get_op(op);
    call.where_fn = &python_source_line;
    call.literals = ints;
    graph::UserCallScope scope(std::move(call));
    return fn();
  };
  redefine(cls, "repeat", [with_literals](const Tensor& t, nb::args a) {
    const std::vector<int64_t> reps = ints_from_args(a, "repeat");
    return with_literals("repeat", reps, [&] { return ops::repeat(t, reps); });
  });
  redefine(cls, "tile", [with_literals](const Tensor& t, nb::args a) {
    const std::vector<int64_t> reps = ints_from_args(a, "tile");
    return with_literals("tile", reps, [&] {  // tile is repeat inside
      return with_op_name("tile", [&] { return ops::tile(t, reps); });
    });
  });
  // flip(*dims), flip(dims) or flip(dims=...), as PyTorch accepts them.
  redefine(cls, "flip", [](const Tensor& t, nb::args a, nb::kwargs kw) {
    if (kw.contains("dims")) {
      TP_CHECK(a.size() == 0 && kw.size() == 1, TypeError, "flip() takes dims either positionally or as dims=");
      return ops::flip(t, ints_from_args(nb::borrow<nb::args>(nb::make_tuple(kw["dims"])), "flip"));
    }
    TP_CHECK(kw.size() == 0, TypeError, "flip() got an unexpected keyword argument");
    return ops::flip(t, ints_from_args(a, "flip"));
  });
  redefine(cls, "nonzero", &nonzero_py, nb::kw_only(), nb::arg("as_tuple") = false);
  // An in-place method returns the caller's own Python object (`x.index_put_(...) is x`), as every
  // other in-place method does; returning the C++ result made a second wrapper of the same tensor.
  redefine(cls, "index_put_", [](nb::handle self, nb::handle indices, const Tensor& values, bool accumulate) {
    Tensor& t = nb::cast<Tensor&>(self);
    ops::index_put_(t, indices_from(indices), values, accumulate);
    return nb::borrow(self);
  }, nb::arg("indices"), nb::arg("values"), nb::arg("accumulate") = false);
  redefine(cls, "index_put", [](const Tensor& t, nb::handle indices, const Tensor& values, bool accumulate) {
    return ops::index_put(t, indices_from(indices), values, accumulate);
  }, nb::arg("indices"), nb::arg("values"), nb::arg("accumulate") = false);
  for (const char* name : {"mT", "mH"}) {
    if (nb::hasattr(cls, name)) nb::delattr(cls, name);
    nb::setattr(cls, name, nb::module_::import_("builtins").attr("property")(nb::cpp_function(
                               [](nb::handle self) { return noted(self, matrix_transpose(nb::cast<const Tensor&>(self))); })));
  }
  // Module functions: replaced both as attributes of _C and in the table of
  // generated functions that the package exports.
  auto def_function = [&](const char* name, auto&& f, auto... extra) {
    if (nb::hasattr(m, name)) nb::delattr(m, name);
    m.def(name, f, extra...);
    if (nb::hasattr(m, "_op_functions")) m.attr("_op_functions")[name] = m.attr(name);
  };
  def_function("nonzero", &nonzero_py, nb::arg("input"), nb::kw_only(), nb::arg("as_tuple") = false);
  def_function("index_put_", [](nb::handle self, nb::handle indices, const Tensor& values, bool accumulate) {
    Tensor& t = nb::cast<Tensor&>(self);
    ops::index_put_(t, indices_from(indices), values, accumulate);
    return nb::borrow(self);
  }, nb::arg("input"), nb::arg("indices"), nb::arg("values"), nb::arg("accumulate") = false);
  def_function("index_put", [](const Tensor& t, nb::handle indices, const Tensor& values, bool accumulate) {
    return ops::index_put(t, indices_from(indices), values, accumulate);
  }, nb::arg("input"), nb::arg("indices"), nb::arg("values"), nb::arg("accumulate") = false);
}

}  // namespace

void bind_indexing(nb::module_& m) {
  nb::handle cls = nb::type<Tensor>();
  // .none(): x[None] passes None itself as the index.
  redefine(cls, "__getitem__", [](nb::handle self, nb::handle idx) {
    Tensor r = getitem(nb::cast<const Tensor&>(self), idx);
    if (r.defined() && r.impl()->view_base) note_base_object(self, r);
    return r;
  }, nb::arg("index").none());
  redefine(cls, "__setitem__", &setitem, nb::arg("index").none(), nb::arg("value"));
  bind_shape_conveniences(m);
  // .T (bound with the Tensor class): its result names the Python object it was made from as `_base`.
  nb::setattr(cls, "T", nb::module_::import_("builtins").attr("property")(nb::cpp_function([](nb::handle self) {
    ops::Dims d;
    const Tensor& t = nb::cast<const Tensor&>(self);
    for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
    return noted(self, ops::permute(t, d));
  })));
}

}  // namespace tp::py
