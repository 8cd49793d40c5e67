#include "stax/lowering/lower.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "ops/type_promotion.h"
#include "stax/codegen/cpp/prelude.h"

namespace tp::stax {
using namespace tp::stax::ir;
using graph::Node;
using graph::Opcode;

namespace {

using Index = std::vector<IndexExpr>;
// A value during lowering: its logical shape and how to compute element idx.
struct Value {
  Shape sizes;
  DType dtype = DType::Float32;
  std::function<Expr(const Index&)> at;
  int buffer = -1;  // set when the value lives in a buffer with contiguous layout over `sizes`
};

struct IndexHash {
  size_t operator()(const Index& idx) const {
    size_t h = idx.size();
    for (auto& e : idx) h = h * 1000003u ^ e.hash();
    return h;
  }
};

// Every consumer of a value calls its `at` with the index it needs; in a
// pointwise chain those are the same index expressions. Remembering the
// result per index makes a value used k times one node (not k copies of its
// whole expression tree), so lowering is linear in the graph and the body a DAG.
// Copies of the Value share the table (the closure holds it by shared_ptr).
// The producer's closure is held by shared_ptr too: a std::function copies
// its captures, and closures capture their operand Values, so copying a Value
// whose `at` held the closure itself would copy the whole tree of closures
// below it (exponential when a value is used twice).
void memoize(Value& v) {
  auto f = std::make_shared<const std::function<Expr(const Index&)>>(std::move(v.at));
  auto memo = std::make_shared<std::unordered_map<Index, Expr, IndexHash>>();
  v.at = [f, memo](const Index& idx) {
    auto it = memo->find(idx);
    if (it != memo->end()) return it->second;
    Expr e = (*f)(idx);
    memo->emplace(idx, e);
    return e;
  };
}

bool debug_enabled() {
  const char* v = std::getenv("TP_STAX_LOWER_DEBUG");
  return v && *v && std::string(v) != "0";
}

[[noreturn]] void cannot_lower(const Node* n, const std::string& why) {
  std::string msg = str("Stax cannot lower operator '", n->target ? n->target->name : graph::opcode_name(n->opcode),
                        "' (node ", n->name, ", ", dtype_name(n->meta.dtype), shape_str(n->meta.sizes), "): ", why);
  if (debug_enabled()) std::fprintf(stderr, "[TP_STAX_LOWER_DEBUG] %s\n", msg.c_str());
  throw BackendError(msg);
}

IndexExpr linear_index(const Index& idx, const Shape& strides) {
  IndexExpr e = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    if (strides[d] != 0) e = e + idx[d] * strides[d];
  return e;
}

// Index into an operand of shape `in` from an index over the broadcast shape.
Index broadcast_index(const Index& idx, const Shape& in) {
  Index out(in.size());
  size_t off = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] == 1 ? IndexExpr(0) : idx[off + d];
  return out;
}

class Lowerer {
 public:
  explicit Lowerer(LoweredRegion& r) : r_(r), prog_(r.program) {}

  Value from_buffer(int buf, const Shape& sizes, const Shape& strides, DType dtype) {
    Value v;
    v.sizes = sizes;
    v.dtype = dtype;
    v.buffer = buf;
    v.at = [buf, strides, dtype](const Index& idx) { return load(buf, linear_index(idx, strides), dtype); };
    return v;
  }

  int add_buffer(BufferKind kind, const std::string& prefix, DType dtype, const Shape& sizes, const Shape& strides,
                 int arg_index) {
    Buffer b;
    b.id = static_cast<int>(prog_.buffers.size());
    int count = 0;
    for (auto& o : prog_.buffers) count += o.kind == kind;
    b.name = prefix + std::to_string(count);
    b.kind = kind;
    b.dtype = dtype;
    b.sizes = sizes;
    b.strides = strides;
    b.numel = numel(sizes);
    b.arg_index = arg_index;
    prog_.buffers.push_back(b);
    return b.id;
  }

  // Writes v into a new contiguous buffer with a pointwise ComputeNode.
  int realize(const Value& v, BufferKind kind, int arg_index, const std::string& origin) {
    Shape strides = contiguous_strides(v.sizes);
    int buf = add_buffer(kind, kind == BufferKind::Output ? "out" : "buf", v.dtype, v.sizes, strides, arg_index);
    ComputeNode n;
    n.id = static_cast<int>(prog_.nodes.size());
    n.origin = origin;
    n.out_buffer = buf;
    // Size-1 dims get no loop: their index is the constant 0.
    Index idx;
    for (size_t d = 0; d < v.sizes.size(); ++d) {
      if (v.sizes[d] == 1) { idx.push_back(IndexExpr(0)); continue; }
      idx.push_back(prog_.new_var("i"));
      n.ranges.push_back(v.sizes[d]);
      n.vars.push_back(idx.back());
    }
    n.body = v.at(idx);
    n.store_index = linear_index(idx, strides);
    prog_.nodes.push_back(std::move(n));
    return buf;
  }

  Value lower_node(const Node* n, const std::vector<Value>& in, const std::vector<std::optional<Scalar>>& consts);

  void run(const graph::Graph& g) {
    std::unordered_map<const Node*, Value> env;
    std::unordered_map<const Node*, std::string> origin;
    // Generated kernels use the four compute dtypes; graphs touching a narrow
    // dtype (int8..int32, uint8, float16, bfloat16) fall back to eager.
    auto check_dtype = [](const Node* n) {
      if (!is_compute_dtype(n->meta.dtype))
        cannot_lower(n, str("dtype ", dtype_name(n->meta.dtype), " is not supported by generated kernels yet"));
    };
    for (Node* p : g.placeholders()) {
      check_dtype(p);
      int buf = add_buffer(BufferKind::Input, "in", p->meta.dtype, p->meta.sizes, p->meta.strides, p->input_index);
      env[p] = from_buffer(buf, p->meta.sizes, p->meta.strides, p->meta.dtype);
      prog_.num_inputs++;
    }
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      if (n->opcode == Opcode::GetAttr || n->opcode == Opcode::CallFunction) check_dtype(n);
      if (n->opcode == Opcode::GetAttr) {
        int buf = add_buffer(BufferKind::Constant, "const", n->meta.dtype, n->meta.sizes, n->meta.strides,
                             static_cast<int>(r_.constants.size()));
        r_.constants.push_back(n->constant);
        env[n] = from_buffer(buf, n->meta.sizes, n->meta.strides, n->meta.dtype);
      } else if (n->opcode == Opcode::CallFunction) {
        std::vector<Value> in;
        std::vector<std::optional<Scalar>> consts;
        for (auto& a : n->args) {
          if (auto* p = std::get_if<Node*>(&a)) {
            if (!*p) cannot_lower(n, "an absent optional tensor argument");
            in.push_back(env.at(*p));
            consts.push_back(std::nullopt);
          } else {
            const Scalar& s = std::get<Scalar>(a);
            Value v;
            v.dtype = s.is_float() ? DType::Float64 : s.natural_dtype();
            v.at = [s, dt = v.dtype](const Index&) { return constant(s, dt); };
            in.push_back(v);
            consts.push_back(s);
          }
        }
        current_origin_ = n->target->name;
        for (auto& a : n->args)
          if (auto* p = std::get_if<Node*>(&a); p && origin.count(*p)) current_origin_ = origin[*p] + ", " + n->target->name;
        env[n] = lower_node(n, in, consts);
        memoize(env[n]);
        if (env[n].buffer < 0) origin[n] = current_origin_;
        if (n->meta.sizes != env[n].sizes) cannot_lower(n, "internal shape mismatch");
      } else if (n->opcode == Opcode::Output) {
        for (size_t i = 0; i < n->args.size(); ++i) {
          auto* p = std::get_if<Node*>(&n->args[i]);
          if (!p) cannot_lower(n, "a constant output");
          Value v = env.at(*p);
          int buf = v.buffer;
          // A reduction's own temp buffer can become the output directly;
          // inputs, constants and shared buffers are copied.
          bool reuse = buf >= 0 && prog_.buffers[buf].kind == BufferKind::Temp;
          if (reuse) {
            prog_.buffers[buf].kind = BufferKind::Output;
            prog_.buffers[buf].arg_index = static_cast<int>(i);
            int count = 0;
            for (auto& b : prog_.buffers) count += b.kind == BufferKind::Output && b.id != buf;
            prog_.buffers[buf].name = "out" + std::to_string(count);
          } else {
            std::string org = origin.count(*p) ? origin[*p] : std::string("copy");
            buf = realize(v, BufferKind::Output, static_cast<int>(i), org);
          }
          prog_.output_buffers.push_back(buf);
        }
        prog_.num_outputs = static_cast<int>(n->args.size());
      }
    }
  }

 private:
  LoweredRegion& r_;
  LoopProgram& prog_;
  std::string current_origin_;
};

const char* pointwise_fn_name(const std::string& op) {
  static const std::unordered_map<std::string, const char*> names = {
      {"add", "add"},         {"sub", "sub"},   {"mul", "mul"},   {"div", "div"},   {"maximum", "max"},
      {"minimum", "min"},     {"neg", "neg"},   {"relu", "relu"}, {"abs", "abs"},   {"exp", "exp"},
      {"log", "log"},         {"sqrt", "sqrt"}, {"tanh", "tanh"}, {"sigmoid", "sigmoid"},
      {"eq", "eq"},           {"ne", "ne"},     {"lt", "lt"},     {"le", "le"},     {"gt", "gt"},
      {"ge", "ge"}};
  auto it = names.find(op);
  return it == names.end() ? nullptr : it->second;
}

Value Lowerer::lower_node(const Node* n, const std::vector<Value>& in, const std::vector<std::optional<Scalar>>& consts) {
  const std::string op = n->target->name;
  const Shape& out_sizes = n->meta.sizes;
  const DType out_dtype = n->meta.dtype;
  Value v;
  v.sizes = out_sizes;
  v.dtype = out_dtype;

  // A value with no elements is never read or written by any loop (consumers
  // of it are empty too, or reduce over a zero-size range): whatever the
  // operator, it needs no rule.
  if (numel(out_sizes) == 0 && n->output_metas.empty()) {
    v.at = [out_dtype](const Index&) { return constant(Scalar(int64_t(0)), out_dtype); };
    return v;
  }
  // Float math backed by libm in the generated code (see prelude.h): computed
  // in the result type (a FloatValued op on integers computes in the default
  // float, as eager). Integer floor/round/..., fmod/remainder stay eager.
  if (int arity = 0; codegen::libm_function(op, &arity) && static_cast<int>(in.size()) == arity) {
    if (!is_floating(out_dtype)) cannot_lower(n, "integer " + op + " has no rule yet");
    if (op == "round" && !n->attrs.is_none("decimals") && n->attrs.get_int("decimals") != 0)
      cannot_lower(n, "round with decimals");
    std::vector<Value> ins = in;
    v.at = [ins, op, out_dtype](const Index& idx) {
      std::vector<Expr> args;
      for (auto& x : ins) args.push_back(cast(x.at(broadcast_index(idx, x.sizes)), out_dtype));
      return call(op, std::move(args), out_dtype);
    };
    return v;
  }
  if (const char* fn = pointwise_fn_name(op)) {
    // Compute in the promoted operand type; comparisons yield bool.
    // A comparison's operands meet in PyTorch's result_type (tensor, 0-d
    // tensor and Python-number classes): `bool_tensor == 2` compares in int64,
    // never in the tensor's own bool (which would turn 2 into true).
    DType compute = out_dtype;
    if (is_comparison(fn)) {
      std::vector<PromotionOperand> operands;
      for (size_t i = 0; i < in.size(); ++i)
        operands.push_back(consts[i] ? PromotionOperand{consts[i]->natural_dtype(), 0, true}
                                     : PromotionOperand{in[i].dtype, static_cast<int64_t>(in[i].sizes.size()), false});
      compute = result_type(operands);
    }
    // add/sub(x, y, alpha=a) is x +- a*y; div's integer rounding modes have no rule yet.
    if (!n->attrs.is_none("rounding_mode")) cannot_lower(n, "div with rounding_mode");
    std::optional<Scalar> alpha;
    if (!n->attrs.is_none("alpha") && n->attrs.get_double("alpha") != 1.0) alpha = n->attrs.get_scalar("alpha");
    std::vector<Value> ins = in;
    std::string fname = fn;
    v.at = [ins, fname, compute, out_dtype, out_sizes, alpha](const Index& idx) {
      std::vector<Expr> args;
      for (auto& x : ins) args.push_back(cast(x.at(broadcast_index(idx, x.sizes)), compute));
      if (alpha) args[1] = call("mul", {args[1], constant(*alpha, compute)}, compute);
      return call(fname, std::move(args), is_comparison(fname) ? DType::Bool : out_dtype);
    };
    return v;
  }
  // Logical operators read every operand as bool (nonzero = true; NaN is true).
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor" || op == "logical_not") {
    std::vector<Value> ins = in;
    std::string fname = op.substr(8);
    v.at = [ins, fname, out_dtype](const Index& idx) {
      std::vector<Expr> args;
      for (auto& x : ins) args.push_back(cast(x.at(broadcast_index(idx, x.sizes)), DType::Bool));
      return cast(call(fname, std::move(args), DType::Bool), out_dtype);
    };
    return v;
  }
  if (op == "where") {
    std::vector<Value> ins = in;
    v.at = [ins, out_dtype](const Index& idx) {
      Expr c = cast(ins[0].at(broadcast_index(idx, ins[0].sizes)), DType::Bool);
      Expr a = cast(ins[1].at(broadcast_index(idx, ins[1].sizes)), out_dtype);
      Expr b = cast(ins[2].at(broadcast_index(idx, ins[2].sizes)), out_dtype);
      return where(c, a, b);
    };
    return v;
  }
  // masked_fill(self, mask, value): the value (a 0-d tensor or a number)
  // converted to self's dtype where the mask is true; the result has the
  // broadcast shape of self and mask.
  if (op == "masked_fill.Tensor" || op == "masked_fill.Scalar") {
    Value self = in[0], mask = in[1], value;
    if (op == "masked_fill.Tensor") {
      value = in[2];
    } else {
      Scalar s = n->attrs.get_scalar("value");
      value.dtype = out_dtype;
      value.at = [s, out_dtype](const Index&) { return cast(constant(s, s.is_float() ? DType::Float64 : s.natural_dtype()), out_dtype); };
    }
    v.at = [self, mask, value, out_dtype](const Index& idx) {
      Expr c = cast(mask.at(broadcast_index(idx, mask.sizes)), DType::Bool);
      Expr a = cast(value.at(broadcast_index(idx, value.sizes)), out_dtype);
      Expr b = cast(self.at(broadcast_index(idx, self.sizes)), out_dtype);
      return where(c, a, b);
    };
    return v;
  }
  if (op == "to" || op == "clone") {
    Value x = in[0];
    v.at = [x, out_dtype](const Index& idx) { return cast(x.at(idx), out_dtype); };
    return v;
  }
  if (op == "full" || op == "zeros" || op == "ones") {
    Scalar s = op == "zeros" ? Scalar(int64_t(0)) : op == "ones" ? Scalar(int64_t(1)) : n->attrs.get_scalar("fill_value");
    v.at = [s, out_dtype](const Index&) { return constant(s, out_dtype); };
    return v;
  }
  // ---- views: remap the index, never copy ----
  if (op == "permute") {
    Value x = in[0];
    auto dims = n->attrs.get<std::vector<int64_t>>("dims");
    for (auto& d : dims) d = d < 0 ? d + static_cast<int64_t>(dims.size()) : d;
    v.at = [x, dims](const Index& idx) {
      Index src(idx.size());
      for (size_t i = 0; i < dims.size(); ++i) src[dims[i]] = idx[i];
      return x.at(src);
    };
    return v;
  }
  if (op == "expand") {
    Value x = in[0];
    v.at = [x](const Index& idx) { return x.at(broadcast_index(idx, x.sizes)); };
    return v;
  }
  if (op == "slice" || op == "select") {
    // The output's metadata already encodes start/step: recover them from the
    // view's stride/offset relationship through the attributes.
    Value x = in[0];
    int64_t dim = n->attrs.get<int64_t>("dim");
    int64_t nd = static_cast<int64_t>(x.sizes.size());
    if (dim < 0) dim += nd;
    if (op == "select") {
      int64_t index = n->attrs.get<int64_t>("index");
      if (index < 0) index += x.sizes[dim];
      v.at = [x, dim, index](const Index& idx) {
        Index src(idx.begin(), idx.end());
        src.insert(src.begin() + dim, IndexExpr(index));
        return x.at(src);
      };
    } else {
      int64_t step = n->attrs.get_or<int64_t>("step", 1);
      // start after PyTorch's clamping: derive from sizes (start is clamped into [0, size]).
      const AttrValue* sv = n->attrs.find("start");
      int64_t start = 0;
      if (sv && std::holds_alternative<int64_t>(*sv)) start = std::get<int64_t>(*sv);
      if (start < 0) start += x.sizes[dim];
      start = std::max<int64_t>(0, std::min<int64_t>(start, x.sizes[dim]));
      v.at = [x, dim, start, step](const Index& idx) {
        Index src = idx;
        src[dim] = IndexExpr(start) + idx[dim] * step;
        return x.at(src);
      };
    }
    return v;
  }
  if (op == "view") {
    Value x = in[0];
    Shape out_c = contiguous_strides(out_sizes), in_c = contiguous_strides(x.sizes);
    v.at = [x, out_c, in_c](const Index& idx) {
      IndexExpr flat = linear_index(idx, out_c);
      Index src(x.sizes.size());
      for (size_t d = 0; d < x.sizes.size(); ++d)
        src[d] = x.sizes[d] <= 1 ? IndexExpr(0) : mod(floordiv(flat, in_c[d]), x.sizes[d]);
      return x.at(src);
    };
    return v;
  }
  // ---- reductions: a ComputeNode writing a temp buffer ----
  // any/all are max/min over the values as bool (false < true).
  static const std::unordered_map<std::string, ReduceOp> reductions = {
      {"sum", ReduceOp::Sum}, {"amax", ReduceOp::Max}, {"amin", ReduceOp::Min},
      {"any", ReduceOp::Max}, {"all", ReduceOp::Min}};
  if (auto red = reductions.find(op); red != reductions.end()) {
    const Value& x = in[0];
    auto dims = n->attrs.get_or<std::vector<int64_t>>("dim", {});  // None (absent) = all dims
    int64_t nd = static_cast<int64_t>(x.sizes.size());
    // A 0-d input has no dim to reduce: dim -1 / 0 name the value itself
    // (eager has already checked the range during capture).
    std::vector<bool> reduced(nd, dims.empty());
    for (auto d : dims) {
      int64_t w = d < 0 ? d + nd : d;
      if (nd == 0) continue;
      if (w < 0 || w >= nd) cannot_lower(n, str("reduction dim ", d, " out of range"));
      reduced[w] = true;
    }
    ComputeNode c;
    c.id = static_cast<int>(prog_.nodes.size());
    c.origin = current_origin_;
    c.reduce = red->second;
    Index src(nd);
    Shape kept;
    Index kept_idx;
    for (int64_t d = 0; d < nd; ++d) {
      if (reduced[d]) {
        if (x.sizes[d] == 1) { src[d] = 0; continue; }
        IndexExpr r = prog_.new_var("r");
        c.rvars.push_back(r);
        c.reduce_ranges.push_back(x.sizes[d]);
        src[d] = r;
      } else {
        IndexExpr i = x.sizes[d] == 1 ? IndexExpr(0) : prog_.new_var("i");
        src[d] = i;
        kept.push_back(x.sizes[d]);
        kept_idx.push_back(i);
      }
    }
    for (size_t d = 0; d < kept.size(); ++d)
      if (kept[d] != 1) { c.ranges.push_back(kept[d]); c.vars.push_back(kept_idx[d]); }
    c.body = cast(x.at(src), out_dtype);
    // The temp is contiguous over the kept (non-1) dims in order.
    Shape range_strides = contiguous_strides(c.ranges);
    c.store_index = linear_index(c.vars, range_strides);
    int buf = add_buffer(BufferKind::Temp, "buf", out_dtype, out_sizes, contiguous_strides(out_sizes), -1);
    c.out_buffer = buf;
    prog_.nodes.push_back(std::move(c));
    // out_sizes already reflects keepdim: with or without the size-1 dims the layout is the same.
    return from_buffer(buf, out_sizes, contiguous_strides(out_sizes), out_dtype);
  }
  cannot_lower(n, "no lowering rule");
}

}  // namespace

LoweredRegion lower(const graph::Graph& g) {
  LoweredRegion r;
  Lowerer(r).run(g);
  return r;
}

}  // namespace tp::stax
