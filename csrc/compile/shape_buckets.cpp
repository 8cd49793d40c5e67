#include "compile/shape_buckets.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "compile/compiled_function.h"
#include "compile/dynamic_marks.h"
#include "core/grad_mode.h"
#include "graph/interpreter.h"
#include "graph/shape_env.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::compile {

int64_t BucketPolicy::bucket(int64_t n) const {
  if (pow2) {
    int64_t b = std::max<int64_t>(floor, 1);
    while (b < n) b *= 2;
    return b;
  }
  for (int64_t s : sizes)
    if (s >= n) return s;
  return -1;
}

BucketPolicy BucketPolicy::parse(const std::string& text) {
  BucketPolicy p;
  if (text == "pow2") {
    p.pow2 = true;
    return p;
  }
  // A Python list/tuple as str() wrote it: "[8, 32, 128]".
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    for (char c : cur)
      if (!std::isdigit(static_cast<unsigned char>(c)))
        throw ValueError(str("tp.compile: options['shape_buckets'] must be 'pow2' or a list of positive ints, got '",
                             text, "'"));
    p.sizes.push_back(std::stoll(cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == '[' || c == ']' || c == '(' || c == ')' || c == ',' || std::isspace(static_cast<unsigned char>(c)))
      flush();
    else
      cur += c;
  }
  flush();
  TP_CHECK(!p.sizes.empty(), ValueError, "tp.compile: options['shape_buckets'] must be 'pow2' or a non-empty list of ",
           "positive ints, got '", text, "'");
  for (size_t i = 0; i < p.sizes.size(); ++i)
    TP_CHECK(p.sizes[i] >= 2 && (i == 0 || p.sizes[i] > p.sizes[i - 1]), ValueError,
             "tp.compile: options['shape_buckets'] must be ascending sizes >= 2, got '", text, "'");
  return p;
}

Tensor pad_to(const Tensor& x, const Shape& sizes) {
  AutoGradMode no_grad(false);
  Tensor z = ops::zeros(sizes, x.dtype());
  Tensor v = z;
  for (int64_t d = 0; d < x.dim(); ++d) v = ops::slice(v, d, 0, x.size(d), 1);
  ops::copy_(v, x);
  return z;
}

namespace {

struct Refused {
  explicit Refused(std::string w) : why(std::move(w)) {}
  std::string why;
  std::vector<std::pair<int, int64_t>> drop;  // padded dims it refuses: a retry goes without them
};

bool in_list(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

bool integral(DType t) { return !(t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16); }

}  // namespace

BucketPlan analyze_padding(const graph::TraceResult& tr, const std::vector<Tensor>& unpadded,
                           const std::vector<Tensor>& padded, const std::vector<std::string>& names) {
  BucketPlan plan;
  try {
    const graph::Graph& g = *tr.graph;
    if (!tr.gates.empty()) throw Refused{"data gate " + tr.gates[0].describe() + " reads values that padding changes"};
    if (!tr.rng_inputs.empty()) throw Refused{"random operators draw per element (padding shifts the draws)"};
    // Symbol k -> the size n it has at this call (its dims grew from n to the bucket).
    std::map<int, int64_t> n_of;
    std::map<int, std::string> origin;
    std::map<int, std::vector<std::pair<int, int64_t>>> dims_of;
    // A refusal along padded dim k: without bucketing k the rest may still pad.
    auto refuse_dim = [&](int k, std::string why) {
      Refused r{std::move(why)};
      r.drop = dims_of[k];
      return r;
    };
    for (graph::Node* p : g.placeholders()) {
      if (p->input_index < 0 || p->input_index >= static_cast<int>(unpadded.size())) continue;
      const Tensor& t = unpadded[static_cast<size_t>(p->input_index)];
      for (size_t d = 0; d < p->sym_sizes.size(); ++d) {
        const graph::SymDim& e = p->sym_sizes[d];
        if (e.is_const()) continue;
        if (!e.is_size()) throw Refused{"input dim is " + e.to_string()};
        const int k = e.size_index();
        const int64_t n = t.size(static_cast<int64_t>(d));
        std::string where = str(names[static_cast<size_t>(p->input_index)], ".size(", d, ")");
        auto it = n_of.find(k);
        if (it != n_of.end() && it->second != n) {
          // Equal bucket sizes were unified by the capture: retry without this dim.
          Refused r{str(origin[k], " = ", it->second, " and ", where, " = ", n,
                        " share a bucket but differ (eager would refuse or broadcast them)")};
          r.drop.push_back({p->input_index, static_cast<int64_t>(d)});
          throw r;
        }
        n_of[k] = n;
        origin.emplace(k, where);
        dims_of[k].push_back({p->input_index, static_cast<int64_t>(d)});
      }
    }
    // A padded dim the capture specialized (the program used the size as a number:
    // `x * x.shape[0]`) would run with the bucket size baked in.
    for (graph::Node* p : g.placeholders()) {
      if (p->input_index < 0 || p->input_index >= static_cast<int>(unpadded.size())) continue;
      const size_t i = static_cast<size_t>(p->input_index);
      for (int64_t d = 0; d < unpadded[i].dim(); ++d) {
        if (padded[i].size(d) == unpadded[i].size(d)) continue;
        const size_t du = static_cast<size_t>(d);
        if (du < p->sym_sizes.size() && !p->sym_sizes[du].is_const()) continue;
        Refused r{str("the program specialized the padded size ", names[i], ".size(", d, ") = ", padded[i].size(d),
                      " (it used the size as a number)")};
        r.drop.push_back({p->input_index, d});
        throw r;
      }
    }
    if (n_of.empty()) throw Refused{"no dim of the capture is symbolic"};
    std::unordered_map<int, int64_t> values;
    for (auto& [k, n] : n_of) values[stax::ir::size_var_id(k)] = n;
    for (auto& sg : tr.shape_guards)
      if (!sg.holds(values))
        throw Refused{"the program decided on a padded size: " + sg.describe(g.symbols) +
                      " holds at the bucket size but not at the call's"};
    for (auto& [k, n] : n_of)
      if (k < static_cast<int>(g.symbols.size()) && (n < g.symbols[k].min || n > g.symbols[k].max))
        throw Refused{str(origin[k], " = ", n, " is outside its range")};

    // Per shape: position -> symbol of the padded dims (bare symbols only).
    auto labels = [&](const graph::SymShape& s, const std::string& op) {
      std::vector<std::pair<size_t, int>> out;
      std::set<int> seen;
      for (size_t d = 0; d < s.size(); ++d) {
        std::vector<int> ks;
        stax::ir::collect_sizes(s[d], ks);
        if (ks.empty()) continue;
        if (!s[d].is_size())
          throw Refused{str(op, " makes a dim ", graph::describe_sym(s[d], g.symbols),
                            " from a padded size (it merges, splits or offsets the padded dim)")};
        if (!seen.insert(s[d].size_index()).second)
          throw Refused{str(op, " has the padded dim ", origin[s[d].size_index()], " twice in one shape")};
        out.push_back({d, s[d].size_index()});
      }
      return out;
    };
    auto padded_at = [](const std::vector<std::pair<size_t, int>>& l, int64_t d) {
      for (auto& [p, k] : l)
        if (static_cast<int64_t>(p) == d) return k;
      return -1;
    };
    for (auto& up : g.nodes()) {
      const graph::Node* node = up.get();
      if (node->opcode != graph::Opcode::CallFunction) continue;
      const std::string op = node->target ? node->target->name : "?";
      std::vector<graph::SymShape> outs;
      if (!node->sym_sizes.empty()) outs.push_back(node->sym_sizes);
      for (auto& s : node->output_sym_sizes) outs.push_back(s);
      std::set<int> out_syms;
      for (auto& s : outs)
        for (auto& [d, k] : labels(s, op)) out_syms.insert(k);
      if (node->is_getitem()) continue;
      std::vector<graph::Node*> ins = node->input_nodes();
      std::vector<std::vector<std::pair<size_t, int>>> in_l;
      std::set<int> in_syms;
      for (graph::Node* i : ins) {
        in_l.push_back(i ? labels(i->sym_sizes, op) : std::vector<std::pair<size_t, int>>{});
        for (auto& [d, k] : in_l.back()) in_syms.insert(k);
      }
      if (in_syms.empty() && out_syms.empty()) continue;  // touches no padded value
      const OpDef& def = *node->target;
      if (def.has(kRandom)) throw Refused{op + " is random (padding shifts the draws)"};
      for (int k : in_syms)
        if (!out_syms.count(k))
          throw refuse_dim(k, str(op, " reduces or contracts over the padded dim ", origin[k]));
      const bool view = def.has(kView);
      for (auto& [an, sa] : node->sym_attrs) {
        if (view) break;
        std::vector<int> ks;
        for (auto& e : sa) stax::ir::collect_sizes(e, ks);
        if (!ks.empty()) throw Refused{str(op, " takes '", an, "' computed from the padded size ", origin[ks[0]])};
      }
      if (def.has(kPointwise)) {
        if ((op.find("div") != std::string::npos || op.find("remainder") != std::string::npos ||
             op.find("fmod") != std::string::npos) &&
            integral(node->meta.dtype))
          throw Refused{op + " divides integers (the zero padding would divide by zero)"};
        continue;
      }
      if (view) {
        if (op == "as_strided") throw Refused{op + " addresses memory across the padded dim"};
        if (op.find("view") != std::string::npos || op.find("reshape") != std::string::npos ||
            op.find("flatten") != std::string::npos) {
          // Row-major reshape keeps the padded dim's rows apart iff the static
          // extent after it is the same before and after.
          auto after = [](const graph::SymShape& s, size_t d) {
            int64_t p = 1;
            for (size_t j = d + 1; j < s.size(); ++j) p *= s[j].const_value();
            return p;
          };
          for (auto& [di, k] : in_l.at(0)) {
            size_t dout = 0;
            for (auto& [d, kk] : labels(outs.at(0), op))
              if (kk == k) dout = d;
            if (after(ins[0]->sym_sizes, di) != after(outs[0], dout))
              throw refuse_dim(k, str(op, " moves the padded dim ", origin[k], " across other dims"));
          }
        }
        continue;
      }
      // Operators that work along a dim named by an attribute: never the padded one.
      if (in_l.empty()) in_l.emplace_back();
      const std::vector<std::pair<size_t, int>>& l0 = in_l[0];
      const int64_t nd0 = ins.empty() || !ins[0] ? 0 : static_cast<int64_t>(ins[0]->sym_sizes.size());
      for (const char* an : {"dim", "dims", "axis"}) {
        const AttrValue* v = node->attrs.find(an);
        if (!v) continue;
        std::vector<int64_t> ds;
        if (auto* i = std::get_if<int64_t>(v)) ds.push_back(*i);
        if (auto* l = std::get_if<std::vector<int64_t>>(v)) ds = *l;
        for (int64_t d : ds) {
          if (nd0 > 0 && d < 0) d += nd0;
          if (int k = padded_at(l0, d); k >= 0) throw refuse_dim(k, str(op, " works along the padded dim ", origin[k]));
        }
      }
      if (const AttrValue* v = node->attrs.find("normalized_shape")) {
        if (auto* l = std::get_if<std::vector<int64_t>>(v))
          for (int64_t d = nd0 - static_cast<int64_t>(l->size()); d < nd0; ++d)
            if (int k = padded_at(l0, d); k >= 0)
              throw refuse_dim(k, str(op, " normalizes over the padded dim ", origin[k]));
      }
      // Contractions: the K dim of each operand.
      auto refuse_k = [&](size_t which, int64_t d) {
        if (which >= ins.size() || !ins[which]) return;
        const int64_t nd = static_cast<int64_t>(ins[which]->sym_sizes.size());
        if (d < 0) d += nd;
        if (int k = padded_at(in_l[which], d); k >= 0)
          throw refuse_dim(k, str(op, " contracts over the padded dim ", origin[k]));
      };
      auto nd_of = [&](size_t which) {
        return which < ins.size() && ins[which] ? static_cast<int64_t>(ins[which]->sym_sizes.size()) : 0;
      };
      if (in_list(op, {"mm", "bmm", "matmul", "dot"})) {
        refuse_k(0, -1);
        refuse_k(1, nd_of(1) >= 2 ? -2 : 0);
      } else if (in_list(op, {"addmm", "baddbmm"})) {
        refuse_k(1, -1);
        refuse_k(2, -2);
      } else if (op == "linear") {
        refuse_k(0, -1);
        refuse_k(1, -1);
      } else if (in_list(op, {"batch_norm", "native_batch_norm"})) {
        for (auto& [d, k] : l0)
          if (d != 1) throw refuse_dim(k, str(op, " takes statistics over the padded dim ", origin[k]));
      }
      if (def.has(kReduction)) continue;  // over other dims only (checked above)
      if (!in_list(op, {"mm", "bmm", "matmul", "addmm", "baddbmm", "linear", "softmax", "log_softmax", "layer_norm",
                        "native_layer_norm", "rms_norm", "cumsum", "cumprod", "logsumexp", "sort", "argsort", "topk",
                        "cat", "stack", "clone", "contiguous", "_to_copy", "to", "copy", "embedding", "index_select",
                        "batch_norm", "native_batch_norm", "argmax", "argmin", "max.dim", "min.dim", "sum", "mean",
                        "amax", "amin", "prod", "var", "var.dim", "std", "std.dim", "where", "masked_fill"}))
        throw Refused{op + " is not known to keep the padded rows apart (no padding rule for it)"};
    }

    // Results: narrowed back along their padded dims, or re-made as eager's views.
    const graph::Node* out = g.output_node();
    const size_t nres = out->args.size() - tr.mutated_inputs.size();
    for (size_t i = 0; i < nres; ++i) {
      BucketPlan::Result r;
      if (i < tr.output_views.size() && tr.output_views[i].input_index >= 0 &&
          tr.output_views[i].input_index < static_cast<int>(unpadded.size())) {
        r.view_of = tr.output_views[i].input_index;
        for (size_t s = 0; s < tr.output_views[i].steps.size(); ++s) {
          auto& [opdef, attrs] = tr.output_views[i].steps[s];
          const bool sym = i < tr.output_view_sym_attrs.size() && s < tr.output_view_sym_attrs[i].size() &&
                           !tr.output_view_sym_attrs[i][s].empty();
          r.steps.push_back({opdef, sym ? graph::evaluate_attrs(attrs, tr.output_view_sym_attrs[i][s], values) : attrs});
        }
      } else if (auto* const* np = std::get_if<graph::Node*>(&out->args[i]);
                 np && *np && (*np)->opcode == graph::Opcode::Placeholder && (*np)->input_index >= 0 &&
                 (*np)->input_index < static_cast<int>(unpadded.size())) {
        r.view_of = (*np)->input_index;  // eager returned the argument itself
      } else if (np && *np) {
        for (size_t j = 0; j < i && r.same_as < 0; ++j)
          if (out->args[j] == out->args[i]) r.same_as = static_cast<int>(j);
        for (auto& [d, k] : labels((*np)->sym_sizes, "the result"))
          r.narrow.push_back({static_cast<int64_t>(d), n_of.at(k)});
      }
      plan.results.push_back(std::move(r));
    }
    for (int m : tr.mutated_inputs)
      if (m < static_cast<int>(unpadded.size())) plan.mutated.push_back(m);
    plan.safe = true;
  } catch (const Refused& r) {
    plan.safe = false;
    plan.refusal = r.why;
    plan.drop = r.drop;
  }
  for (auto& t : padded) plan.padded.push_back(t.sizes());
  for (size_t i = 0; i < padded.size(); ++i) plan.is_padded.push_back(padded[i].sizes() != unpadded[i].sizes());
  return plan;
}

// Lives here rather than in compiled_function.cpp: the whole of bucketing is one file.
bool CompiledFunction::bucketed_call(const std::vector<ArgValue>& args, const OutputStructure** structure,
                                     std::vector<Tensor>* result) {
  last_call_bucketed_ = false;
  std::vector<Tensor> ts;
  std::vector<size_t> pos;
  std::vector<std::string> names;
  for (size_t i = 0; i < args.size(); ++i)
    if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
      if (!t->defined()) return false;
      ts.push_back(*t);
      pos.push_back(i);
      names.push_back(i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i));
    }
  using Mode = CompileOptions::Dynamic;
  if (options_.dynamic == Mode::Off) return false;
  for (auto& t : ts) {
    if (t.device().kind != Device::Kind::CPU) return false;  // pad_to makes CPU tensors
    if (GradMode::is_enabled() && t.requires_grad()) {
      last_bucket_refusal_ = "an input requires grad (bucketing serves inference for now)";
      return false;
    }
  }
  if (bucket_first_sizes_.empty())
    for (auto& t : ts) bucket_first_sizes_.push_back(t.sizes());
  const std::string key = specialization_key(args);
  auto it = bucket_plans_.find(key);
  if (it == bucket_plans_.end()) {
    // The dims that would be dynamic, each to its bucket.
    // Dims refused at earlier call shapes start out unbucketed (fewer padded dims is always sound).
    std::set<std::pair<int, int64_t>> dropped;
    for (auto& [d, why] : bucket_dropped_) dropped.insert(d);
    BucketPlan plan;
    for (int attempt = 0; attempt < 16; ++attempt) {
      graph::DynamicSpec spec(ts.size());
      std::vector<Tensor> padded = ts;
      bool any = false;
      for (size_t i = 0; i < ts.size(); ++i) {
        const int64_t nd = ts[i].dim();
        spec[i].resize(static_cast<size_t>(nd));
        std::map<int64_t, DimMark> marks = dim_marks(ts[i]);
        Shape sizes = ts[i].sizes();
        for (int64_t d = 0; d < nd; ++d) {
          const int64_t n = sizes[static_cast<size_t>(d)];
          bool dyn = options_.dynamic == Mode::On ||
                     (i < bucket_first_sizes_.size() && bucket_first_sizes_[i].size() == sizes.size() &&
                      bucket_first_sizes_[i][static_cast<size_t>(d)] != n);
          if (auto m = marks.find(d); m != marks.end()) dyn = m->second.dynamic;
          if (dropped.count({static_cast<int>(i), d})) dyn = false;
          const int64_t b = dyn && n >= 2 ? bucket_policy_.bucket(n) : -1;
          if (b < 0) continue;
          spec[i][static_cast<size_t>(d)].symbolic = true;
          sizes[static_cast<size_t>(d)] = b;
          any = true;
        }
        if (sizes != ts[i].sizes()) padded[i] = pad_to(ts[i], sizes);
      }
      if (!any) {
        for (auto& [d, why] : bucket_dropped_)
          if (plan.refusal.empty() && d.first < static_cast<int>(ts.size())) plan.refusal = why;
        if (plan.refusal.empty()) plan.refusal = "no dim is dynamic with a bucket";
        break;
      }
      try {
        graph::TraceResult tr = graph::trace(
            [&](const std::vector<Tensor>& proxies) {
              std::vector<ArgValue> v = args;
              for (size_t k = 0; k < pos.size(); ++k) v[pos[k]] = proxies[k];
              std::shared_ptr<const OutputStructure> s;
              return fn_(v, &s);
            },
            padded, names, /*execute=*/true, /*lift_free_tensors=*/true, &spec);
        plan = analyze_padding(tr, ts, padded, names);
        // Backward through padded rows is not padding-safe (a zero cotangent times an
        // infinite local derivative is NaN, and it reaches the parameters' gradients).
        if (GradMode::is_enabled())
          for (size_t k = 0; k < tr.free_tensors.size() && plan.safe; ++k)
            if (tr.free_tensors[k].requires_grad()) {
              plan = BucketPlan{};
              plan.refusal = "a tensor the function reads (a parameter) requires grad (bucketing serves inference for now)";
            }
      } catch (const std::exception& e) {
        plan = BucketPlan{};
        plan.refusal = str("the capture at the bucket sizes failed: ", e.what());
        // Padding every dim can break a shape check (`x @ w` with a static w): retry
        // without the innermost padded dim (leading dims are the batch-like ones).
        std::pair<int, int64_t> last{-1, -1};
        for (size_t i = 0; i < spec.size(); ++i)
          for (size_t d = 0; d < spec[i].size(); ++d)
            if (spec[i][d].symbolic && (static_cast<int64_t>(d) > last.second ||
                                        (static_cast<int64_t>(d) == last.second && static_cast<int>(i) > last.first)))
              last = {static_cast<int>(i), static_cast<int64_t>(d)};
        if (last.first >= 0 && last.second > 0) plan.drop.push_back(last);
      }
      if (log_enabled("recompiles")) {
        std::string sizes;
        for (auto& t : padded) sizes += (sizes.empty() ? "" : ", ") + shape_str(t.sizes());
        if (plan.safe)
          std::fprintf(stderr, "[tp.compile] shape buckets: this call runs padded to %s\n", sizes.c_str());
        else
          std::fprintf(stderr, "[tp.compile] shape buckets: not padding to %s: %s\n", sizes.c_str(),
                       plan.refusal.c_str());
      }
      if (plan.safe || plan.drop.empty()) break;
      for (auto& d : plan.drop) dropped.insert(d);  // retry with the other dims bucketed
      for (auto& d : plan.drop) bucket_dropped_.emplace(d, plan.refusal);
    }
    it = bucket_plans_.emplace(key, std::make_shared<const BucketPlan>(std::move(plan))).first;
  }
  const BucketPlan& plan = *it->second;
  if (!plan.safe) {
    last_bucket_refusal_ = plan.refusal;
    return false;
  }
  // The padded inputs: a buffer per plan, reused (a plan is one exact call shape, so
  // only its leading corner is ever written and the padding stays zero), unless the
  // function writes into a padded input. Fresh zeros of a bucket size cost more than
  // the whole call (a large allocation is a fresh mapping each time).
  bool reuse = true;
  for (int m : plan.mutated) reuse &= !plan.is_padded[static_cast<size_t>(m)];
  std::vector<Tensor> padded = ts;
  {
    AutoGradMode no_grad(false);
    for (size_t i = 0; i < ts.size(); ++i) {
      if (!plan.is_padded[i]) continue;
      if (!reuse) {
        padded[i] = pad_to(ts[i], plan.padded[i]);
        continue;
      }
      if (plan.buffer.size() != ts.size()) {
        plan.buffer.assign(ts.size(), Tensor());
        plan.corner.assign(ts.size(), Tensor());
      }
      if (!plan.buffer[i].defined()) {
        plan.buffer[i] = ops::zeros(plan.padded[i], ts[i].dtype());
        Tensor v = plan.buffer[i];
        for (int64_t d = 0; d < ts[i].dim(); ++d) v = ops::slice(v, d, 0, ts[i].size(d), 1);
        plan.corner[i] = v;
      }
      ops::copy_(plan.corner[i], ts[i]);
      padded[i] = plan.buffer[i];
    }
  }
  std::vector<ArgValue> pargs = args;
  for (size_t i = 0; i < ts.size(); ++i) pargs[pos[i]] = padded[i];
  std::vector<Tensor> out;
  in_bucket_call_ = true;
  try {
    out = call(pargs, structure);
  } catch (...) {
    in_bucket_call_ = false;
    throw;
  }
  in_bucket_call_ = false;
  {
    AutoGradMode no_grad(false);
    for (int m : plan.mutated) {
      if (!plan.is_padded[static_cast<size_t>(m)]) continue;  // the call wrote the caller's tensor itself
      Tensor v = padded[static_cast<size_t>(m)];
      Tensor& dst = ts[static_cast<size_t>(m)];
      for (int64_t d = 0; d < dst.dim(); ++d) v = ops::slice(v, d, 0, dst.size(d), 1);
      ops::copy_(dst, v);
    }
  }
  TP_CHECK(out.size() == plan.results.size(), Error, "internal: shape buckets: ", out.size(), " results, the plan has ",
           plan.results.size());
  for (size_t r = 0; r < out.size(); ++r) {
    const BucketPlan::Result& pr = plan.results[r];
    if (pr.same_as >= 0) {
      out[r] = out[static_cast<size_t>(pr.same_as)];
    } else if (pr.view_of >= 0) {
      Tensor v = ts[static_cast<size_t>(pr.view_of)];
      for (auto& [op, attrs] : pr.steps) v = call_op(*op, {v}, attrs).at(0);
      out[r] = v;
    } else if (!pr.narrow.empty() && out[r].defined()) {
      Tensor v = out[r];
      for (auto& [d, n] : pr.narrow) v = ops::slice(v, d, 0, n, 1);
      out[r] = ops::contiguous(v);  // eager's result is a fresh contiguous tensor
    }
  }
  bucketed_calls_++;
  last_call_bucketed_ = true;
  last_bucket_refusal_.clear();
  *result = std::move(out);
  return true;
}

}  // namespace tp::compile
