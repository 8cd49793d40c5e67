#include "ops/families.h"

namespace tp {
void register_linalg_ops() {}
}  // namespace tp
