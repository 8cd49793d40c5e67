#include "stax/backend/stax_backend.h"

#include <exception>
#include <unordered_map>

#include "ops/dispatch.h"
#include "ops/ops.h"
#include "stax/backend/extern_gemm.h"
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
  codegen::GeneratedSource gen = codegen::generate_cpp(prog, sched, isa.vector_bytes);

  auto region = std::make_shared<CompiledRegion>();
  region->kernel_ = std::make_shared<runtime::CachedKernel>(std::move(gen.source), "tp_entry");
  region->kernel_count_ = gen.kernel_count;
  region->constants_ = lowered.constants;
  region->num_outputs_ = prog.num_outputs;
  for (int b : gen.slot_buffer) {
    const ir::Buffer& buf = prog.buffers[b];
    CompiledRegion::Slot s;
    switch (buf.kind) {
      case ir::BufferKind::Input: s.kind = CompiledRegion::SlotKind::Input; break;
      case ir::BufferKind::Constant: s.kind = CompiledRegion::SlotKind::Constant; break;
      case ir::BufferKind::Output: s.kind = CompiledRegion::SlotKind::Output; break;
      case ir::BufferKind::Temp: s.kind = CompiledRegion::SlotKind::Temp; break;
    }
    s.index = buf.arg_index;
    s.sizes = buf.sizes;
    s.strides = buf.strides;
    s.dtype = buf.dtype;
    region->slots_.push_back(std::move(s));
  }
  std::unordered_map<int, int> slot_of;
  for (size_t i = 0; i < gen.slot_buffer.size(); ++i) slot_of[gen.slot_buffer[i]] = static_cast<int>(i);
  for (const ir::ExternCall& call : prog.externs) {
    CompiledRegion::ExternStep e;
    e.call = call;
    e.op = &get_op(call.op);
    e.attrs = lowered.extern_attrs.at(static_cast<size_t>(call.id));
    for (auto& o : call.inputs)
      e.in_slots.push_back(o.kind == ir::ExternOperand::Kind::Buffer ? slot_of.at(o.buffer) : -1);
    for (int b : call.outputs) {
      int slot = slot_of.at(b);
      e.out_slots.push_back(slot);
      region->slots_[static_cast<size_t>(slot)].extern_written = true;
    }
    region->externs_.push_back(std::move(e));
  }
  return region;
}

// What the extern callback needs during one call of the entry.
struct CompiledRegion::RunState {
  const CompiledRegion* region = nullptr;
  void** bufs = nullptr;
  std::vector<Tensor> slots;  // the tensor behind every slot (extern results once they ran)
  std::vector<Tensor>* outputs = nullptr;
  std::exception_ptr error;
};

int CompiledRegion::run_extern_trampoline(void* ctx, int k) {
  auto* st = static_cast<RunState*>(ctx);
  // No exception may unwind through the generated code: it is kept and raised
  // once the entry has returned.
  try {
    st->region->run_extern(*st, k);
    return 0;
  } catch (...) {
    st->error = std::current_exception();
    return 1;
  }
}

void CompiledRegion::run_extern(RunState& st, int k) const {
  const ExternStep& e = externs_.at(static_cast<size_t>(k));
  std::vector<Tensor> in;
  for (size_t i = 0; i < e.call.inputs.size(); ++i) {
    const ir::ExternOperand& o = e.call.inputs[i];
    switch (o.kind) {
      case ir::ExternOperand::Kind::Buffer: {
        const Tensor& base = st.slots[static_cast<size_t>(e.in_slots[i])];
        in.push_back(base.as_strided(o.sizes, o.strides, base.offset() + o.offset));
        break;
      }
      case ir::ExternOperand::Kind::Number: in.push_back(Tensor::wrapped_scalar(o.value)); break;
      case ir::ExternOperand::Kind::Absent: in.push_back(Tensor()); break;
    }
  }
  auto install = [&](int slot, const Tensor& t) {
    st.slots[static_cast<size_t>(slot)] = t;
    st.bufs[slot] = t.data();
    const Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.kind == SlotKind::Output) (*st.outputs)[static_cast<size_t>(s.index)] = t;
  };
  ScopedInterceptor no_tracer(nullptr);  // never recorded into an enclosing capture
  if (e.call.kind == ir::ExternKind::Gemm) {
    const Slot& s = slots_[static_cast<size_t>(e.out_slots.at(0))];
    Tensor out = Tensor::empty_strided(s.sizes, s.strides, s.dtype);
    run_gemm_extern(e.call.op, e.attrs, in, out);
    install(e.out_slots[0], out);
    return;
  }
  // The eager kernel alone: no autograd recording, no tracer.
  std::vector<Tensor> outs = run_kernel(*e.op, in, e.attrs);
  if (outs.size() != e.out_slots.size())
    throw Error(str("internal: extern ", e.call.op, " returned ", outs.size(), " results, planned ",
                    e.out_slots.size()));
  for (size_t r = 0; r < outs.size(); ++r) {
    const Slot& s = slots_[static_cast<size_t>(e.out_slots[r])];
    const Tensor& t = outs[r];
    if (t.sizes() != s.sizes)
      throw Error(str("internal: extern ", e.call.op, " result ", r, " has shape ", shape_str(t.sizes()),
                      ", planned ", shape_str(s.sizes)));
    // Adopt the kernel's result when it is in the planned layout and is fresh
    // memory (a view of an operand must not become a buffer the region writes
    // or returns); otherwise copy it into the planned buffer.
    bool fresh = !e.op->has(kView);
    for (auto& x : in) fresh = fresh && !(x.defined() && x.impl()->storage == t.impl()->storage);
    if (fresh && t.dtype() == s.dtype && t.strides() == s.strides) {
      install(e.out_slots[r], t);
    } else {
      Tensor dst = Tensor::empty_strided(s.sizes, s.strides, s.dtype);
      ops::copy_(dst, t);
      install(e.out_slots[r], dst);
    }
  }
}

std::vector<Tensor> CompiledRegion::run(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> outputs(num_outputs_);
  if (!externs_.empty()) {
    // Every slot's tensor is kept, so an extern call can wrap its operands as
    // views and install its results.
    RunState st;
    st.region = this;
    st.outputs = &outputs;
    st.slots.resize(slots_.size());
    std::vector<void*> bufs(slots_.size(), nullptr);
    st.bufs = bufs.data();
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      Tensor t;
      switch (s.kind) {
        case SlotKind::Input: t = inputs[static_cast<size_t>(s.index)]; break;
        case SlotKind::Constant: t = constants_[static_cast<size_t>(s.index)]; break;
        case SlotKind::Output:
        case SlotKind::Temp:
          if (s.extern_written) continue;
          t = Tensor::empty_strided(s.sizes, s.strides, s.dtype);
          if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
          break;
      }
      bufs[i] = t.data();
      st.slots[i] = std::move(t);
    }
    const runtime::CachedKernel::Pinned pinned = kernel_->pin();
    reinterpret_cast<EntryFn>(pinned.symbol)(bufs.data(), nullptr, &run_extern_trampoline, &st);
    if (st.error) std::rethrow_exception(st.error);
    return outputs;
  }
  std::vector<Tensor> temps;
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
    }
  }
  const runtime::CachedKernel::Pinned pinned = kernel_->pin();  // mapped until the call returns
  reinterpret_cast<EntryFn>(pinned.symbol)(bufs, nullptr, nullptr, nullptr);
  return outputs;
}

}  // namespace tp::stax
