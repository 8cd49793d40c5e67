// Scheduling (Section 7): which ComputeNodes share a kernel, in what loop
// structure, and how each loop is executed.
//
// Fusion rule (greedy, in dependence order, Algorithm 7.1 in its simplest
// form): a node joins the current kernel when its iteration space starts with
// the kernel's outer space (Definition 7.2) and every value it reads from a
// node already in the kernel is read at exactly the index that node wrote in
// the same outer iteration (dependence distance 0, Proposition 7.3). Values
// produced and consumed inside one kernel then never reach memory: they live
// in a local variable for the current outer iteration.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "stax/ir/loop_ir.h"

namespace tp::stax {

// A value a nest also writes to memory so that a later nest of the same kernel
// can read it instead of recomputing it (see share_expensive_values).
struct SideStore {
  ir::Expr value;          // a subexpression of the nest's body (same node, so it is emitted once)
  int buffer = -1;
  ir::IndexExpr index;     // over the nest's own loop variables
};

struct LoopNest {
  int node = -1;                        // index into LoopProgram::nodes
  std::vector<ir::IndexExpr> inner_vars;  // after coalescing; the last one is the vector loop
  Shape inner_ranges;
  ir::Expr body;                        // with vars substituted by the kernel's loop vars
  ir::IndexExpr store_index;            // over the outer var (and inner vars for pointwise nests)
  bool vectorize = false;
  bool store_to_memory = true;          // false: only a local of this kernel reads it
  std::vector<SideStore> side_stores;
};

struct KernelPlan {
  std::string name;                     // kernel0, ...
  std::vector<int> nodes;
  Shape outer_ranges;                   // the fused iteration space shared by all nests
  ir::IndexExpr outer_var;              // all outer dims flattened into one parallel loop
  int64_t outer_extent = 1;
  std::vector<LoopNest> nests;
  std::set<int> local_buffers;          // buffers read from a local variable inside this kernel
  bool parallel = false;
  int64_t chunk = 0;                    // >0: a single pointwise nest split into chunks across threads
  // A single reduction whose inner loop is strided (e.g. sum over dim 0 of a
  // row-major matrix): vectorize across consecutive outer iterations instead,
  // one vector accumulator holding `lanes` neighbouring results.
  bool vectorize_outer = false;
  std::string origin;                   // operators fused here, for the comment above the kernel
};

struct ScheduleOptions {
  int vector_bytes = 64;                // from the host ISA
  int64_t parallel_grain = 32768;       // elements of work below which a kernel stays on one thread
};

// One step of the entry: a kernel, or an extern call (LoopProgram::externs)
// between kernels. An extern call ends the kernel before it (its operands must
// be in memory) and the kernels after it read its results from memory.
struct ScheduleStep {
  bool is_extern = false;
  int index = 0;  // into Schedule::kernels or LoopProgram::externs
};

struct Schedule {
  std::vector<KernelPlan> kernels;
  std::vector<ScheduleStep> steps;  // kernels and extern calls in execution order
};

Schedule schedule(const ir::LoopProgram& program, const ScheduleOptions& options);

// Exposed for tests: may `node` join a kernel that already holds `members`
// with outer space `outer`? (shape compatibility + dependence distance 0)
bool can_fuse(const ir::LoopProgram& program, const std::vector<int>& members, const Shape& outer, int node);

}  // namespace tp::stax
