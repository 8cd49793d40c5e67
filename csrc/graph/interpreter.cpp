#include "graph/interpreter.h"

#include <optional>
#include <unordered_map>

#include "core/grad_mode.h"

#include "ops/dispatch.h"

namespace tp::graph {

std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs) {
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
        std::optional<AutoGradMode> no_grad;  // the function ran it under no_grad
        if (!n->grad_enabled) no_grad.emplace(false);
        std::vector<Tensor> outs = call_op(*n->target, args, n->attrs);
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
