#include "ops/autocast.h"
#include "ops/families.h"

namespace tp {
void register_linalg_lu_ops();  // ops/linalg_lu_ops.cpp (LU factorization through LAPACK getrf)

void register_builtin_ops() {
  register_pointwise_ops();
  register_reduction_ops();
  register_view_ops();
  register_factory_ops();
  register_copy_ops();
  register_matmul_ops();
  register_unary_math_ops();
  register_binary_math_ops();
  register_reduction_extra_ops();
  register_norm_ops();
  register_shape_ops();
  register_index_ops();
  register_linalg_ops();
  register_nn_ops();
  register_factory_extra_ops();
  register_sort_ops();
  register_misc_ops();
  register_extra_composite_ops();
  register_counting_ops();
  register_view_scatter_ops();
  register_random_functional_ops();
  register_masked_scatter_ops();
  register_linalg_decomp_ops();
  register_linalg_lu_ops();
  register_special_ops();
  register_special_bessel_ops();
  register_special_binary_ops();
  register_device_move_ops();
  register_value_check_ops();
  register_saved_values();
  declare_autocast_policies();
}
}  // namespace tp
