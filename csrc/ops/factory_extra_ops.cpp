#include "ops/families.h"

namespace tp {
void register_factory_extra_ops() {}
}  // namespace tp
