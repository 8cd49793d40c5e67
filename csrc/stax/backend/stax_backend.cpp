#include "stax/backend/stax_backend.h"

#include <set>
#include <unordered_set>

#include "stax/backend/progress.h"
#include "stax/backend/testing_faults.h"
#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/lowering/lower.h"
#include "stax/runtime/isa.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {

namespace {
int64_t buffer_bytes(const ir::Buffer& b) {
  int64_t n = b.kind == ir::BufferKind::Temp || b.kind == ir::BufferKind::Output ? b.numel : numel(b.sizes);
  return n * static_cast<int64_t>(itemsize(b.dtype));
}

// Arithmetic nodes of an expression DAG (each shared node once); the buffers it loads go to `loads`.
int64_t count_ops(const ir::Expr& e, std::unordered_set<const ir::ExprNode*>& seen, std::set<int>& loads) {
  if (!seen.insert(e.get()).second) return 0;
  if (e->op == ir::ExprOp::Load) loads.insert(e->buffer);
  int64_t n = e->op == ir::ExprOp::Call || e->op == ir::ExprOp::Where ? 1 : 0;
  for (auto& a : e->args) n += count_ops(a, seen, loads);
  return n;
}

std::vector<KernelInfo> describe_kernels(const ir::LoopProgram& prog, const Schedule& sched) {
  std::vector<KernelInfo> out;
  for (const KernelPlan& k : sched.kernels) {
    KernelInfo info;
    info.name = k.name;
    info.origin = k.origin;
    std::set<int> written, read;
    for (const LoopNest& nest : k.nests) {
      if (nest.store_to_memory) written.insert(prog.nodes[nest.node].out_buffer);
      for (const SideStore& s : nest.side_stores) written.insert(s.buffer);
    }
    for (int m : k.nodes) {
      const ir::ComputeNode& n = prog.nodes[m];
      std::unordered_set<const ir::ExprNode*> seen;
      std::set<int> loads;
      int64_t per_point = count_ops(n.body, seen, loads) + (n.is_reduction() ? 1 : 0);
      for (int b : loads)
        if (!k.local_buffers.count(b) && !written.count(b)) read.insert(b);
      info.flops += per_point * numel(n.ranges) * (n.is_reduction() ? numel(n.reduce_ranges) : 1);
    }
    for (int b : read) info.bytes_read += buffer_bytes(prog.buffers[b]);
    for (int b : written) info.bytes_written += buffer_bytes(prog.buffers[b]);
    out.push_back(std::move(info));
  }
  return out;
}

bool option_true(const std::string& v) { return !(v == "0" || v == "False" || v == "false" || v == "off"); }
}  // namespace

RegionOptions region_options(const std::map<std::string, std::string>& options) {
  RegionOptions r;
  if (auto it = options.find("stax_fusion"); it != options.end()) r.fuse = option_true(it->second);
  if (auto it = options.find("progress_after_s"); it != options.end()) {
    try {
      r.progress_after_s = std::stod(it->second);
    } catch (const std::exception&) {
      throw ValueError(str("tp.compile: options['progress_after_s'] must be a number of seconds, got '", it->second, "'"));
    }
  }
  return r;
}

std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g) { return compile_region(g, RegionOptions{}); }

std::shared_ptr<CompiledRegion> compile_region(const graph::Graph& g, const RegionOptions& options) {
  LoweredRegion lowered = lower(g);
  testing::apply_program_faults(lowered.program);
  const ir::LoopProgram& prog = lowered.program;
  const runtime::IsaInfo& isa = runtime::host_isa();
  ScheduleOptions opts;
  opts.vector_bytes = isa.vector_bytes;
  opts.fuse = options.fuse;
  Schedule sched = schedule(prog, opts);
  testing::apply_schedule_faults(prog, sched);
  codegen::PrintedUnit gen = codegen::CppPrinter().print(prog, sched);

  auto region = std::make_shared<CompiledRegion>();
  {
    SlowStepLine line(str("tp.compile: compiling region with ", gen.kernel_count, " kernel",
                          gen.kernel_count == 1 ? "" : "s", "..."),
                      options.progress_after_s);
    region->kernel_ = std::make_shared<runtime::CachedKernel>(std::move(gen.source), "tp_entry");
  }
  region->kernels_ = describe_kernels(prog, sched);
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
