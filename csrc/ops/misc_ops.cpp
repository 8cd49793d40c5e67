#include "ops/families.h"

namespace tp {
void register_misc_ops() {}
}  // namespace tp
