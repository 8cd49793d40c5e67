// The Stax backend: Graph -> lowering -> scheduling -> C++ -> content-addressed
// cache -> loaded entry point, wrapped as a callable region.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "stax/ir/loop_ir.h"
#include "stax/runtime/cached_kernel.h"

namespace tp::stax {

// ext(ctx, k) runs extern call k between kernels (nonzero: it failed).
using ExternFn = int (*)(void* ctx, int k);
using EntryFn = void (*)(void* const* bufs, const long long* sizes, ExternFn ext, void* ctx);

class CompiledRegion {
 public:
  // inputs: the region's tensor inputs with exactly the metadata it was compiled for.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::string& source() const { return kernel_->source(); }
  const std::string& source_path() const { return kernel_->source_path(); }
  int kernel_count() const { return kernel_count_; }
  int extern_count() const { return static_cast<int>(externs_.size()); }
  bool disk_hit() const { return kernel_->disk_hit(); }
  double compiler_seconds() const { return kernel_->compile_seconds(); }

 private:
  friend std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);
  enum class SlotKind : uint8_t { Input, Constant, Output, Temp };
  struct Slot {
    SlotKind kind = SlotKind::Temp;
    int index = -1;  // input / constant / output index
    Shape sizes, strides;
    DType dtype = DType::Float32;
    bool extern_written = false;  // allocated (or adopted) when its extern call runs
  };
  // An extern call with its buffers resolved to slots.
  struct ExternStep {
    ir::ExternCall call;
    const OpDef* op = nullptr;
    Attrs attrs;
    std::vector<int> in_slots;   // per operand; -1 unless a buffer
    std::vector<int> out_slots;  // per result
  };
  struct RunState;
  static int run_extern_trampoline(void* ctx, int k);
  void run_extern(RunState& st, int k) const;
  std::vector<ExternStep> externs_;
  // Not the library itself: run() pins it per call, so the code cache can
  // unload idle kernels (bounded number of mapped libraries).
  std::shared_ptr<runtime::CachedKernel> kernel_;
  std::vector<Slot> slots_;
  std::vector<Tensor> constants_;
  int num_outputs_ = 0;
  int kernel_count_ = 0;
};

// Throws tp::BackendError when a part of the graph cannot be generated.
std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);

}  // namespace tp::stax
