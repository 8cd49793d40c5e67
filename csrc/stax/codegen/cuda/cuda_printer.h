// CUDA code generation (Section 9, issue 12 item 4): the KernelPrinter for
// NVIDIA GPUs. It prints the scheduler's plans (schedule.h) as they are — one
// `extern "C" __global__` kernel per KernelPlan, fusing the plan's nests —
// and only chooses how threads map onto them:
//  - Flat: a kernel of pointwise nests over one inner space is a grid-stride
//    loop over (outer iteration, inner group); a vectorized nest (the plan's
//    `lanes`) moves `lanes` consecutive elements per thread with 128-bit loads
//    and stores where the address is 16-byte aligned (checked per access, the
//    fallback reads the same lanes one by one), the rest of a row runs scalar.
//  - Row: a kernel holding a row reduction runs one block per outer iteration
//    (softmax, layer_norm: every nest of the row in one kernel); each nest's
//    inner space is shared among the block's threads (vector groups as above),
//    a reduction combines per-thread partials with warp shuffles and one
//    shared-memory step, in a fixed order, and every thread gets the result
//    for the nests after it.
//  - Column: a single reduction the plan vectorizes across outputs
//    (`vectorize_outer`: the reduced dim is strided, the kept dim contiguous)
//    gives each of X threads of a block row a neighbouring output (coalesced
//    rows; X = 32, 16 or 8 as the outputs allow) and splits the reduced range
//    over 1024/X block rows. 16-bit data: two neighbouring outputs a thread
//    (one 4-byte access per row; the alignment tested once per thread).
// exp/tanh/sigmoid/division of a 16-bit node use hardware approximations far
// below a 16-bit ulp (the accurate float routines made those kernels
// instruction-bound); float32/float64 nodes keep the accurate ones.
// A float32 sum accumulates in double (free on a memory-bound GPU kernel; the
// error no longer grows with the reduced length). Refused (NotImplementedError,
// the region falls back or raises under strict_native): scans, checked
// indexing (Guard), random draws, narrow dtypes.
// Dynamic shapes: a program with size variables prints kernels that take every
// size as an `i64 tp_arg_size<k>` parameter (after the buffers, before a split
// reduction's scratch) and loop to size expressions; every size-dependent
// launch choice is a CudaLaunch expression the host evaluates at each launch
// (cuda_launch_at), and the source holds only choices valid for any size in
// the declared ranges (a register row whose vector groups no longer fit K per
// thread takes the plain row path behind a run-time test).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "stax/codegen/kernel_printer.h"
#include "stax/ir/index_expr.h"

namespace tp::stax::codegen {

enum class CudaForm { Flat, Row, Column };

// How the host launches one printed kernel (one per KernelPlan, in order).
struct CudaLaunch {
  CudaForm form = CudaForm::Flat;
  // Flat: the number of work items (grid-stride: the host caps the grid);
  // Row: the number of rows (one block each); Column: the number of blocks.
  int64_t work = 0;
  int block_x = 256;
  int block_y = 1;
  // > 0: a split reduction (split_reduction.h); the host passes a buffer of
  // this many bytes, its first 4 zeroed on the launch's stream, as the
  // kernel's last argument (one per launch: concurrent launches never share it).
  int64_t scratch_bytes = 0;
  // Row form only: the rows live in registers (the block is CudaKnobs::row_block's).
  bool register_rows = false;
  // Column form only: neighbouring outputs per block row (block_x times the
  // outputs per thread).
  int column_width = 0;
  // Dynamic shapes: the fields above hold the values at the sizes' hints;
  // a symbolic launch is re-made from the call's sizes by cuda_launch_at.
  bool symbolic = false;
  ir::IndexExpr work_expr;   // work at any sizes
  // Row form: > 0 when the block is chosen at launch: a power of two in
  // [32, block_max] covering items_expr (plain rows: the largest nest's items
  // per row; register rows with `cache_k` groups a thread: the row's vector
  // groups / cache_k, so that the row fits the registers where it can).
  int block_max = 0;
  int cache_k = 0;
  ir::IndexExpr items_expr;
  // Split reduction: the blocks follow the reduction's items (split_items) unless
  // a knob fixed them (split_fixed); scratch_bytes covers the most blocks.
  bool split_auto = false;
  ir::IndexExpr split_items;
};

// The launch of a symbolic kernel at the call's sizes (values under
// ir::size_var_id(k)); a static launch is returned as it is.
CudaLaunch cuda_launch_at(const CudaLaunch& launch, const std::unordered_map<int, int64_t>& sizes);

struct CudaUnit {
  PrintedUnit unit;
  std::vector<CudaLaunch> launches;  // per kernel, as unit.kernel_names
  // Some row kernel keeps its rows in registers: its block size (and so the
  // vector groups per thread) is a launch choice worth timing.
  bool tunable = false;
};

// The launch choices the printer leaves to a tuner (Section 9.6). Each 0
// means the printer's own choice, so CudaKnobs{} prints exactly what the
// printer printed before the knobs existed; a knob applies to every kernel of
// its form in the unit. A value the kernel cannot take throws ValueError.
struct CudaKnobs {
  // Register-row kernels: threads per block (a power of two in [32, 512]);
  // the vector groups per thread follow (a row that no longer fits in
  // registers at this size is printed as a plain row kernel).
  int row_block = 0;
  // Other row kernels (not split): threads per block, a power of two in
  // [32, 1024] (default: the row's items rounded up, in [32, 512]; 1024 for
  // a single row).
  int row_threads = 0;
  // Flat kernels: threads per block, a multiple of 32 up to 1024 (default 256).
  int flat_block = 0;
  // Column kernels: neighbouring outputs per block row W (8, 16, 32 or 64;
  // default 32/16/8 by the number of outputs) and threads per block, a power
  // of two in [64, 1024] (default kCudaColumnThreads).
  int column_width = 0;
  int column_threads = 0;
  // Split reductions (split_reduction.h): blocks (1 to 4096; default
  // split_reduction_blocks of the size) and threads per block (a power of two
  // in [64, 1024]; default kSplitThreads). Only where the default splits.
  int split_blocks = 0;
  int split_threads = 0;
  bool operator==(const CudaKnobs&) const = default;
};

class CudaPrinter final : public KernelPrinter {
 public:
  // row_block > 0: the threads per block of register-row kernels (a power of
  // two in [32, 512]) instead of the default (a quarter of the row's vector
  // groups); the default autotuner prints the candidates this way.
  explicit CudaPrinter(int row_block = 0) { knobs_.row_block = row_block; }
  explicit CudaPrinter(const CudaKnobs& knobs) : knobs_(knobs) {}
  const char* language() const override { return "cuda"; }
  PrintedUnit print(const ir::LoopProgram& program, const Schedule& schedule) const override;
  CudaUnit print_cuda(const ir::LoopProgram& program, const Schedule& schedule) const;

 private:
  CudaKnobs knobs_;
};

// Threads per block of the column form (X outputs x 1024/X rows).
constexpr int kCudaColumnThreads = 1024;

}  // namespace tp::stax::codegen
