// The Stax backend: Graph -> lowering -> scheduling -> C++ -> content-addressed
// cache -> loaded entry point, wrapped as a callable region.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "stax/runtime/code_cache.h"

namespace tp::stax {

using EntryFn = void (*)(void* const* bufs, const long long* sizes);

class CompiledRegion {
 public:
  // inputs: the region's tensor inputs with exactly the metadata it was compiled for.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::string& source() const { return source_; }
  const std::string& source_path() const { return library_->source_path(); }
  int kernel_count() const { return kernel_count_; }
  bool disk_hit() const { return disk_hit_; }
  double compiler_seconds() const { return compiler_seconds_; }

 private:
  friend std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);
  enum class SlotKind : uint8_t { Input, Constant, Output, Temp };
  struct Slot {
    SlotKind kind = SlotKind::Temp;
    int index = -1;  // input / constant / output index
    Shape sizes, strides;
    DType dtype = DType::Float32;
  };
  std::shared_ptr<runtime::LoadedLibrary> library_;
  EntryFn entry_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<Tensor> constants_;
  int num_outputs_ = 0;
  std::string source_;
  int kernel_count_ = 0;
  bool disk_hit_ = false;
  double compiler_seconds_ = 0;
};

// Throws tp::BackendError when a part of the graph cannot be generated.
std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g);

}  // namespace tp::stax
