// tp.compile(mode="reduce-overhead") on a CUDA region (Section 9.9, issue 12
// item 7): the region's launches (generated kernels and extern calls such as
// cuBLASLt GEMMs) are recorded once into a CUDA graph and replayed with one
// cuGraphLaunch per call.
//
// - Call 1 runs the region normally (warm-up: kernels loaded, GEMM algorithms
//   chosen, workspaces sized); call 2 captures and replays.
// - Inputs are read in place while the caller passes the same storage as at
//   capture (parameters, buffers, a reused input: their address is stable and
//   the graph reads whatever they hold now, so in-place updates are seen). An
//   input that arrives in another storage (a new tensor, a `.data` swap) gets
//   a static buffer of its own: the graph is captured again reading that
//   buffer, and each later call copies the input into it first.
// - Outputs live in the graph's private pool and each replay rewrites them.
//   While an output of the previous replay is still referenced by the caller,
//   the call runs the region's launches one by one instead (fresh memory), so
//   a kept output never changes under the caller (Exercise 27); the graph is
//   replayed again once those outputs are dropped.
// - A region whose capture fails (an extern that synchronizes the host or
//   uploads a number) keeps its normal launches, with a one-time warning.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"
#include "cuda/graph.h"
#include "stax/backend/cuda_region.h"

namespace tp::stax {

class CudaGraphRegion {
 public:
  CudaGraphRegion(std::shared_ptr<CudaRegion> region, int device, std::string name);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // Counters for tests and tp.compiler introspection.
  struct Stats {
    int captures = 0;       // graphs recorded
    int replays = 0;        // calls served by cuGraphLaunch
    int plain_calls = 0;    // calls that launched the kernels one by one
    int copied_inputs = 0;  // inputs read through a static buffer
    bool disabled = false;  // capture failed: normal launches for good
  };
  Stats stats() const;
  // Summed over every region of the process (tests: which path calls took).
  static Stats totals();

 private:
  struct InputState {
    bool copied = false;
    std::weak_ptr<StorageImpl> storage;  // in place: the storage captured
    const void* data = nullptr;          // and the element address read
    Tensor static_buffer;                // copied: what the graph reads
  };
  struct OutputSpec {
    const void* storage_data = nullptr;
    size_t nbytes = 0;
    int storage_index = 0;  // outputs sharing one storage share it again
    Shape sizes, strides;
    int64_t offset = 0;
    DType dtype = DType::Float32;
  };
  bool capture(const std::vector<Tensor>& inputs);
  void note(int Stats::*field);  // this region's counter and the process total
  std::vector<Tensor> graph_inputs(const std::vector<Tensor>& inputs);

  mutable std::mutex mu_;
  std::shared_ptr<CudaRegion> region_;
  int device_;
  std::string name_;
  int calls_ = 0;
  std::unique_ptr<cuda::Graph> graph_;
  std::vector<InputState> inputs_;
  std::vector<OutputSpec> outputs_;
  std::vector<Shape> shapes_;  // the inputs' sizes the graph was captured at
  bool deterministic_ = false;  // tp.use_deterministic_algorithms at capture (it picks extern kernels)
  std::vector<std::weak_ptr<StorageImpl>> live_;  // storages handed out by the last replay
  Stats stats_;
};

}  // namespace tp::stax
