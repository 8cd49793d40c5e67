#include "ops/families.h"

namespace tp {
void register_nn_ops() {}
}  // namespace tp
