// The Stax backend: Graph -> lowering -> scheduling -> C++ -> content-addressed
// cache -> loaded entry point, wrapped as a callable region.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "stax/backend/extern_step.h"
#include "stax/ir/loop_ir.h"
#include "stax/runtime/cached_kernel.h"

namespace tp::stax {

// ext(ctx, k) runs extern call k between kernels (nonzero: it failed).
using ExternFn = int (*)(void* ctx, int k);
using EntryFn = void (*)(void* const* bufs, const long long* sizes, ExternFn ext, void* ctx);

// One generated kernel as tp.compiler.explain reports it (Section 13's model):
// the bytes it must move between memory and the core, each buffer counted once
// (buffers it writes and reads back count as written only), and a rough flop
// count (one per arithmetic node of each body per iteration, plus one per
// reduction step).
struct KernelInfo {
  std::string name;
  std::string origin;  // the graph operators fused into it
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  int64_t flops = 0;
};

// Compile options the Stax backend reads from tp.compile(options=...).
struct RegionOptions {
  bool fuse = true;               // "stax_fusion": False puts every loop nest in its own kernel
  double progress_after_s = 1.0;  // "progress_after_s": stderr line when compiling takes longer (< 0: never)
  // tp.compile's mode: "max-autotune" / "max-autotune-no-cudagraphs" widen a
  // CUDA region's launch tuning (cuda_region.h); the CPU path ignores it.
  std::string mode;
  // Run the C++ compiler on a compile-pool worker and return at once; the
  // region waits for it at its first run (or wait_built()), where a failed
  // build throws. Lets several regions' builds overlap (Section 11.2).
  bool background_build = false;
  // "stax_welford": auto (-1: the scheduler picks by row length), one_pass (0), two_pass (a huge limit)
  int64_t welford_two_pass_max = -1;
  bool masked_tails = true;       // "stax_masked_tails": False keeps every vector tail scalar
  // In-place reuse: (region output, region input) pairs where the output is the
  // final value of an input the function writes (functionalization). Where the
  // program makes it legal (inplace_reuse_legal in stax_backend.cpp) the output
  // is computed straight into the input's memory, so the caller's write-back
  // copy is not needed; otherwise the output gets a buffer of its own.
  std::vector<std::pair<int, int>> write_into;
  bool inplace = true;            // "stax_inplace": False keeps every such output in a buffer of its own
  // "stax_gelu_grad": False keeps the erf gelu's derivative as its unfused
  // operators (erfc and exp) instead of CallOp::GeluGrad (gelu_grad_fusion.h)
  bool gelu_grad = true;
  // "stax_tu_split": how many translation units a region's C++ may be split
  // into, compiled at once on the compile pool and linked into one library
  // (unit_split.h). "auto" (-1): units of about kAutoUnitBytes of kernel text,
  // at most kAutoMaxUnits; N >= 1: up to N units whatever the size (1: one unit).
  int tu_split = -1;
  // "stax_split_phases": False keeps a several-nest kernel over one outer
  // iteration (a whole-tensor mean: sum, then the division) on one thread
  // (ScheduleOptions::phased_chunks, for A/B).
  bool split_phases = true;
};
RegionOptions region_options(const std::map<std::string, std::string>& options);

class CompiledRegion {
 public:
  // inputs: the region's tensor inputs with exactly the metadata it was compiled for.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::string& source() const { return kernel_->source(); }
  const std::string& source_path() const { return kernel_->source_path(); }
  int kernel_count() const { return kernel_count_; }
  int unit_count() const { return unit_count_; }  // translation units its C++ was split into
  int extern_count() const { return static_cast<int>(externs_.size()); }
  bool disk_hit() const { return kernel_->disk_hit(); }
  // Waits for a background build; throws what it threw (tp::BackendError for a compiler failure).
  void wait_built() const { kernel_->wait(); }
  double compiler_seconds() const { return kernel_->compile_seconds(); }
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  // In-place reuse: (output, input) pairs the region may write into the input
  // (each output is written there at a call whose input has the planned layout
  // and shares memory with no other input), and per rejected pair why not.
  const std::vector<std::pair<int, int>>& inplace_outputs() const { return inplace_outputs_; }
  const std::vector<std::string>& inplace_rejected() const { return inplace_rejected_; }
  friend std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g, const RegionOptions& options);

 private:
  friend std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);
  enum class SlotKind : uint8_t { Input, Constant, Output, Temp, Status };
  struct Slot {
    SlotKind kind = SlotKind::Temp;
    int index = -1;  // input / constant / output index
    Shape sizes, strides;
    DType dtype = DType::Float32;
    bool extern_written = false;  // allocated (or adopted) when its extern call runs
    // Dynamic shapes: the sizes as expressions over the symbols (the layout is
    // contiguous at the call's sizes); empty when `sizes`/`strides` are exact.
    std::vector<ir::IndexExpr> size_exprs;
    int inplace_input = -1;  // Output: the input it may be computed into (in-place reuse)
  };
  // An extern call with its buffers resolved to slots.
  using ExternStep = stax::ExternStep;
  struct RunState;
  // Dynamic shapes: sizes[k] of the entry point read from the inputs (each
  // symbol's input and dim), after checking every symbolic input against its
  // sizes and each symbol against its declared range (ValueError otherwise).
  void read_sizes(const std::vector<Tensor>& inputs, long long* sizes) const;
  // A slot's sizes and (contiguous) strides at the call's sizes.
  void slot_layout(const Slot& s, const long long* sizes, Shape& out_sizes, Shape& out_strides) const;
  // Raises IndexError with the message of the check whose code the kernels stored.
  void raise_failed_check(long long status) const;
  static int run_extern_trampoline(void* ctx, int k);
  void run_extern(RunState& st, int k) const;
  // TP_LOGS=region_times: a callback timed (k >= 0: extern k; k < 0: the
  // printer's mark after kernel -1 - k).
  void timed_step(RunState& st, int k) const;
  std::vector<ExternStep> externs_;
  // Not the library itself: run() pins it per call, so the code cache can
  // unload idle kernels (bounded number of mapped libraries).
  std::shared_ptr<runtime::CachedKernel> kernel_;
  std::vector<Slot> slots_;
  std::vector<std::pair<int, int>> inplace_outputs_;
  std::vector<std::string> inplace_rejected_;
  // In-place reuse at a call: the input tensor an output slot is computed into,
  // or an undefined tensor when this call's input does not allow it.
  Tensor inplace_target(const Slot& s, const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> constants_;
  std::vector<ir::LoopProgram::Check> checks_;  // what a failed Guard raises, by code - 1
  std::vector<graph::SymbolInfo> symbols_;  // dynamic shapes: size_var(k) = symbols_[k]
  int num_outputs_ = 0;
  int kernel_count_ = 0;
  int unit_count_ = 1;
  std::vector<KernelInfo> kernels_;
  // The temporaries' memory, kept from one call to the next: fresh buffers of
  // many MB cost a page fault per 4 KiB page at every call (a training step's
  // backward region spent ~10% of its time in the kernel zeroing pages).
  // Temps never escape a call (outputs are fresh tensors), so a call that gets
  // the lock reuses them; a concurrent or nested call allocates its own.
  struct TempArena {
    std::mutex lock;
    std::vector<Tensor> temps;  // by slot, undefined until first used
  };
  std::unique_ptr<TempArena> arena_ = std::make_unique<TempArena>();
  Tensor temp(TempArena* arena, size_t slot, const long long* sizes) const;
};

// Throws tp::BackendError when a part of the graph cannot be generated.
std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);
std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g, const RegionOptions& options);

}  // namespace tp::stax
