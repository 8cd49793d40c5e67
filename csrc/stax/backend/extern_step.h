// An extern call of a compiled region (CPU or CUDA) as the region runs it: the
// call, its operator and attributes, and the region slots of its operands and
// results.
#pragma once
#include <functional>
#include <unordered_map>
#include <vector>

#include "ops/registry.h"
#include "stax/ir/extern_call.h"

namespace tp::stax {

struct ExternStep {
  ir::ExternCall call;
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<int> in_slots;   // per operand; -1 unless a buffer
  std::vector<int> out_slots;  // per result
};

// The program's extern calls as steps; `slot_of` maps a buffer id to its slot,
// `attrs` holds each call's attributes by id (LoweredRegion::extern_attrs).
std::vector<ExternStep> extern_steps(const std::vector<ir::ExternCall>& calls, const std::vector<Attrs>& attrs,
                                     const std::unordered_map<int, int>& slot_of);

// The attributes of one call of the step (dynamic shapes): those computed from
// sizes (ExternCall::sym_attrs) evaluated by `at` at the call's sizes, the
// others as planned. CPU and CUDA regions both pass these to the eager kernel.
Attrs call_attrs(const ExternStep& e, const std::function<int64_t(const ir::IndexExpr&)>& at);

}  // namespace tp::stax
