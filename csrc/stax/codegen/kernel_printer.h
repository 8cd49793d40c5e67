// The seam between scheduling and code generation (Section 8).
//
// A KernelPrinter spells out a Schedule of a LoopProgram in one target
// language: one translation unit holding every kernel of the region and an
// entry point that runs them in order. It makes no decision of its own: every
// choice about loop structure (parallel loops, vector width, accumulators,
// cascade blocks, chunks, tails) is in the KernelPlans the scheduler made
// (schedule.h), so that a new target (the C++ printer is the first; a CUDA
// printer is next) only has to print them. What a printer may decide is
// spelling: names of temporaries, the runtime prelude, the compiler barriers
// its language needs to keep eager's rounding.
#pragma once
#include <string>
#include <vector>

#include "stax/ir/loop_ir.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax::codegen {

// A printed region: the source and how to call it.
struct PrintedUnit {
  std::string language;            // "c++", ...
  std::string source;              // one translation unit
  // The entry point, with C linkage:
  //     void <entry>(void* const* bufs, const long long* sizes)
  // bufs[slot] is the data pointer of buffer slot_buffer[slot]; sizes[k] is
  // the value of size variable k (ir::size_var) for this call.
  std::string entry = "tp_entry";
  std::vector<int> slot_buffer;    // slot -> buffer id
  std::vector<std::string> kernel_names;  // in call order
  int kernel_count = 0;
  int size_count = 0;              // entries of `sizes` the unit reads (0: none, the pointer may be null)
};

class KernelPrinter {
 public:
  virtual ~KernelPrinter() = default;
  virtual const char* language() const = 0;
  virtual PrintedUnit print(const ir::LoopProgram& program, const Schedule& schedule) const = 0;
};

}  // namespace tp::stax::codegen
