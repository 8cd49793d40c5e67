#include "graph/tracer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "autograd/engine.h"
#include "core/grad_mode.h"
#include "ops/type_promotion.h"
#include "ops/api_nn_linalg.h"
#include "ops/composite_scope.h"
#include "ops/dispatch.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/size_expr.h"
#include "graph/custom_function.h"
#include "graph/guard_replay.h"
#include "graph/sym_shape_rules.h"

namespace tp::graph {
namespace {

thread_local UserCall* t_user_call = nullptr;
// note_user_exception, read when a trace fails; cleared when the function goes on
// recording or returns (it caught the exception, say of an inner compiled function).
thread_local bool t_user_exception = false;
// Set while a custom Function's backward is traced (CustomBackwardScope): its name.
thread_local const std::string* t_custom_backward = nullptr;
std::string (*t_source_line)() = nullptr;  // set_source_line_provider

using SymAttrs = std::map<std::string, std::vector<SymDim>>;

bool symbolic_checks_strict() {
  // Tests set TP_SYMBOLIC_STRICT=1: a shape rule whose result disagrees with the
  // real result is an internal error there; otherwise the node is specialized.
  static const bool strict = [] {
    const char* v = std::getenv("TP_SYMBOLIC_STRICT");
    return v && *v && *v != '0';
  }();
  return strict;
}

class Tracer : public DispatchInterceptor {
 public:
  Tracer(Graph& g, bool execute, bool lift, int num_inputs)
      : g_(g), execute_(execute), lift_(lift), num_inputs_(num_inputs), rng_epoch_(generator_epoch()) {}
  // TraceResult::part_of, as recorded so far.
  std::map<std::string, std::string> part_of;

  // ---- values eager's backward would have saved (TraceResult::backward_error) ----
  // The capture's operators run without autograd, and functionalization makes
  // a later in-place write into a saved value invisible to the backward (which
  // reads the value as it was): eager raises there. So, as eager's autograd
  // does, each differentiable call notes the tensors its derivative reads
  // (OpDef::saved) at their version; one written later (its version moved by
  // the real in-place kernel) makes the compiled backward raise.
  struct SavedRead {
    Tensor t;
    uint64_t version;
    const Node* node;  // the call that saved it (is it on a result's path?)
    const char* op;
  };
  std::vector<SavedRead> saved_reads;
  std::unordered_set<const TensorImpl*> grad_values_;  // tensors eager would have given a grad_fn
  bool needs_grad_value(const Tensor& t) const {
    return t.defined() && (t.requires_grad() || grad_values_.count(t.impl()) > 0);
  }
  // After a call of `op` (its inputs, results, and for an in-place operator
  // the twin whose saved set applies; `n` its node) under the function's grad mode.
  void note_saved(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& out, const Node* n,
                  bool inplace) {
    if (!user_grad_ || !op.backward) return;
    std::vector<bool> needs;
    bool any = false;
    for (auto& t : inputs) any |= needs.emplace_back(needs_grad_value(t));
    if (!any) return;
    const SavedSet set = op.saved ? op.saved(needs) : SavedSet{~uint64_t{0}, ~uint64_t{0}};
    // (an in-place call's own input 0 is read before its write: eager keeps
    // what the formula needs of it; its result is self, read at this version)
    for (size_t i = inplace ? 1 : 0; i < inputs.size(); ++i)
      if (set.input(i) && inputs[i].defined()) saved_reads.push_back({inputs[i], inputs[i].autograd_version(), n, op.name});
    for (size_t j = 0; j < out.size(); ++j)
      if (set.output(j) && out[j].defined()) saved_reads.push_back({out[j], out[j].autograd_version(), n, op.name});
    for (auto& t : out)
      if (t.defined() && is_floating(t.dtype())) grad_values_.insert(t.impl());
  }
  // The first saved value written after it was saved by a call on the path of
  // `results` (eager's backward reaches only those): eager's error, or "".
  std::string stale_saved_read(const std::vector<Node*>& results) const {
    if (saved_reads.empty()) return {};
    std::unordered_set<const Node*> reached;
    std::vector<const Node*> stack(results.begin(), results.end());
    while (!stack.empty()) {
      const Node* v = stack.back();
      stack.pop_back();
      if (!v || !reached.insert(v).second) continue;
      for (const Arg& a : v->args)
        if (auto* p = std::get_if<Node*>(&a); p && *p) stack.push_back(*p);
    }
    for (const SavedRead& r : saved_reads) {
      if (r.t.autograd_version() == r.version || !reached.count(r.node)) continue;
      return str("one of the variables needed for gradient computation has been modified by an inplace operation: [",
                 dtype_name(r.t.dtype()), " ", shape_str(r.t.sizes()), "] is at version ", r.t.autograd_version(),
                 "; expected version ", r.version, " instead (", r.op,
                 " saved it inside the compiled function; clone() it before the in-place write, or write out of "
                 "place)");
    }
    return {};
  }
  void note_part(const OpDef& op) {
    const char* c = current_composite();
    auto [it, inserted] = part_of.try_emplace(op.name, c ? c : "");
    if (!inserted && it->second != (c ? c : "")) it->second.clear();
  }

  const std::vector<Tensor>& free_tensors() const { return free_; }

  // ---- dynamic shapes ----
  ShapeEnv* env_ = nullptr;
  // The SymShape of a traced tensor, replacements applied (empty: unknown / static).
  SymShape sym_of(const Tensor& t) {
    if (!env_ || !t.defined()) return {};
    auto it = values_.find(t.impl());
    if (it == values_.end()) return {};
    SymShape s = sym_shape_of(*it->second);
    for (auto& d : s) d = env_->resolve(d);
    return s;
  }
  SymAttrs size_attr(const Tensor& like) {
    SymShape s = sym_of(like);
    if (s.empty() || std::all_of(s.begin(), s.end(), [](const SymDim& d) { return d.is_const(); })) return {};
    return {{"size", s}};
  }
  // The user's SymInt attributes reach the node that carries them (the operator
  // itself, or the part of a composite with the same list of values).
  void consume(Node* n, UserCall& call) {
    for (auto& [name, vec] : call.sym_attrs) {
      // inferred: the node is the call's own operator, whose -1 (a view's inferred
      // dim) the call's attributes hold resolved (`x.view(x.size(0), -1)` replayed
      // by the joint trace: [s0, -1] against [s0, s1*s2]); unmatched, s0 was fixed.
      auto matches = [&](const AttrValue& v, bool inferred) {
        if (auto* i = std::get_if<int64_t>(&v)) return vec.size() == 1 && env_->hint(vec[0]) == *i;
        auto* l = std::get_if<std::vector<int64_t>>(&v);
        if (!l || l->size() != vec.size()) return false;
        for (size_t j = 0; j < vec.size(); ++j) {
          bool minus1 = (vec[j].is_const() && vec[j].const_value() == -1) || (inferred && (*l)[j] == -1);
          if (!minus1 && env_->hint(vec[j]) != (*l)[j]) return false;
        }
        return true;
      };
      const char* hit = nullptr;
      for (auto& [an, av] : n->attrs.items())
        if (name == an && matches(av, n->target == call.op)) hit = an;
      // A composite's part under another attribute name: a list of several values, or
      // a view's one-element size (reshape(n * m), x[:, :1].reshape(n)); a lone value
      // in any other list could match by chance.
      if (!hit && n->target != call.op)
        for (auto& [an, av] : n->attrs.items())
          if (std::holds_alternative<std::vector<int64_t>>(av) &&
              (vec.size() > 1 || std::strcmp(an, "size") == 0) && matches(av, false))
            hit = an;
      if (!hit) continue;
      n->sym_attrs[hit] = vec;
      call.consumed = true;
    }
  }
  // A derivative formula's attributes computed from its operands' sizes
  // (ops/size_expr.h): the node whose attribute of that name has that value
  // takes the expression over the operands' symbolic sizes (a constant one
  // too: it tells the rule the number is not a size the trace lost).
  void take_sized(Node* n, const std::vector<ops::SizedAttr>& sized) {
    for (const ops::SizedAttr& s : sized) {
      const AttrValue* v = n->attrs.find(s.name);
      std::vector<int64_t> values;
      if (const int64_t* i = v ? std::get_if<int64_t>(v) : nullptr) values = {*i};
      else if (auto* l = v ? std::get_if<std::vector<int64_t>>(v) : nullptr) values = *l;
      if (values.size() != s.exprs.size()) continue;
      std::vector<SymDim> out;
      for (size_t k = 0; k < values.size(); ++k) {
        const ops::SizeExpr& x = s.exprs[k];
        if (x.value() != values[k]) break;
        SymDim e(x.constant());
        for (const ops::SizeExpr::Term& t : x.terms()) {
          SymShape ts = sym_of(t.tensor);
          const size_t d = static_cast<size_t>(t.dim);
          e = e + SymDim(t.coef) * (d < ts.size() ? ts[d] : SymDim(t.tensor.sizes().at(d)));
        }
        e = env_->resolve(e);
        if (env_->hint(e) != values[k]) break;
        out.push_back(e);
      }
      if (out.size() == values.size()) n->sym_attrs[s.name] = std::move(out);
    }
  }
  bool hints_agree(const Node* n) {
    auto same = [&](const SymShape& s, const Shape& real) {
      if (s.size() != real.size()) return false;
      for (size_t i = 0; i < s.size(); ++i)
        if (env_->hint(s[i]) != real[i]) return false;
      return true;
    };
    if (!same(n->sym_sizes, n->meta.sizes)) return false;
    if (!n->output_metas.empty()) {
      if (n->output_sym_sizes.size() != n->output_metas.size()) return false;
      for (size_t i = 0; i < n->output_metas.size(); ++i)
        if (!same(n->output_sym_sizes[i], n->output_metas[i].sizes)) return false;
    }
    return true;
  }
  // Gives a new node its SymShape (a rule, or specialization of its inputs' symbols).
  void sym(Node* n, const SymAttrs* attrs = nullptr) {
    if (!env_) return;
    if (n->opcode != Opcode::CallFunction) {
      if (n->sym_sizes.empty())
        for (int64_t d : n->meta.sizes) n->sym_sizes.push_back(SymDim(d));
      return;
    }
    if (attrs) n->sym_attrs = *attrs;
    UserCall* call = t_user_call;
    const bool part = !call || call->op != n->target;
    if (call && !call->sym_attrs.empty()) consume(n, *call);
    if (const std::vector<ops::SizedAttr>* sized = ops::sized_attrs()) take_sized(n, *sized);
    bool ok = false;
    std::string why;
    try {
      ok = apply_sym_rule(*n, *env_, part, call);
    } catch (const Error& e) {
      why = e.what();
    }
    if (ok && !hints_agree(n)) {
      if (symbolic_checks_strict())
        throw Error(str("internal: the symbolic shape rule of ", n->target->name, " gives ",
                        shape_str(n->meta.sizes), " at the hints wrongly"));
      ok = false;
    }
    if (ok) {
      // A derived size whose example value is 0 or 1 (x[1:] at x.size(0) = 2): Stax
      // takes a dim of example size 1 as a broadcast / dropped dim, so such a size
      // is fixed (guarded) like an input size of 0 or 1 is never made symbolic.
      const std::string where = call ? call->where() : "";
      auto fix_small = [&](const SymShape& s) {
        for (auto& d : s)
          if (!env_->resolve(d).is_const() && env_->hint(d) <= 1) env_->specialize(d, where);
      };
      fix_small(n->sym_sizes);
      for (auto& s : n->output_sym_sizes) fix_small(s);
      return;
    }
    // No rule: every symbol of the inputs (and of its symbolic attributes) becomes its hint.
    const std::string where = call ? call->where() : "";
    if (guards_logged()) {
      bool any = false;
      for (Node* in : n->input_nodes())
        for (auto& d : sym_shape_of(*in)) any |= !env_->resolve(d).is_const();
      if (any)
        std::fprintf(stderr, "[tp.compile] %s: no symbolic shape rule%s; its inputs' sizes are specialized%s%s\n",
                     n->target->name, why.empty() ? "" : (" (" + why + ")").c_str(), where.empty() ? "" : " at ",
                     where.c_str());
    }
    for (Node* in : n->input_nodes())
      for (auto& d : sym_shape_of(*in)) env_->specialize(d, where);
    for (auto& [name, vec] : n->sym_attrs)
      for (auto& d : vec) env_->specialize(d, where);
    n->sym_attrs.clear();
    n->sym_sizes.clear();
    for (int64_t d : n->meta.sizes) n->sym_sizes.push_back(SymDim(d));
    n->output_sym_sizes.clear();
    for (auto& m : n->output_metas) {
      SymShape s;
      for (int64_t d : m.sizes) s.push_back(SymDim(d));
      n->output_sym_sizes.push_back(std::move(s));
    }
  }

  const std::vector<bool>& free_aliases() const { return free_aliases_; }

  // A tensor an operator recorded in this trace made, neither a view nor an
  // input or free tensor: its storage belongs to the captured program alone.
  bool is_own_value(const Tensor& t) const {
    return values_.count(t.impl()) && !views_.count(t.impl()) && !is_placeholder(t);
  }
  bool is_traced_result(const Tensor& t) const { return values_.count(t.impl()) && !is_placeholder(t); }

  // `t` stands for `src`'s value from now on (t.detach_(): its detached view).
  void rebind(const Tensor& t, const Tensor& src) {
    auto it = values_.find(src.impl());
    TP_CHECK(it != values_.end(), CaptureError, "internal: rebinding to a tensor the trace does not know");
    values_[t.impl()] = it->second;
  }

  bool depends_on_call(const Tensor& t) {
    auto it = values_.find(t.impl());
    if (it == values_.end()) return true;  // not read by an operator yet: a free tensor
    std::vector<const Node*> stack{it->second};
    std::unordered_set<const Node*> seen;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->opcode == Opcode::Placeholder || n->opcode == Opcode::GetAttr) return true;
      for (const Arg& a : n->args)
        if (auto* p = std::get_if<Node*>(&a); p && *p) stack.push_back(*p);
    }
    return false;
  }

  bool computed_only_from(const Tensor& t, const std::vector<Tensor>& roots) {
    auto it = values_.find(t.impl());
    if (it == values_.end()) return false;
    std::unordered_set<const Node*> root_nodes;
    for (const Tensor& r : roots)
      if (auto f = values_.find(r.impl()); f != values_.end()) root_nodes.insert(f->second);
    std::vector<const Node*> stack{it->second};
    std::unordered_set<const Node*> seen;
    bool reached = false;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (root_nodes.count(n)) {
        reached = true;
        continue;
      }
      if (n->opcode == Opcode::Placeholder || n->opcode == Opcode::GetAttr) return false;
      for (const Arg& a : n->args)
        if (auto* p = std::get_if<Node*>(&a); p && *p) stack.push_back(*p);
    }
    return reached;
  }

  void bind_input(const Tensor& t, Node* n) {
    values_[t.impl()] = n;
    keep_.push_back(t);
  }

  Arg arg_for(const Tensor& t) {
    if (!t.defined()) return static_cast<Node*>(nullptr);  // an absent optional argument
    refresh(t);
    auto it = values_.find(t.impl());
    if (it != values_.end()) return it->second;
    if (t.is_wrapped_number()) return t.item();  // a Python number: a constant of the graph
    // A custom Function's backward traced into a joint graph: a tensor it reads
    // that is none of the trace's values would be a constant of the compiled
    // backward, stale at the next call when it is a parameter, a global that
    // changes, or a value of the forward's capture kept out of ctx's sight. A
    // 0-d one is a constant made on the way (a composite's bound, tp.tensor(2.0)).
    if (t_custom_backward && (t.requires_grad() || t.dim() > 0))
      throw CaptureError(str(*t_custom_backward, " reads a ", dtype_name(t.dtype()), shape_str(t.sizes()),
                             " tensor that is none of its gradients, saved tensors or ctx attributes (a parameter, "
                             "a global, a tensor kept elsewhere); pass it to the Function and save it with "
                             "ctx.save_for_backward"));
    if (!lift_) {
      // A free tensor (e.g. a global): lifted into the graph as a named constant.
      Node* n = g_.get_attr("const", t);
      sym(n);
      bind_input(t, n);
      return n;
    }
    // Does it share memory with an input or an intermediate? Then it may have been
    // made from one outside the operators (`x.detach()`, `x.data`); the caller
    // decides (a located global is fine, an unlocated alias cannot be re-read).
    bool aliases = false;
    for (auto& k : keep_)
      if (k.impl()->storage == t.impl()->storage &&
          std::none_of(free_.begin(), free_.end(), [&](const Tensor& f) { return f.impl() == k.impl(); }))
        aliases = true;
    // A free tensor (a parameter, global, closure variable): an extra input,
    // which the caller reads afresh at every call.
    Node* n = g_.placeholder("free", t.meta(), num_inputs_ + static_cast<int>(free_.size()));
    free_.push_back(t);
    free_aliases_.push_back(aliases);
    sym(n);
    bind_placeholder(t, n);
    return n;
  }

  Node* node_for(const Tensor& t) {
    Arg a = arg_for(t);
    if (auto* n = std::get_if<Node*>(&a)) return *n;
    Tensor c = Tensor::scalar_tensor(std::get<Scalar>(a), t.dtype());
    Node* n = g_.get_attr("const", c);
    sym(n);
    return n;
  }

  void bind_placeholder(const Tensor& t, Node* n) {
    bind_input(t, n);
    placeholders_.push_back({t, n});
  }

  // The position of the first node recorded after `last` (null: the graph was
  // empty). Not the old node count: a free tensor first read by the call gets
  // its placeholder in front of every other node, which shifts the earlier
  // nodes by one (`stats.mul_(0.9)` under no_grad then marked the preceding
  // `x @ w` as recorded without grad: the compiled result needed no gradient).
  static size_t first_after(const Graph& g, const Node* last) {
    if (!last) return 0;
    for (size_t i = g.nodes().size(); i-- > 0;)
      if (g.nodes()[i].get() == last) return i + 1;
    return g.nodes().size();
  }

  std::vector<Tensor> intercept(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) override {
    std::vector<Tensor> out = record(op, inputs, attrs);
    // Eager's new tensors made under tp.inference_mode are inference tensors
    // (a view keeps its base's kind; an in-place write does not change it):
    // remembered so the compiled call marks such results as eager's are.
    if (autograd::inference_mode_enabled() && !op.has(kInplace) && !op.has(kView))
      for (auto& t : out) {
        bool input = false;
        for (auto& in : inputs) input |= in.defined() && in.impl() == t.impl();
        if (t.defined() && !input) inference_.insert(t.impl());
      }
    return out;
  }

  // Whether eager's `t` is an inference tensor made inside the function: made
  // under tp.inference_mode, or a view of such a tensor.
  bool made_in_inference(const Tensor& t) const {
    if (inference_.count(t.impl())) return true;
    Tensor root = view_root(t);
    return root.defined() && inference_.count(root.impl());
  }

  std::vector<Tensor> record(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
    // The grad mode the function called the operator under (a `with no_grad():`
    // inside it) is kept on the nodes this call records, so that compiled
    // training differentiates what eager does; the recording runs without autograd.
    struct MarkGradMode {
      Graph& g;
      const Node* last;  // the graph's last node before the call
      bool enabled;
      ~MarkGradMode() {
        if (!enabled)
          for (size_t i = first_after(g, last); i < g.nodes().size(); ++i) g.nodes()[i]->grad_enabled = false;
      }
    } mark{g_, g_.nodes().empty() ? nullptr : g_.nodes().back().get(),
           GradMode::is_enabled() && !write_without_grad(op, inputs)};
    user_grad_ = mark.enabled;
    call_last_node_ = mark.last;
    t_user_exception = false;
    AutoGradMode no_grad(false);
    if (op.has(kRandom)) return functionalize_random(op, inputs, attrs);
    if (op.has(kInplace)) return functionalize_inplace(op, inputs, attrs);
    if (is_batch_norm_update(op, inputs, attrs)) return functionalize_batch_norm(op, inputs, attrs);
    std::vector<Arg> args;
    args.reserve(inputs.size());
    for (auto& t : inputs) args.push_back(arg_for(t));
    std::vector<Tensor> out;
    // A custom Function's node: its results are aliases of its first arguments
    // (no kernel runs, on any device) and are no views for functionalization: a
    // new value, as eager's Function output is a new tensor.
    const bool custom = is_custom_function(op);
    {
      ScopedInterceptor suspend(nullptr);  // run the real kernel, unrecorded
      out = custom ? custom_function_results(inputs, attrs)
            : execute_ || op.has(kView) ? run_kernel(op, inputs, attrs) : allocate_outputs(op, inputs, attrs);
    }
    TP_CHECK(!out.empty(), CaptureError, "cannot capture operator ", op.name, ": it returned no tensor");
    Node* n = g_.call(op, std::move(args), attrs, out[0].meta());
    note_part(op);
    if (!custom) note_saved(op, inputs, out, n, false);
    if (out.size() == 1) {
      sym(n);
      bind_input(out[0], n);
      if (!custom) note_view(op, inputs, attrs, out[0], -1, n->sym_attrs);
      size_gate(op, attrs, out[0]);
      return out;
    }
    // Several results: the node stands for all of them, one getitem node each.
    for (auto& t : out) n->output_metas.push_back(t.meta());
    sym(n);
    for (size_t i = 0; i < out.size(); ++i) {
      Node* gi = g_.call(getitem_op(), {n}, {{"index", static_cast<int64_t>(i)}}, out[i].meta());
      sym(gi);
      bind_input(out[i], gi);
      if (!custom) note_view(op, inputs, attrs, out[i], static_cast<int>(i), n->sym_attrs);
    }
    size_gate(op, attrs, out[0]);
    return out;
  }

  // An operator whose result size depends on the data (nonzero, so `x[mask]`;
  // unique, bincount): every later node of the graph, and the joint graph's
  // backward, has the size this call gave baked in (a mean's divisor, a
  // reshape, the gradient's scatter), so the capture is valid only for calls
  // where the operator gives that size again: a data gate on it. (Without it a
  // call with another mask ran the first call's backward: a wrong gradient, or
  // an index read from uninitialized memory.) The first result's element count
  // fixes the data-dependent dim: the other dims follow from the inputs' sizes.
  void size_gate(const OpDef& op, const Attrs& attrs, const Tensor& t) {
    // (tp.compile's captures only: the AOT joint trace replays an already gated graph.)
    if (!op.has(kNondeterministicShape) || !execute_ || !lift_) return;
    // The caller gave the size (F.one_hot(y, 10), repeat_interleave's output_size).
    const std::string name = op.name;
    if (name == "one_hot" && attrs.has("num_classes") && attrs.get_int("num_classes") >= 0) return;
    if (name == "repeat_interleave.Tensor" && attrs.has("output_size") && !attrs.is_none("output_size")) return;
    std::string where = str(op.name, "'s result");
    if (t_source_line) {
      std::string line = t_source_line();
      if (!line.empty()) where += " at " + line;
    }
    gates_.push_back({node_for(t), "numel", std::move(where), Scalar(static_cast<int64_t>(t.numel()))});
  }

  // ---- data gates (Section 3) ----
  struct PendingGate {
    Node* node;
    std::string kind, where;
    Scalar value;
  };
  Scalar gate(const Tensor& t, const std::string& kind, const std::string& where) {
    if (!execute_)
      throw CaptureError(str("cannot capture ", kind, "(Tensor)", where.empty() ? "" : " at " + where,
                             ": it reads tensor data, and this trace has shapes only"));
    Node* n = node_for(t);
    Scalar v;
    {
      ScopedInterceptor suspend(nullptr);
      v = read_gate_value(kind, t);
    }
    gates_.push_back({n, kind, where, v});
    return v;
  }
  void note_detached(const Tensor& t) {
    keep_.push_back(t);
    detached_.insert(t.impl());
  }
  const std::vector<PendingGate>& gates() const { return gates_; }
  size_t random_calls() const { return random_calls_; }

  // Whether eager autograd would give `t` a history: it is computed, through
  // operators that have a derivative and were called with grad mode on, from
  // an input or free tensor that requires grad (the capture's own tensors
  // never do: the operators run without autograd).
  bool requires_grad(const Tensor& t) {
    auto it = values_.find(t.impl());
    if (it == values_.end()) return t.requires_grad();  // not read yet: a free tensor as it is
    std::unordered_map<const Node*, const Tensor*> bound;
    for (auto& [pt, pn] : placeholders_) bound[pn] = &pt;
    auto differentiable = [](const Node* n) {
      return n->opcode == Opcode::CallFunction && !n->grad_identity_of && n->grad_enabled &&
             (n->is_getitem() || n->target->backward);
    };
    // Post-order over the nodes `t` depends on (iterative: chains may be long).
    std::unordered_map<const Node*, bool> memo;
    std::vector<std::pair<const Node*, bool>> stack{{it->second, false}};
    while (!stack.empty()) {
      auto [n, expanded] = stack.back();
      stack.pop_back();
      if (memo.count(n)) continue;
      if (!expanded) {
        stack.push_back({n, true});
        if (n->grad_identity_of) stack.push_back({n->grad_identity_of, false});
        else if (differentiable(n))
          for (const Node* in : n->input_nodes()) stack.push_back({in, false});
        continue;
      }
      bool r = false;
      if (n->opcode == Opcode::Placeholder) {
        auto b = bound.find(n);
        r = b != bound.end() && b->second->requires_grad();
      } else if (n->opcode == Opcode::GetAttr) {
        r = n->constant.defined() && n->constant.requires_grad();
      } else if (n->grad_identity_of) {
        r = memo.at(n->grad_identity_of);  // a placeholder written under no_grad is still that tensor
      } else if (differentiable(n)) {
        for (const Node* in : n->input_nodes()) r = r || memo.at(in);
      }
      if (n->output_metas.empty()) r = r && is_floating(n->meta.dtype);
      memo[n] = r;
    }
    return memo.at(it->second);
  }

  // ---- functionalization (Section 4, Proposition 4.4) ----
  // The graph is a pure function: an in-place operator becomes its out-of-place
  // twin, and a write through a view becomes a scatter of the new value into the
  // view's base (select_scatter / slice_scatter / as_strided_scatter), after
  // which every other view of that base is re-derived from the new base value
  // when it is next read. A placeholder (argument or free tensor) whose final
  // value differs from its initial one is a mutated input: its final value is an
  // extra graph output, which the caller copies into the caller's tensor after
  // the compiled code ran. During capture the real kernels still run (the Python
  // code sees eager's values); the initial data of every written input is saved
  // and put back afterwards, so the compiled code applies the side effect once.

  // A placeholder whose value the function replaced, and the node of its final value.
  std::vector<std::pair<int, Node*>> mutations() {
    std::vector<std::pair<int, Node*>> r;
    for (auto& [t, n] : placeholders_) {
      Node* cur = node_for(t);
      if (cur != n) r.push_back({n->input_index, cur});
    }
    return r;
  }
  // The user's exception ended the trace: the writes stand, as eager's would.
  void keep_writes() { saved_.clear(); }
  // Puts the inputs written during capture back as they were.
  void restore_inputs() {
    ScopedInterceptor suspend(nullptr);
    for (auto& [t, saved] : saved_) {
      if (t.device().kind == Device::Kind::CPU) copy_into(t, saved);
      else run_kernel(get_op("copy_"), {t, saved}, {});  // device memory: the device's copy kernel
    }
    saved_.clear();
  }
  // The chain of view operators from a placeholder to `t` (for results that are views of inputs).
  bool view_chain(const Tensor& t, int* input_index, std::vector<std::pair<const OpDef*, Attrs>>* steps,
                  std::vector<SymAttrs>* sym_steps) {
    std::vector<std::pair<const OpDef*, Attrs>> rev;
    std::vector<SymAttrs> rev_sym;
    const TensorImpl* cur = t.impl();
    while (true) {
      auto it = views_.find(cur);
      if (it == views_.end()) break;
      const ViewInfo& v = it->second;
      if (v.inputs.size() != 1 || v.out_index >= 0) return false;
      rev.push_back({v.op, v.attrs});
      rev_sym.push_back(v.sym_attrs);
      cur = v.inputs[0].impl();
    }
    if (rev.empty()) return false;
    for (auto& [pt, pn] : placeholders_)
      if (pt.impl() == cur) {
        *input_index = pn->input_index;
        steps->assign(rev.rbegin(), rev.rend());
        sym_steps->assign(rev_sym.rbegin(), rev_sym.rend());
        return true;
      }
    return false;
  }
  // The tensor at the end of t's chain of (single-input) view operators; t itself
  // when it is not a view, an undefined tensor when the chain has another kind of link.
  Tensor view_root(const Tensor& t) const {
    Tensor cur = t;
    while (true) {
      auto it = views_.find(cur.impl());
      if (it == views_.end()) return cur;
      const ViewInfo& v = it->second;
      if (v.inputs.size() != 1 || v.out_index >= 0) return Tensor();
      cur = v.inputs[0];
    }
  }
  bool is_placeholder(const Tensor& t) const {
    for (auto& [pt, pn] : placeholders_)
      if (pt.impl() == t.impl()) return true;
    return false;
  }
  // The chain of view operators from another result to outputs[i], when
  // outputs[i] is a view of it (eager's `return y, y[0]`; the nearest such result).
  bool view_of_output(const std::vector<Tensor>& outputs, size_t i, int* output_index,
                      std::vector<std::pair<const OpDef*, Attrs>>* steps, std::vector<SymAttrs>* sym_steps) {
    std::vector<std::pair<const OpDef*, Attrs>> rev;
    std::vector<SymAttrs> rev_sym;
    const TensorImpl* cur = outputs[i].impl();
    while (true) {
      auto it = views_.find(cur);
      if (it == views_.end()) return false;
      const ViewInfo& v = it->second;
      if (v.inputs.size() != 1 || v.out_index >= 0) return false;
      rev.push_back({v.op, v.attrs});
      rev_sym.push_back(v.sym_attrs);
      cur = v.inputs[0].impl();
      for (size_t j = 0; j < outputs.size(); ++j)
        if (j != i && outputs[j].impl() == cur) {
          *output_index = static_cast<int>(j);
          steps->assign(rev.rbegin(), rev.rend());
          sym_steps->assign(rev_sym.rbegin(), rev_sym.rend());
          return true;
        }
    }
  }

 private:
  struct ViewInfo {
    const OpDef* op;
    std::vector<Tensor> inputs;  // inputs[0] is the tensor it views
    Attrs attrs;
    int out_index;               // >= 0: that result of a multi-result operator
    const TensorImpl* root;      // the non-view tensor at the end of the chain
    uint64_t gen;                // the root's write count when this view's node was made
    SymAttrs sym_attrs;          // its node's attributes computed from sizes (dynamic shapes)
  };

  // The tensor a write lands in at the end of the chain of views.
  const TensorImpl* root_of(const Tensor& t) const {
    auto it = views_.find(t.impl());
    return it == views_.end() ? t.impl() : it->second.root;
  }

  void note_view(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs, const Tensor& out,
                 int out_index, const SymAttrs& sym_attrs = {}) {
    // A result that shares memory with input 0 and is a new object is a view of
    // it (a view op, or an op such as reshape/contiguous that returned one).
    if (inputs.empty() || !inputs[0].defined() || out.impl() == inputs[0].impl() ||
        out.impl()->storage != inputs[0].impl()->storage)
      return;
    const TensorImpl* root = root_of(inputs[0]);
    views_[out.impl()] = ViewInfo{&op, inputs, attrs, out_index, root, gen_[root], sym_attrs};
  }

  // A view whose base was written since its node was made gets a new node: the
  // view operator applied to the base's current value.
  void refresh(const Tensor& t) {
    auto it = views_.find(t.impl());
    if (it == views_.end() || it->second.gen == gen_[it->second.root]) return;
    ViewInfo& v = it->second;
    std::vector<Arg> args;
    for (auto& in : v.inputs) args.push_back(arg_for(in));
    values_[t.impl()] = replay(*v.op, std::move(args), v.attrs, v.out_index, &v.sym_attrs);
    v.gen = gen_[v.root];
  }

  // A node for op(args), with metas inferred from the argument nodes.
  Node* replay(const OpDef& op, std::vector<Arg> args, const Attrs& attrs, int out_index = -1,
               const SymAttrs* sym_attrs = nullptr) {
    std::vector<TensorMeta> in_meta;
    for (auto& a : args) {
      TensorMeta m;
      if (auto* n = std::get_if<Node*>(&a)) {
        if (*n) m = (*n)->meta;
        else m.defined = false;
      } else {
        m = TensorMeta::contiguous({}, std::get<Scalar>(a).is_float() ? DType::Float32 : (std::get<Scalar>(a).is_bool() ? DType::Bool : DType::Int64));
      }
      in_meta.push_back(m);
    }
    std::vector<TensorMeta> metas = op.infer(op, in_meta, attrs);
    Node* n = g_.call(op, std::move(args), attrs, metas.at(0));
    if (metas.size() == 1 && out_index < 0) {
      sym(n, sym_attrs);
      return n;
    }
    n->output_metas = metas;
    sym(n, sym_attrs);
    int64_t i = out_index < 0 ? 0 : out_index;
    Node* gi = g_.call(getitem_op(), {n}, {{"index", i}}, metas.at(static_cast<size_t>(i)));
    sym(gi);
    return gi;
  }

  Node* convert(Node* n, const Tensor& like) {
    if (n->meta.dtype != like.dtype()) n = replay(get_op("to"), {n}, {{"dtype", like.dtype()}});
    if (n->meta.sizes != like.sizes()) {
      SymAttrs sa = size_attr(like);
      n = replay(get_op("expand"), {n}, {{"size", like.sizes()}}, -1, &sa);
    }
    return n;
  }

  // Before the first write into an input (argument or free tensor): keep its data.
  void save_before_write(const Tensor& t) {
    if (!execute_) return;
    const TensorImpl* root = root_of(t);
    for (auto& [pt, pn] : placeholders_) {
      if (pt.impl() != root) continue;
      for (auto& s : saved_)
        if (s.first.impl() == root) return;
      ScopedInterceptor suspend(nullptr);
      Tensor copy;
      if (pt.device().kind == Device::Kind::CPU) {
        copy = Tensor::empty(pt.sizes(), pt.dtype());
        copy_into(copy, pt);
      } else {
        copy = run_kernel(get_op("clone"), {pt}, {})[0];  // device memory: the device's copy kernel
      }
      saved_.push_back({pt, copy});
      return;
    }
  }

  // Two inputs that share memory: a write into one changes the other, which the
  // graph (values, one placeholder each) cannot express.
  void check_unaliased_input(const Tensor& t, const char* opname) {
    const Node* mine = nullptr;
    for (auto& [pt, pn] : placeholders_)
      if (pt.impl() == t.impl()) mine = pn;
    if (!mine) return;
    for (auto& [pt, pn] : placeholders_)
      if (pn != mine && pt.impl()->storage == t.impl()->storage)
        throw CaptureError(str("cannot capture ", opname, ": it writes into input '", mine->name,
                               "', which shares memory with input '", pn->name,
                               "'; pass tensors that do not overlap, or .clone() one of them"));
  }

  // `t` now holds the value `value`: the write lands in t's base through the views between them.
  void write(const Tensor& t, Node* value, const char* opname) {
    auto it = views_.find(t.impl());
    if (it == views_.end()) {
      check_unaliased_input(t, opname);
      if (!user_grad_) {
        // Written under no_grad: the tensor keeps its autograd identity (Node::grad_identity_of),
        // marked on a node this call made (a copy_ may hand back its source's node).
        Node* old = node_for(t);
        if (old->grad_identity_of) old = old->grad_identity_of;
        bool fresh = false;
        for (size_t i = first_after(g_, call_last_node_); i < g_.nodes().size() && !fresh; ++i)
          fresh = g_.nodes()[i].get() == value;
        // An intermediate with a history (`h = x * 2` then `h.mul_(3)` under no_grad,
        // or through h.detach()) keeps that history in eager; a node that stands for
        // another one would dangle once passes remove or merge the old node, so the
        // graph cannot say it: refused rather than a gradient that silently loses
        // the history.
        if (old->opcode != Opcode::Placeholder && requires_grad(t))
          throw CaptureError(str("cannot capture ", opname, " under no_grad (or through detach()) into an "
                                 "intermediate that requires grad: eager keeps its history across the write, which "
                                 "the compiled graph cannot express; write into a clone(), or compute the new value "
                                 "out of place"));
        if (old->opcode == Opcode::Placeholder && fresh && value->opcode == Opcode::CallFunction)
          value->grad_identity_of = old;
      }
      values_[t.impl()] = value;
      ++gen_[t.impl()];
      return;
    }
    ViewInfo v = it->second;
    // A parent that shares elements (an expand: stride 0 over a dim longer than 1)
    // cannot take the write back as a value: scattering it into its own base writes
    // every copy, the last one winning, so a write through one copy
    // (`x[None].expand(2, n)[0].fill_(v)`) was lost in the compiled graph. Such a
    // write goes past those views, into the nearest ancestor without shared
    // elements, by t's own strides (t itself never shares elements: eager refuses
    // such a write).
    // (Sufficient test of no overlap: dims of size > 1 by increasing stride, each
    // stride beyond the extent of the smaller ones; an unfold's windows fail it.)
    auto shares_elements = [](const Tensor& u) {
      std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
      for (int64_t d = 0; d < u.dim(); ++d)
        if (u.sizes()[d] > 1) dims.push_back({u.strides()[d], u.sizes()[d]});
      std::sort(dims.begin(), dims.end());
      int64_t extent = 0;
      for (auto& [stride, size] : dims) {
        if (stride <= extent) return true;
        extent += stride * (size - 1);
      }
      return false;
    };
    if (shares_elements(v.inputs[0]) && !shares_elements(t)) {
      Tensor anc = v.inputs[0];
      while (shares_elements(anc)) {
        auto a = views_.find(anc.impl());
        if (a == views_.end() || a->second.inputs.size() != 1 || a->second.out_index >= 0) break;
        anc = a->second.inputs[0];
      }
      Node* pa = shares_elements(anc) ? nullptr : node_for(anc);
      if (!pa || !anc.is_contiguous() || pa->meta.sizes != anc.sizes())
        throw CaptureError(str("cannot capture ", opname, ": it writes through an expanded view of size ",
                               shape_str(v.inputs[0].sizes()), " and strides ", shape_str(v.inputs[0].strides()),
                               " whose base is not a dense tensor; write into the base tensor directly"));
      Node* scattered = replay(get_op("as_strided_scatter"), {pa, value},
                               {{"size", t.sizes()}, {"stride", t.strides()}, {"storage_offset", t.offset() - anc.offset()}});
      write(anc, scattered, opname);
      values_[t.impl()] = value;
      views_[t.impl()].gen = gen_[v.root];
      return;
    }
    const Tensor& parent = v.inputs[0];
    Node* p = node_for(parent);
    Node* scattered = nullptr;
    std::string name = v.op->name;
    if (name == "view.dtype") {
      // The same bits as the parent's dtype: the inverse reinterpretation (a reshape
      // back, as the branch below does, converted the values instead of the bits).
      scattered = replay(get_op("view.dtype"), {value}, {{"dtype", parent.dtype()}});
    } else if (v.out_index < 0 && v.inputs.size() == 1 && (name == "select" || name == "slice")) {
      scattered = replay(get_op(name == "select" ? "select_scatter" : "slice_scatter"), {p, value}, v.attrs, -1,
                         &v.sym_attrs);
    } else if (t.is_contiguous() && parent.is_contiguous() && t.offset() == parent.offset() &&
               t.numel() == parent.numel()) {
      // A reshape of the whole parent (view, flatten, unsqueeze, ...): the value reshaped back.
      SymAttrs sa = size_attr(parent);
      scattered = replay(get_op("view"), {value}, {{"size", parent.sizes()}}, -1, &sa);
    } else if (parent.is_contiguous() && p->meta.sizes == parent.sizes()) {
      // Any other view of a dense parent: the written elements by their strides.
      scattered = replay(get_op("as_strided_scatter"), {p, value},
                         {{"size", t.sizes()}, {"stride", t.strides()}, {"storage_offset", t.offset() - parent.offset()}});
    } else {
      throw CaptureError(str("cannot capture ", opname, ": it writes through a ", v.op->name, " view of a ",
                             "non-contiguous tensor of size ", shape_str(parent.sizes()), " and strides ",
                             shape_str(parent.strides()),
                             "; write into a .contiguous() copy, or into the base tensor directly"));
    }
    write(parent, scattered, opname);
    values_[t.impl()] = value;
    views_[t.impl()].gen = gen_[v.root];
  }

  // Eager autograd's refusal of a write, with grad mode on, into a leaf that
  // requires grad or a view of one (autograd/record.cpp), with its message: the
  // capture runs kernels without autograd, so the write went through and only
  // the write-back into the caller's tensor failed, naming copy_.
  void refuse_write_into_leaf(const OpDef& op, const Tensor& self) {
    auto is_grad_leaf = [](const Tensor& t) { return t.requires_grad() && !t.impl()->grad_fn; };
    TP_CHECK(!is_grad_leaf(self), Error, op.name,
             ": a leaf Variable that requires grad is being used in an in-place operation (shape ",
             shape_str(self.sizes()), "); do it under tp.no_grad() or on a clone()");
    const TensorImpl* root = root_of(self);
    if (root == self.impl()) return;
    for (auto& [t, n] : placeholders_)
      TP_CHECK(t.impl() != root || !is_grad_leaf(t), Error, op.name,
               ": a view of a leaf Variable that requires grad is being used in an in-place operation (view shape ",
               shape_str(self.sizes()), ", leaf shape ", shape_str(t.sizes()), ")");
  }

  // Whether a write into `t` goes through a view x.detach() made (note_detached).
  bool through_detach(const Tensor& t) const {
    for (const TensorImpl* v = t.impl();;) {
      if (detached_.count(v)) return true;
      auto it = views_.find(v);
      if (it == views_.end() || it->second.inputs.empty()) return false;
      v = it->second.inputs[0].impl();
    }
  }

  // A write through x.detach() (`w.detach().mul_(2)` on a leaf that requires
  // grad) is, for autograd, a write under no_grad: eager allows it, the value
  // has no history, and the written tensor keeps its identity (Node::
  // grad_identity_of: its gradient is still the tensor's own, not 2x through
  // the mul; write() refuses an intermediate with a history).
  bool write_without_grad(const OpDef& op, const std::vector<Tensor>& inputs) const {
    return op.has(kInplace) && !inputs.empty() && inputs[0].defined() && through_detach(inputs[0]);
  }

  std::vector<Tensor> functionalize_inplace(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
    const Tensor& self = inputs.at(0);
    std::string name = op.name;
    if (user_grad_) refuse_write_into_leaf(op, self);
    node_for(self);  // a free tensor written before it is read is lifted (and saved) now
    Node* value = nullptr;
    const OpDef* saver = nullptr;  // the out-of-place twin, whose saved values eager keeps
    if (name == "copy_") {
      value = convert(node_for(inputs.at(1)), self);
      // Under no_grad the written tensor keeps its autograd identity, marked on the
      // value node (write): a node of its own, not the source's.
      if (!user_grad_ && value == node_for(inputs.at(1))) value = replay(get_op("clone"), {value}, {});
    } else if (name == "fill_" && self.device().kind != Device::Kind::CPU) {
      // A factory node has no device (interpreted, or traced again by the AOT
      // layer, it makes a host tensor): on a GPU the value is built from self
      // (full_on records where(self != 0, v, v)), so it stays on self's device.
      value = node_for(ops::full_on(self, self.sizes(), attrs.get_scalar("value"), self.dtype()));
    } else if (name == "fill_") {
      SymAttrs sa = size_attr(self);
      value = replay(get_op("full"), {},
                     {{"size", self.sizes()}, {"fill_value", attrs.get_scalar("value")}, {"dtype", self.dtype()}}, -1,
                     &sa);
    } else {
      // The out-of-place twin: add_ -> add, scatter_.src -> scatter.src.
      size_t dot = name.find('.');
      std::string base = name.substr(0, dot), overload = dot == std::string::npos ? "" : name.substr(dot);
      const OpDef* twin = base.size() > 1 && base.back() == '_' ? find_op(base.substr(0, base.size() - 1) + overload)
                                                                  : nullptr;
      if (!twin || twin->has(kInplace) || twin->num_inputs != op.num_inputs)
        throw CaptureError(str("cannot capture the in-place operator ", op.name,
                               " inside a compiled function: it has no out-of-place form to functionalize it "
                               "into; use an out-of-place operator"));
      std::vector<Arg> args;
      for (auto& t : inputs) args.push_back(arg_for(t));
      value = convert(replay(*twin, std::move(args), attrs), self);
      saver = twin;
    }
    save_before_write(self);
    std::vector<Tensor> out;
    {
      ScopedInterceptor suspend(nullptr);  // the real write, so Python sees eager's values
      out = run_kernel(op, inputs, attrs);
    }
    write(self, value, op.name);
    if (saver) note_saved(*saver, inputs, {self}, value, true);
    return out;
  }

  // ---- random operators (ops/random_functional.h) ----
  // A random operator becomes philox_random draws, whose randomness is an input
  // of the graph (the state of the generator drawn from: one placeholder per
  // generator), plus pure operators that map a draw as the eager kernel does.
  // The real operator still runs (Python sees eager's values); the counters it
  // reserves say which generator it drew from and where, so each draw's offset
  // in a call's range is eager's and the call reserves eager's total.
  struct Reservations : ReservationObserver {
    struct Seen {
      int64_t id;
      PhiloxRange range;
      uint64_t n;
    };
    std::vector<Seen> seen;
    void reserved(int64_t id, PhiloxRange range, uint64_t n) override { seen.push_back({id, range, n}); }
  };
  struct RngUse {
    int64_t gen;
    uint64_t key, start, next;  // the generator at capture: key, first counter, next unused counter
  };
  // One draw: its own state placeholder ([key, first counter of this draw]: the
  // call places it after the draws before it), its philox_random node (whose
  // sizes give the draw's element count at any size) and eager's counters.
  struct Draw {
    int64_t gen;
    Node* state;
    Node* node;
    uint64_t counters;
    int64_t per;
  };
  // The generator's use in this trace; a new one starts at `st` (its state before this draw).
  RngUse& rng_use(int64_t gen, GeneratorState st) {
    for (auto& u : rng_)
      if (u.gen == gen) return u;
    rng_.push_back({gen, st.seed, st.offset, st.offset});
    return rng_.back();
  }

  // Counters eager's kernels use per draw (ops/factory_ops.cpp and friends): a
  // float64 sample or a 64-bit integer takes two 32-bit words, anything else one.
  static int64_t elements_per_counter(const std::string& dist, DType dt) {
    return dist == "randint" || dist == "randperm" || dt == DType::Float64 ? 2 : 4;
  }
  static uint64_t counters_for(const std::string& dist, int64_t n, DType dt) {
    const int64_t per = elements_per_counter(dist, dt);
    return static_cast<uint64_t>((n + per - 1) / per);
  }

  std::vector<Tensor> functionalize_random(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
    ++random_calls_;
    const std::string name = op.name;
    static const char* const kKnown[] = {"rand", "randn", "randint", "randint.low", "randperm", "normal_",
                                         "uniform_", "bernoulli_.float", "bernoulli", "native_dropout"};
    if (!execute_ || std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return name == k; }))
      throw CaptureError(str("cannot capture the random operator ", op.name, " inside a compiled function",
                             execute_ ? " (it has no functional form yet)" : " in a shapes-only trace",
                             "; create the random tensor outside and pass it in"));
    check_not_reseeded(op.name);
    Node* self = inputs.empty() ? nullptr : node_for(inputs[0]);  // before an in-place write
    if (op.has(kInplace)) save_before_write(inputs[0]);
    Reservations res;
    std::vector<Tensor> out;
    {
      ScopedInterceptor suspend(nullptr);  // the real draw, so Python sees eager's values
      ScopedReservationObserver watch(&res);
      out = run_kernel(op, inputs, attrs);
    }
    check_not_reseeded(op.name);  // the kernel itself must not have reseeded
    TP_CHECK(res.seen.size() <= 1, CaptureError, "cannot capture the random operator ", op.name,
             ": it drew from a generator ", res.seen.size(), " times");
    // Where the draw sits in this call's range of its generator.
    const int64_t gen = res.seen.empty() ? (name == "native_dropout" ? kDefaultGenerator : generator_attr(attrs))
                                         : res.seen[0].id;
    RngUse& u = res.seen.empty() ? rng_use(gen, generator_get_state(gen))
                                 : rng_use(gen, {res.seen[0].range.key, res.seen[0].range.first});
    uint64_t first = u.next, drawn = 0;
    if (!res.seen.empty()) {
      first = res.seen[0].range.first;
      drawn = res.seen[0].n;
      TP_CHECK(res.seen[0].range.key == u.key && first == u.next, CaptureError, "internal: the random operator ",
               op.name, " drew from counter ", first, " of its generator, expected ", u.next);
    }
    u.next = first + drawn;
    // A CUDA tensor's draw: eager's CUDA kernels compute the host's Philox stream
    // (same counters, same elements), so the draw is the host's, moved to the device.
    const Device dev = op.has(kInplace) ? inputs[0].device() : out.at(0).device();
    auto draw = [&](const char* dist, const Shape& size, DType dt, Attrs extra = {}) -> Node* {
      TP_CHECK(counters_for(dist, numel(size), dt) == drawn, CaptureError, "internal: the functional form of ",
               op.name, " would draw ", counters_for(dist, numel(size), dt), " counters, eager drew ", drawn);
      Node* state = g_.placeholder(gen == kDefaultGenerator ? "rng_state" : "rng_state_g" + std::to_string(gen),
                                   TensorMeta::contiguous({2}, DType::Int64), -1);
      Attrs a = extra;
      a.set("size", size);
      a.set("dtype", dt);
      a.set("distribution", std::string(dist));
      a.set("offset", int64_t{0});  // the draw's own state input is placed at its counters
      SymAttrs sa;
      if (!inputs.empty() && inputs[0].defined() && inputs[0].sizes() == size) sa = size_attr(inputs[0]);
      Node* n = replay(get_op("philox_random"), {state}, a, -1, sa.empty() ? nullptr : &sa);
      draws_.push_back({gen, state, n, drawn, elements_per_counter(dist, dt)});
      if (dev.kind != Device::Kind::CPU)
        n = replay(get_op("_to_device"), {n}, {{"device", static_cast<int64_t>(dev.index)}});
      return n;
    };
    auto call = [&](const char* o, std::vector<Arg> args) { return replay(get_op(o), std::move(args), {}); };
    auto to = [&](Node* n, DType dt) { return n->meta.dtype == dt ? n : replay(get_op("to"), {n}, {{"dtype", dt}}); };
    const Tensor& r = out.at(0);
    if (name == "rand" || name == "randn") {
      bind_input(r, draw(name == "rand" ? "uniform" : "normal", r.sizes(), r.dtype()));
    } else if (name == "randint" || name == "randint.low") {
      bind_input(r, draw("randint", r.sizes(), r.dtype(),
                         {{"low", attrs.has("low") ? attrs.get_int("low") : int64_t{0}}, {"high", attrs.get_int("high")}}));
    } else if (name == "randperm") {
      bind_input(r, draw("randperm", r.sizes(), r.dtype()));
    } else if (name == "bernoulli") {
      // Each element is 1 where a float64 uniform sample is below its probability.
      Node* u01 = draw("uniform", r.sizes(), DType::Float64);
      bind_input(r, to(call("lt", {u01, to(self, DType::Float64)}), r.dtype()));
    } else if (name == "native_dropout") {
      // Kept where a float32 uniform sample is below 1 - p; kept ones scaled by 1/(1-p).
      const double p = attrs.get_or("train", true) ? attrs.get_double("p") : 0.0;
      Node* mask = call("lt", {draw("uniform", r.sizes(), DType::Float32), Scalar(1.0 - p)});
      Node* scaled = call("mul", {self, Scalar(p < 1 ? 1.0 / (1.0 - p) : 0.0)});
      bind_input(r, to(call("where", {mask, scaled, Scalar(0.0)}), r.dtype()));
      bind_input(out.at(1), mask);
    } else {
      // In place: float64 samples mapped as the kernel maps them, then converted
      // to self's dtype, written into self (functionalized like any in-place op).
      const Tensor& t = inputs[0];
      Node* value = nullptr;
      if (name == "normal_") {
        Node* z = draw("normal", t.sizes(), DType::Float64);
        value = call("add", {call("mul", {z, Scalar(attrs.get_double("std"))}), Scalar(attrs.get_double("mean"))});
      } else if (name == "uniform_") {
        const double a = attrs.get_double("from"), b = attrs.get_double("to");
        value = call("add", {call("mul", {draw("uniform", t.sizes(), DType::Float64), Scalar(b - a)}), Scalar(a)});
      } else {  // bernoulli_.float
        value = call("lt", {draw("uniform", t.sizes(), DType::Float64), Scalar(attrs.get_double("p"))});
      }
      write(t, to(value, t.dtype()), op.name);
    }
    return out;
  }


 public:
  // A reseed (tp.manual_seed, set_state) inside the function cannot be replayed:
  // the compiled code reserves its counters at call time, from wherever the
  // generator stands.
  void check_not_reseeded(const char* opname) const {
    if (generator_epoch() != rng_epoch_)
      throw CaptureError(str("cannot capture the random operator ", opname,
                             ": a generator was reseeded (tp.manual_seed, Generator.manual_seed or set_state) inside "
                             "the compiled function, which compiled code cannot replay; seed outside the compiled "
                             "function"));
  }

  // At the end of a trace: number the state placeholders after the free tensors,
  // report the counters per call, and put the generators back (the compiled
  // code draws this call's numbers itself).
  std::vector<TraceResult::RngInput> finish_random() {
    std::vector<TraceResult::RngInput> r;
    if (!rng_.empty() && generator_epoch() != rng_epoch_)
      throw CaptureError("cannot capture a function that draws random numbers and reseeds a generator (tp.manual_seed, "
                         "Generator.manual_seed or set_state): compiled code cannot replay the reseed; seed outside "
                         "the compiled function");
    for (size_t k = 0; k < draws_.size(); ++k) {
      const Draw& d = draws_[k];
      d.state->input_index = num_inputs_ + static_cast<int>(free_.size() + k);
      r.push_back({d.gen, d.counters, SymDim(numel(d.node->meta.sizes)), d.per});
    }
    for (const RngUse& u : rng_) generator_set_state(u.gen, {u.key, u.start});
    return r;
  }
  // After the shape environment finished the graph: each draw's element count,
  // symbolic where its sizes are (the call then reserves eager's counters at its sizes).
  void set_draw_sizes(std::vector<TraceResult::RngInput>& r) const {
    for (size_t k = 0; k < draws_.size() && k < r.size(); ++k) {
      const Node* n = draws_[k].node;
      SymDim e(int64_t{1});
      if (n->sym_sizes.size() == n->meta.sizes.size())
        for (const SymDim& d : n->sym_sizes) e = e * d;
      else
        e = SymDim(numel(n->meta.sizes));
      r[k].numel = e;
    }
  }
  int first_rng_input() const { return num_inputs_ + static_cast<int>(free_.size()); }
  // A failed trace: the generators it drew from go back to where they were (a
  // joint trace whose custom backward drew, then failed, before the fallback).
  void restore_generators() {
    for (const RngUse& u : rng_) generator_set_state(u.gen, {u.key, u.start});
  }

 private:
  // native_batch_norm in training with running statistics updates them in place
  // inside its kernel (no kInplace tag: the write is to inputs 3 and 4 — aten's
  // order is input, weight, bias, running_mean, running_var).
  static constexpr int kRunningMean = 3, kRunningVar = 4;
  static bool is_batch_norm_update(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
    return std::string(op.name) == "native_batch_norm" && attrs.get_or("training", false) &&
           ((inputs.size() > kRunningMean && inputs[kRunningMean].defined()) ||
            (inputs.size() > kRunningVar && inputs[kRunningVar].defined()));
  }

  std::vector<Tensor> functionalize_batch_norm(const OpDef& op, const std::vector<Tensor>& inputs,
                                               const Attrs& attrs) {
    const Tensor& x = inputs[0];
    std::vector<Arg> args{arg_for(x), arg_for(inputs[1]), arg_for(inputs[2]), static_cast<Node*>(nullptr),
                          static_cast<Node*>(nullptr)};
    for (int i : {kRunningMean, kRunningVar})
      if (inputs[i].defined()) {
        node_for(inputs[i]);  // lifts a running statistic (a free tensor) before saving it
        save_before_write(inputs[i]);
      }
    std::vector<Tensor> out;
    {
      ScopedInterceptor suspend(nullptr);
      out = execute_ ? run_kernel(op, inputs, attrs)
                     : allocate_outputs(op, {x, inputs[1], inputs[2], Tensor(), Tensor()}, attrs);
    }
    // The normalization without the running statistics (the same results) ...
    Node* n = g_.call(op, std::move(args), attrs, out[0].meta());
    for (auto& t : out) n->output_metas.push_back(t.meta());
    sym(n);
    for (size_t i = 0; i < out.size(); ++i) {
      Node* gi = g_.call(getitem_op(), {n}, {{"index", static_cast<int64_t>(i)}}, out[i].meta());
      sym(gi);
      bind_input(out[i], gi);
    }
    // ... and the update as pure arithmetic: r' = (1 - m) r + m * stat, with the
    // unbiased batch variance for running_var (the kernel's formula).
    // The kernel updates them outside autograd: eager's running statistics never
    // require grad, so these nodes are recorded as under no_grad.
    const Node* before_update = g_.nodes().empty() ? nullptr : g_.nodes().back().get();
    const double m = attrs.get_double("momentum");
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    for (int i : {kRunningMean, kRunningVar}) {
      const Tensor& r = inputs[i];
      if (!r.defined()) continue;
      Node* stat = i == kRunningMean ? replay(get_op("mean"), {node_for(x)}, {{"dim", dims}, {"keepdim", false}})
                          : replay(get_op("var.dim"), {node_for(x)}, {{"dim", dims}, {"unbiased", true}, {"keepdim", false}});
      stat = convert(stat, r);
      Node* keep = replay(get_op("mul"), {node_for(r), Scalar(1.0 - m)}, {});
      Node* moved = replay(get_op("add"), {keep, stat}, {{"alpha", Scalar(m)}});
      write(r, convert(moved, r), op.name);
    }
    for (size_t i = first_after(g_, before_update); i < g_.nodes().size(); ++i) g_.nodes()[i]->grad_enabled = false;
    return out;
  }

 private:
  // Meta mode: shapes and dtypes from the operator's inference, no computation.
  static std::vector<Tensor> allocate_outputs(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
    std::vector<TensorMeta> in_meta;
    for (auto& t : inputs) {
      TensorMeta m = t.defined() ? t.meta() : TensorMeta{};
      m.defined = t.defined();
      in_meta.push_back(m);
    }
    std::vector<Tensor> out;
    const bool numbers = yields_python_number(op, inputs);  // (as run_kernel does)
    std::optional<PythonNumberArithmetic> scope;
    if (numbers) scope.emplace();
    for (auto& m : op.infer(op, in_meta, attrs)) out.push_back(Tensor::empty_strided(m.sizes, m.strides, m.dtype));
    if (numbers) mark_python_numbers(out);
    return out;
  }
  Graph& g_;
  bool execute_;
  bool user_grad_ = true;       // the grad mode the function called the current operator under
  const Node* call_last_node_ = nullptr;  // the graph's last node before the current operator's call
  bool lift_;
  int num_inputs_;
  std::vector<Tensor> free_;
  std::vector<bool> free_aliases_;
  std::unordered_map<const TensorImpl*, Node*> values_;
  std::vector<Tensor> keep_;  // keeps every traced tensor alive so addresses stay unique
  std::vector<std::pair<Tensor, Node*>> placeholders_;  // arguments and lifted free tensors
  std::unordered_map<const TensorImpl*, ViewInfo> views_;
  std::unordered_set<const TensorImpl*> detached_;        // views made by x.detach() (note_detached)
  std::unordered_set<const TensorImpl*> inference_;       // made under tp.inference_mode (made_in_inference)
  std::unordered_map<const TensorImpl*, uint64_t> gen_;  // writes into each root so far
  std::vector<std::pair<Tensor, Tensor>> saved_;          // inputs written during capture, and their data before
  std::vector<PendingGate> gates_;
  size_t random_calls_ = 0;  // random operators recorded so far
  std::vector<RngUse> rng_;  // generators random operators drew from, in first-use order
  std::vector<Draw> draws_;  // the random operators' draws, in order
  uint64_t rng_epoch_;       // generator_epoch() when the trace started
};

thread_local Tracer* t_tracer = nullptr;

thread_local int t_trace_depth = 0;

}  // namespace

bool is_tracing() { return t_trace_depth > 0; }

thread_local int t_restore_scopes = 0;       // open RestoreWritesOnError scopes
void note_user_exception(bool users) { t_user_exception = users && t_trace_depth > 0; }
RestoreWritesOnError::RestoreWritesOnError() { ++t_restore_scopes; }
RestoreWritesOnError::~RestoreWritesOnError() { --t_restore_scopes; }

bool traced_requires_grad(const Tensor& t) {
  if (t_trace_depth > 0 && t_tracer) return t_tracer->requires_grad(t);
  return t.requires_grad();
}

void note_detached(const Tensor& t) {
  if (t_trace_depth > 0 && t_tracer) t_tracer->note_detached(t);
}

size_t trace_gate_count() { return t_trace_depth > 0 && t_tracer ? t_tracer->gates().size() : 0; }

size_t trace_random_count() { return t_trace_depth > 0 && t_tracer ? t_tracer->random_calls() : 0; }

CustomBackwardScope::CustomBackwardScope(const std::string& who) : who_(who), prev_(t_custom_backward) {
  t_custom_backward = &who_;
}
CustomBackwardScope::~CustomBackwardScope() { t_custom_backward = prev_; }

bool depends_on_call(const Tensor& t) { return t_trace_depth > 0 && t_tracer && t_tracer->depends_on_call(t); }

bool is_own_value(const Tensor& t) { return t_trace_depth > 0 && t_tracer && t_tracer->is_own_value(t); }
// Declared where it is used (python/src/inplace_view_bind.cpp).
bool is_traced_result(const Tensor& t);
bool is_traced_result(const Tensor& t) { return t_trace_depth > 0 && t_tracer && t_tracer->is_traced_result(t); }

void rebind_value(const Tensor& t, const Tensor& src) {
  if (t_trace_depth > 0 && t_tracer) t_tracer->rebind(t, src);
}

bool computed_only_from(const Tensor& t, const std::vector<Tensor>& roots) {
  return t_trace_depth > 0 && t_tracer && t_tracer->computed_only_from(t, roots);
}

bool symbolic_tracing() { return t_trace_depth > 0 && t_tracer && t_tracer->env_; }

SymShape sym_sizes_of(const Tensor& t) { return symbolic_tracing() ? t_tracer->sym_of(t) : SymShape{}; }

bool decide_shape(const SymDim& e, GuardRel rel, const std::string& where) {
  TP_CHECK(symbolic_tracing(), Error, "internal: a symbolic size outside its capture");
  return t_tracer->env_->decide(e, rel, where);
}

int64_t specialize_shape(const SymDim& e, const std::string& where) {
  TP_CHECK(symbolic_tracing(), Error, "internal: a symbolic size outside its capture");
  return t_tracer->env_->specialize(e, where);
}

int64_t shape_hint(const SymDim& e) {
  TP_CHECK(symbolic_tracing(), Error, "internal: a symbolic size outside its capture");
  return t_tracer->env_->hint(e);
}

std::string describe_shape(const SymDim& e) {
  if (!symbolic_tracing()) return e.to_string();
  return describe_sym(t_tracer->env_->resolve(e), t_tracer->env_->symbols());
}

UserCallScope::UserCallScope(UserCall call) : call_(std::move(call)), prev_(t_user_call) { t_user_call = &call_; }

UserCallScope::~UserCallScope() noexcept(false) {
  t_user_call = prev_;
  // SymInt attributes no node carries: the call's parts used their hint values.
  // (Not while an exception unwinds: the capture fails anyway.)
  if (!call_.consumed && symbolic_tracing() && std::uncaught_exceptions() == 0)
    for (auto& [name, vec] : call_.sym_attrs)
      for (auto& d : vec) t_tracer->env_->specialize(d, call_.where());
}

Scalar read_gate_value(const std::string& kind, const Tensor& t) {
  // PyTorch's exception types: bool() of 0 or several elements is a RuntimeError
  // (`if t:` on a mask is a logic error, not a bad value), and so is item();
  // int()/float() of several elements are a ValueError.
  TP_CHECK(kind != "bool" || t.numel() == 1, Error, "Boolean value of Tensor with ",
           t.numel() == 0 ? "no values" : "more than one value", " is ambiguous (shape ", shape_str(t.sizes()),
           "); use .any() or .all()");
  TP_CHECK((kind != "int" && kind != "float") || t.numel() == 1, ValueError, kind,
           "(Tensor): only one element tensors can be converted to Python scalars (got ", t.numel(),
           " elements, shape ", shape_str(t.sizes()), ")");
  if (kind == "numel") return Scalar(static_cast<int64_t>(t.numel()));  // a data-dependent result size
  Scalar s = host_copy_of(t).item();  // several elements: item()'s own error, as in eager; CUDA read on the host
  if (kind == "bool") return Scalar(s.to_bool());
  if (kind == "int" || kind == "index") return Scalar(s.to_int());  // index: a 0-d tensor indexing (x[i])
  if (kind == "float") return Scalar(s.to_double());
  return s;
}

void set_source_line_provider(std::string (*fn)()) { t_source_line = fn; }

Scalar record_data_gate(const Tensor& t, const std::string& kind, const std::string& where) {
  if (t_trace_depth > 0 && t_tracer) return t_tracer->gate(t, kind, where);
  return read_gate_value(kind, t);
}

TraceResult trace(const TraceableFn& fn, const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                  bool execute, bool lift_free_tensors, const DynamicSpec* dynamic) {
  TraceResult r;
  r.graph = std::make_unique<Graph>();
  Tracer tracer(*r.graph, execute, lift_free_tensors, static_cast<int>(inputs.size()));
  ShapeEnv env;
  if (dynamic) tracer.env_ = &env;
  std::vector<Tensor> proxies;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i];
    if (!t.defined()) {  // an absent optional argument of a traced decomposition
      proxies.push_back(t);
      continue;
    }
    // The same tensor passed twice must become two placeholders: give the
    // second one its own identity (same storage).
    for (size_t j = 0; j < i; ++j)
      if (inputs[j].impl() == t.impl()) {
        t = t.as_strided(t.sizes(), t.strides(), t.offset());
        t.impl()->requires_grad = inputs[i].requires_grad();  // as the argument (traced_requires_grad)
      }
    std::string hint = i < names.size() && !names[i].empty() ? names[i] : "arg" + std::to_string(i);
    Node* ph = r.graph->placeholder(hint, t.meta(), static_cast<int>(i));
    if (dynamic) {
      // Symbolic dims: never 0 or 1 (0/1 specialization), only of contiguous
      // inputs (the backend derives their strides from the sizes). Duck sizing:
      // dims with equal example sizes and the same range share one symbol.
      const bool contiguous = t.is_contiguous();
      for (int64_t d = 0; d < t.dim(); ++d) {
        const int64_t size = t.sizes()[d];
        const DimSpec spec = i < dynamic->size() && d < static_cast<int64_t>((*dynamic)[i].size())
                                 ? (*dynamic)[i][d] : DimSpec{};
        if (!spec.symbolic || size < 2 || !contiguous || size < spec.min || size > spec.max) {
          ph->sym_sizes.push_back(SymDim(size));
          continue;
        }
        int k = -1;
        for (size_t s = 0; s < env.symbols().size() && k < 0; ++s) {
          const SymbolInfo& si = env.symbols()[s];
          if (si.hint == size && si.min == std::max<int64_t>(2, spec.min) && si.max == spec.max) k = static_cast<int>(s);
        }
        if (k < 0)
          k = env.new_symbol(size, std::max<int64_t>(2, spec.min), spec.max, str(hint, ".size(", d, ")"),
                             static_cast<int>(i), static_cast<int>(d));
        ph->sym_sizes.push_back(stax::ir::size_var(k));
      }
    }
    tracer.bind_placeholder(t, ph);
    proxies.push_back(t);
  }
  {
    // The function runs in the caller's grad mode (each recorded node keeps the
    // mode it was called under); the operators themselves never reach autograd.
    ScopedInterceptor install(&tracer);
    Tracer* outer = t_tracer;
    t_tracer = &tracer;
    ++t_trace_depth;
    try {
      t_user_exception = false;
      r.outputs = fn(proxies);
    } catch (...) {
      --t_trace_depth;
      t_tracer = outer;
      AutoGradMode no_grad(false);
      const bool keep = t_user_exception && t_restore_scopes == 0;  // (note_user_exception)
      t_user_exception = false;
      if (keep) {
        tracer.keep_writes();
      } else {
        tracer.restore_inputs();
        tracer.restore_generators();
      }
      throw;
    }
    --t_trace_depth;
    t_tracer = outer;
  }
  AutoGradMode no_grad(false);  // the graph is what we want, not an autograd record of this run
  std::vector<Arg> outs;
  std::vector<Node*> result_nodes;
  for (auto& o : r.outputs) {
    TP_CHECK(o.defined(), CaptureError, "compiled functions must return tensors");
    outs.push_back(tracer.node_for(o));
    result_nodes.push_back(std::get<Node*>(outs.back()));
  }
  r.backward_error = tracer.stale_saved_read(result_nodes);
  // Results that are views of an input in eager (read before the inputs are put back).
  r.part_of = std::move(tracer.part_of);
  r.output_views.resize(r.outputs.size());
  r.output_view_sym_attrs.resize(r.outputs.size());
  for (size_t i = 0; i < r.outputs.size(); ++i)
    if (!tracer.view_chain(r.outputs[i], &r.output_views[i].input_index, &r.output_views[i].steps,
                           &r.output_view_sym_attrs[i]) &&
        !tracer.view_of_output(r.outputs, i, &r.output_views[i].output_index, &r.output_views[i].steps,
                               &r.output_view_sym_attrs[i])) {
      r.output_views[i] = {};
      r.output_view_sym_attrs[i].clear();
    }
  // Results that are views of one intermediate the function does not return:
  // that intermediate becomes a hidden result, and they views of it (tp.compile's
  // captures only: a decomposition or a joint graph returns what it computes).
  if (lift_free_tensors) {
    const size_t nres = r.outputs.size();
    std::vector<Tensor> roots(nres);
    for (size_t i = 0; i < nres; ++i)
      if (r.output_views[i].input_index < 0 && r.output_views[i].output_index < 0) roots[i] = tracer.view_root(r.outputs[i]);
    for (size_t i = 0; i < nres; ++i) {
      const Tensor& base = roots[i];
      if (!base.defined() || base.impl() == r.outputs[i].impl() || tracer.is_placeholder(base)) continue;
      bool shared = false, hidden = false;
      for (size_t j = 0; j < nres; ++j) shared |= j != i && roots[j].defined() && roots[j].impl() == base.impl();
      for (size_t j = nres; j < r.outputs.size(); ++j) hidden |= r.outputs[j].impl() == base.impl();
      if (!shared) continue;
      if (!hidden) {
        r.outputs.push_back(base);
        outs.push_back(tracer.node_for(base));
        ++r.hidden_outputs;
      }
      r.output_view_sym_attrs[i].clear();
      if (!tracer.view_of_output(r.outputs, i, &r.output_views[i].output_index, &r.output_views[i].steps,
                                 &r.output_view_sym_attrs[i])) {
        r.output_views[i] = {};
        r.output_view_sym_attrs[i].clear();
      }
    }
    r.output_views.resize(r.outputs.size());
    r.output_view_sym_attrs.resize(r.outputs.size());
  }
  r.inference_outputs.resize(r.outputs.size());
  for (size_t i = 0; i < r.outputs.size(); ++i) r.inference_outputs[i] = tracer.made_in_inference(r.outputs[i]);
  // Mutated inputs: their final values are extra outputs after the function's results.
  for (auto& [index, node] : tracer.mutations()) {
    r.mutated_inputs.push_back(index);
    outs.push_back(node);
  }
  tracer.restore_inputs();
  r.rng_inputs = tracer.finish_random();
  r.graph->output(std::move(outs));
  if (dynamic) {
    // Replacements (specializations, unifications) into every node; live symbols renumbered.
    r.shape_guards = env.finish(*r.graph);
    tracer.set_draw_sizes(r.rng_inputs);
    for (auto& steps : r.output_view_sym_attrs)
      for (auto& sa : steps) {
        for (auto& [name, vec] : sa)
          for (auto& d : vec) d = env.finalize(d);
        if (!r.graph->is_symbolic()) sa.clear();
      }
  }
  // Each gate's guard: the part of the graph its tensor depends on, taken before
  // any pass (DCE would drop a gate nobody else reads).
  for (auto& pg : tracer.gates()) {
    auto guard = std::shared_ptr<const Graph>(slice_to(*r.graph, pg.node));
    for (auto& n : guard->nodes())
      if (n->opcode == Opcode::Placeholder && n->input_index >= tracer.first_rng_input())
        throw CaptureError(str("cannot capture ", DataGate{pg.kind, pg.where, pg.value, nullptr}.describe(),
                               ": it reads a value computed from a random operator, which differs at every call; ",
                               pg.kind == "numel" ? "select with the random mask outside the compiled function, or keep "
                                                    "the shape (tp.where(mask, x, 0))"
                                                  : "branch on it outside the compiled function"));
    r.gates.push_back({pg.kind, pg.where, pg.value, std::move(guard)});
  }
  r.free_tensors = tracer.free_tensors();
  r.free_aliases_traced = tracer.free_aliases();
  return r;
}

}  // namespace tp::graph
