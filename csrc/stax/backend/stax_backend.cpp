#include "stax/backend/stax_backend.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/profiler.h"
#include "graph/interpreter.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "stax/backend/extern_gemm.h"
#include "stax/backend/gelu_grad_fusion.h"
#include "stax/backend/progress.h"
#include "stax/runtime/region_times.h"
#include "stax/backend/testing_faults.h"
#include "stax/backend/unit_split.h"
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
      if (nest.store_aux_to_memory) written.insert(prog.nodes[nest.node].aux_buffer);
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

// An index expression at the call's sizes: a walk over the tree, no map and no
// allocation (per-call overhead of dynamic shapes). Buffer shapes and strides
// are sums and products of sizes; // and % come from views of reshapes.
int64_t eval_at(const ir::IndexExpr& e, const long long* sizes) {
  using ir::IndexOp;
  switch (e.op()) {
    case IndexOp::Const: return e.const_value();
    case IndexOp::Size: return sizes[e.size_index()];
    case IndexOp::Var: throw Error("internal: a loop variable in a buffer size");
    default: break;
  }
  const auto& ops = e.operands();
  int64_t acc = eval_at(ops[0], sizes);
  for (size_t i = 1; i < ops.size(); ++i) {
    int64_t b = eval_at(ops[i], sizes);
    switch (e.op()) {
      case IndexOp::Add: acc += b; break;
      case IndexOp::Mul: acc *= b; break;
      case IndexOp::Min: acc = std::min(acc, b); break;
      case IndexOp::Max: acc = std::max(acc, b); break;
      case IndexOp::FloorDiv:
        if (b == 0) throw Error("internal: division by zero in a buffer size");
        acc = ir::detail::floor_div(acc, b);
        break;
      case IndexOp::Mod:
        if (b == 0) throw Error("internal: division by zero in a buffer size");
        acc = ir::detail::floor_mod(acc, b);
        break;
      default: break;
    }
  }
  return acc;
}

// Loads of any of `buffers` in e (each shared node once).
void collect_loads(const ir::Expr& e, const std::set<int>& buffers, std::unordered_set<const ir::ExprNode*>& seen,
                   std::vector<const ir::ExprNode*>& out) {
  if (!e || !seen.insert(e.get()).second) return;
  if (e->op == ir::ExprOp::Load && buffers.count(e->buffer)) out.push_back(e.get());
  for (auto& a : e->args) collect_loads(a, buffers, seen, out);
}

// Whether loads of `buffers` in `body` (and `extra`, an ArgMax position) are all
// direct loads at exactly `index` (the same flat element). `any` receives whether there was one at all.
bool loads_only_at(const ir::Expr& body, const ir::Expr& extra, const std::set<int>& buffers,
                   const ir::IndexExpr& index, bool* any) {
  std::unordered_set<const ir::ExprNode*> seen;
  std::vector<const ir::ExprNode*> loads;
  collect_loads(body, buffers, seen, loads);
  collect_loads(extra, buffers, seen, loads);
  if (any) *any = !loads.empty();
  if (loads.empty()) return true;
  // Compared in the simplifier's canonical form (the lowering leaves `0 + i0 * 1`).
  const ir::IndexExpr at = ir::simplify(index);
  for (const ir::ExprNode* l : loads)
    if (!l->args.empty() || !(ir::simplify(l->index) == at)) return false;
  return true;
}

// In-place reuse (ARCHITECTURE.md step 11): may region output `out` (the final
// value of region input `in`) be computed straight into `in`'s memory? The rule
// is conservative; each condition is what makes the overwrite invisible:
//  1. The output is static, contiguous and dense (numel == its elements), and the
//     input is no other pair's target: the call checks that the input tensor has
//     exactly this dtype and layout (so the store index of an element is its
//     offset in the input too) and shares memory with no other input.
//  2. Exactly one compute node writes the output buffer (not an extern, no
//     side store of another nest, no second output on the same buffer), and it
//     is pointwise with a single result (no reduction, scan or pair result).
//  3. No extern reads the input, and in the scheduled program (the loop nests
//     the printer emits, after the scheduler substituted each kernel's loop
//     variables and inlined producers into consumers) every read of the input
//     is in one pointwise loop nest, which also stores the output (its own
//     store or a side store), each read a direct load at exactly that store's
//     index. So at each iteration point the nest reads input[p] and then
//     stores output[p] computed from it: every element is read before it is
//     overwritten (the printer emits the body's loads before the nest's
//     stores, and the stored value depends on them, so no compiler moves them
//     past it even under __restrict__) and never read again, in any loop
//     order, vector width, tail mode or thread split. Reads of the output
//     buffer by later nests read the new value, as they would from a buffer
//     of its own.
// Anything else keeps the output in a buffer of its own (the caller copies it in).
bool inplace_reuse_legal(const ir::LoopProgram& prog, const Schedule& sched, int out, int in,
                         const std::vector<std::pair<int, int>>& pairs, std::string* why) {
  auto no = [&](const std::string& w) {
    *why = w;
    return false;
  };
  if (out < 0 || out >= prog.num_outputs || out >= static_cast<int>(prog.output_buffers.size()))
    return no("not a region output");
  int targets = 0;
  for (auto& pr : pairs) targets += pr.second == in;
  if (targets != 1) return no("the input receives more than one output");
  const int ob = prog.output_buffers[static_cast<size_t>(out)];
  const ir::Buffer& B = prog.buffers[static_cast<size_t>(ob)];
  if (B.kind != ir::BufferKind::Output || B.arg_index != out) return no("the output is not a buffer of its own");
  if (!B.size_exprs.empty()) return no("symbolic sizes");
  if (B.strides != contiguous_strides(B.sizes) || B.numel != numel(B.sizes)) return no("the output is not contiguous");
  for (size_t k = 0; k < prog.output_buffers.size(); ++k)
    if (static_cast<int>(k) != out && prog.output_buffers[k] == ob) return no("the buffer is also another output");
  std::set<int> ins;
  for (const ir::Buffer& b : prog.buffers)
    if (b.kind == ir::BufferKind::Input && b.arg_index == in) {
      if (b.dtype != B.dtype || b.sizes != B.sizes || b.strides != B.strides || !b.size_exprs.empty())
        return no("the input's dtype or layout differs from the output's");
      ins.insert(b.id);
    }
  for (const ir::ExternCall& call : prog.externs) {
    for (const ir::ExternOperand& o : call.inputs)
      if (o.kind == ir::ExternOperand::Kind::Buffer && ins.count(o.buffer)) return no("an extern call reads the input");
    for (int b : call.outputs)
      if (b == ob) return no("an extern call writes the output");
  }
  int writer = -1;
  for (size_t m = 0; m < prog.nodes.size(); ++m) {
    const ir::ComputeNode& n = prog.nodes[m];
    if (n.writes(ob)) {
      if (writer >= 0) return no("two nodes write the output");
      writer = static_cast<int>(m);
    }
  }
  if (writer < 0) return no("no compute node writes the output");
  const ir::ComputeNode& w = prog.nodes[static_cast<size_t>(writer)];
  if (w.is_reduction() || w.scan || w.has_pair_result()) return no("the output is a reduction's result");
  // The printed code: every nest of every kernel (a kernel's nests run one after
  // another inside its outer loop). The reading nest R is the only one that
  // loads the input; it must store the output too, at the index of every load.
  // Within one iteration of R the printer emits the whole body (every load)
  // before any store, side stores included, so R reads input[p] before it
  // writes p. Other nests that store the output store the same value and read
  // nothing of the input, so they cannot observe the overwrite.
  const LoopNest* reader = nullptr;
  for (const KernelPlan& k : sched.kernels) {
    std::vector<const LoopNest*> nests;
    for (const LoopNest& nest : k.nests) nests.push_back(&nest);
    if (k.outer_vector.lanes > 0) nests.push_back(&k.outer_vector.tail);
    for (const LoopNest* nest : nests) {
      std::unordered_set<const ir::ExprNode*> seen;
      std::vector<const ir::ExprNode*> loads;
      collect_loads(nest->body, ins, seen, loads);
      collect_loads(nest->position, ins, seen, loads);
      if (loads.empty()) continue;
      if (reader) return no("two loop nests read the input");
      if (k.outer_vector.lanes > 0) return no("the input is read by an outer-vectorized reduction");
      reader = nest;
    }
  }
  if (reader) {
    // No other nest may store into the output buffer: the scheduler can place a
    // value a later nest reads back (a side store, "reused below") in it, and such
    // a store before the reader would overwrite input elements not yet read.
    for (const KernelPlan& k : sched.kernels) {
      std::vector<const LoopNest*> nests;
      for (const LoopNest& nest : k.nests) nests.push_back(&nest);
      if (k.outer_vector.lanes > 0) nests.push_back(&k.outer_vector.tail);
      for (const LoopNest* nest : nests) {
        if (nest == reader) continue;
        bool stores = nest->node == writer && nest->store_to_memory;
        for (const SideStore& ss : nest->side_stores) stores |= ss.buffer == ob;
        if (stores) return no("another loop nest stores into the output buffer");
      }
    }
    const ir::ComputeNode& rn = prog.nodes[static_cast<size_t>(reader->node)];
    if (rn.is_reduction() || rn.scan || rn.has_pair_result()) return no("a reduction reads the input");
    std::vector<ir::IndexExpr> at;  // where R stores the output
    if (reader->node == writer && reader->store_to_memory) at.push_back(reader->store_index);
    for (const SideStore& ss : reader->side_stores)
      if (ss.buffer == ob) at.push_back(ss.index);
    if (at.empty()) return no("the loop nest that reads the input does not store the output");
    for (const ir::IndexExpr& e : at)
      if (!loads_only_at(reader->body, nullptr, ins, e, nullptr))
        return no("the input is read at another element than the one stored");
  }
  return true;
}

bool option_true(const std::string& v) { return !(v == "0" || v == "False" || v == "false" || v == "off"); }
}  // namespace

RegionOptions region_options(const std::map<std::string, std::string>& options) {
  RegionOptions r;
  if (auto it = options.find("stax_fusion"); it != options.end()) r.fuse = option_true(it->second);
  if (auto it = options.find("stax_masked_tails"); it != options.end()) r.masked_tails = option_true(it->second);
  if (auto it = options.find("stax_inplace"); it != options.end()) r.inplace = option_true(it->second);
  if (auto it = options.find("stax_gelu_grad"); it != options.end()) r.gelu_grad = option_true(it->second);
  if (auto it = options.find("stax_split_phases"); it != options.end()) r.split_phases = option_true(it->second);
  if (auto it = options.find("stax_welford"); it != options.end()) {
    if (it->second == "auto") r.welford_two_pass_max = -1;
    else if (it->second == "one_pass") r.welford_two_pass_max = 0;
    else if (it->second == "two_pass") r.welford_two_pass_max = INT64_MAX;
    else
      throw ValueError(str("tp.compile: options['stax_welford'] must be 'auto', 'one_pass' or 'two_pass', got '",
                           it->second, "'"));
  }
  if (auto it = options.find("stax_tu_split"); it != options.end()) {
    if (it->second == "auto" || it->second == "None") {
      r.tu_split = -1;
    } else {
      size_t used = 0;
      long long n = 0;
      try {
        n = std::stoll(it->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it->second.size() || n < 1 || n > 64)
        throw ValueError(str("tp.compile: options['stax_tu_split'] must be 'auto' or a number of translation units "
                             "from 1 to 64, got '", it->second, "'"));
      r.tu_split = static_cast<int>(n);
    }
  }
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
  const runtime::IsaInfo& isa = runtime::host_isa();
  if (options.gelu_grad && isa.vector_bytes >= 32) fuse_gelu_grad(lowered.program);  // tp_gelu_grad needs erfc's FMA polynomial
  const ir::LoopProgram& prog = lowered.program;
  ScheduleOptions opts;
  opts.vector_bytes = isa.vector_bytes;
  opts.fuse = options.fuse;
  for (size_t k = 0; k < lowered.symbols.size(); ++k)  // every decision must hold over the declared ranges
    opts.size_ranges[ir::size_var_id(static_cast<int>(k))] = {lowered.symbols[k].min, lowered.symbols[k].max};
  opts.welford_two_pass_max = options.welford_two_pass_max;
  opts.masked_tails = options.masked_tails && isa.vector_bytes == 64;  // AVX-512 masked moves
  opts.cpp_vector_code = true;
  opts.phased_chunks = options.split_phases;
  opts.stored_handover = true;
  Schedule sched = schedule(prog, opts);
  testing::apply_schedule_faults(prog, sched);
  codegen::PrintedUnit gen = codegen::CppPrinter().print(prog, sched);

  auto region = std::make_shared<CompiledRegion>();
  // In-place reuse: the generated code is the same either way (only the pointer
  // the entry receives for the output differs), so the cache key is unchanged.
  std::map<int, int> inplace_of_output;
  for (const auto& [out, in] : options.write_into) {
    if (!options.inplace) break;
    std::string why;
    if (inplace_reuse_legal(prog, sched, out, in, options.write_into, &why)) {
      inplace_of_output[out] = in;
      region->inplace_outputs_.push_back({out, in});
    } else {
      region->inplace_rejected_.push_back(str("output ", out, " into input ", in, ": ", why));
    }
  }
  {
    SlowStepLine line(str("tp.compile: compiling region with ", gen.kernel_count, " kernel",
                          gen.kernel_count == 1 ? "" : "s", "..."),
                      options.progress_after_s);
    // Section 11.2: a large region's kernels in several translation units,
    // compiled at once by the pool's workers (only the external compiler runs
    // there: the printing above stays on this thread).
    std::vector<std::string> units =
        options.tu_split < 0
            ? split_translation_units(gen.source, gen.kernel_names, kAutoMaxUnits, kAutoUnitBytes)
            : split_translation_units(gen.source, gen.kernel_names, options.tu_split, 0);
    region->unit_count_ = static_cast<int>(units.size());
    region->kernel_ = options.background_build
                          ? std::make_shared<runtime::CachedKernel>(std::move(gen.source), std::move(units), "tp_entry",
                                                                    runtime::CachedKernel::InBackground{})
                          : std::make_shared<runtime::CachedKernel>(std::move(gen.source), std::move(units), "tp_entry");
  }
  region->kernels_ = describe_kernels(prog, sched);
  region->kernel_count_ = gen.kernel_count;
  region->constants_ = lowered.constants;
  region->num_outputs_ = prog.num_outputs;
  region->checks_ = prog.checks;
  region->symbols_ = lowered.symbols;
  for (const graph::SymbolInfo& sym : lowered.symbols)  // sizes[k] is read from an input dim at every call
    if (sym.input_index < 0 || sym.input_dim < 0 || sym.input_index >= prog.num_inputs)
      throw BackendError(str("Stax: symbol ", sym.origin, " is not a dim of a region input (symbolic shapes)"));
  if (static_cast<int>(lowered.symbols.size()) != prog.num_sizes || gen.size_count > prog.num_sizes)
    throw BackendError("internal: the program's size variables do not match the graph's symbols");
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
    s.size_exprs = buf.size_exprs;
    if (s.kind == CompiledRegion::SlotKind::Output)
      if (auto it = inplace_of_output.find(s.index); it != inplace_of_output.end()) s.inplace_input = it->second;
    region->slots_.push_back(std::move(s));
  }
  std::unordered_map<int, int> slot_of;
  for (size_t i = 0; i < gen.slot_buffer.size(); ++i) slot_of[gen.slot_buffer[i]] = static_cast<int>(i);
  region->externs_ = extern_steps(prog.externs, lowered.extern_attrs, slot_of);
  for (const ExternStep& e : region->externs_)
    for (int slot : e.out_slots) region->slots_[static_cast<size_t>(slot)].extern_written = true;
  return region;
}

void CompiledRegion::read_sizes(const std::vector<Tensor>& inputs, long long* sizes) const {
  for (size_t k = 0; k < symbols_.size(); ++k) sizes[k] = graph::checked_symbol_value(symbols_[k], inputs, "compiled region");
  // Inputs of symbolic shape: every dim as its expression says, laid out contiguously.
  for (const Slot& s : slots_) {
    if (s.kind != SlotKind::Input || s.size_exprs.empty()) continue;
    graph::check_symbolic_input(inputs.at(static_cast<size_t>(s.index)), s.index, s.size_exprs.size(),
                                [&](size_t d) { return eval_at(s.size_exprs[d], sizes); }, "compiled region");
  }
}

void CompiledRegion::slot_layout(const Slot& s, const long long* sizes, Shape& out_sizes, Shape& out_strides) const {
  if (s.size_exprs.empty()) {
    out_sizes = s.sizes;
    out_strides = s.strides;
    return;
  }
  out_sizes.resize(s.size_exprs.size());
  for (size_t d = 0; d < out_sizes.size(); ++d) out_sizes[d] = eval_at(s.size_exprs[d], sizes);
  out_strides = contiguous_strides(out_sizes);
}

Tensor CompiledRegion::temp(TempArena* arena, size_t slot, const long long* sizes) const {
  const Slot& s = slots_[slot];
  Shape sz, st;
  slot_layout(s, sizes, sz, st);
  if (arena == nullptr) return Tensor::empty_strided(sz, st, s.dtype);
  if (arena->temps.size() < slots_.size()) arena->temps.resize(slots_.size());
  Tensor& t = arena->temps[slot];
  // A symbolic region's temporaries change size with the call: kept while they fit.
  if (!t.defined() || t.sizes() != sz) t = Tensor::empty_strided(sz, st, s.dtype);
  return t;
}

// What the extern callback needs during one call of the entry.
struct CompiledRegion::RunState {
  const CompiledRegion* region = nullptr;
  TempArena* arena = nullptr;  // null: this call allocates its own temps
  const long long* sizes = nullptr;  // dynamic shapes: the call's sizes
  void** bufs = nullptr;
  std::vector<Tensor> slots;  // the tensor behind every slot (extern results once they ran)
  std::vector<Tensor>* outputs = nullptr;
  std::exception_ptr error;
  double mark = 0;  // TP_LOGS=region_times: when the current segment of generated code began
};

int CompiledRegion::run_extern_trampoline(void* ctx, int k) {
  auto* st = static_cast<RunState*>(ctx);
  // No exception may unwind through the generated code: it is kept and raised
  // once the entry has returned.
  try {
    if (region_times::enabled()) {
      st->region->timed_step(*st, k);
      return 0;
    }
    st->region->run_extern(*st, k);
    return 0;
  } catch (...) {
    st->error = std::current_exception();
    return 1;
  }
}

// Strings built by appending: GCC 12 warns falsely (-Wrestrict) on operator+ here.
static std::string labelled(const char* prefix, int n, const std::string& suffix = "") {
  std::string s = prefix;
  s += std::to_string(n);
  s += suffix;
  return s;
}

void CompiledRegion::timed_step(RunState& st, int k) const {
  const double start = region_times::now();
  if (k < 0) {  // the printer's mark: generated kernel -1 - k just ended
    const int i = -1 - k;
    std::string label = "kernel ";
    label += static_cast<size_t>(i) < kernels_.size() ? kernels_[static_cast<size_t>(i)].name : std::to_string(i);
    region_times::record(this, labelled("k", i), label, start - st.mark, false);
    st.mark = start;
    return;
  }
  region_times::record(this, labelled("g", k), labelled("other generated code before extern ", k), start - st.mark,
                       false);
  run_extern(st, k);
  const double end = region_times::now();
  std::string op = ": ";
  op += externs_[static_cast<size_t>(k)].op->name;
  region_times::record(this, labelled("e", k), labelled("extern ", k, op), end - start, true);
  st.mark = end;
}

void CompiledRegion::run_extern(RunState& st, int k) const {
  const ExternStep& e = externs_.at(static_cast<size_t>(k));
  std::optional<profiler::Range> range;
  if (profiler::active()) [[unlikely]] range.emplace("extern", "extern: " + std::string(e.call.op));
  std::vector<Tensor> in;
  for (size_t i = 0; i < e.call.inputs.size(); ++i) {
    const ir::ExternOperand& o = e.call.inputs[i];
    switch (o.kind) {
      case ir::ExternOperand::Kind::Buffer: {
        const Tensor& base = st.slots[static_cast<size_t>(e.in_slots[i])];
        if (!o.size_exprs.empty()) {  // dynamic shapes: the view at the call's sizes
          Shape sz(o.size_exprs.size()), sd(o.stride_exprs.size());
          for (size_t d = 0; d < sz.size(); ++d) sz[d] = eval_at(o.size_exprs[d], st.sizes);
          for (size_t d = 0; d < sd.size(); ++d) sd[d] = eval_at(o.stride_exprs[d], st.sizes);
          in.push_back(base.as_strided(sz, sd, base.offset() + eval_at(o.offset_expr, st.sizes)));
          break;
        }
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
  if (range) range->set_inputs(in);
  ScopedInterceptor no_tracer(nullptr);  // never recorded into an enclosing capture
  if (e.call.kind == ir::ExternKind::Gemm) {
    const size_t slot = static_cast<size_t>(e.out_slots.at(0));
    const Slot& s = slots_[slot];
    Tensor out;
    if (s.kind == SlotKind::Temp) {
      out = temp(st.arena, slot, st.sizes);
    } else {
      Shape sizes, strides;
      slot_layout(s, st.sizes, sizes, strides);
      out = Tensor::empty_strided(sizes, strides, s.dtype);
    }
    run_gemm_extern(e.call.op, e.attrs, in, out);
    install(e.out_slots[0], out);
    return;
  }
  // The eager kernel alone: no autograd recording, no tracer. Attributes
  // computed from sizes are evaluated at the call's sizes.
  std::vector<Tensor> outs;
  if (e.call.sym_attrs.empty()) {
    outs = run_kernel(*e.op, in, e.attrs);
  } else {
    outs = run_kernel(*e.op, in, call_attrs(e, [&](const ir::IndexExpr& x) { return eval_at(x, st.sizes); }));
  }
  if (outs.size() != e.out_slots.size())
    throw Error(str("internal: extern ", e.call.op, " returned ", outs.size(), " results, planned ",
                    e.out_slots.size()));
  for (size_t r = 0; r < outs.size(); ++r) {
    const Slot& s = slots_[static_cast<size_t>(e.out_slots[r])];
    const Tensor& t = outs[r];
    Shape sizes, strides;
    slot_layout(s, st.sizes, sizes, strides);
    if (t.sizes() != sizes)
      throw Error(str("internal: extern ", e.call.op, " result ", r, " has shape ", shape_str(t.sizes()),
                      ", planned ", shape_str(sizes)));
    // Adopt the kernel's result when it is in the planned layout and is fresh
    // memory (a view of an operand must not become a buffer the region writes
    // or returns); otherwise copy it into the planned buffer.
    bool fresh = !e.op->has(kView);
    for (auto& x : in) fresh = fresh && !(x.defined() && x.impl()->storage == t.impl()->storage);
    if (fresh && t.dtype() == s.dtype && t.strides() == strides) {
      install(e.out_slots[r], t);
    } else {
      Tensor dst = Tensor::empty_strided(sizes, strides, s.dtype);
      ops::copy_(dst, t);
      install(e.out_slots[r], dst);
    }
  }
}

Tensor CompiledRegion::inplace_target(const Slot& s, const std::vector<Tensor>& inputs) const {
  if (s.inplace_input < 0 || static_cast<size_t>(s.inplace_input) >= inputs.size()) return Tensor();
  const Tensor& t = inputs[static_cast<size_t>(s.inplace_input)];
  // The layout the legality proof assumed (inplace_reuse_legal, condition 1).
  if (!t.defined() || t.device().kind != Device::Kind::CPU || t.dtype() != s.dtype || t.sizes() != s.sizes ||
      t.strides() != s.strides)
    return Tensor();
  // Another input over the same memory would be read through a pointer the
  // proof did not look at.
  for (size_t j = 0; j < inputs.size(); ++j)
    if (j != static_cast<size_t>(s.inplace_input) && inputs[j].defined() &&
        inputs[j].impl()->storage == t.impl()->storage)
      return Tensor();
  return t;
}

void CompiledRegion::raise_failed_check(long long status) const {
  if (status == 0) return;
  size_t k = static_cast<size_t>(status & 0xffff) - 1;
  if (k >= checks_.size()) throw IndexError("index out of range in a compiled region");
  std::string message = checks_[k].message;
  if (checks_[k].with_value) {
    if (size_t at = message.find("{value}"); at != std::string::npos)
      message.replace(at, 7, std::to_string(status >> 16));  // (arithmetic: a negative index stays negative)
  } else if (status > 0xffff) {
    throw IndexError("index out of range in a compiled region");
  }
  if (checks_[k].value_error) throw ValueError(message);
  throw IndexError(message);
}

std::vector<Tensor> CompiledRegion::run(const std::vector<Tensor>& inputs) const {
  std::optional<profiler::Range> range;  // tp.profiler: the region's generated code, its externs as children
  if (profiler::active()) [[unlikely]] {
    range.emplace("region", kernels_.empty() ? std::string("stax region")
                                             : "stax region: " + kernels_.front().name +
                                                   (kernels_.size() > 1 ? " +" + std::to_string(kernels_.size() - 1)
                                                                        : std::string()));
    range->set_inputs(inputs);
  }
  std::vector<Tensor> outputs(num_outputs_);
  std::unique_lock<std::mutex> arena_lock(arena_->lock, std::try_to_lock);
  TempArena* arena = arena_lock.owns_lock() ? arena_.get() : nullptr;
  // Dynamic shapes: sizes[k] of the entry point (on the stack for up to 16 symbols).
  long long sizes_stack[16];
  std::vector<long long> sizes_heap;
  long long* sizes = nullptr;
  if (!symbols_.empty()) {
    if (symbols_.size() > 16) sizes_heap.resize(symbols_.size());
    sizes = symbols_.size() > 16 ? sizes_heap.data() : sizes_stack;
    read_sizes(inputs, sizes);
  }
  Shape sym_sizes, sym_strides;  // a symbolic slot's layout at this call
  auto allocate = [&](const Slot& s) {
    if (s.size_exprs.empty()) return Tensor::empty_strided(s.sizes, s.strides, s.dtype);
    slot_layout(s, sizes, sym_sizes, sym_strides);
    return Tensor::empty_strided(sym_sizes, sym_strides, s.dtype);
  };
  if (!externs_.empty() || region_times::enabled()) {
    // Every slot's tensor is kept, so an extern call can wrap its operands as
    // views and install its results. (TP_LOGS=region_times: every region
    // comes here, its kernels' marks reach the trampoline.)
    RunState st;
    st.region = this;
    st.arena = arena;
    st.sizes = sizes;
    st.outputs = &outputs;
    st.slots.resize(slots_.size());
    std::vector<void*> bufs(slots_.size(), nullptr);
    st.bufs = bufs.data();
    long long status = 0;  // a failed check in the generated code stores its code here
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      Tensor t;
      switch (s.kind) {
        case SlotKind::Status: bufs[i] = &status; continue;
        case SlotKind::Input: t = inputs[static_cast<size_t>(s.index)]; break;
        case SlotKind::Constant: t = constants_[static_cast<size_t>(s.index)]; break;
        case SlotKind::Output:
        case SlotKind::Temp:
          if (s.extern_written) continue;
          if (s.kind == SlotKind::Output) t = inplace_target(s, inputs);
          if (!t.defined()) t = s.kind == SlotKind::Temp ? temp(arena, i, sizes) : allocate(s);
          if (s.kind == SlotKind::Output) outputs[static_cast<size_t>(s.index)] = t;
          break;
      }
      bufs[i] = t.data();
      st.slots[i] = std::move(t);
    }
    const runtime::CachedKernel::Pinned pinned = kernel_->pin();
    const bool timed = region_times::enabled();
    if (timed) st.mark = region_times::now();
    reinterpret_cast<EntryFn>(pinned.symbol)(bufs.data(), sizes, &run_extern_trampoline, &st);
    if (timed) {
      region_times::record(this, "tail", "other generated code after the last step", region_times::now() - st.mark,
                           false);
      region_times::end_call(this);
    }
    if (st.error) std::rethrow_exception(st.error);
    raise_failed_check(status);
    return outputs;
  }
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
        outputs[s.index] = inplace_target(s, inputs);
        if (!outputs[s.index].defined()) outputs[s.index] = allocate(s);
        bufs[i] = outputs[s.index].data();
        break;
      case SlotKind::Temp:
        temps.push_back(temp(arena, i, sizes));
        bufs[i] = temps.back().data();
        break;
      case SlotKind::Status: bufs[i] = &status; break;
    }
  }
  const runtime::CachedKernel::Pinned pinned = kernel_->pin();  // mapped until the call returns
  reinterpret_cast<EntryFn>(pinned.symbol)(bufs, sizes, nullptr, nullptr);
  raise_failed_check(status);
  return outputs;
}

}  // namespace tp::stax
