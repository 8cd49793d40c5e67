// Each operator family (one translation unit each) registers its OpDefs here.
#pragma once

namespace tp {
void register_pointwise_ops();   // ops/pointwise_ops.cpp
void register_reduction_ops();   // ops/reduction_ops.cpp (sum, amax, mean, softmax)
void register_view_ops();        // ops/view_ops.cpp
void register_factory_ops();     // ops/factory_ops.cpp
void register_copy_ops();        // ops/copy_ops.cpp (to / clone / copy_ / fill_ / in-place arithmetic)
void register_matmul_ops();      // ops/matmul_ops.cpp
// Issue 3 families (one owner each):
void register_unary_math_ops();    // ops/unary_math_ops.cpp
void register_binary_math_ops();   // ops/binary_math_ops.cpp
void register_reduction_extra_ops();  // ops/reduction_extra_ops.cpp
void register_norm_ops();          // ops/norm_ops.cpp (softmax family, layer/rms/batch norm, dropout)
void register_shape_ops();         // ops/shape_ops.cpp
void register_index_ops();         // ops/index_ops.cpp
void register_linalg_ops();        // ops/linalg_ops.cpp
void register_nn_ops();            // ops/nn_ops.cpp (conv, pool, losses, embedding)
void register_factory_extra_ops(); // ops/factory_extra_ops.cpp
void register_sort_ops();          // ops/sort_ops.cpp (sort, topk, median, unique, randperm, ...)
void register_misc_ops();          // ops/misc_ops.cpp (isclose, nan_to_num, diag, trace, meshgrid, ...)
void register_extra_composite_ops();  // ops/extra_composite_ops.cpp (nansum, aminmax, cummax, isin, block_diag, ...)
void register_counting_ops();     // ops/counting_ops.cpp (bincount, histc, histogram, mode, multinomial, tril_indices)
void register_view_scatter_ops(); // ops/view_scatter_ops.cpp (select/slice/as_strided_scatter: functionalization)
void register_masked_scatter_ops();  // ops/masked_scatter_ops.cpp
void register_random_functional_ops();  // ops/random_functional_ops.cpp (philox_random: random draws of compiled regions)
void register_linalg_decomp_ops();  // ops/linalg_decomp_ops.cpp (tp.linalg factorizations through LAPACK)
void register_special_binary_ops();  // ops/special_binary_ops.cpp (zeta, gammainc(c), orthogonal polynomials)
void register_special_bessel_ops();  // ops/special_bessel_ops.cpp (Bessel J/Y/K, i0e/i1e, erfcx, log_ndtr, ndtri)
void register_special_ops();  // ops/special_ops.cpp (lgamma, digamma, polygamma, i0, special_i1)
void register_device_move_ops();  // ops/device_move_ops.cpp (_to_device: a captured Tensor.to(device))
void register_value_check_ops();  // ops/value_check_ops.cpp (_value_check: data checks kept by compiled code)
void register_saved_values();  // ops/saved_values.cpp (OpDef::saved of the operators above; runs last)
void register_builtin_ops();     // ops/builtin_ops.cpp: calls all of the above
}  // namespace tp
