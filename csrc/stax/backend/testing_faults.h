// Testing only: planted faults for the bisection tests (Algorithm 11.1). Each
// makes the generated code compute a wrong value at a known layer, so a test can
// check that tp.compiler.bisect names that layer. Nothing plants a fault unless
// a test calls plant_fault (through tensorplay._C._testing_plant_stax_fault).
#pragma once
#include <string>

#include "stax/ir/loop_ir.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax::testing {

// kind:
//   "lowering": every ComputeNode whose origin names operator `op` computes its
//               body + 1, as if that operator's lowering rule emitted a wrong
//               constant (applied to the LoopProgram before scheduling);
//   "kernel":   the loop nest of operator `op` in the generated kernel computes
//               body + 1 (applied to the Schedule: a code-level fault);
//   "fusion":   the last nest of every kernel that fused several nodes computes
//               body + 1 (`op` ignored): correct unfused, wrong fused;
//   "cuda_symbolic": the CUDA printing of every symbolic region is refused
//               (`op` ignored), as a rule without a symbolic form would: the
//               backend must specialize per size, not run eagerly.
// Throws ValueError for another kind. Faults stay planted until clear_faults().
void plant_fault(const std::string& kind, const std::string& op);
void clear_faults();

// Whether "cuda_symbolic" is planted.
bool refuses_symbolic_cuda();

void apply_program_faults(ir::LoopProgram& program);
void apply_schedule_faults(const ir::LoopProgram& program, Schedule& schedule);

}  // namespace tp::stax::testing
