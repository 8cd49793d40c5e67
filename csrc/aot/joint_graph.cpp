#include "aot/joint_graph.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "aot/device_constants.h"
#include "autograd/node.h"
#include "core/grad_mode.h"
#include "graph/custom_function.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "graph/interpreter.h"
#include "graph/sym_shape_rules.h"
#include "passes/passes.h"

namespace tp::aot {
namespace {

using graph::Node;
using graph::Opcode;

// Which nodes carry a gradient: those computed, through operators that have a
// derivative and that the function called with grad mode on, from a primal that
// requires grad.
std::unordered_map<const Node*, bool> requires_grad(const graph::Graph& g, const std::vector<bool>& needs_grad) {
  std::unordered_map<const Node*, bool> req;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    bool r = false;
    if (n->opcode == Opcode::Placeholder) {
      r = n->input_index < static_cast<int>(needs_grad.size()) && needs_grad[static_cast<size_t>(n->input_index)];
    } else if (n->grad_identity_of) {
      r = req[n->grad_identity_of];  // a placeholder written under no_grad is still that tensor
    } else if (n->opcode == Opcode::CallFunction && n->grad_enabled && (n->is_getitem() || n->target->backward)) {
      for (Node* in : n->input_nodes()) r |= req[in];
    }
    // A multi-result node stands for its results (each getitem checks its own dtype).
    if (n->opcode != Opcode::Output && n->output_metas.empty()) r &= is_floating(n->meta.dtype);
    req[n] = r;
  }
  return req;
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? ops::add(slot, g) : g;
}

}  // namespace

JointGraph trace_joint(const graph::Graph& fw, const std::vector<Tensor>& inputs,
                       const std::vector<bool>& needs_grad) {
  JointGraph j = trace_joint_raw(fw, inputs, needs_grad);
  passes::PassOptions po;
  po.decompose = false;
  passes::run_default_passes(*j.graph, po);
  return j;
}

JointGraph trace_joint_raw(const graph::Graph& fw, const std::vector<Tensor>& inputs,
                           const std::vector<bool>& needs_grad, const std::vector<Tensor>* tangents,
                           std::vector<graph::ShapeGuard>* guards, const std::unordered_map<int, int64_t>* at) {
  JointGraph j;
  j.num_primals = static_cast<int>(inputs.size());
  auto req = requires_grad(fw, needs_grad);
  const Node* out_node = fw.output_node();
  j.num_outputs = static_cast<int>(out_node->args.size());
  std::vector<Tensor> examples = inputs;
  const Device device = region_device(inputs);
  const bool moves = graph::has_device_moves(fw);
  std::vector<std::string> names;
  for (Node* p : fw.placeholders())
    if (p->input_index >= 0) {
      if (names.size() <= static_cast<size_t>(p->input_index)) names.resize(static_cast<size_t>(p->input_index) + 1);
      names[static_cast<size_t>(p->input_index)] = "primal_" + p->name;
    }
  names.resize(inputs.size());
  for (auto& a : out_node->args) {
    const Node* n = std::holds_alternative<Node*>(a) ? std::get<Node*>(a) : nullptr;
    bool d = n && req[n] && is_floating(n->meta.dtype);
    j.differentiable.push_back(d);
    if (d) {
      const size_t k = examples.size() - inputs.size();
      // A graph that moves values between devices: each result's tangent on
      // its result's device (the captured metas are the real values' there).
      const Device on = moves ? n->meta.device : device;
      examples.push_back(tangents ? tangents->at(k) : ones_on(n->meta.sizes, n->meta.dtype, on));
      names.push_back("tangent_" + std::to_string(j.differentiable.size() - 1));
    }
  }
  // A symbolic trace: the forward's symbols on the same dims (duck sizing gives
  // a tangent's dim the primal's symbol of that example size and range).
  graph::DynamicSpec spec;
  if (guards) {
    auto dims_of = [&](const graph::SymShape& s) {
      std::vector<graph::DimSpec> d;
      for (const graph::SymDim& e : s) {
        graph::DimSpec ds;
        if (e.is_size()) {
          const graph::SymbolInfo& si = fw.symbols.at(static_cast<size_t>(e.size_index()));
          ds = {true, si.min, si.max};
        }
        d.push_back(ds);
      }
      return d;
    };
    spec.resize(inputs.size());
    for (Node* p : fw.placeholders())
      if (p->input_index >= 0 && static_cast<size_t>(p->input_index) < inputs.size())
        spec[static_cast<size_t>(p->input_index)] = dims_of(p->sym_sizes);
    for (size_t o = 0; o < out_node->args.size(); ++o)
      if (j.differentiable[o]) spec.push_back(dims_of(graph::sym_shape_of(*std::get<Node*>(out_node->args[o]))));
  }
  std::vector<int> grad_slot(inputs.size(), -1);  // primal -> position among the traced grads

  graph::TraceResult tr = graph::trace(
      [&](const std::vector<Tensor>& proxies) {
        // As the eager engine runs formulas (no create_graph): a formula that asks
        // for the grad mode sees it off.
        AutoGradMode no_grad(false);
        std::unordered_map<const Node*, Tensor> env;
        std::unordered_map<const Node*, std::vector<Tensor>> multi;  // results of multi-result nodes
        auto value = [&](const graph::Arg& a) -> Tensor {
          if (auto* n = std::get_if<Node*>(&a)) return *n ? env.at(*n) : Tensor();
          return Tensor::wrapped_scalar(std::get<Scalar>(a));
        };
        // Forward: the captured graph, operator by operator (recorded again).
        for (auto& up : fw.nodes()) {
          const Node* n = up.get();
          switch (n->opcode) {
            case Opcode::Placeholder: env[n] = proxies.at(static_cast<size_t>(n->input_index)); break;
            case Opcode::GetAttr: env[n] = n->constant; break;
            case Opcode::Output: break;
            default: {
              if (n->is_getitem()) {
                env[n] = multi.at(std::get<Node*>(n->args.at(0))).at(static_cast<size_t>(n->getitem_index()));
                break;
              }
              if (graph::is_custom_function(*n->target)) {
                // A custom Function's autograd identity has no node of its own: its
                // results are its first arguments, and its derivative (below, the
                // user's backward traced on this trace's values) records ordinary
                // operators (graph/custom_function.h).
                std::vector<Tensor> outs;
                const size_t k = static_cast<size_t>(n->attrs.get_int("num_outputs"));
                for (size_t i = 0; i < k; ++i) outs.push_back(value(n->args.at(i)));
                env[n] = outs.at(0);
                if (!n->output_metas.empty()) multi[n] = std::move(outs);
                break;
              }
              std::vector<Tensor> args;
              for (auto& a : n->args) args.push_back(value(a));
              // Size attributes the forward computes per call: at other sizes,
              // their values there; in a symbolic trace, the same expressions
              // (the user's call of the operator, as at capture; the joint
              // trace numbers the symbols as the forward does, checked after).
              // Its other int attributes are the graph's constants (valid at
              // every size the capture's guards admit), not numbers computed
              // from sizes: the node is the user's call, not a composite's part.
              std::optional<graph::UserCallScope> scope;
              if (guards) {
                graph::UserCall uc;
                uc.op = n->target;
                uc.sym_attrs = n->sym_attrs;
                // Not taken by the node (an expand's -1 the rule reads from the
                // input): no specialization; the check at other sizes stands.
                uc.consumed = true;
                scope.emplace(std::move(uc));
              }
              std::vector<Tensor> outs = call_op(*n->target, args,
                                                 at && !n->sym_attrs.empty() ? graph::evaluate_sym_attrs(*n, *at)
                                                                             : n->attrs);
              scope.reset();
              env[n] = outs.at(0);
              if (!n->output_metas.empty()) multi[n] = std::move(outs);
            }
          }
        }
        std::vector<Tensor> results;
        for (auto& a : out_node->args) results.push_back(value(a));
        // Backward: reverse topological order, each node's derivative formula
        // applied to the gradients accumulated for its results.
        std::unordered_map<const Node*, Tensor> grads;
        std::unordered_map<const Node*, std::vector<Tensor>> multi_grads;
        size_t t = inputs.size();
        for (size_t i = 0; i < out_node->args.size(); ++i)
          if (j.differentiable[i]) accumulate(grads[std::get<Node*>(out_node->args[i])], proxies.at(t++));
        const auto& nodes = fw.nodes();
        for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
          const Node* n = it->get();
          if (n->opcode != Opcode::CallFunction || !req[n]) continue;
          if (n->grad_identity_of) {  // written under no_grad: its gradient is the placeholder's
            auto gi = grads.find(n);
            if (gi != grads.end()) accumulate(grads[n->grad_identity_of], gi->second);
            continue;
          }
          if (n->is_getitem()) {
            auto gi = grads.find(n);
            if (gi == grads.end()) continue;
            const Node* parent = std::get<Node*>(n->args.at(0));
            auto& mg = multi_grads[parent];
            mg.resize(parent->output_metas.size());
            accumulate(mg.at(static_cast<size_t>(n->getitem_index())), gi->second);
            continue;
          }
          std::vector<Tensor> gout;
          std::vector<Tensor> outs;
          if (n->output_metas.empty()) {
            auto gi = grads.find(n);
            if (gi == grads.end()) continue;
            gout = {gi->second};
            outs = {env.at(n)};
          } else {
            auto gi = multi_grads.find(n);
            if (gi == multi_grads.end()) continue;
            gout = gi->second;
            gout.resize(n->output_metas.size());
            outs = multi.at(n);
          }
          std::vector<Tensor> ins;
          std::vector<bool> needs;
          for (auto& a : n->args) {
            ins.push_back(value(a));
            const Node* an = std::holds_alternative<Node*>(a) ? std::get<Node*>(a) : nullptr;
            needs.push_back(an && req[an]);
          }
          // Symbolic sizes (and the trace at other sizes that checks them): the
          // formulas read sizes as ints; the operands' and results' symbolic
          // shapes are offered to every node the formula records, whose size
          // attribute they match at the hints (trace_joint_symbolic checks
          // that the match held at other sizes too).
          const bool sym = guards || at;
          std::optional<graph::UserCallScope> scope;
          if (guards) {
            graph::UserCall uc;
            uc.consumed = true;  // a shape no node took is no specialization
            // A shape whose example sizes equal a static operand's (x of [s0*s1, 16]
            // against a [16, 16] weight at s0*s1 = 16) could be matched to the
            // wrong attribute: not offered (the nodes then specialize, soundly).
            std::vector<Shape> static_shapes;
            for (const auto* v : {&ins, &outs})
              for (const Tensor& t : *v) {
                if (!t.defined()) continue;
                graph::SymShape ss = graph::sym_sizes_of(t);
                bool any = false;
                for (auto& d : ss) any |= !d.is_const();
                if (!any) static_shapes.push_back(t.sizes());
              }
            auto offer = [&](const std::string& name, const Tensor& t) {
              graph::SymShape ss = t.defined() ? graph::sym_sizes_of(t) : graph::SymShape{};
              bool any = false;
              for (auto& d : ss) any |= !d.is_const();
              if (!any || std::find(static_shapes.begin(), static_shapes.end(), t.sizes()) != static_shapes.end()) return;
              uc.sym_attrs[name] = ss;
            };
            for (size_t i = 0; i < ins.size(); ++i) offer("input" + std::to_string(i), ins[i]);
            for (size_t i = 0; i < outs.size(); ++i) offer("result" + std::to_string(i), outs[i]);
            // The forward node's own int attributes (slice bounds, dims) are
            // constants of the graph: a formula that passes them on (slice's
            // slice_scatter) passes literals, not sizes.
            // Its int attributes computed from sizes (a slice's bounds, a
            // select's index) as the forward computed them: the formula's
            // operators that take them by the same name (slice's slice_scatter)
            // take the same expressions.
            for (auto& [name, v] : n->sym_attrs)
              if (const AttrValue* av = n->attrs.find(name.c_str());
                  v.size() == 1 && av && std::holds_alternative<int64_t>(*av))
                uc.sym_attrs[name] = v;
            for (auto& [name, v] : n->attrs.items()) {
              if (n->sym_attrs.count(name)) continue;
              if (auto* i = std::get_if<int64_t>(&v)) uc.literals.push_back(*i);
              if (auto* l = std::get_if<std::vector<int64_t>>(&v)) uc.literals.insert(uc.literals.end(), l->begin(), l->end());
            }
            scope.emplace(std::move(uc));
          }
          // At other sizes the formula reads the attributes the forward
          // computed there (a slice's bound from a size).
          const Attrs attrs = at && !n->sym_attrs.empty() ? graph::evaluate_sym_attrs(*n, *at) : n->attrs;
          BackwardArgs ba{ins, outs, gout, attrs, needs};
          std::vector<Tensor> gin;
          // Formulas that compute a number from sizes have a form that
          // computes it in the graph (OpDef::symbolic_backward).
          if (sym && n->target->symbolic_backward) gin = n->target->symbolic_backward(ba);
          else gin = n->target->backward(ba);
          for (size_t i = 0; i < gin.size() && i < ins.size(); ++i) {
            if (!needs[i] || !gin[i].defined()) continue;
            // As the eager engine does: broadcasting and promotion undone.
            Tensor g = autograd::fit_grad(gin[i], ins[i].sizes(), ins[i].dtype(), n->target->name);
            accumulate(grads[std::get<Node*>(n->args[i])], g);
          }
          scope.reset();
        }
        for (Node* p : fw.placeholders()) {
          size_t k = static_cast<size_t>(p->input_index);
          auto gi = grads.find(p);
          if (k >= inputs.size() || !needs_grad[k] || gi == grads.end() || !gi->second.defined()) continue;
          grad_slot[k] = static_cast<int>(results.size());
          results.push_back(gi->second);
        }
        return results;
      },
      examples, names, /*execute=*/true, /*lift_free_tensors=*/false, guards ? &spec : nullptr);
  // A forward output's final value may have been functionalized into extra
  // outputs (never for graphs that are already functional: nothing is mutated).
  TP_CHECK(tr.mutated_inputs.empty(), Error, "AOT: the joint graph wrote into its inputs");
  TP_CHECK(tr.rng_inputs.empty() && tr.gates.empty(), Error,
           "AOT: a derivative drew random numbers or read a tensor's value, which the joint graph cannot replay");
  j.graph = std::move(tr.graph);
  j.grad_output = grad_slot;
  if (guards) *guards = std::move(tr.shape_guards);
  return j;
}

}  // namespace tp::aot
