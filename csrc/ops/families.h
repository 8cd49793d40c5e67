// Each operator family (one translation unit each) registers its OpDefs here.
#pragma once

namespace tp {
void register_pointwise_ops();   // ops/pointwise_ops.cpp
void register_reduction_ops();   // ops/reduction_ops.cpp (sum, amax, mean, softmax)
void register_view_ops();        // ops/view_ops.cpp
void register_factory_ops();     // ops/factory_ops.cpp
void register_copy_ops();        // ops/copy_ops.cpp (to / clone / copy_ / fill_ / in-place arithmetic)
void register_matmul_ops();      // ops/matmul_ops.cpp
void register_builtin_ops();     // ops/builtin_ops.cpp: calls all of the above
}  // namespace tp
