// Extern calls inside a region (lowering/extern.cpp): operators without a loop
// form run their library or eager kernel on buffers the program plans, while
// the pointwise and reduction work around them is still fused.
#pragma once
#include <string>

#include "stax/lowering/families.h"

namespace tp::stax {

void register_extern_lowerings(LoweringTable& t);
// Whether `op`'s rule is an extern rule (they accept absent optional operands).
bool is_extern_lowering(const std::string& op);
// The default for an operator without a rule: an extern call of its eager
// kernel. Raises (naming the operator) when it cannot run inside a region:
// random operators, data-dependent result shapes, no eager kernel.
Value lower_as_extern(LoweringContext& c);

}  // namespace tp::stax
