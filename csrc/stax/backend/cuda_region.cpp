#include "stax/backend/cuda_region.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/disk_cache.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/backend/attention_fusion.h"
#include "stax/backend/gemm_epilogue.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {

// A region lowered, scheduled and printed for the GPU (not compiled yet).
struct PrintedCudaRegion {
  LoweredRegion lowered;
  Schedule sched;
  codegen::CudaUnit unit;
};
using Printed = PrintedCudaRegion;

namespace {

// What the GPU printer wants from the scheduler: 128-bit accesses, 32-bit
// index arithmetic where range analysis proves it safe (fewer registers).
ScheduleOptions gpu_options(const RegionOptions& options) {
  ScheduleOptions opts;
  opts.vector_bytes = 16;
  opts.index32 = true;
  opts.fuse = options.fuse;
  return opts;
}


Printed print_region(const graph::Graph& g, const RegionOptions& options, int row_block = 0) {
  Printed r;
  r.lowered = lower(g, /*half_floats=*/true);  // the CUDA printer loads 16-bit floats into float registers
  r.sched = schedule(r.lowered.program, gpu_options(options));
  try {
    r.unit = codegen::CudaPrinter(row_block).print_cuda(r.lowered.program, r.sched);
  } catch (const NotImplementedError& e) {
    throw BackendError(e.what());
  }
  return r;
}

unsigned grid_of(const codegen::CudaLaunch& l, int sms) {
  int64_t g = 1;
  switch (l.form) {
    case codegen::CudaForm::Flat: {
      // A grid-stride loop: one wave of resident blocks is enough to keep
      // every SM's memory pipeline full (8 blocks of 256 threads per SM).
      const int64_t blocks = (l.work + l.block_x - 1) / l.block_x;
      g = std::min<int64_t>(blocks, static_cast<int64_t>(sms) * 8);
      break;
    }
    case codegen::CudaForm::Row: g = std::min<int64_t>(l.work, int64_t(1) << 30); break;
    case codegen::CudaForm::Column: g = std::min<int64_t>(l.work, int64_t(1) << 30); break;
  }
  return static_cast<unsigned>(std::max<int64_t>(g, 1));
}

// A CUDA tensor of `numel` elements viewed with the planned sizes/strides.
Tensor device_buffer(const Shape& sizes, const Shape& strides, int64_t numel, DType dt, int dev) {
  Tensor base = cuda::empty(Shape{std::max<int64_t>(numel, 1)}, dt, dev);
  return base.as_strided(sizes, strides, 0);
}

}  // namespace

int cuda_region_device(const std::vector<Tensor>& examples) {
  int dev = -1;
  bool cpu = false;
  for (const Tensor& t : examples) {
    if (!t.defined()) continue;
    if (t.device().kind == Device::Kind::CUDA) {
      if (dev >= 0 && dev != t.device().index)
        throw BackendError(str("the region's inputs are on several GPUs (cuda:", dev, " and cuda:", t.device().index,
                               ")"));
      dev = t.device().index;
    } else {
      cpu = true;  // even a 0-d tensor: the kernels would read it from device memory
    }
  }
  if (dev >= 0 && cpu)
    throw BackendError(str("the region mixes CUDA tensors (cuda:", dev, ") with CPU tensors; move them to one device"));
  return dev;
}

std::shared_ptr<CudaRegion> build_region(const PrintedCudaRegion& pr, int device) {
  const ir::LoopProgram& p = pr.lowered.program;
  auto region = std::make_shared<CudaRegion>();
  region->device_ = device;
  region->source_ = pr.unit.unit.source;
  region->num_outputs_ = p.num_outputs;
  for (const Tensor& c : pr.lowered.constants) {
    // Uploaded once (to_device makes a contiguous copy; non-contiguous constants are refused below).
    region->constants_.push_back(c.device().kind == Device::Kind::CPU ? cuda::to_device(c, device) : c);
  }
  std::unordered_map<int, int> slot_of;
  for (int b : pr.unit.unit.slot_buffer) {
    const ir::Buffer& buf = p.buffers[b];
    CudaRegion::Slot s;
    switch (buf.kind) {
      case ir::BufferKind::Input: s.kind = CudaRegion::SlotKind::Input; break;
      case ir::BufferKind::Constant: s.kind = CudaRegion::SlotKind::Constant; break;
      case ir::BufferKind::Output: s.kind = CudaRegion::SlotKind::Output; break;
      case ir::BufferKind::Temp: s.kind = CudaRegion::SlotKind::Temp; break;
      case ir::BufferKind::Status: throw BackendError("stax cuda: checked indexing is not supported yet");
    }
    if (s.kind == CudaRegion::SlotKind::Constant) {
      // The constant was uploaded contiguously: the kernels index it by the
      // buffer's strides, which for a constant are its contiguous strides.
      const Tensor& c = pr.lowered.constants.at(static_cast<size_t>(buf.arg_index));
      if (!c.is_contiguous()) throw BackendError("stax cuda: non-contiguous constants are not supported yet");
    }
    s.index = buf.arg_index;
    s.sizes = buf.sizes;
    s.strides = buf.strides;
    s.numel = buf.numel;
    s.dtype = buf.dtype;
    slot_of[b] = static_cast<int>(region->slots_.size());
    region->slots_.push_back(std::move(s));
  }
  region->externs_ = extern_steps(p.externs, pr.lowered.extern_attrs, slot_of);
  for (const ExternStep& e : region->externs_)
    for (int slot : e.out_slots) region->slots_[static_cast<size_t>(slot)].extern_written = true;
  const int sms = cuda::multiprocessor_count(device);
  for (size_t k = 0; k < pr.unit.launches.size(); ++k) {
    const codegen::CudaLaunch& l = pr.unit.launches[k];
    CudaRegion::Launch launch;
    launch.name = pr.unit.unit.kernel_names[k];
    launch.block_x = static_cast<unsigned>(l.block_x);
    launch.block_y = static_cast<unsigned>(l.block_y);
    launch.grid = l.work > 0 ? grid_of(l, sms) : 0;
    launch.scratch_bytes = l.scratch_bytes;
    try {
      launch.function = cuda::generated_function(device, launch.name, region->source_);
    } catch (const Error& e) {
      throw BackendError(str("stax cuda: compiling kernel ", launch.name, " failed: ", e.what()));
    }
    region->functions_.push_back(std::move(launch));
  }
  for (const ScheduleStep& st : pr.sched.steps) region->steps_.push_back({st.is_extern, st.index});
  return region;
}

namespace {
// Seconds per call of the region on the example inputs (best of three
// batches, each long enough to dwarf the host's timer).
double time_region(const CudaRegion& r, const std::vector<Tensor>& examples, int device) {
  using clock = std::chrono::steady_clock;
  r.run(examples);
  cuda::synchronize(device);
  auto t0 = clock::now();
  r.run(examples);
  cuda::synchronize(device);
  const double once = std::chrono::duration<double>(clock::now() - t0).count();
  const int n = static_cast<int>(std::clamp(2e-3 / std::max(once, 1e-7), 1.0, 50.0));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    t0 = clock::now();
    for (int i = 0; i < n; ++i) r.run(examples);
    cuda::synchronize(device);
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / n);
  }
  return best;
}

bool autotune_enabled() {  // TP_CUDA_AUTOTUNE=0 / off turns tuning off
  const char* v = std::getenv("TP_CUDA_AUTOTUNE");
  return !(v && (std::string(v) == "0" || std::string(v) == "off"));
}
}  // namespace

std::shared_ptr<CudaRegion> tune_region(const graph::Graph& g, int device, const RegionOptions& options,
                                        const std::vector<Tensor>& examples, const PrintedCudaRegion& pr,
                                        const std::string& key);

std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device, const RegionOptions& options,
                                                const std::vector<Tensor>& examples) {
  Printed pr = print_region(g, options);
  if (!pr.unit.tunable || examples.empty() || !pr.lowered.program.externs.empty() || !autotune_enabled())
    return build_region(pr, device);
  // Launch-configuration autotuning (Section 9.6, first form): the block size
  // of register-row kernels, timed on the example inputs; the winner is kept
  // on disk by (default source, device name), so a warm process compiles only it.
  const std::string key = cuda::tuning_key(pr.unit.unit.source, cuda::device_name(device));
  if (std::optional<std::string> t = cuda::load_tuning(key)) {
    const int block = std::atoi(t->c_str());
    if (block == 0) return build_region(pr, device);
    if (block >= 32 && block <= 512 && (block & (block - 1)) == 0) {
      std::shared_ptr<CudaRegion> r = build_region(print_region(g, options, block), device);
      r->tuned_block_ = block;
      return r;
    }
  }
  try {
    return tune_region(g, device, options, examples, pr, key);
  } catch (const Error&) {  // a candidate that fails to build or run: the default, untuned
    return build_region(pr, device);
  }
}

std::shared_ptr<CudaRegion> tune_region(const graph::Graph& g, int device, const RegionOptions& options,
                                        const std::vector<Tensor>& examples, const PrintedCudaRegion& pr,
                                        const std::string& key) {
  int default_block = 0;
  for (const codegen::CudaLaunch& l : pr.unit.launches)
    if (l.form == codegen::CudaForm::Row) default_block = std::max(default_block, l.block_x);
  std::shared_ptr<CudaRegion> best = build_region(pr, device);
  double best_t = time_region(*best, examples, device);
  int best_block = 0;
  for (int block : {128, 256, 512}) {
    if (block == default_block) continue;
    Printed cand = print_region(g, options, block);
    if (!cand.unit.tunable) continue;  // the rows do not fit in registers at this size
    std::shared_ptr<CudaRegion> r = build_region(cand, device);
    const double t = time_region(*r, examples, device);
    if (t < best_t * 0.97) {  // a clear win only: timing noise keeps the default
      best_t = t;
      best = r;
      best_block = block;
    }
  }
  cuda::store_tuning(key, std::to_string(best_block));
  best->tuned_block_ = best_block;
  return best;
}

void CudaRegion::run_extern(const ExternStep& e, std::vector<Tensor>& slots, std::vector<void*>& ptrs,
                            std::vector<Tensor>& outputs) const {
  std::vector<Tensor> in;
  for (size_t i = 0; i < e.call.inputs.size(); ++i) {
    const ir::ExternOperand& o = e.call.inputs[i];
    switch (o.kind) {
      case ir::ExternOperand::Kind::Buffer: {
        const Tensor& base = slots[static_cast<size_t>(e.in_slots[i])];
        in.push_back(base.as_strided(o.sizes, o.strides, base.offset() + o.offset));
        break;
      }
      case ir::ExternOperand::Kind::Number: in.push_back(Tensor::wrapped_scalar(o.value)); break;
      case ir::ExternOperand::Kind::Absent: in.push_back(Tensor()); break;
    }
  }
  ScopedInterceptor no_tracer(nullptr);
  // The eager CUDA kernel; an operator without one raises NotImplementedError
  // naming it and the device (never a trip through the CPU).
  std::vector<Tensor> outs = run_kernel(*e.op, in, e.attrs);
  if (outs.size() != e.out_slots.size())
    throw Error(str("internal: extern ", e.call.op, " returned ", outs.size(), " results, planned ", e.out_slots.size()));
  for (size_t r = 0; r < outs.size(); ++r) {
    const int slot = e.out_slots[r];
    const Slot& s = slots_[static_cast<size_t>(slot)];
    Tensor t = outs[r];
    bool fresh = !e.op->has(kView);
    for (auto& x : in) fresh = fresh && !(x.defined() && x.impl()->storage == t.impl()->storage);
    if (!(fresh && t.dtype() == s.dtype && t.strides() == s.strides && t.sizes() == s.sizes)) {
      Tensor dst = device_buffer(s.sizes, s.strides, s.numel, s.dtype, device_);
      ops::copy_(dst, t);
      t = dst;
    }
    slots[static_cast<size_t>(slot)] = t;
    ptrs[static_cast<size_t>(slot)] = t.data();
    if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
  }
}

std::vector<Tensor> CudaRegion::run(const std::vector<Tensor>& inputs) const {
  std::vector<Tensor> outputs(static_cast<size_t>(num_outputs_));
  std::vector<Tensor> slots(slots_.size());
  std::vector<void*> ptrs(slots_.size(), nullptr);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    Tensor t;
    switch (s.kind) {
      case SlotKind::Input:
        t = inputs.at(static_cast<size_t>(s.index));
        if (t.device().kind != Device::Kind::CUDA || t.device().index != device_)
          throw ValueError(str("stax cuda: input ", s.index, " is on ", t.device().str(), ", the region runs on cuda:",
                               device_));
        break;
      case SlotKind::Constant: t = constants_[static_cast<size_t>(s.index)]; break;
      case SlotKind::Output:
      case SlotKind::Temp:
        if (s.extern_written) continue;
        t = device_buffer(s.sizes, s.strides, s.numel, s.dtype, device_);
        if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
        break;
    }
    ptrs[i] = t.data();
    slots[i] = std::move(t);
  }
  // One slot past the region's buffers: a split reduction's scratch pointer
  // (the kernel's last parameter); other kernels never read it.
  std::vector<void*> args(slots_.size() + 1, nullptr);
  for (size_t i = 0; i < slots_.size(); ++i) args[i] = &ptrs[i];
  for (const Step& st : steps_) {
    if (st.is_extern) {
      run_extern(externs_[static_cast<size_t>(st.index)], slots, ptrs, outputs);
      continue;
    }
    const Launch& l = functions_[static_cast<size_t>(st.index)];
    if (l.grid == 0) continue;  // nothing to compute (a zero-size space)
    if (l.scratch_bytes > 0) {
      // A split reduction's partials and arrival counter, per launch from the
      // caching allocator on this stream (split_reduction.h): one region
      // called on two streams at once never shares them.
      Tensor scratch = cuda::empty(Shape{(l.scratch_bytes + 3) / 4}, DType::Float32, device_);
      void* sp = scratch.data();
      cuda::activate(device_);
      cuda::check(cuda::driver().cuMemsetD32Async(reinterpret_cast<cuda::CUdeviceptr>(sp), 0u, 1, cuda::current_stream(device_)),
                  "cuMemsetD32Async");
      args.back() = &sp;
      cuda::launch_function(device_, l.function, l.grid, l.block_x, l.block_y, args.data(), l.name.c_str());
      args.back() = nullptr;
      continue;
    }
    cuda::launch_function(device_, l.function, l.grid, l.block_x, l.block_y, args.data(), l.name.c_str());
  }
  return outputs;
}

namespace {
// The graph as the Stax backend sees it on CUDA: GEMM epilogues fused,
// composites decomposed, simplified (compile/backend.cpp's order).
std::unique_ptr<graph::Graph> prepared(const graph::Graph& g) {
  auto sg = g.clone();
  fuse_attention(*sg);
  fuse_gemm_epilogues(*sg);
  passes::PassOptions po;
  po.decompose = true;
  passes::run_default_passes(*sg, po);
  return sg;
}
}  // namespace

codegen::CudaUnit cuda_unit(const graph::Graph& g, int row_block) {
  return print_region(*prepared(g), RegionOptions{}, row_block).unit;
}

std::string cuda_source(const graph::Graph& g) { return cuda_unit(g, 0).unit.source; }

std::vector<std::string> cuda_extern_calls(const graph::Graph& g) {
  Printed pr = print_region(*prepared(g), RegionOptions{});
  std::vector<std::string> out;
  for (const ir::ExternCall& e : pr.lowered.program.externs) {
    std::string s = e.op;
    const Attrs& a = pr.lowered.extern_attrs.at(static_cast<size_t>(e.id));
    if (a.has("act")) s += ":" + a.get_str("act");
    if (!e.inputs.empty() && e.inputs[0].kind == ir::ExternOperand::Kind::Absent) s += ":nobias";
    out.push_back(s);
  }
  return out;
}

std::vector<Tensor> run_cuda(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  const int dev = cuda_region_device(inputs);
  TP_CHECK(dev >= 0, NotImplementedError, "stax cuda: the region's inputs must be CUDA tensors");
  return compile_cuda_region(*prepared(g), dev, RegionOptions{}, {})->run(inputs);
}

}  // namespace tp::stax
