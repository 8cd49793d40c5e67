#include "graph/tracer.h"

#include <algorithm>
#include <unordered_map>

#include "core/grad_mode.h"
#include "ops/dispatch.h"

namespace tp::graph {
namespace {

class Tracer : public DispatchInterceptor {
 public:
  Tracer(Graph& g, bool execute, bool lift, int num_inputs)
      : g_(g), execute_(execute), lift_(lift), num_inputs_(num_inputs) {}

  const std::vector<Tensor>& free_tensors() const { return free_; }
  const std::vector<bool>& free_aliases() const { return free_aliases_; }

  void bind_input(const Tensor& t, Node* n) {
    values_[t.impl()] = n;
    keep_.push_back(t);
  }

  Arg arg_for(const Tensor& t) {
    if (!t.defined()) return static_cast<Node*>(nullptr);  // an absent optional argument
    auto it = values_.find(t.impl());
    if (it != values_.end()) return it->second;
    if (t.is_wrapped_number()) return t.item();  // a Python number: a constant of the graph
    if (!lift_) {
      // A free tensor (e.g. a global): lifted into the graph as a named constant.
      Node* n = g_.get_attr("const", t);
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
    bind_input(t, n);
    return n;
  }

  Node* node_for(const Tensor& t) {
    Arg a = arg_for(t);
    if (auto* n = std::get_if<Node*>(&a)) return *n;
    Tensor c = Tensor::scalar_tensor(std::get<Scalar>(a), t.dtype());
    Node* n = g_.get_attr("const", c);
    return n;
  }

  std::vector<Tensor> intercept(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) override {
    if (op.has(kInplace))
      throw CaptureError(str("cannot capture the in-place operator ", op.name,
                             " inside a compiled function yet (functionalization is not implemented); "
                             "use the out-of-place form"));
    if (op.has(kRandom))
      throw CaptureError(str("cannot capture the random operator ", op.name,
                             " inside a compiled function yet; create random tensors outside and pass them in"));
    std::vector<Arg> args;
    args.reserve(inputs.size());
    for (auto& t : inputs) args.push_back(arg_for(t));
    std::vector<Tensor> out;
    {
      ScopedInterceptor suspend(nullptr);  // run the real kernel, unrecorded
      out = execute_ || op.has(kView) ? run_kernel(op, inputs, attrs) : allocate_outputs(op, inputs, attrs);
    }
    TP_CHECK(!out.empty(), CaptureError, "cannot capture operator ", op.name, ": it returned no tensor");
    Node* n = g_.call(op, std::move(args), attrs, out[0].meta());
    if (out.size() == 1) {
      bind_input(out[0], n);
      return out;
    }
    // Several results: the node stands for all of them, one getitem node each.
    for (auto& t : out) n->output_metas.push_back(t.meta());
    for (size_t i = 0; i < out.size(); ++i)
      bind_input(out[i], g_.call(getitem_op(), {n}, {{"index", static_cast<int64_t>(i)}}, out[i].meta()));
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
    for (auto& m : op.infer(op, in_meta, attrs)) out.push_back(Tensor::empty_strided(m.sizes, m.strides, m.dtype));
    return out;
  }
  Graph& g_;
  bool execute_;
  bool lift_;
  int num_inputs_;
  std::vector<Tensor> free_;
  std::vector<bool> free_aliases_;
  std::unordered_map<const TensorImpl*, Node*> values_;
  std::vector<Tensor> keep_;  // keeps every traced tensor alive so addresses stay unique
};

thread_local int t_trace_depth = 0;

}  // namespace

bool is_tracing() { return t_trace_depth > 0; }

TraceResult trace(const TraceableFn& fn, const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                  bool execute, bool lift_free_tensors) {
  TraceResult r;
  r.graph = std::make_unique<Graph>();
  Tracer tracer(*r.graph, execute, lift_free_tensors, static_cast<int>(inputs.size()));
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
      if (inputs[j].impl() == t.impl()) t = t.as_strided(t.sizes(), t.strides(), t.offset());
    std::string hint = i < names.size() && !names[i].empty() ? names[i] : "arg" + std::to_string(i);
    tracer.bind_input(t, r.graph->placeholder(hint, t.meta(), static_cast<int>(i)));
    proxies.push_back(t);
  }
  {
    AutoGradMode no_grad(false);  // the graph is what we want, not an autograd record of this run
    ScopedInterceptor install(&tracer);
    ++t_trace_depth;
    try {
      r.outputs = fn(proxies);
    } catch (...) {
      --t_trace_depth;
      throw;
    }
    --t_trace_depth;
  }
  std::vector<Arg> outs;
  for (auto& o : r.outputs) {
    TP_CHECK(o.defined(), CaptureError, "compiled functions must return tensors");
    outs.push_back(tracer.node_for(o));
  }
  r.graph->output(std::move(outs));
  r.free_tensors = tracer.free_tensors();
  r.free_aliases_traced = tracer.free_aliases();
  return r;
}

}  // namespace tp::graph
