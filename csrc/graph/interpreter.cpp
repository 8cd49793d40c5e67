#include "graph/interpreter.h"

#include <optional>
#include <unordered_map>

#include "autograd/engine.h"
#include "core/grad_mode.h"
#include "graph/custom_function.h"

#include "ops/dispatch.h"

namespace tp::graph {

std::unordered_map<int, int64_t> symbol_values(const Graph& g, const std::vector<Tensor>& inputs) {
  std::unordered_map<int, int64_t> v;
  for (size_t k = 0; k < g.symbols.size(); ++k) {
    const SymbolInfo& s = g.symbols[k];
    TP_CHECK(s.input_index >= 0 && s.input_index < static_cast<int>(inputs.size()) &&
                 s.input_dim < inputs[s.input_index].dim(),
             Error, "internal: symbol ", s.origin, " names no input dim of this call");
    v[stax::ir::size_var_id(static_cast<int>(k))] = inputs[s.input_index].sizes()[s.input_dim];
  }
  return v;
}

int64_t checked_symbol_value(const SymbolInfo& sym, const std::vector<Tensor>& inputs, const char* who) {
  const Tensor& t = inputs.at(static_cast<size_t>(sym.input_index));
  if (sym.input_dim >= t.dim())
    throw ValueError(str(who, ": input ", sym.input_index, " has ", t.dim(), " dims, symbol ", sym.origin,
                         " is its dim ", sym.input_dim));
  const int64_t n = t.sizes()[static_cast<size_t>(sym.input_dim)];
  if (n < sym.min || n > sym.max)
    throw ValueError(str(who, ": ", sym.origin, " = ", n, " is outside the range [", sym.min, ", ", sym.max,
                         "] the region was compiled for"));
  return n;
}

void throw_symbolic_input_mismatch(const Tensor& t, int index, const char* who) {
  throw ValueError(str(who, ": input ", index, " has shape ", shape_str(t.sizes()), " strides ", shape_str(t.strides()),
                       ", which does not match the symbolic shape it was compiled for"));
}

Attrs evaluate_sym_attrs(const Node& n, const std::unordered_map<int, int64_t>& values) {
  return evaluate_attrs(n.attrs, n.sym_attrs, values);
}

Attrs evaluate_attrs(const Attrs& attrs, const std::map<std::string, std::vector<SymDim>>& sym_attrs,
                     const std::unordered_map<int, int64_t>& values) {
  Attrs a = attrs;
  for (auto& [name, vec] : sym_attrs) {
    const AttrValue* old = attrs.find(name.c_str());
    std::vector<int64_t> xs;
    for (auto& d : vec) xs.push_back(stax::ir::evaluate(d, values));
    if (old && std::holds_alternative<int64_t>(*old)) a.set(intern_attr_name(name), xs.at(0));
    else a.set(intern_attr_name(name), std::move(xs));
  }
  return a;
}

std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs) {
  // A symbolic graph: attributes computed from sizes are evaluated at this call's sizes.
  std::unordered_map<int, int64_t> sym_values;
  if (g.is_symbolic()) sym_values = symbol_values(g, inputs);
  std::unordered_map<const Node*, Tensor> env;
  std::unordered_map<const Node*, std::vector<Tensor>> results;  // of multi-result nodes
  auto value = [&](const Arg& a) -> Tensor {
    if (auto* n = std::get_if<Node*>(&a)) return *n ? env.at(*n) : Tensor();  // null: absent optional
    return Tensor::wrapped_scalar(std::get<Scalar>(a));
  };
  std::vector<Tensor> result;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    switch (n->opcode) {
      case Opcode::Placeholder:
        TP_CHECK(n->input_index >= 0 && n->input_index < static_cast<int>(inputs.size()), TypeError,
                 "graph expects input #", n->input_index, " but only ", inputs.size(), " were given");
        env[n] = inputs[n->input_index];
        break;
      case Opcode::GetAttr: env[n] = n->constant; break;
      case Opcode::CallFunction:
      case Opcode::CallMethod:
      case Opcode::CallModule: {
        if (n->is_getitem()) {
          env[n] = results.at(std::get<Node*>(n->args.at(0))).at(static_cast<size_t>(n->getitem_index()));
          break;
        }
        std::vector<Tensor> args;
        args.reserve(n->args.size());
        for (auto& a : n->args) args.push_back(value(a));
        const bool recording = GradMode::is_enabled();
        std::optional<AutoGradMode> no_grad;  // the function ran it under no_grad
        if (!n->grad_enabled) no_grad.emplace(false);
        std::vector<Tensor> outs = is_custom_function(*n->target) ? run_custom_function(args, n->attrs)
                                   : n->sym_attrs.empty()
                                       ? call_op(*n->target, args, n->attrs)
                                       : call_op(*n->target, args, evaluate_sym_attrs(*n, sym_values));
        no_grad.reset();
        if (n->grad_identity_of && recording && env.at(n->grad_identity_of).requires_grad()) {
          // A placeholder written under no_grad is still that tensor for autograd
          // (Node::grad_identity_of): the new value, with the gradient passed to it.
          std::vector<Tensor> v{outs.at(0)};
          autograd::record_function("no_grad_write", {env.at(n->grad_identity_of)}, v,
                                    [](const std::vector<Tensor>& g) { return g; }, {false});
          outs[0] = v[0];
        }
        env[n] = outs.at(0);
        if (!n->output_metas.empty()) results[n] = std::move(outs);
        // Free intermediates as soon as their last user ran.
        break;
      }
      case Opcode::Output:
        for (auto& a : n->args) result.push_back(value(a));
        break;
    }
  }
  return result;
}

}  // namespace tp::graph
