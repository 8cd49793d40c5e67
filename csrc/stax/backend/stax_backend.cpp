#include "stax/backend/stax_backend.h"

#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/lowering/lower.h"
#include "stax/runtime/isa.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {

std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g) {
  LoweredRegion lowered = lower(g);
  const ir::LoopProgram& prog = lowered.program;
  const runtime::IsaInfo& isa = runtime::host_isa();
  ScheduleOptions opts;
  opts.vector_bytes = isa.vector_bytes;
  Schedule sched = schedule(prog, opts);
  codegen::PrintedUnit gen = codegen::CppPrinter().print(prog, sched);

  auto region = std::make_shared<CompiledRegion>();
  region->kernel_ = std::make_shared<runtime::CachedKernel>(std::move(gen.source), "tp_entry");
  region->kernel_count_ = gen.kernel_count;
  region->constants_ = lowered.constants;
  region->num_outputs_ = prog.num_outputs;
  region->checks_ = prog.checks;
  for (int b : gen.slot_buffer) {
    const ir::Buffer& buf = prog.buffers[b];
    CompiledRegion::Slot s;
    switch (buf.kind) {
      case ir::BufferKind::Input: s.kind = CompiledRegion::SlotKind::Input; break;
      case ir::BufferKind::Constant: s.kind = CompiledRegion::SlotKind::Constant; break;
      case ir::BufferKind::Output: s.kind = CompiledRegion::SlotKind::Output; break;
      case ir::BufferKind::Temp: s.kind = CompiledRegion::SlotKind::Temp; break;
      case ir::BufferKind::Status: s.kind = CompiledRegion::SlotKind::Status; break;
    }
    s.index = buf.arg_index;
    s.sizes = buf.sizes;
    s.strides = buf.strides;
    s.dtype = buf.dtype;
    region->slots_.push_back(std::move(s));
  }
  return region;
}

std::vector<Tensor> CompiledRegion::run(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> outputs(num_outputs_);
  std::vector<Tensor> temps;
  long long status = 0;  // a failed check in the generated code stores its code here
  void* ptrs[64];
  std::vector<void*> heap;
  void** bufs = ptrs;
  if (slots_.size() > 64) {
    heap.resize(slots_.size());
    bufs = heap.data();
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    switch (s.kind) {
      case SlotKind::Input: bufs[i] = inputs[s.index].data(); break;
      case SlotKind::Constant: bufs[i] = constants_[s.index].data(); break;
      case SlotKind::Output:
        outputs[s.index] = Tensor::empty_strided(s.sizes, s.strides, s.dtype);
        bufs[i] = outputs[s.index].data();
        break;
      case SlotKind::Temp:
        temps.push_back(Tensor::empty_strided(s.sizes, s.strides, s.dtype));
        bufs[i] = temps.back().data();
        break;
      case SlotKind::Status: bufs[i] = &status; break;
    }
  }
  const runtime::CachedKernel::Pinned pinned = kernel_->pin();  // mapped until the call returns
  reinterpret_cast<EntryFn>(pinned.symbol)(bufs, nullptr);
  if (status != 0) {
    size_t k = static_cast<size_t>(status) - 1;
    throw IndexError(k < checks_.size() ? checks_[k] : std::string("index out of range in a compiled region"));
  }
  return outputs;
}

}  // namespace tp::stax
