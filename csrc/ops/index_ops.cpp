#include "ops/families.h"

namespace tp {
void register_index_ops() {}
}  // namespace tp
