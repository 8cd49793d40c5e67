// C++ code generation (Section 8): a Schedule -> one translation unit holding
// every kernel of the region and an `extern "C"` entry
//     void tp_entry(void* const* bufs, const long long* sizes,
//                   int (*ext)(void* ctx, int k), void* ctx)
// that calls them in order, and ext(ctx, k) where extern call k runs between
// them. bufs[slot] is the data pointer of buffer slot_buffer[slot]; sizes is
// reserved for symbolic shapes (unused while every extent is a compile-time
// constant).
#pragma once
#include <string>
#include <vector>

#include "stax/ir/loop_ir.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax::codegen {

struct GeneratedSource {
  std::string source;
  std::vector<int> slot_buffer;  // slot -> buffer id
  int kernel_count = 0;
};

GeneratedSource generate_cpp(const ir::LoopProgram& program, const Schedule& schedule, int vector_bytes);

}  // namespace tp::stax::codegen
