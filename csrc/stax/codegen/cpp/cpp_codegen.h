// C++ code generation (Section 8): the KernelPrinter for CPUs. A Schedule ->
// one translation unit holding every kernel of the region (one `static void`
// function per KernelPlan, named after it) and an `extern "C"` entry
//     void tp_entry(void* const* bufs, const long long* sizes,
//                   int (*ext)(void* ctx, int k), void* ctx)
// that calls them in order, and ext(ctx, k) where extern call k runs between
// them (see kernel_printer.h). Vectors are GCC vector extensions of
// Schedule::vector_bytes bytes, parallel loops OpenMP.
#pragma once
#include <string>
#include <vector>

#include "stax/codegen/kernel_printer.h"

namespace tp::stax::codegen {

class CppPrinter final : public KernelPrinter {
 public:
  const char* language() const override { return "c++"; }
  PrintedUnit print(const ir::LoopProgram& program, const Schedule& schedule) const override;
};

// Kept for callers of the former free function: CppPrinter().print(program,
// schedule); `vector_bytes` must equal schedule.vector_bytes (the schedule's
// plans were made for that width).
using GeneratedSource = PrintedUnit;
GeneratedSource generate_cpp(const ir::LoopProgram& program, const Schedule& schedule, int vector_bytes);

}  // namespace tp::stax::codegen
