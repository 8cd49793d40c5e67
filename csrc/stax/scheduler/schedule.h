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

// How the iterations a vector loop leaves over run: one scalar step at a time,
// or one masked vector step (the C++ printer loads the tail into a vector
// padded with a neutral value and stores only the live lanes back; see
// ScheduleOptions::masked_tails for when the scheduler picks it), or (a
// reduction's W-vector loop over a symbolic extent) a loop of vector steps, the
// last one masked, in place of the one-vector loop and the scalar tail: one
// printed body instead of two, for a shorter C++ compile.
enum class TailMode { Scalar, Masked, MaskedLoop };

// How a Welford reduction (ReduceOp::Welford) is computed.
enum class WelfordMode {
  OnePass,  // one read: per-lane (count, mean, M2) accumulators in double, merged pairwise (Chan et al.)
  TwoPass,  // the row read twice in the element type: the mean, then the squared deviations (in cache)
};

// How a chunked reduction's partial results are combined.
enum class ChunkCombine {
  PairwiseTree,  // a fixed binary tree in chunk order: deterministic, a sum's error grows with log2(chunks)
};

// Every decision about how a nest's loops execute lives here, made by the
// scheduler from ScheduleOptions; a printer (kernel_printer.h) only spells it
// out in its language. Nothing here is CPU-specific except as data (`lanes`
// comes from ScheduleOptions::vector_bytes).
struct LoopNest {
  int node = -1;                        // index into LoopProgram::nodes
  std::vector<ir::IndexExpr> inner_vars;  // after coalescing; the last one is the vector loop
  Shape inner_ranges;                   // static extents (or one example call's, see inner_extents)
  std::vector<ir::IndexExpr> inner_extents;  // what the loops run to: constants, or over size variables
  ir::Expr body;                        // with vars substituted by the kernel's loop vars
  ir::IndexExpr store_index;            // over the outer var (and inner vars for pointwise nests)
  bool vectorize = false;
  bool store_to_memory = true;          // false: only a local of this kernel reads it
  bool store_aux_to_memory = false;     // the same for a pair reduction's second result (aux_buffer)
  std::vector<SideStore> side_stores;

  // --- loop policy (read by the printer, decided by the scheduler) ---
  int lanes = 1;                        // vector width in elements of the body's type (when vectorize)
  TailMode tail = TailMode::Scalar;     // the last (span % step) iterations
  // Reduction: W independent vector accumulators (segmented summation,
  // Section 6.5), each taking one vector of every step of W*lanes elements,
  // combined pairwise at the end; then a one-vector loop, then the tail.
  int accumulators = 1;
  // Cascaded (blocked) summation of a long float sum (Section 13.3): the last
  // inner loop runs in blocks of `block` elements; each block starts from zero
  // and the block sums are added pairwise, in double, through a binary-counter
  // stack of `cascade_levels` entries; block 0 = one block (no cascade). A
  // symbolic extent has block > 0 and cascade_levels 0: its block sums are
  // added into the double total one after the other (one loop form for every
  // size, no stack sized for the range; in double the order is immaterial).
  int64_t block = 0;
  int cascade_levels = 0;
  // A scalar float32 sum accumulates in double (latency-bound anyway).
  bool wide_scalar_acc = false;
  // Welford reductions only: one pass or two (see WelfordMode).
  WelfordMode welford = WelfordMode::OnePass;
  // ArgMax / ArgMin only: the node's position expression over the kernel's loop variables.
  ir::Expr position;
  // A nest of a phased kernel (KernelPlan::phased) split across threads, as
  // KernelPlan::chunk / chunks / partials_in_double say for a one-nest kernel:
  // chunk > 0 splits its one inner loop into chunks of that many elements (a
  // symbolic extent: the least chunk of a reduction, 64 partials at most, or
  // the chunk of a pointwise loop; the printer sizes them at run time).
  int64_t chunk = 0;
  int64_t chunks = 0;
  bool partials_in_double = false;
  // A pointwise nest of a phased kernel with several inner loops (a layer_norm
  // output written in a whole-tensor kernel): its first inner loop is split
  // across threads instead (each iteration writes its own elements).
  bool parallel_first = false;
  // A split reduction nest with several inner loops (a whole-tensor sum whose
  // loads keep [16, 128, 256] apart): `chunk` counts iterations of its first
  // inner loop, which the chunks divide (at most 64 partials, none below the
  // grain in elements); the inner loops run whole.
  bool chunk_first = false;
};

// A single reduction vectorized across consecutive outer iterations (its inner
// loop is strided, e.g. sum over dim 0 of a row-major matrix): `unroll`
// vectors of `lanes` hold unroll*lanes neighbouring results, `groups` such
// groups, the remaining outputs run one at a time as `tail` (a scalar nest
// with its own policy).
struct OuterVectorPlan {
  int lanes = 0;
  int unroll = 0;
  int64_t groups = 0;
  // Cascade over the reduced rows: blocks of `block_rows` rows whose sums are
  // added pairwise as double vectors (0 = no cascade).
  int64_t block_rows = 0;
  int cascade_levels = 0;
  LoopNest tail;
};

struct KernelPlan {
  std::string name;                     // fused_<ops>_<index>, from what it fuses (a C identifier)
  std::vector<int> nodes;
  Shape outer_ranges;                   // the fused iteration space shared by all nests
  ir::IndexExpr outer_var;              // all outer dims flattened into one parallel loop
  int64_t outer_extent = 1;             // static (or one example call's) trip count of the outer loop
  std::vector<ir::IndexExpr> outer_extents;  // per outer dim: constants, or over size variables
  ir::IndexExpr outer_count;            // the outer loop's trip count (product of outer_extents)
  // Some extent is a size variable: the plan holds only choices valid for
  // any size in the declared ranges (ScheduleOptions::size_ranges): no chunks,
  // an outer vectorization whose group count the printer computes at run
  // time, cascade stacks for the largest count; the printer reads sizes[].
  bool symbolic = false;
  std::vector<LoopNest> nests;
  std::set<int> local_buffers;          // buffers read from a local variable inside this kernel
  bool parallel = false;
  // >0: a single nest with one long loop split into chunks of this many
  // elements across threads (outer_extent == 1). A reduction keeps one partial
  // result per chunk and combines them with `combine`; a float sum's partials
  // stay in double until then (`partials_in_double`).
  // Symbolic extent: the printer computes the chunking from the size at run
  // time; `chunk` is then the least chunk of a reduction (chunks = 64, the
  // most partials) or the chunk of a pointwise loop (chunks = 0).
  int64_t chunk = 0;
  int64_t chunks = 0;
  ChunkCombine combine = ChunkCombine::PairwiseTree;
  bool partials_in_double = false;
  // A kernel over one outer iteration (a whole-tensor reduction and what
  // reads it: mean = sum, then the division; or amax, then exp(x - m) summed)
  // with several nests: each nest runs as its own phase, one after the other;
  // a nest with LoopNest::chunk > 0 splits its loop across threads (a
  // reduction: fixed chunks, partial results combined in a fixed tree, so the
  // result does not depend on the thread count), the others run on the
  // calling thread. Reduction results are locals of the kernel, read by the
  // later phases. A static kernel of a few long rows (ScheduleOptions::
  // split_rows_max) may be phased too: its first nest, a reduction, is split
  // per row (all rows' chunks in one parallel loop), the other nests (no
  // inner loop) then run per row on the calling thread.
  bool phased = false;
  bool vectorize_outer = false;         // see OuterVectorPlan
  // Width of the loop variables and index arithmetic: 32 when range analysis
  // proves every loop bound and every subexpression of every index fits in
  // half the int32 range (headroom for the steps a printer adds), and the
  // options ask for it (Section 6.8); otherwise 64.
  int index_bits = 64;
  OuterVectorPlan outer_vector;
  // Dynamic shapes: the declared ranges of the size variables (ScheduleOptions::size_ranges),
  // so the printer can prove e.g. a division by a size positive.
  ir::RangeMap size_ranges;
  std::string origin;                   // operators fused here, for the comment above the kernel
};

struct ScheduleOptions {
  int vector_bytes = 64;                // from the host ISA (a GPU printer would pass its own)
  int64_t parallel_grain = 32768;       // elements of work below which a kernel stays on one thread
  int accumulators = 4;                 // W of a vectorized reduction
  int64_t vector_block_steps = 64;      // cascade block: steps of each vector accumulator
  int64_t scalar_block = 256;           // cascade block of a scalar sum, in elements
  int64_t outer_block_rows = 128;       // cascade block of an outer-vectorized sum, in rows (eager's flush interval)
  int max_outer_unroll = 8;             // vectors per group of an outer-vectorized reduction
  int64_t pointwise_chunk = 16384;      // chunk of a long pointwise loop split across threads
  size_t max_kernel_name = 48;          // characters of a kernel name's operator part
  // Use 32-bit indices where proven safe. Off for CPUs: 64-bit address
  // arithmetic costs nothing there and a 32-bit index needs sign extension
  // before each access. A GPU target turns it on (fewer registers).
  bool index32 = false;
  bool fuse = true;                     // false: one node per kernel (compile option stax_fusion, for bisection)
  // Dynamic shapes: the declared [min, max] of each size variable, under
  // ir::size_var_id(k) (graph::SymbolInfo). Absent: [0, INT64_MAX]. Bounds
  // that hold for every size (32-bit indices, cascade depth) use them.
  ir::RangeMap size_ranges;
  // Welford: rows up to this many elements (and one inner loop) read the row
  // twice from cache (WelfordMode::TwoPass), longer ones once. -1: one vector
  // cascade block (accumulators * lanes * vector_block_steps, 4096 floats with
  // AVX-512); 0: always one pass. Compile option stax_welford (auto / one_pass / two_pass).
  int64_t welford_two_pass_max = -1;
  // Masked vector tails for vectorized nests whose inner extent is not a
  // multiple of the lanes (compile option stax_masked_tails).
  bool masked_tails = false;  // the backend turns it on for AVX-512
  // Vector code may read a bool buffer as a where's condition (widened to lane
  // masks) and use a position that does not move with the lanes (a symbolic
  // size, splatted). The C++ printer can; the CUDA printer's vector accesses cannot.
  bool cpp_vector_code = false;  // the CPU backend turns it on
  // Split every long nest of a several-nest kernel over one outer iteration
  // across threads (KernelPlan::phased). The C++ printer can; the CUDA
  // printer has its own whole-tensor split and ignores per-nest chunks.
  bool phased_chunks = false;  // the CPU backend turns it on
  // A pointwise reader of a pointwise node's output buffer, at the element
  // the node stores, may join the node's kernel (the row goes through memory
  // within one outer iteration). The C++ printer runs a kernel's nests one
  // after the other per outer iteration (a phased kernel: one phase after the
  // other); the CUDA backend keeps its kernels as they were.
  bool stored_handover = false;  // the CPU backend turns it on
  // With phased_chunks: a reduction kernel of at most this many long rows
  // splits each row across threads as well (its outer loop alone would leave
  // threads idle). A constant, so the chunks never depend on the thread count.
  int64_t split_rows_max = 16;
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
  int vector_bytes = 64;                // the options' vector width, for the printer's vector types
  std::vector<ScheduleStep> steps;  // kernels and extern calls in execution order
};

Schedule schedule(const ir::LoopProgram& program, const ScheduleOptions& options);

// Range of a loop variable that runs over [0, extent): exact for a constant
// extent, [0, INT64_MAX - 1] for a symbolic one.
ir::Interval loop_interval(const ir::IndexExpr& extent);
// Range of a kernel's outer loop variable.
ir::Interval outer_interval(const KernelPlan& k);

// Exposed for tests: may `node` join a kernel that already holds `members`
// with outer space `outer`? (shape compatibility + dependence distance 0)
// `stored_handover`: see ScheduleOptions::stored_handover.
bool can_fuse(const ir::LoopProgram& program, const std::vector<int>& members, const Shape& outer, int node,
              bool stored_handover = false);

}  // namespace tp::stax
