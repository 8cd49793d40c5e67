#include "ops/families.h"

namespace tp {
void register_builtin_ops() {
  register_pointwise_ops();
  register_reduction_ops();
  register_view_ops();
  register_factory_ops();
  register_copy_ops();
  register_matmul_ops();
}
}  // namespace tp
