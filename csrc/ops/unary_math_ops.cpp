#include "ops/families.h"

namespace tp {
void register_unary_math_ops() {}
}  // namespace tp
