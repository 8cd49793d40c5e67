#include "stax/backend/cuda_region.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/kernels.h"
#include "stax/codegen/cuda/cuda_printer.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {

namespace {
codegen::PrintedUnit print_cuda(const LoweredRegion& lowered) {
  ScheduleOptions opts;
  opts.vector_bytes = 16;  // a 128-bit access
  Schedule sched = schedule(lowered.program, opts);
  return codegen::CudaPrinter().print(lowered.program, sched);
}

bool contiguous(const ir::Buffer& b) {
  int64_t expect = 1;
  for (size_t d = b.sizes.size(); d-- > 0;) {
    if (b.sizes[d] != 1 && b.strides[d] != expect) return false;
    expect *= b.sizes[d];
  }
  return true;
}
}  // namespace

std::string cuda_source(const graph::Graph& g) { return print_cuda(lower(g)).source; }

std::vector<Tensor> run_cuda(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  TP_CHECK(!inputs.empty() && inputs[0].device().kind == Device::Kind::CUDA, NotImplementedError,
           "stax cuda: the region's inputs must be CUDA tensors");
  const int dev = inputs[0].device().index;
  LoweredRegion lowered = lower(g);
  const ir::LoopProgram& p = lowered.program;
  codegen::PrintedUnit unit = print_cuda(lowered);
  std::vector<Tensor> keep(p.buffers.size());
  std::vector<void*> ptrs(p.buffers.size(), nullptr);
  std::vector<Tensor> outputs(static_cast<size_t>(p.num_outputs));
  for (const ir::Buffer& b : p.buffers) {
    Tensor t;
    switch (b.kind) {
      case ir::BufferKind::Input:
        t = inputs.at(static_cast<size_t>(b.arg_index));
        TP_CHECK(t.device().kind == Device::Kind::CUDA && t.device().index == dev, NotImplementedError,
                 "stax cuda: every region input must be on cuda:", dev);
        // The lowering specialized the kernels to the captured layout.
        TP_CHECK(t.sizes() == b.sizes && t.strides() == b.strides && t.dtype() == b.dtype, ValueError,
                 "stax cuda: input ", b.arg_index, " has sizes ", t.sizes(), " strides ", t.strides(), " dtype ",
                 dtype_name(t.dtype()), "; the region was captured for sizes ", b.sizes, " strides ", b.strides,
                 " dtype ", dtype_name(b.dtype));
        break;
      case ir::BufferKind::Constant: {
        const Tensor& c = lowered.constants.at(static_cast<size_t>(b.arg_index));
        TP_CHECK(c.is_contiguous(), NotImplementedError, "stax cuda: non-contiguous constants are not supported yet");
        t = cuda::to_device(c, dev);
        break;
      }
      case ir::BufferKind::Output:
        TP_CHECK(contiguous(b), NotImplementedError, "stax cuda: non-contiguous outputs are not supported yet");
        t = cuda::empty(b.sizes, b.dtype, dev);
        outputs.at(static_cast<size_t>(b.arg_index)) = t;
        break;
      case ir::BufferKind::Temp: t = cuda::empty(Shape{std::max<int64_t>(b.numel, 1)}, b.dtype, dev); break;
      case ir::BufferKind::Status: throw NotImplementedError("stax cuda: checked indexing is not supported yet");
    }
    keep[static_cast<size_t>(b.id)] = t;
    ptrs[static_cast<size_t>(b.id)] = t.data();
  }
  std::vector<void*> args;
  for (int id : unit.slot_buffer) args.push_back(&ptrs[static_cast<size_t>(id)]);
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const ir::ComputeNode& n = p.nodes[k];
    int64_t numel = 1;
    for (int64_t v : n.ranges) numel *= v;
    if (numel == 0) continue;
    unsigned grid, block;
    if (n.is_reduction()) {
      block = codegen::kCudaReduceThreads;
      grid = static_cast<unsigned>(std::min<int64_t>(numel, 65535LL * 32));
    } else {
      block = 256;
      grid = static_cast<unsigned>(std::min<int64_t>((numel + 255) / 256, 65535LL * 32));
    }
    cuda::launch_generated(dev, unit.kernel_names[k], unit.source, grid, block, args.data());
  }
  return outputs;
}

}  // namespace tp::stax
