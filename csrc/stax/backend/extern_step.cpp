#include "stax/backend/extern_step.h"

namespace tp::stax {

std::vector<ExternStep> extern_steps(const std::vector<ir::ExternCall>& calls, const std::vector<Attrs>& attrs,
                                     const std::unordered_map<int, int>& slot_of) {
  std::vector<ExternStep> steps;
  for (const ir::ExternCall& call : calls) {
    ExternStep e;
    e.call = call;
    e.op = &get_op(call.op);
    e.attrs = attrs.at(static_cast<size_t>(call.id));
    for (auto& o : call.inputs)
      e.in_slots.push_back(o.kind == ir::ExternOperand::Kind::Buffer ? slot_of.at(o.buffer) : -1);
    for (int b : call.outputs) e.out_slots.push_back(slot_of.at(b));
    steps.push_back(std::move(e));
  }
  return steps;
}

Attrs call_attrs(const ExternStep& e, const std::function<int64_t(const ir::IndexExpr&)>& at) {
  Attrs attrs = e.attrs;
  for (auto& [name, exprs] : e.call.sym_attrs) {
    std::vector<int64_t> xs;
    for (auto& x : exprs) xs.push_back(at(x));
    const AttrValue* old = e.attrs.find(name.c_str());
    if (old && std::holds_alternative<int64_t>(*old)) attrs.set(intern_attr_name(name), xs.at(0));
    else attrs.set(intern_attr_name(name), std::move(xs));
  }
  return attrs;
}

}  // namespace tp::stax
