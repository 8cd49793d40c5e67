// Dual levels, the tangent table and the forward-mode part of the dispatcher
// hook (see forward_ad.h).
#include "autograd/forward_ad.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "autograd/jvp_rules.h"
#include "autograd/node.h"
#include "autograd/views.h"
#include "core/grad_mode.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::autograd::forward_ad {
namespace {

// The tangent of a dual tensor at the open level. The weak pointer tells a
// live entry from one whose tensor died (its address may be reused).
struct Entry {
  std::weak_ptr<TensorImpl> owner;
  Tensor tangent;
};

struct State {
  std::mutex mu;
  int64_t level = -1;
  int64_t next_level = 0;
  std::unordered_map<const TensorImpl*, Entry> table;
  size_t sweep_at = 256;  // table size at which dead entries are dropped
};
State& state() {
  static State* s = new State();  // never destroyed: tensors may die after static destruction
  return *s;
}
std::atomic<bool> g_active{false};

// Tangent formulas run with forward mode suspended on this thread: their ops
// read primal inputs that are dual, and must not compute tangents of tangents.
thread_local int t_suspended = 0;
struct Suspend {
  Suspend() { ++t_suspended; }
  ~Suspend() { --t_suspended; }
};

std::unordered_map<std::string, JvpFn>& rules() {
  static auto* m = new std::unordered_map<std::string, JvpFn>();
  return *m;
}
void ensure_rules() {
  static std::once_flag once;
  std::call_once(once, [] { register_all_jvp_rules(); });
}

// The tangent stored for t itself (none: undefined).
Tensor lookup_own(const Tensor& t) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.table.find(t.impl());
  if (it == s.table.end()) return Tensor();
  if (it->second.owner.expired()) {
    s.table.erase(it);
    return Tensor();
  }
  return it->second.tangent;
}

// The tensor whose memory view `t` reads: Tensor._base, recorded for every view
// in every grad mode (a view made under no_grad, as in a derivative formula,
// has one too); undefined for unpack_dual's primal.
Tensor base_of(const Tensor& t) { return t.impl()->view_base ? Tensor(t.impl()->view_base) : Tensor(); }

// View `self`'s region of its base's tangent `tb` (undefined when tb's layout
// is not the base's: the region would not be where the view's elements are).
Tensor region_of_base_tangent(const Tensor& self, const Tensor& base, const Tensor& tb) {
  if (!tb.defined() || tb.sizes() != base.sizes() || tb.strides() != base.strides() || tb.dtype() != self.dtype() ||
      tb.device() != self.device())
    return Tensor();
  return tb.as_strided(self.sizes(), self.strides(), tb.offset() + self.offset() - base.offset());
}

// The tangent of t: its own, else (a view without one of its own) its region of
// its base's tangent, so that a view taken before its base got a tangent (by an
// in-place write) sees it, as the view sees the write.
Tensor lookup(const Tensor& t) {
  if (!t.defined()) return Tensor();
  Tensor own = lookup_own(t);
  if (own.defined()) return own;
  const Tensor base = base_of(t);
  if (!base.defined() || base.impl() == t.impl() || !is_floating(t.dtype())) return Tensor();
  return region_of_base_tangent(t, base, lookup_own(base));
}

void store(const Tensor& t, const Tensor& tangent) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!tangent.defined()) {
    s.table.erase(t.impl());
    return;
  }
  s.table[t.impl()] = Entry{t.impl_ptr(), tangent};
  if (s.table.size() >= s.sweep_at) {
    std::erase_if(s.table, [](const auto& kv) { return kv.second.owner.expired(); });
    s.sweep_at = 2 * s.table.size() + 256;
  }
}

// Gives a result its tangent. Its backward node keeps a history-free alias
// of it for the derivative formula; that alias gets the tangent too, so that a
// derivative formula run while the level is open (forward-over-reverse:
// jacfwd(grad(f))) differentiates through the saved result.
void store_result(const Tensor& out, const Tensor& tangent) {
  store(out, tangent);
  auto* node = dynamic_cast<OpNode*>(out.impl()->grad_fn.get());
  if (!node) return;
  const uint32_t nr = out.impl()->output_nr;
  if (nr >= node->saved_outputs.size()) return;
  const Tensor& raw = node->saved_outputs[nr].raw();  // undefined when the formula does not read it
  if (raw.defined() && raw.impl() != out.impl()) store(raw, tangent);
}

void check_level(const char* who, int64_t level) {
  const int64_t cur = current_level();
  TP_CHECK(cur >= 0, Error, who,
           ": no dual level is open; create dual tensors inside `with tp.autograd.forward_ad.dual_level():`");
  TP_CHECK(level == cur, Error, who, ": level ", level, " is not the open dual level (", cur, ")");
}

// A formula's tangent must have the shape of its primal result.
Tensor fit(const Tensor& tangent, const Tensor& out, const OpDef& op) {
  if (tangent.sizes() == out.sizes()) return tangent;
  bool broadcasts = false;
  try {
    broadcasts = broadcast_shapes(tangent.sizes(), out.sizes(), op.name) == out.sizes();
  } catch (const Error&) {
  }
  TP_CHECK(broadcasts, Error,
           "forward-mode AD: the tangent formula of '", op.name, "' gave shape ", shape_str(tangent.sizes()),
           " for a result of shape ", shape_str(out.sizes()));
  return ops::contiguous(ops::expand(tangent, out.sizes()));
}

bool any_floating(const std::vector<Tensor>& v) {
  for (auto& t : v)
    if (t.defined() && is_floating(t.dtype())) return true;
  return false;
}

[[noreturn]] void no_formula(const OpDef& op) {
  throw NotImplementedError(str("forward-mode AD: no tangent formula for '", op.name, "'"));
}

// The out-of-place operator an in-place one updates with (add_ -> add, mul_.Scalar -> mul.Scalar).
const OpDef* twin_of(const OpDef& op) {
  std::string name = op.name;
  const size_t dot = name.find('.');
  std::string base = name.substr(0, dot);
  if (base.empty() || base.back() != '_') return nullptr;
  base.pop_back();
  const OpDef* t = dot == std::string::npos ? nullptr : find_op(base + name.substr(dot));
  return t ? t : find_op(base);
}

// The region of `base`'s tangent that view `self` covers, creating a zero
// tangent for the base when it has none (undefined when the layouts do not
// allow it: the base's tangent must have the base's strides).
Tensor tangent_region_of_base(const Tensor& self) {
  const Tensor base = base_of(self);
  if (!base.defined() || base.impl() == self.impl() || !is_floating(base.dtype())) return Tensor();
  Tensor tb = lookup_own(base);
  if (!tb.defined()) {
    if (!base.is_contiguous()) return Tensor();
    tb = ops::zeros_like(base);
    if (!tb.is_contiguous()) return Tensor();
    store(base, tb);
  }
  return region_of_base_tangent(self, base, tb);
}

// After an in-place op, self's new tangent `t` (undefined: zero) is written
// into the tangent self already has, so that views sharing that tangent's
// memory (the tangent of a view is a view of its base's tangent) see it, as
// the primal's views see the write. Without one, a view of a dual (or plain)
// base writes into its region of the base's tangent.
void write_tangent(const Tensor& self, const Tensor& t, Tensor current) {
  Suspend s;
  if (!current.defined() && t.defined()) current = tangent_region_of_base(self);
  const bool writable = current.defined() && current.sizes() == self.sizes() && current.dtype() == self.dtype() &&
                        !(current.requires_grad() && !current.impl()->grad_fn);
  if (!writable) {
    // A tangent of its own (t may be another tensor's tangent, e.g. copy_'s
    // source's, expanded): a later in-place op on self writes into it.
    if (t.defined() && self.is_contiguous()) {
      Tensor own = ops::zeros_like(self);
      if (own.is_contiguous()) {
        ops::copy_(own, t);
        store_result(self, own);
        return;
      }
    }
    store_result(self, t);
    return;
  }
  if (t.defined())
    ops::copy_(current, t);
  else
    ops::zero_(current);
  store_result(self, current);
}

std::vector<Tensor> dispatch_inplace(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                     InnerHook inner, const std::vector<Tensor>& tangents) {
  const Tensor& self = inputs[0];
  const std::string name = op.name;
  if (name == "copy_") {  // self takes src's values: its tangent is src's, fitted to self
    std::vector<Tensor> out = inner(op, inputs, attrs);
    Tensor t;
    if (tangents[1].defined()) {
      Suspend s;
      t = ops::expand(ops::to_dtype(tangents[1], self.dtype()), self.sizes());
    }
    write_tangent(self, t, tangents[0]);
    return out;
  }
  if (name == "fill_" || name == "zero_" || op.has(kRandom)) {  // values that do not depend on any input
    std::vector<Tensor> out = inner(op, inputs, attrs);
    write_tangent(self, Tensor(), tangents[0]);
    return out;
  }
  const OpDef* twin = twin_of(op);
  JvpFn fn = twin ? find_jvp(twin->name) : nullptr;
  if (!fn) no_formula(op);
  Tensor old;
  {
    Suspend s;
    AutoGradMode no_grad(false);
    old = ops::clone(self);  // the formula reads self before the write
  }
  std::vector<Tensor> out = inner(op, inputs, attrs);
  std::vector<Tensor> ins = inputs;
  ins[0] = old;
  std::vector<Tensor> outs{self};
  Tensor t;
  if (is_floating(self.dtype())) {
    Suspend s;
    std::vector<Tensor> r = fn(JvpArgs{*twin, ins, outs, tangents, attrs});
    if (!r.empty() && r[0].defined()) t = ops::to_dtype(fit(r[0], self, op), self.dtype());
  }
  write_tangent(self, t, tangents[0]);
  return out;
}

}  // namespace

void register_jvp(const char* op_name, JvpFn fn) { rules()[op_name] = fn; }
JvpFn find_jvp(const std::string& op_name) {
  ensure_rules();
  auto it = rules().find(op_name);
  return it == rules().end() ? nullptr : it->second;
}
std::vector<std::string> ops_with_formula() {
  ensure_rules();
  std::vector<std::string> v;
  for (auto& kv : rules()) v.push_back(kv.first);
  return v;
}

int64_t enter_dual_level() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  TP_CHECK(s.level < 0, Error,
           "dual_level: nested forward-mode AD levels are not supported (level ", s.level, " is open)");
  s.level = s.next_level++;
  g_active = true;
  return s.level;
}

void exit_dual_level(int64_t level) {
  std::unordered_map<const TensorImpl*, Entry> dead;  // tangents are freed outside the lock
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    TP_CHECK(s.level >= 0 && s.level == level, Error, "exit_dual_level: level ", level,
             " is not the open dual level (", s.level, ")");
    dead.swap(s.table);
    s.level = -1;
    s.sweep_at = 256;
    g_active = false;
  }
}

int64_t current_level() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.level;
}

bool active() { return g_active.load(std::memory_order_relaxed) && t_suspended == 0; }

Tensor tangent_of(const Tensor& t) { return g_active ? lookup(t) : Tensor(); }

Tensor make_dual(const Tensor& primal, const Tensor& tangent, int64_t level) {
  check_level("make_dual", level);
  TP_CHECK(primal.defined() && tangent.defined(), TypeError, "make_dual: primal and tangent must be tensors");
  TP_CHECK(is_floating(primal.dtype()), ValueError, "make_dual: expected primal to be a floating-point tensor, got ",
           dtype_name(primal.dtype()));
  TP_CHECK(is_floating(tangent.dtype()), ValueError,
           "make_dual: expected tangent to be a floating-point tensor, got ", dtype_name(tangent.dtype()));
  TP_CHECK(primal.sizes() == tangent.sizes(), Error, "make_dual: the tangent must have the primal's shape: primal ",
           shape_str(primal.sizes()), ", tangent ", shape_str(tangent.sizes()));
  TP_CHECK(primal.device() == tangent.device(), Error, "make_dual: primal is on ", primal.device().str(),
           " but tangent is on ", tangent.device().str());
  Tensor dual;
  {
    Suspend s;
    dual = ops::view(primal, primal.sizes());  // an alias keeping primal's reverse-mode history
  }
  {
    Suspend s;
    store(dual, ops::clone(tangent));  // in-place ops on the dual write into its tangent: never the caller's tensor
  }
  return dual;
}

std::pair<Tensor, Tensor> unpack_dual(const Tensor& t, int64_t level) {
  TP_CHECK(t.defined(), TypeError, "unpack_dual: expected a tensor");
  const int64_t cur = current_level();
  if (cur < 0 || level != cur) return {t, Tensor()};
  Tensor tangent = lookup(t);
  if (!tangent.defined()) return {t, Tensor()};
  Suspend s;
  // The primal as a view without tangent; not a view of t's base for forward
  // AD (Tensor._base None), so that its views do not find the base's tangent.
  Tensor primal = ops::view(t, t.sizes());
  primal.impl()->view_base.reset();
  primal.impl()->base_py.reset();
  return {primal, tangent};
}

void copy_tangent(const Tensor& from, const Tensor& to) {
  if (!g_active || !from.defined() || !to.defined()) return;
  Tensor t = lookup(from);
  if (t.defined()) store(to, t);
}

std::vector<Tensor> dispatch(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                             InnerHook inner) {
  if (t_suspended) return inner(op, inputs, attrs);
  std::vector<Tensor> tangents(inputs.size());
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    tangents[i] = lookup(inputs[i]);
    any |= tangents[i].defined();
  }
  if (!any) return inner(op, inputs, attrs);
  if (op.has(kInplace)) return dispatch_inplace(op, inputs, attrs, inner, tangents);
  JvpFn fn = find_jvp(op.name);
  std::vector<Tensor> out = inner(op, inputs, attrs);
  if (!fn) {
    if (!any_floating(out)) return out;  // comparisons, argmax, ...: no tangent to give
    no_formula(op);
  }
  std::vector<Tensor> touts;
  {
    Suspend s;
    touts = fn(JvpArgs{op, inputs, out, tangents, attrs});
    for (size_t i = 0; i < out.size() && i < touts.size(); ++i) {
      if (!out[i].defined() || !is_floating(out[i].dtype()) || !touts[i].defined()) {
        touts[i] = Tensor();
        continue;
      }
      touts[i] = fit(touts[i], out[i], op);
      // A non-view result's tangent must own its memory: a later in-place op
      // writes into it, and must not reach an input's tangent.
      if (!op.has(kView))
        for (auto& ti : tangents)
          if (ti.defined() && ti.impl()->storage == touts[i].impl()->storage) {
            touts[i] = ops::clone(touts[i]);
            break;
          }
      // A result's tangent has the result's dtype (formulas may promote through a wrapped scalar).
      if (touts[i].dtype() != out[i].dtype()) touts[i] = ops::to_dtype(touts[i], out[i].dtype());
    }
  }
  for (size_t i = 0; i < out.size() && i < touts.size(); ++i)
    if (touts[i].defined()) store_result(out[i], touts[i]);
  return out;
}

}  // namespace tp::autograd::forward_ad
