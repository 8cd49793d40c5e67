// The lowering driver: walks the graph in order, gives each operator's rule
// (registry.h) its operands as Values, and writes the region's outputs. An
// operator without a rule becomes an extern call of its eager kernel
// (extern.cpp), so one unusual operator does not send the whole region to
// eager; the work around it is still fused.
#include "stax/lowering/lower.h"

#include <algorithm>
#include <unordered_set>

#include <unordered_map>

#include "stax/lowering/extern.h"
#include "stax/lowering/families.h"
#include "stax/lowering/registry.h"

namespace tp::stax {
using namespace tp::stax::ir;
using graph::Node;
using graph::Opcode;

namespace {

class Lowerer {
 public:
  explicit Lowerer(LoweredRegion& r) : r_(r), prog_(r.program) {}

  void run(const graph::Graph& g) {
    // Generated kernels use the dtypes region_dtype allows (lower.h); a graph
    // touching another one falls back to eager.
    auto check_dtype = [this](const Node* n) {
      if (!region_dtype(n->meta.dtype, r_.half_floats))
        cannot_lower(n, str("dtype ", dtype_name(n->meta.dtype), " is not supported by generated kernels yet"));
    };
    // Dynamic shapes: symbol k is size_var(k), sizes[k] of the entry point.
    // Decisions about size-1 dims (broadcasting, dims without a loop) are taken
    // on the example sizes, so a symbol's example must not be 0 or 1.
    r_.symbols = g.symbols;
    prog_.num_sizes = static_cast<int>(g.symbols.size());
    for (auto& s : g.symbols)
      if (s.hint < 2)
        throw BackendError(str("Stax cannot lower a graph with symbolic shapes whose symbol ", s.origin,
                               " has the example size ", s.hint, " (0 and 1 are specialized)"));
    // Buffers are created through a context with no operator (placeholders, constants, outputs).
    for (Node* p : g.placeholders()) {
      check_dtype(p);
      LoweringContext c(r_, p, {}, {}, "");
      if (g.is_symbolic() && !all_const(p->sym_sizes)) {  // a contiguous input of symbolic shape
        // A dim of size 1 is only ever indexed at 0, so its stride is irrelevant
        // (`idx[:, :-1]` of a [1, n + 1] tensor is contiguous with strides [n + 1, 1]).
        const Shape want = contiguous_strides(p->meta.sizes);
        for (size_t d = 0; d < want.size(); ++d)
          if (p->meta.sizes[d] != 1 && p->meta.strides[d] != want[d])
            cannot_lower(p, "an input with symbolic shapes must be contiguous");
        int buf = c.add_buffer(BufferKind::Input, "in", p->meta.dtype, p->sym_sizes, p->input_index);
        env_[p] = c.from_contiguous_buffer(buf, p->sym_sizes, p->meta.dtype);
        prog_.num_inputs++;
        continue;
      }
      int buf = c.add_buffer(BufferKind::Input, "in", p->meta.dtype, p->meta.sizes, p->meta.strides, p->input_index);
      env_[p] = LoweringContext::from_buffer(buf, p->meta.sizes, p->meta.strides, p->meta.dtype);
      prog_.num_inputs++;
    }
    mark_shared_gemm_operands(g);
    mark_shared_outputs(g);
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      if (n->opcode == Opcode::GetAttr || n->opcode == Opcode::CallFunction) check_dtype(n);
      if (n->opcode == Opcode::GetAttr) {
        LoweringContext c(r_, n, {}, {}, "");
        int buf = c.add_buffer(BufferKind::Constant, "const", n->meta.dtype, n->meta.sizes, n->meta.strides,
                               static_cast<int>(r_.constants.size()));
        r_.constants.push_back(n->constant);
        env_[n] = LoweringContext::from_buffer(buf, n->meta.sizes, n->meta.strides, n->meta.dtype);
      } else if (n->opcode == Opcode::CallFunction) {
        lower_call(n);
      } else if (n->opcode == Opcode::Output) {
        write_outputs(n);
      }
    }
  }

 private:
  void lower_call(const Node* n) {
    if (n->is_getitem()) {  // result i of a multi-result node, set by its rule
      const Node* src = std::get<Node*>(n->args.at(0));
      auto it = results_.find(src);
      size_t i = static_cast<size_t>(n->getitem_index());
      if (it == results_.end() || i >= it->second.size())
        cannot_lower(n, str("result ", i, " of '", src->target->name, "' was not lowered"));
      env_[n] = it->second[i];
      return;
    }
    LoweringFn rule = find_lowering(n->target->name);
    // Extern rules (and the generic extern) pass an omitted optional tensor
    // (conv2d's bias=None) to the kernel as absent; loop rules cannot take one.
    bool has_absent = false;
    for (auto& a : n->args)
      if (auto* p = std::get_if<Node*>(&a); p && !*p) has_absent = true;
    if (has_absent && rule && !is_extern_lowering(n->target->name) && !norm_lowering_takes_absent(n->target->name))
      rule = LoweringFn();  // the extern takes it
    std::vector<Value> in;
    std::vector<std::optional<Scalar>> consts;
    std::string origin = n->target->name;
    for (auto& a : n->args) {
      if (auto* p = std::get_if<Node*>(&a)) {
        if (!*p) {
          in.push_back(Value());  // no `at`: LoweringContext::absent
          consts.push_back(std::nullopt);
          continue;
        }
        in.push_back(env_.at(*p));
        consts.push_back(std::nullopt);
        if (auto o = origin_.find(*p); o != origin_.end()) origin = o->second + ", " + n->target->name;
      } else {
        const Scalar& s = std::get<Scalar>(a);
        Value v;
        v.dtype = s.is_float() ? DType::Float64 : s.natural_dtype();
        v.at = [s, dt = v.dtype](const Index&) { return constant(s, dt); };
        in.push_back(v);
        consts.push_back(s);
      }
    }
    LoweringContext c(r_, n, std::move(in), std::move(consts), origin);
    // A node touching a symbolic size goes to its rule only when the rule
    // handles symbolic shapes; otherwise it becomes an extern call (below).
    const bool symbolic = c.symbolic();
    if (symbolic && rule && !handles_symbolic_shapes(n->target->name)) rule = LoweringFn();
    Value v;
    // A value with no elements is never read or written by any loop (consumers
    // of it are empty too, or reduce over a zero-size range): whatever the
    // operator, it needs no rule.
    if (numel(n->meta.sizes) == 0 && n->output_metas.empty()) {
      DType dt = n->meta.dtype;
      v = c.pointwise([dt](const Index&) { return constant(Scalar(int64_t(0)), dt); });
    } else {
      bool lowered = false;
      if (rule) {
        // A rule may decline an attribute/dtype combination it has no loop
        // form for (integer remainder, ...): the operator then runs as an
        // extern call instead. Rules only append to the program, so what the
        // declining rule added is dropped first.
        const size_t buffers = prog_.buffers.size(), nodes = prog_.nodes.size(), externs = prog_.externs.size();
        try {
          v = rule(c);
          check_results(n, c);
          lowered = true;
        } catch (const BackendError&) {
          c.reset_lowering_state();
          prog_.buffers.resize(buffers);
          prog_.nodes.resize(nodes);
          prog_.externs.resize(externs);
          r_.extern_attrs.resize(externs);
        }
      }
      if (!lowered) {
        // An attribute computed from sizes reaches the eager kernel evaluated
        // at the call's sizes (ExternCall::sym_attrs); a library call (GEMM)
        // takes none.
        const size_t before = prog_.externs.size();
        v = lower_as_extern(c);
        if (prog_.externs.size() > before && !prog_.externs.back().sym_attrs.empty() &&
            prog_.externs.back().kind != ExternKind::Kernel)
          cannot_lower(n, str("attribute '", prog_.externs.back().sym_attrs[0].first,
                              "' depends on symbolic shapes and the library call takes constants"));
        check_results(n, c);
      }
      if (!n->output_metas.empty()) results_[n] = c.results();
      // An operand realized for an extern call is a buffer from now on: its
      // other readers load it instead of recomputing it.
      for (auto& [i, b] : c.realized())
        if (auto* p = std::get_if<Node*>(&n->args.at(i)); p && *p) env_[*p] = b;
    }
    memoize(v);
    if (v.buffer < 0) origin_[n] = origin;
    if (n->meta.sizes != v.sizes) cannot_lower(n, "internal shape mismatch");
    if (!r_.symbols.empty() && !n->sym_sizes.empty()) {  // the rule's symbolic sizes are the graph's
      if (n->sym_sizes.size() != v.sizes.size()) cannot_lower(n, "internal symbolic rank mismatch");
      for (size_t d = 0; d < v.sizes.size(); ++d)
        if (!(simplify(v.size(d)) == simplify(n->sym_sizes[d])))
          cannot_lower(n, str("internal symbolic shape mismatch in dim ", d, ": ", v.size(d).to_string(), " vs ",
                              n->sym_sizes[d].to_string(), " (symbolic shapes)"));
    }
    const bool large_shared = v.buffer < 0 && inlines_many_and_is_shared(n);
    if ((realize_early_.count(n) || large_shared) && v.buffer < 0 && !v.symbolic() && n->output_metas.empty() &&
        numel(v.sizes) > 0) {
      // A GEMM operand, a graph output with other readers (below), or a large
      // shared expression: written once, here.
      LoweringContext c(r_, n, {}, {}, origin);
      int buf = c.realize(v, BufferKind::Temp, -1, origin);
      v = LoweringContext::from_buffer(buf, v.sizes, contiguous_strides(v.sizes), v.dtype);
      origin_.erase(n);
    }
    env_[n] = std::move(v);
  }

  // Records the operators node n's value recomputes wherever it is read (its
  // own and its unrealized operands', Property 6.1), counted up to
  // kMaxInlined; true when there are more and several operators read it. Each
  // reader's kernel would recompute all of them: a residual stack's running
  // gradient (dx + g(dx) + GEMM output, layer after layer) reaches back through
  // every layer, so the backward's code and work grew with the square of the
  // depth (64 layers: 2.7 MB of source, 19 s to compile). Written once, the
  // chain restarts from a buffer.
  bool inlines_many_and_is_shared(const Node* n) {
    std::vector<const Node*> cone{n};
    for (auto& a : n->args) {
      auto* p = std::get_if<Node*>(&a);
      if (!p || !*p || env_.at(*p).buffer >= 0) continue;
      auto it = inlined_.find(*p);
      if (it == inlined_.end()) continue;
      for (const Node* q : it->second)
        if (cone.size() <= kMaxInlined && std::find(cone.begin(), cone.end(), q) == cone.end()) cone.push_back(q);
    }
    const bool large = cone.size() > kMaxInlined;
    if (large && n->users.size() > 1) return true;
    inlined_[n] = std::move(cone);
    return false;
  }

  // A computed value that a GEMM reads (through views: the linear layer's
  // reshape, a transpose) and that other operators read as well: the GEMM
  // needs it in memory anyway, so it is written once when it is lowered and
  // every reader loads it. Otherwise each reader fused its own copy of the
  // computation: relu's backward `where(relu > 0, g, 0)` was computed by the
  // bias gradient's column sum and again for the weight-gradient GEMM, each
  // reading both 8 MB operands (the transformer block's backward).
  void mark_shared_gemm_operands(const graph::Graph& g) {
    static const std::unordered_set<std::string> gemms = {"mm", "bmm", "matmul", "addmm", "baddbmm"};
    static const std::unordered_set<std::string> views = {"view", "reshape", "_unsafe_view", "t", "transpose",
                                                          "permute", "unsqueeze", "squeeze"};
    if (g.is_symbolic()) return;
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      if (n->opcode != Opcode::CallFunction || !n->target || !gemms.count(n->target->name)) continue;
      for (auto& a : n->args) {
        auto* p = std::get_if<Node*>(&a);
        const Node* v = p ? *p : nullptr;
        while (v && v->opcode == Opcode::CallFunction && v->target && views.count(v->target->name) &&
               v->users.size() == 1 && !v->args.empty()) {
          auto* q = std::get_if<Node*>(&v->args[0]);
          v = q ? *q : nullptr;
        }
        if (!v || v->opcode != Opcode::CallFunction || !v->target || gemms.count(v->target->name)) continue;
        if (v->users.size() > 1) realize_early_.insert(v);
      }
    }
  }

  // A computed graph output that other operators read too: it is written to
  // memory anyway, so it is written when it is lowered and the other readers
  // load it (one stream) instead of computing it again from its operands
  // (theirs). SGD's new momentum buffer was recomputed by the parameter's
  // update from the old buffer and the gradient; besides the extra reads, the
  // old buffer then had two readers, so the new one could not be written in
  // place and was copied back after each step.
  void mark_shared_outputs(const graph::Graph& g) {
    if (g.is_symbolic()) return;
    for (auto& up : g.nodes()) {
      if (up->opcode != Opcode::Output) continue;
      for (auto& a : up->args) {
        auto* p = std::get_if<Node*>(&a);
        if (!p || !*p || (*p)->opcode != Opcode::CallFunction) continue;
        for (const Node* u : (*p)->users)
          if (u != up.get()) realize_early_.insert(*p);
      }
    }
  }

  static void check_results(const Node* n, const LoweringContext& c) {
    if (!n->output_metas.empty() && c.results().size() != n->output_metas.size())
      cannot_lower(n, str("its rule gave ", c.results().size(), " results, the operator has ", n->output_metas.size()));
  }

  void write_outputs(const Node* n) {
    for (size_t i = 0; i < n->args.size(); ++i) {
      auto* p = std::get_if<Node*>(&n->args[i]);
      if (!p) cannot_lower(n, "a constant output");
      const Value& v = env_.at(*p);
      int buf = v.buffer;
      // A temp buffer holding exactly this value (a reduction's result) becomes
      // the output directly; inputs, constants and views of buffers are copied.
      bool reuse = buf >= 0 && prog_.buffers[buf].kind == BufferKind::Temp && v.offset == 0 &&
                   v.sizes == prog_.buffers[buf].sizes && v.strides == prog_.buffers[buf].strides;
      if (reuse && (v.symbolic() || !prog_.buffers[buf].size_exprs.empty())) {
        const Buffer& b = prog_.buffers[buf];
        reuse = v.symbolic() && b.size_exprs == v.sym_sizes && v.sym_offset.is_const() &&
                v.sym_offset.const_value() == 0 && v.sym_strides == sym_contiguous_strides(v.sym_sizes);
      }
      if (reuse) {
        Buffer& b = prog_.buffers[buf];
        b.kind = BufferKind::Output;
        b.arg_index = static_cast<int>(i);
        int count = 0;
        for (auto& o : prog_.buffers) count += o.kind == BufferKind::Output && o.id != buf;
        b.name = "out" + std::to_string(count);
      } else {
        std::string org = origin_.count(*p) ? origin_[*p] : std::string("copy");
        LoweringContext c(r_, n, {}, {}, org);
        buf = c.realize(v, BufferKind::Output, static_cast<int>(i), org);
      }
      prog_.output_buffers.push_back(buf);
    }
    prog_.num_outputs = static_cast<int>(n->args.size());
  }

  LoweredRegion& r_;
  LoopProgram& prog_;
  std::unordered_map<const Node*, Value> env_;
  std::unordered_map<const Node*, std::string> origin_;
  std::unordered_map<const Node*, std::vector<Value>> results_;  // of multi-result nodes
  std::unordered_set<const Node*> realize_early_;  // GEMM operands and outputs with other readers
  static constexpr size_t kMaxInlined = 64;
  std::unordered_map<const Node*, std::vector<const Node*>> inlined_;  // see inlines_many_and_is_shared
};

}  // namespace

LoweredRegion lower(const graph::Graph& g, bool cuda) {
  LoweredRegion r;
  r.cuda = cuda;
  r.half_floats = true;  // both printers have the 16-bit form
  Lowerer(r).run(g);
  return r;
}

}  // namespace tp::stax
