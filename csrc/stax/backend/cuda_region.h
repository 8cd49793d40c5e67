// Running a Stax region on a CUDA GPU (issue 12): the region is lowered as for
// the CPU, scheduled with GPU options (16-byte vectors, 32-bit indices where
// proven), printed by the CUDA printer, compiled once by NVRTC for the
// device's exact architecture (CUBIN cached on disk by source, sm_XY, NVRTC
// and driver version) and its kernels launched in plan order on the default
// stream, extern calls (GEMM, sort, ...) running their eager CUDA kernels
// between them. Outputs and temps come from the CUDA caching allocator.
// Dynamic shapes: a symbolic graph gives one region for every size in its
// symbols' ranges; each call reads the sizes from its inputs, passes them to
// the kernels and makes every size-dependent launch choice from them
// (codegen::cuda_launch_at). 32-bit indices are proved over the declared
// ranges, else over ranges capped near the hints with a guard per call: a
// call beyond the caps runs a 64-bit build of the same region (compiled at
// its first such call).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/registry.h"
#include "stax/backend/cuda_launch_space.h"
#include "stax/backend/extern_step.h"
#include "stax/backend/stax_backend.h"
#include "stax/codegen/cuda/cuda_printer.h"

namespace tp::stax {

// How a region's launch configuration is tuned on its example inputs.
//  Off: TP_CUDA_AUTOTUNE=0 / off — the printer's defaults;
//  Default: the first form — register-row kernels try 128/256/512 threads,
//    host-timed, stored as <sha256(device name, default source)>.tune;
//  Max: mode "max-autotune" / "max-autotune-no-cudagraphs" — every knob of
//    cuda_launch_space.h searched by launch_search.h, timed with CUDA events,
//    the winner stored under a key that also names the mode's search (both
//    modes share it: they search the same space).
enum class CudaTuning { Off, Default, Max };
CudaTuning cuda_tuning(const RegionOptions& options);
// The options a CUDA region gets from tp.compile's options and mode.
RegionOptions cuda_region_options(const std::map<std::string, std::string>& options, const std::string& mode);

// Counters of the max-autotune search in this process (tests: a warm process
// reads the stored winner instead of searching).
struct CudaTuningStats {
  int64_t searches = 0;       // regions searched
  int64_t evaluations = 0;    // points timed or refused, over all searches
  int64_t invalid = 0;        // points that failed to print, build, run or match the default's results
  int64_t cache_loads = 0;    // regions built from a stored winner
};
CudaTuningStats cuda_tuning_stats();
// The check every max-autotune candidate faster than the default passes: empty
// when `got` equals `want` (a region's outputs, on any device) within the
// rounding of another summation order — NaN where NaN, infinities equal,
// floating elements within rtol (float64 1e-9, float32 1e-4, 16-bit 2e-2) of
// the element or of the output's largest magnitude, integers exact — else
// what differs first.
std::string launch_results_differ(const std::vector<Tensor>& want, const std::vector<Tensor>& got);

// The CUDA device of a region's example inputs; -1 when none is on a GPU.
// Throws BackendError when CUDA tensors meet CPU tensors (even 0-d ones:
// the region runs eagerly then, where a 0-d CPU tensor is a number).
int cuda_region_device(const std::vector<Tensor>& examples);
// Throws BackendError when a result of `g` is a host tensor (a factory called
// with device="cpu" or without a device, a host constant): eager returns it on
// the CPU, a CUDA region would compute it on the GPU.
void check_cuda_region_results(const graph::Graph& g, int device);

// The composites that stay whole for a CUDA region (the decomposition pass
// splits the rest): var/std (and their overloads), which lower to two plain
// reductions computed in double (the printer has no Welford node; the
// decomposition would compute the mean in the float type); and, for a symbolic
// graph, mean, whose lowering divides by the element count read at run time
// (its decomposition would bake the hint's count in).
bool cuda_keeps_whole(const std::string& op, bool symbolic);
// Before the passes decompose a symbolic graph for CUDA: layer_norm's
// normalized_shape (a SymInt list under dynamic=True) only names the trailing
// dims its decomposition reduces over, whose mean divides by the count read at
// run time, so the attribute's symbolic form is dropped and the decomposition
// (size-independent then) applies — else layer_norm stayed whole, a Welford
// node the CUDA printer does not print.
void cuda_prepare_symbolic(graph::Graph& g);

struct PrintedCudaRegion;

class CudaRegion {
 public:
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  const std::string& source() const { return source_; }
  int kernel_count() const { return static_cast<int>(functions_.size()); }
  int extern_count() const { return static_cast<int>(externs_.size()); }
  bool disk_hit() const { return false; }
  // The row block size the autotuner chose (0: the printer's default).
  int tuned_block() const { return tuned_block_; }
  // max-autotune: the chosen point ("name=value ..."), empty otherwise.
  const std::string& tuned_config() const { return tuned_config_; }
  friend std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device,
                                                         const RegionOptions& options,
                                                         const std::vector<Tensor>& examples);
  friend std::shared_ptr<CudaRegion> build_region(const struct PrintedCudaRegion& pr, int device,
                                                  const CudaGridKnobs& grid);
  friend std::shared_ptr<CudaRegion> search_region(int device, const RegionOptions& options,
                                                   const std::vector<Tensor>& examples, const PrintedCudaRegion& pr);
  friend std::shared_ptr<CudaRegion> tune_region(const graph::Graph& g, int device, const RegionOptions& options,
                                                 const std::vector<Tensor>& examples, const PrintedCudaRegion& pr,
                                                 const std::string& key);

 private:
  enum class SlotKind : uint8_t { Input, Constant, Output, Temp };
  struct Slot {
    SlotKind kind = SlotKind::Temp;
    int index = -1;
    Shape sizes, strides;
    int64_t numel = 0;
    DType dtype = DType::Float32;
    bool extern_written = false;
    std::vector<ir::IndexExpr> size_exprs;  // dynamic shapes: contiguous at these sizes (empty: static)
  };
  struct Launch {
    void* function = nullptr;
    std::string name;
    unsigned grid = 1, block_x = 1, block_y = 1;
    int64_t scratch_bytes = 0;  // split reduction: a zeroed-counter scratch per launch
    codegen::CudaLaunch spec;   // a symbolic launch: grid and block re-made per call from it
  };
  // Dynamic shapes: the call's sizes (read_sizes) as size_var_id(k) -> value.
  using SizeValues = std::unordered_map<int, int64_t>;
  SizeValues read_sizes(const std::vector<Tensor>& inputs) const;
  Tensor allocate(const Slot& s, const SizeValues& sizes) const;
  // The 64-bit build for calls beyond the 32-bit caps (built at the first one).
  std::shared_ptr<CudaRegion> wide_region() const;
  using ExternStep = stax::ExternStep;
  struct Step {
    bool is_extern = false;
    int index = 0;  // into launches_ or externs_
  };
  void run_extern(const ExternStep& e, std::vector<Tensor>& slots, std::vector<void*>& ptrs,
                  std::vector<Tensor>& outputs, const SizeValues& sizes) const;
  int device_ = 0;
  std::string source_;
  std::vector<Slot> slots_;
  std::vector<Tensor> constants_;  // on the device
  std::vector<Launch> functions_;
  std::vector<ExternStep> externs_;
  std::vector<Step> steps_;
  int num_outputs_ = 0;
  int tuned_block_ = 0;
  std::string tuned_config_;
  // Dynamic shapes.
  std::vector<graph::SymbolInfo> symbols_;
  int sms_ = 1;
  CudaGridKnobs grid_;
  std::vector<int64_t> index32_caps_;  // per symbol; empty: the build holds over the declared ranges
  std::shared_ptr<const PrintedCudaRegion> wide_printed_;
  mutable std::mutex wide_mu_;
  mutable std::shared_ptr<CudaRegion> wide_;
};

// Throws BackendError naming what the CUDA path cannot generate. With
// example inputs (tp.compile's), the launch configuration is tuned on them as
// cuda_tuning(options) says, once per (source, device name[, search]): the
// choice is kept on disk beside the CUBINs.
std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device, const RegionOptions& options,
                                                const std::vector<Tensor>& examples);

// The printed CUDA unit of g (scheduled with the GPU options); no GPU needed.
// row_block > 0: the block size of register-row kernels (see CudaPrinter).
codegen::CudaUnit cuda_unit(const graph::Graph& g, int row_block = 0);
codegen::CudaUnit cuda_unit(const graph::Graph& g, const codegen::CudaKnobs& knobs);
// The max-autotune search space of g (test hook; no GPU needed).
SearchSpace cuda_search_space(const graph::Graph& g);
// g printed at a point of that space given by name (parameters left out stay
// at their defaults; ValueError for an unknown name or a value that is not a
// candidate) — what the search would compile there (test hook).
struct CudaVariant {
  codegen::CudaUnit unit;
  CudaLaunchChoice choice;
  std::string point;  // SearchSpace::describe of the whole point
};
CudaVariant cuda_variant(const graph::Graph& g, const std::map<std::string, int64_t>& values);
// Its source text (test hook; g is decomposed first, as the backend does).
std::string cuda_source(const graph::Graph& g);
// Its extern calls in order, as "op" or "_gemm_epilogue:<act>[:nobias]"
// (test hook: which GEMMs took a cuBLASLt epilogue; no GPU needed).
std::vector<std::string> cuda_extern_calls(const graph::Graph& g);
// Compiles g for `device` and runs it once on `inputs` (test hook).
std::vector<Tensor> run_cuda(const graph::Graph& g, const std::vector<Tensor>& inputs);
// Compiles g (symbolic or not) for the device of `examples` without tuning
// and returns the region (test hook: one region called at many sizes).
std::shared_ptr<CudaRegion> compile_cuda_test_region(const graph::Graph& g, const std::vector<Tensor>& examples);
// The symbolic printing's 32-bit caps (per symbol; empty: proved over the
// declared ranges or not symbolic) — test hook, no GPU needed.
std::vector<int64_t> cuda_index32_caps(const graph::Graph& g);

}  // namespace tp::stax
