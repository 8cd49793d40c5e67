// Running a Stax region on a CUDA GPU (issue 12): the region is lowered as for
// the CPU, scheduled with GPU options (16-byte vectors, 32-bit indices where
// proven), printed by the CUDA printer, compiled once by NVRTC for the
// device's exact architecture (CUBIN cached on disk by source, sm_XY, NVRTC
// and driver version) and its kernels launched in plan order on the default
// stream, extern calls (GEMM, sort, ...) running their eager CUDA kernels
// between them. Outputs and temps come from the CUDA caching allocator.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/registry.h"
#include "stax/backend/extern_step.h"
#include "stax/backend/stax_backend.h"
#include "stax/codegen/cuda/cuda_printer.h"

namespace tp::stax {

// The CUDA device of a region's example inputs; -1 when none is on a GPU.
// Throws BackendError when CUDA tensors meet CPU tensors (even 0-d ones:
// the region runs eagerly then, where a 0-d CPU tensor is a number).
int cuda_region_device(const std::vector<Tensor>& examples);

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
  friend std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device,
                                                         const RegionOptions& options,
                                                         const std::vector<Tensor>& examples);
  friend std::shared_ptr<CudaRegion> build_region(const struct PrintedCudaRegion& pr, int device);
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
  };
  struct Launch {
    void* function = nullptr;
    std::string name;
    unsigned grid = 1, block_x = 1, block_y = 1;
    int64_t scratch_bytes = 0;  // split reduction: a zeroed-counter scratch per launch
  };
  using ExternStep = stax::ExternStep;
  struct Step {
    bool is_extern = false;
    int index = 0;  // into launches_ or externs_
  };
  void run_extern(const ExternStep& e, std::vector<Tensor>& slots, std::vector<void*>& ptrs,
                  std::vector<Tensor>& outputs) const;
  int device_ = 0;
  std::string source_;
  std::vector<Slot> slots_;
  std::vector<Tensor> constants_;  // on the device
  std::vector<Launch> functions_;
  std::vector<ExternStep> externs_;
  std::vector<Step> steps_;
  int num_outputs_ = 0;
  int tuned_block_ = 0;
};

// Throws BackendError naming what the CUDA path cannot generate. With
// example inputs (tp.compile's), a region with register-row kernels tunes
// their block size by timing the candidates on them, once per (source,
// device name): the choice is kept on disk beside the CUBINs
// (TP_CUDA_AUTOTUNE=0 turns this off).
std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device, const RegionOptions& options,
                                                const std::vector<Tensor>& examples);

// The printed CUDA unit of g (scheduled with the GPU options); no GPU needed.
// row_block > 0: the block size of register-row kernels (see CudaPrinter).
codegen::CudaUnit cuda_unit(const graph::Graph& g, int row_block = 0);
// Its source text (test hook; g is decomposed first, as the backend does).
std::string cuda_source(const graph::Graph& g);
// Its extern calls in order, as "op" or "_gemm_epilogue:<act>[:nobias]"
// (test hook: which GEMMs took a cuBLASLt epilogue; no GPU needed).
std::vector<std::string> cuda_extern_calls(const graph::Graph& g);
// Compiles g for `device` and runs it once on `inputs` (test hook).
std::vector<Tensor> run_cuda(const graph::Graph& g, const std::vector<Tensor>& inputs);

}  // namespace tp::stax
