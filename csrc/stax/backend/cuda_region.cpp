#include "stax/backend/cuda_region.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/disk_cache.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/stream.h"
#include "graph/interpreter.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/backend/attention_fusion.h"
#include "stax/backend/gemm_epilogue.h"
#include "stax/backend/progress.h"
#include "stax/backend/testing_faults.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {

// A region lowered, scheduled and printed for the GPU (not compiled yet).
struct PrintedCudaRegion {
  LoweredRegion lowered;
  Schedule sched;
  codegen::CudaUnit unit;
  // Dynamic shapes: the per-symbol caps the schedule's 32-bit indices were
  // proved under (empty: the declared ranges), and the print over the
  // declared ranges for calls beyond them.
  std::vector<int64_t> caps;
  std::shared_ptr<const PrintedCudaRegion> wide;
};
using Printed = PrintedCudaRegion;

namespace {

// What the GPU printer wants from the scheduler: 128-bit accesses, 32-bit
// index arithmetic where range analysis proves it safe (fewer registers).
// Symbolic: every decision over the symbols' ranges (declared, or capped).
ScheduleOptions gpu_options(const RegionOptions& options, const std::vector<graph::SymbolInfo>& symbols,
                            const std::vector<int64_t>& caps) {
  ScheduleOptions opts;
  opts.vector_bytes = 16;
  opts.index32 = true;
  opts.fuse = options.fuse;
  for (size_t k = 0; k < symbols.size(); ++k)
    opts.size_ranges[ir::size_var_id(static_cast<int>(k))] = {symbols[k].min, caps.empty() ? symbols[k].max : caps[k]};
  return opts;
}

Printed schedule_and_print(const LoweredRegion& lowered, const RegionOptions& options, const std::vector<int64_t>& caps,
                           const codegen::CudaKnobs& knobs) {
  Printed r;
  r.lowered = lowered;
  r.caps = caps;
  r.sched = schedule(r.lowered.program, gpu_options(options, r.lowered.symbols, caps));
  try {
    r.unit = codegen::CudaPrinter(knobs).print_cuda(r.lowered.program, r.sched);
  } catch (const NotImplementedError& e) {
    throw BackendError(e.what());
  }
  return r;
}

bool all_index32(const Schedule& s) {
  for (const KernelPlan& k : s.kernels)
    if (k.index_bits != 32) return false;
  return true;
}

Printed print_region(const graph::Graph& g, const RegionOptions& options, int row_block = 0) {
  LoweredRegion lowered = lower(g, /*cuda=*/true);  // the CUDA printer loads 16-bit floats into float registers
  codegen::CudaKnobs knobs;
  knobs.row_block = row_block;
  for (const graph::SymbolInfo& sym : lowered.symbols)  // sizes[k] is read from an input dim at every call
    if (sym.input_index < 0 || sym.input_dim < 0 || sym.input_index >= lowered.program.num_inputs)
      throw BackendError(str("stax cuda: symbol ", sym.origin, " is not a dim of a region input (symbolic shapes)"));
  if (!lowered.symbols.empty() && testing::refuses_symbolic_cuda())
    throw BackendError("stax cuda: the symbolic print is refused (testing fault 'cuda_symbolic')");
  Printed full = schedule_and_print(lowered, options, {}, knobs);
  if (lowered.symbols.empty() || all_index32(full.sched)) return full;
  // Dynamic shapes: the declared ranges (unbounded by default) leave 64-bit
  // indices, whose run-time divisions and registers cost on a GPU. Cap the
  // symbols instead: from their hints, each cap doubles in turn while every
  // kernel still proves 32 bits (a symbol whose doubling fails keeps its cap);
  // calls beyond a cap run the full-range print.
  const size_t ns = lowered.symbols.size();
  std::vector<int64_t> caps(ns);
  for (size_t k = 0; k < ns; ++k) {
    const graph::SymbolInfo& sym = lowered.symbols[k];
    caps[k] = std::min(std::max(sym.hint, sym.min), sym.max);
  }
  Printed best = schedule_and_print(lowered, options, caps, knobs);
  if (!all_index32(best.sched)) return full;  // not even at the hints
  std::vector<bool> growing(ns, true);
  for (int round = 0; round < 24; ++round) {
    bool any = false;
    for (size_t k = 0; k < ns; ++k) {
      if (!growing[k]) continue;
      std::vector<int64_t> next = caps;
      next[k] = std::min(caps[k] * 2, lowered.symbols[k].max);
      if (next[k] == caps[k]) {
        growing[k] = false;
        continue;
      }
      Printed c = schedule_and_print(lowered, options, next, knobs);
      if (!all_index32(c.sched)) {
        growing[k] = false;
        continue;
      }
      caps = std::move(next);
      best = std::move(c);
      any = true;
    }
    if (!any) break;
  }
  best.wide = std::make_shared<const Printed>(std::move(full));
  return best;
}

// The same region printed with other launch knobs (max-autotune): the
// lowering and the schedule are the default's, only the printer's choices differ.
Printed print_variant(const Printed& base, const codegen::CudaKnobs& knobs) {
  Printed r;
  try {
    r.unit = codegen::CudaPrinter(knobs).print_cuda(base.lowered.program, base.sched);
  } catch (const NotImplementedError& e) {
    throw BackendError(e.what());
  }
  r.lowered = base.lowered;
  r.sched = base.sched;
  r.caps = base.caps;
  r.wide = base.wide;
  return r;
}

// The tuning key's extra text for a symbolic region: a launch choice tuned at
// the example sizes is kept per power-of-two bucket of each symbol (a row of
// 1000 and one of 100000 floats want other blocks), so other sizes in the same
// buckets reuse it and a new bucket tunes again.
std::string size_bucket_tag(const Printed& pr, const std::vector<Tensor>& examples) {
  if (pr.lowered.symbols.empty()) return {};
  std::string tag = "\nsize buckets";
  for (const graph::SymbolInfo& sym : pr.lowered.symbols) {
    int64_t v = sym.hint;
    if (sym.input_index >= 0 && static_cast<size_t>(sym.input_index) < examples.size()) {
      const Tensor& t = examples[static_cast<size_t>(sym.input_index)];
      if (t.defined() && sym.input_dim >= 0 && sym.input_dim < t.dim()) v = t.sizes()[static_cast<size_t>(sym.input_dim)];
    }
    int b = 0;
    while (b < 62 && (int64_t{1} << (b + 1)) <= v) ++b;
    tag += ' ';  // appended piecewise, not operator+: GCC 12 warns falsely (-Wrestrict)
    tag += std::to_string(b);
  }
  return tag;
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
    } else if (t.dim() != 0) {
      // A 0-d CPU tensor is a scalar eager accepts beside CUDA tensors (as
      // PyTorch does; tp.compile(opt.step) passes its hyperparameters so):
      // CudaRegion::run copies it over. Any other CPU tensor is a mix eager refuses.
      cpu = true;
    }
  }
  if (dev >= 0 && cpu)
    throw BackendError(str("the region mixes CUDA tensors (cuda:", dev, ") with CPU tensors; move them to one device"));
  return dev;
}

void check_cuda_region_results(const graph::Graph& g, int device) {
  const graph::Node* out = g.output_node();
  if (out == nullptr) return;
  for (const graph::Arg& a : out->args) {
    const graph::Node* const* n = std::get_if<graph::Node*>(&a);
    if (n == nullptr || *n == nullptr) continue;
    // Only values made without tensor inputs can be on the host here: every
    // other operator's result is where its (CUDA) inputs are.
    const bool host = (*n)->opcode == graph::Opcode::GetAttr
                          ? (*n)->constant.device().kind == Device::Kind::CPU
                          : (*n)->opcode == graph::Opcode::CallFunction && (*n)->input_nodes().empty() &&
                                (*n)->meta.device.kind == Device::Kind::CPU;
    if (host)
      throw BackendError(str("the region (cuda:", device, ") returns a CPU tensor (", (*n)->name,
                             "); a CUDA region computes its results on the GPU"));
  }
}

std::shared_ptr<CudaRegion> build_region(const PrintedCudaRegion& pr, int device, const CudaGridKnobs& grid) {
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
    s.size_exprs = buf.size_exprs;
    slot_of[b] = static_cast<int>(region->slots_.size());
    region->slots_.push_back(std::move(s));
  }
  region->externs_ = extern_steps(p.externs, pr.lowered.extern_attrs, slot_of);
  for (const ExternStep& e : region->externs_)
    for (int slot : e.out_slots) region->slots_[static_cast<size_t>(slot)].extern_written = true;
  const int sms = cuda::multiprocessor_count(device);
  region->symbols_ = pr.lowered.symbols;
  region->sms_ = sms;
  region->grid_ = grid;
  region->index32_caps_ = pr.caps;
  region->wide_printed_ = pr.wide;
  for (size_t k = 0; k < pr.unit.launches.size(); ++k) {
    const codegen::CudaLaunch& l = pr.unit.launches[k];
    CudaRegion::Launch launch;
    launch.spec = l;
    launch.name = pr.unit.unit.kernel_names[k];
    launch.block_x = static_cast<unsigned>(l.block_x);
    launch.block_y = static_cast<unsigned>(l.block_y);
    launch.grid = l.work > 0 ? cuda_grid_blocks(l, sms, grid) : 0;
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

// Seconds per call of the region on the example inputs, measured on the
// device with CUDA events on the current stream (best of three batches of
// about 2 ms), so that host timer and host scheduling noise stay out; host
// timing where the driver lacks events.
double time_region_events(const CudaRegion& r, const std::vector<Tensor>& examples, int device) {
  if (!cuda::driver().has_streams) return time_region(r, examples, device);
  struct Events {  // destroyed whatever the run throws
    cuda::CUevent start = nullptr, end = nullptr;
    ~Events() {
      cuda::event_destroy(start);
      cuda::event_destroy(end);
    }
  } ev;
  ev.start = cuda::event_create(device, /*timing=*/true);
  ev.end = cuda::event_create(device, /*timing=*/true);
  const cuda::CUstream s = cuda::current_stream(device);
  auto batch = [&](int n) {
    cuda::event_record(device, ev.start, s);
    for (int i = 0; i < n; ++i) r.run(examples);
    cuda::event_record(device, ev.end, s);
    cuda::event_synchronize(ev.end);
    return static_cast<double>(cuda::event_elapsed_ms(ev.start, ev.end)) * 1e-3 / n;
  };
  r.run(examples);  // warm-up: module load, allocator blocks
  const double once = batch(1);
  const int n = static_cast<int>(std::clamp(2e-3 / std::max(once, 1e-7), 1.0, 50.0));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) best = std::min(best, batch(n));
  return best;
}

// Host copies of a region's outputs, as float64 (bool / integer outputs are
// exact there too) — the default configuration's results, which every
// candidate of the search must reproduce.
std::vector<Tensor> host_results(const std::vector<Tensor>& outs) {
  std::vector<Tensor> r;
  for (const Tensor& t : outs) {
    if (!t.defined()) {
      r.emplace_back();
      continue;
    }
    Tensor h = t.device().kind == Device::Kind::CUDA ? cuda::to_cpu(t) : t;
    r.push_back(ops::contiguous(ops::to_dtype(h, DType::Float64)));
  }
  return r;
}

// Relative tolerance of a dtype: another block size or split factor sums in
// another order, so floating results may move by rounding, never more.
double result_rtol(DType d) {
  switch (d) {
    case DType::Float64: return 1e-9;
    case DType::Float32: return 1e-4;
    case DType::Float16:
    case DType::BFloat16: return 2e-2;
    default: return 0;
  }
}

// Empty when `got` (device outputs) matches `want` (host_results of the
// default's) within rounding: NaN where NaN, infinities equal, other elements
// within rtol of the element or of the output's largest magnitude.
std::string results_differ(const std::vector<Tensor>& want, const std::vector<Tensor>& got_device) {
  if (want.size() != got_device.size()) return "a different number of outputs";
  const std::vector<Tensor> got = host_results(got_device);
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].defined() != got[i].defined()) return str("output ", i, " defined in one only");
    if (!want[i].defined()) continue;
    if (want[i].sizes() != got[i].sizes()) return str("output ", i, " has another shape");
    const double rtol = result_rtol(got_device[i].dtype());
    const double* a = want[i].data_as<const double>();
    const double* b = got[i].data_as<const double>();
    const int64_t n = want[i].numel();
    double scale = 0;
    for (int64_t k = 0; k < n; ++k)
      if (std::isfinite(a[k])) scale = std::max(scale, std::abs(a[k]));
    for (int64_t k = 0; k < n; ++k) {
      if (std::isnan(a[k]) || std::isnan(b[k])) {
        if (std::isnan(a[k]) != std::isnan(b[k])) return str("output ", i, " element ", k, ": NaN in one only");
        continue;
      }
      if (std::isinf(a[k]) || std::isinf(b[k])) {
        if (a[k] != b[k]) return str("output ", i, " element ", k, ": ", a[k], " against ", b[k]);
        continue;
      }
      if (std::abs(a[k] - b[k]) > rtol * (std::abs(a[k]) + scale))
        return str("output ", i, " element ", k, ": ", b[k], " where the default gives ", a[k]);
    }
  }
  return {};
}

}  // namespace

std::string launch_results_differ(const std::vector<Tensor>& want, const std::vector<Tensor>& got) {
  return results_differ(host_results(want), got);
}

namespace {
// The search's key: the default source and device name, as the first form's,
// plus the search's name (its .tune file never collides with the first form's).
constexpr const char* kMaxSearch = "max-autotune launch search v1";

std::atomic<int64_t> g_searches{0}, g_evaluations{0}, g_invalid{0}, g_cache_loads{0};

// max-autotune's budget for one region: a few sweeps of a one- or two-form
// space and the random points fit; a region past it keeps the best so far.
SearchOptions max_search_options() {
  SearchOptions o;
  o.max_evaluations = 40;
  o.max_seconds = 20;
  o.random_points = 6;
  o.seed = 0x5eed;
  o.min_gain = 0.03;  // as the first form: timing noise keeps the default
  return o;
}
}  // namespace

CudaTuning cuda_tuning(const RegionOptions& options) {
  if (!autotune_enabled()) return CudaTuning::Off;
  if (options.mode == "max-autotune" || options.mode == "max-autotune-no-cudagraphs") return CudaTuning::Max;
  return CudaTuning::Default;
}

RegionOptions cuda_region_options(const std::map<std::string, std::string>& options, const std::string& mode) {
  RegionOptions r = region_options(options);
  r.mode = mode;
  return r;
}

CudaTuningStats cuda_tuning_stats() {
  CudaTuningStats s;
  s.searches = g_searches.load();
  s.evaluations = g_evaluations.load();
  s.invalid = g_invalid.load();
  s.cache_loads = g_cache_loads.load();
  return s;
}

std::shared_ptr<CudaRegion> search_region(int device, const RegionOptions& options, const std::vector<Tensor>& examples,
                                          const PrintedCudaRegion& pr) {
  const SearchSpace space = cuda_launch_space(pr.unit);
  const SearchPoint defaults = space.default_point();
  const std::string key =
      cuda::tuning_key(pr.unit.unit.source, cuda::device_name(device) + "\n" + kMaxSearch + size_bucket_tag(pr, examples));
  auto build_point = [&](const SearchPoint& p) {
    const CudaLaunchChoice c = cuda_launch_choice(space, p);
    std::shared_ptr<CudaRegion> r = c.knobs == codegen::CudaKnobs{} ? build_region(pr, device, c.grid)
                                                                   : build_region(print_variant(pr, c.knobs), device, c.grid);
    r->tuned_config_ = space.describe(p);
    return r;
  };
  if (std::optional<std::string> t = cuda::load_tuning(key)) {
    if (std::optional<SearchPoint> p = space.parse(*t)) {  // a warm process: only the winner is compiled
      g_cache_loads++;
      return build_point(*p);
    }
  }
  SlowStepLine line(str("tp.compile: tuning the launch configuration of a CUDA region (", options.mode, ", ",
                        space.params.size(), " parameters, ", space.size(), " configurations)..."),
                    options.progress_after_s);
  g_searches++;
  std::shared_ptr<CudaRegion> base = build_point(defaults);
  const std::vector<Tensor> want = host_results(base->run(examples));
  // Points that print the same kernels and launch them alike (a knob of a form
  // the region lacks at its default, or a block the rows ignore) cost the same.
  std::map<std::string, double> by_launches;
  double default_time = std::numeric_limits<double>::infinity();
  SearchCost cost = [&](const SearchPoint& p) {
    const bool is_default = p == defaults;
    std::shared_ptr<CudaRegion> r = is_default ? base : build_point(p);
    std::string id = r->source_;
    for (const CudaRegion::Launch& l : r->functions_)
      id += str("\n", l.name, " ", l.grid, " ", l.block_x, " ", l.block_y, " ", l.scratch_bytes);
    if (auto it = by_launches.find(id); it != by_launches.end()) {
      if (it->second < 0) throw Error("the same launches failed before");
      return it->second;
    }
    by_launches[id] = -1;
    const double t = time_region_events(*r, examples, device);
    if (is_default) {
      default_time = t;
    } else if (!(t >= default_time)) {
      // A candidate that could be chosen must compute what the default
      // computes: a knob the kernels mishandle is refused here, never picked
      // for being fast. Only points faster than the default can be chosen
      // (the search starts there and every move gains), so slower ones skip
      // the check (a download of every output).
      if (std::string why = results_differ(want, r->run(examples)); !why.empty())
        throw Error("results differ from the default configuration's: " + why);
    }
    by_launches[id] = t;
    return t;
  };
  const SearchResult res = launch_search(space, cost, max_search_options());
  g_evaluations += res.evaluated;
  g_invalid += res.invalid;
  if (!res.found) return base;  // nothing ran (the default neither): untuned, nothing stored
  cuda::store_tuning(key, space.describe(res.best));
  return res.best == defaults ? base : build_point(res.best);
}

std::shared_ptr<CudaRegion> tune_region(const graph::Graph& g, int device, const RegionOptions& options,
                                        const std::vector<Tensor>& examples, const PrintedCudaRegion& pr,
                                        const std::string& key);

std::shared_ptr<CudaRegion> compile_cuda_region(const graph::Graph& g, int device, const RegionOptions& options,
                                                const std::vector<Tensor>& examples) {
  Printed pr = print_region(g, options);
  if (cuda_tuning(options) == CudaTuning::Max && !examples.empty() && pr.lowered.program.externs.empty() &&
      !cuda::capturing()) {
    // Launch-configuration search (Section 9.6, mode="max-autotune"): every
    // knob the region's kernels have, timed with CUDA events on the examples.
    try {
      return search_region(device, options, examples, pr);
    } catch (const Error&) {  // the default failed to build or run: as untuned (its error, if any, rises there)
      return build_region(pr, device, CudaGridKnobs{});
    }
  }
  if (!pr.unit.tunable || examples.empty() || !pr.lowered.program.externs.empty() || !autotune_enabled())
    return build_region(pr, device, CudaGridKnobs{});
  // Launch-configuration autotuning (Section 9.6, first form): the block size
  // of register-row kernels, timed on the example inputs; the winner is kept
  // on disk by (default source, device name), so a warm process compiles only it.
  const std::string key = cuda::tuning_key(pr.unit.unit.source, cuda::device_name(device) + size_bucket_tag(pr, examples));
  if (std::optional<std::string> t = cuda::load_tuning(key)) {
    const int block = std::atoi(t->c_str());
    if (block == 0) return build_region(pr, device, CudaGridKnobs{});
    if (block >= 32 && block <= 512 && (block & (block - 1)) == 0) {
      codegen::CudaKnobs knobs;
      knobs.row_block = block;
      std::shared_ptr<CudaRegion> r = build_region(print_variant(pr, knobs), device, CudaGridKnobs{});
      r->tuned_block_ = block;
      return r;
    }
  }
  try {
    SlowStepLine line("tp.compile: tuning the block size of a CUDA region's register rows...", options.progress_after_s);
    return tune_region(g, device, options, examples, pr, key);
  } catch (const Error&) {  // a candidate that fails to build or run: the default, untuned
    return build_region(pr, device, CudaGridKnobs{});
  }
}

std::shared_ptr<CudaRegion> tune_region(const graph::Graph& g, int device, const RegionOptions& options,
                                        const std::vector<Tensor>& examples, const PrintedCudaRegion& pr,
                                        const std::string& key) {
  int default_block = 0;
  for (const codegen::CudaLaunch& l : pr.unit.launches)
    if (l.form == codegen::CudaForm::Row) default_block = std::max(default_block, l.block_x);
  std::shared_ptr<CudaRegion> best = build_region(pr, device, CudaGridKnobs{});
  double best_t = time_region(*best, examples, device);
  int best_block = 0;
  for (int block : {128, 256, 512}) {
    if (block == default_block) continue;
    codegen::CudaKnobs knobs;
    knobs.row_block = block;
    Printed cand = print_variant(pr, knobs);  // the same lowering and schedule (and 32-bit caps)
    if (!cand.unit.tunable) continue;  // the rows do not fit in registers at this size
    std::shared_ptr<CudaRegion> r = build_region(cand, device, CudaGridKnobs{});
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

CudaRegion::SizeValues CudaRegion::read_sizes(const std::vector<Tensor>& inputs) const {
  SizeValues v;
  for (size_t k = 0; k < symbols_.size(); ++k)
    v[ir::size_var_id(static_cast<int>(k))] = graph::checked_symbol_value(symbols_[k], inputs, "stax cuda");
  // Inputs of symbolic shape: every dim as its expression says, laid out
  // contiguously (what the kernels' indices assume).
  for (const Slot& s : slots_) {
    if (s.kind != SlotKind::Input || s.size_exprs.empty()) continue;
    graph::check_symbolic_input(inputs.at(static_cast<size_t>(s.index)), s.index, s.size_exprs.size(),
                                [&](size_t d) { return ir::evaluate(s.size_exprs[d], v); }, "stax cuda");
  }
  return v;
}

Tensor CudaRegion::allocate(const Slot& s, const SizeValues& sizes) const {
  if (s.size_exprs.empty()) return device_buffer(s.sizes, s.strides, s.numel, s.dtype, device_);
  Shape sz(s.size_exprs.size());
  int64_t numel = 1;
  for (size_t d = 0; d < sz.size(); ++d) {
    sz[d] = ir::evaluate(s.size_exprs[d], sizes);
    numel *= sz[d];
  }
  return device_buffer(sz, contiguous_strides(sz), numel, s.dtype, device_);
}

std::shared_ptr<CudaRegion> CudaRegion::wide_region() const {
  std::lock_guard<std::mutex> lock(wide_mu_);
  if (!wide_) wide_ = build_region(*wide_printed_, device_, CudaGridKnobs{});
  return wide_;
}

void CudaRegion::run_extern(const ExternStep& e, std::vector<Tensor>& slots, std::vector<void*>& ptrs,
                            std::vector<Tensor>& outputs, const SizeValues& sizes) const {
  std::vector<Tensor> in;
  for (size_t i = 0; i < e.call.inputs.size(); ++i) {
    const ir::ExternOperand& o = e.call.inputs[i];
    switch (o.kind) {
      case ir::ExternOperand::Kind::Buffer: {
        const Tensor& base = slots[static_cast<size_t>(e.in_slots[i])];
        if (!o.size_exprs.empty()) {  // dynamic shapes: the view at the call's sizes
          Shape sz(o.size_exprs.size()), sd(o.stride_exprs.size());
          for (size_t d = 0; d < sz.size(); ++d) sz[d] = ir::evaluate(o.size_exprs[d], sizes);
          for (size_t d = 0; d < sd.size(); ++d) sd[d] = ir::evaluate(o.stride_exprs[d], sizes);
          in.push_back(base.as_strided(sz, sd, base.offset() + ir::evaluate(o.offset_expr, sizes)));
          break;
        }
        in.push_back(base.as_strided(o.sizes, o.strides, base.offset() + o.offset));
        break;
      }
      case ir::ExternOperand::Kind::Number: in.push_back(Tensor::wrapped_scalar(o.value)); break;
      case ir::ExternOperand::Kind::Absent: in.push_back(Tensor()); break;
    }
  }
  ScopedInterceptor no_tracer(nullptr);
  // The eager CUDA kernel; an operator without one raises NotImplementedError
  // naming it and the device (never a trip through the CPU). Attributes
  // computed from sizes (a symbolic backward's conv2d_input_grad input size)
  // at this call's sizes, not the example's.
  std::vector<Tensor> outs =
      e.call.sym_attrs.empty() ? run_kernel(*e.op, in, e.attrs)
                               : run_kernel(*e.op, in, call_attrs(e, [&](const ir::IndexExpr& x) { return ir::evaluate(x, sizes); }));
  if (outs.size() != e.out_slots.size())
    throw Error(str("internal: extern ", e.call.op, " returned ", outs.size(), " results, planned ", e.out_slots.size()));
  for (size_t r = 0; r < outs.size(); ++r) {
    const int slot = e.out_slots[r];
    const Slot& s = slots_[static_cast<size_t>(slot)];
    Tensor t = outs[r];
    Shape sz = s.sizes, st = s.strides;
    if (!s.size_exprs.empty()) {
      for (size_t d = 0; d < sz.size(); ++d) sz[d] = ir::evaluate(s.size_exprs[d], sizes);
      st = contiguous_strides(sz);
    }
    // A result of another shape is a planning error (a size baked in): raised,
    // never broadcast into the planned buffer.
    if (t.sizes() != sz)
      throw Error(str("internal: extern ", e.call.op, " result ", r, " has shape ", shape_str(t.sizes()), ", planned ",
                      shape_str(sz)));
    bool fresh = !e.op->has(kView);
    for (auto& x : in) fresh = fresh && !(x.defined() && x.impl()->storage == t.impl()->storage);
    if (!(fresh && t.dtype() == s.dtype && t.strides() == st && t.sizes() == sz)) {
      Tensor dst = allocate(s, sizes);
      ops::copy_(dst, t);
      t = dst;
    }
    slots[static_cast<size_t>(slot)] = t;
    ptrs[static_cast<size_t>(slot)] = t.data();
    if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
  }
}

std::vector<Tensor> CudaRegion::run(const std::vector<Tensor>& inputs) const {
  cuda::DeviceGuard guard;  // a region on cuda:1 leaves the caller's current context current
  // Dynamic shapes: the call's sizes, from its inputs; beyond the 32-bit caps
  // the 64-bit build runs the call.
  SizeValues sizes;
  std::vector<long long> size_args(symbols_.size());
  if (!symbols_.empty()) {
    sizes = read_sizes(inputs);
    for (size_t k = 0; k < symbols_.size(); ++k) {
      size_args[k] = sizes.at(ir::size_var_id(static_cast<int>(k)));
      if (!index32_caps_.empty() && wide_printed_ && size_args[k] > index32_caps_[k]) return wide_region()->run(inputs);
    }
  }
  std::vector<Tensor> outputs(static_cast<size_t>(num_outputs_));
  std::vector<Tensor> slots(slots_.size());
  std::vector<void*> ptrs(slots_.size(), nullptr);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    Tensor t;
    switch (s.kind) {
      case SlotKind::Input:
        t = inputs.at(static_cast<size_t>(s.index));
        // A host input is one eager accepted beside device tensors (an index
        // built from a Python list, saved for indexing's backward; a 0-d CPU
        // tensor): the capture ran eager's device checks, so it is copied over.
        if (t.device().kind == Device::Kind::CPU) t = cuda::to_device(t, device_);
        if (t.device().kind != Device::Kind::CUDA || t.device().index != device_)
          throw ValueError(str("stax cuda: input ", s.index, " is on ", t.device().str(), ", the region runs on cuda:",
                               device_));
        break;
      case SlotKind::Constant: t = constants_[static_cast<size_t>(s.index)]; break;
      case SlotKind::Output:
      case SlotKind::Temp:
        if (s.extern_written) continue;
        t = allocate(s, sizes);
        if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
        break;
    }
    ptrs[i] = t.data();
    slots[i] = std::move(t);
  }
  // The kernels' parameters: the region's buffers, then (dynamic shapes) the
  // sizes, then one slot for a split reduction's scratch pointer (the last
  // parameter of such a kernel; other kernels never read it).
  std::vector<void*> args(slots_.size() + size_args.size() + 1, nullptr);
  for (size_t i = 0; i < slots_.size(); ++i) args[i] = &ptrs[i];
  for (size_t k = 0; k < size_args.size(); ++k) args[slots_.size() + k] = &size_args[k];
  for (const Step& st : steps_) {
    if (st.is_extern) {
      run_extern(externs_[static_cast<size_t>(st.index)], slots, ptrs, outputs, sizes);
      continue;
    }
    const Launch& l = functions_[static_cast<size_t>(st.index)];
    unsigned grid = l.grid, block_x = l.block_x;
    if (l.spec.symbolic) {  // grid and block from the call's sizes
      const codegen::CudaLaunch at = codegen::cuda_launch_at(l.spec, sizes);
      grid = at.work > 0 ? cuda_grid_blocks(at, sms_, grid_) : 0;
      block_x = static_cast<unsigned>(at.block_x);
    }
    if (grid == 0) continue;  // nothing to compute (a zero-size space)
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
      cuda::launch_function(device_, l.function, grid, block_x, l.block_y, args.data(), l.name.c_str());
      args.back() = nullptr;
      continue;
    }
    cuda::launch_function(device_, l.function, grid, block_x, l.block_y, args.data(), l.name.c_str());
  }
  return outputs;
}

bool cuda_keeps_whole(const std::string& op, bool symbolic) {
  if (symbolic && op == "mean") return true;
  // var/std lower to means.cpp's two passes in double on CUDA, static or not
  // (their decomposition computes the mean and deviations in the float type).
  return op == "var" || op == "var.dim" || op == "var.unbiased" || op == "std" || op == "std.dim" ||
         op == "std.unbiased";
}

void cuda_prepare_symbolic(graph::Graph& g) {
  if (!g.is_symbolic()) return;
  for (auto& n : g.nodes())
    if (n->target && std::string(n->target->name) == "layer_norm") n->sym_attrs.erase("normalized_shape");
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
  const bool symbolic = sg->is_symbolic();
  po.keep_whole = [symbolic](const std::string& op) { return cuda_keeps_whole(op, symbolic); };
  cuda_prepare_symbolic(*sg);
  passes::run_default_passes(*sg, po);
  return sg;
}
}  // namespace

codegen::CudaUnit cuda_unit(const graph::Graph& g, int row_block) {
  return print_region(*prepared(g), RegionOptions{}, row_block).unit;
}

codegen::CudaUnit cuda_unit(const graph::Graph& g, const codegen::CudaKnobs& knobs) {
  return print_variant(print_region(*prepared(g), RegionOptions{}), knobs).unit;
}

SearchSpace cuda_search_space(const graph::Graph& g) { return cuda_launch_space(cuda_unit(g, 0)); }

CudaVariant cuda_variant(const graph::Graph& g, const std::map<std::string, int64_t>& values) {
  Printed pr = print_region(*prepared(g), RegionOptions{});
  const SearchSpace space = cuda_launch_space(pr.unit);
  SearchPoint p = space.default_point();
  for (const auto& [name, v] : values) {
    auto it = std::find_if(space.params.begin(), space.params.end(), [&](const SearchParam& q) { return q.name == name; });
    if (it == space.params.end())
      throw ValueError(str("stax cuda: the region's launch space has no parameter '", name, "'"));
    if (std::find(it->values.begin(), it->values.end(), v) == it->values.end())
      throw ValueError(str("stax cuda: ", name, " = ", v, " is not one of its candidates"));
    p[static_cast<size_t>(it - space.params.begin())] = v;
  }
  CudaVariant r;
  r.choice = cuda_launch_choice(space, p);
  r.unit = r.choice.knobs == codegen::CudaKnobs{} ? pr.unit : print_variant(pr, r.choice.knobs).unit;
  r.point = space.describe(p);
  return r;
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

std::shared_ptr<CudaRegion> compile_cuda_test_region(const graph::Graph& g, const std::vector<Tensor>& examples) {
  const int dev = cuda_region_device(examples);
  TP_CHECK(dev >= 0, NotImplementedError, "stax cuda: the region's inputs must be CUDA tensors");
  return compile_cuda_region(*prepared(g), dev, RegionOptions{}, {});
}

std::vector<int64_t> cuda_index32_caps(const graph::Graph& g) { return print_region(*prepared(g), RegionOptions{}).caps; }

}  // namespace tp::stax
