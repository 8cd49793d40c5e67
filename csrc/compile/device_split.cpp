#include "compile/device_split.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "compile/metrics.h"
#include "compile/options.h"
#include "cuda/copy.h"
#include "graph/interpreter.h"
#include "ops/dispatch.h"

namespace tp::compile {
namespace {

using graph::Node;
using graph::Opcode;

bool is_move(const Node* n) {
  return n->opcode == Opcode::CallFunction && n->target && n->target->has(kDeviceMove);
}
bool is_call(const Node* n) { return n->opcode == Opcode::CallFunction; }
Device device_of(const Node* n) { return n->output_metas.empty() ? n->meta.device : n->output_metas[0].device; }

// One region of the split: the nodes of one device at one stage.
struct Part {
  int stage = 0;
  Device device;
  std::vector<const Node*> nodes;   // graph order
  std::vector<const Node*> inputs;  // values defined outside it, in first-read order
  std::vector<const Node*> outputs; // its values read outside it
  std::shared_ptr<graph::Graph> graph;
  std::vector<TensorMeta> input_metas;  // the layouts it was compiled for
  // Inputs of another device (a CPU 0-d tensor an operator of a CUDA part
  // reads, as eager allows): moved to the part's device before it runs, as
  // a region's inputs live on its device.
  std::vector<bool> upload;
  std::vector<int> in_slots, out_slots;
  RegionFn run;
};

// A step of a call: a move (node) or a part (index), with the slots freed after it.
struct Step {
  const Node* move = nullptr;
  int move_in = -1, move_out = -1;
  int part = -1;
  std::vector<int> release;
};

struct Plan {
  int num_slots = 0;
  std::vector<std::pair<int, int>> inputs;        // (slot, call input index)
  std::vector<std::pair<int, Tensor>> constants;  // (slot, get_attr value) read by moves or returned
  std::vector<Part> parts;
  std::vector<Step> steps;
  std::vector<std::pair<int, graph::Arg>> outputs;  // the graph's output arguments (slot, or -1)
  std::unordered_map<const Node*, int> slot;  // while planning
};

// Stage numbers: a node runs after everything it reads. Crossing a device
// (a move, or an operator reading a value of another device such as a CPU
// scalar tensor) starts a later stage; moves of stage s run before the parts
// of stage s, so each part only reads values of earlier steps or its own.
std::unordered_map<const Node*, int> stages(const graph::Graph& g) {
  std::unordered_map<const Node*, int> st;
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!is_call(n)) continue;
    if (n->is_getitem()) {  // a result of a multi-result node stays with it
      st[n] = st.at(n->input_nodes().at(0));
      continue;
    }
    int s = 0;
    for (const Node* p : n->input_nodes()) {
      if (!p || !is_call(p)) continue;  // inputs and constants are available from the start
      const bool crosses = is_move(n) || (!is_move(p) && !(device_of(p) == device_of(n)));
      s = std::max(s, st.at(p) + (crosses ? 1 : 0));
    }
    st[n] = s;
  }
  return st;
}

// A tensor of `m`'s layout on its device (uninitialized): a part's example
// input for a value computed inside the call.
Tensor example_of(const TensorMeta& m) {
  if (m.device.kind == Device::Kind::CPU) return Tensor::empty_strided(m.sizes, m.strides, m.dtype);
  int64_t extent = 1;
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    if (m.sizes[d] == 0) extent = 0;
    if (extent > 0) extent += (m.sizes[d] - 1) * m.strides[d];
  }
  return cuda::empty({extent}, m.dtype, m.device.index).as_strided(m.sizes, m.strides, 0);
}

bool same_layout(const Tensor& t, const TensorMeta& m) {
  return t.defined() && t.device() == m.device && t.dtype() == m.dtype && t.sizes() == m.sizes &&
         t.strides() == m.strides;
}

std::string part_name(const std::string& region, size_t k, size_t n, Device d) {
  return str(region, " part ", k + 1, "/", n, " (", d.str(), ")");
}

}  // namespace

RegionFn compile_device_split(const BackendRequest& r, const BackendFn& compile_part) {
  const graph::Graph& g = *r.graph;
  auto plan = std::make_shared<Plan>();
  const std::unordered_map<const Node*, int> stage = stages(g);

  // Parts by (stage, device), in order of their first node.
  std::map<std::pair<int, std::pair<int, int>>, int> part_index;
  std::unordered_map<const Node*, int> part_of;
  std::vector<const Node*> moves;
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!is_call(n)) continue;
    if (is_move(n)) {
      moves.push_back(n);
      continue;
    }
    const Device d = device_of(n);
    const auto key = std::make_pair(stage.at(n), std::make_pair(static_cast<int>(d.kind), static_cast<int>(d.index)));
    auto [it, fresh] = part_index.emplace(key, static_cast<int>(plan->parts.size()));
    if (fresh) {
      plan->parts.emplace_back();
      plan->parts.back().stage = stage.at(n);
      plan->parts.back().device = d;
    }
    plan->parts[static_cast<size_t>(it->second)].nodes.push_back(n);
    part_of[n] = it->second;
  }

  // Each value read outside the step that makes it gets a slot.
  auto slot_of = [&](const Node* v) {
    auto [it, fresh] = plan->slot.emplace(v, plan->num_slots);
    if (fresh) plan->num_slots++;
    return it->second;
  };
  auto owner = [&](const Node* v) -> int {  // the part computing v; -1 for inputs, constants and moves
    auto it = part_of.find(v);
    return it == part_of.end() ? -1 : it->second;
  };
  std::vector<std::unordered_set<const Node*>> seen_in(plan->parts.size()), seen_out(plan->parts.size());
  auto read_by = [&](const Node* v, int reader) {  // reader: a part index, or -1 for a move / the output
    if (!v) return;
    if (v->opcode == Opcode::GetAttr && reader >= 0) return;  // copied into the part as a constant
    const int w = owner(v);
    if (w == reader) return;
    if (reader >= 0 && seen_in[static_cast<size_t>(reader)].insert(v).second)
      plan->parts[static_cast<size_t>(reader)].inputs.push_back(v);
    if (w >= 0 && seen_out[static_cast<size_t>(w)].insert(v).second)
      plan->parts[static_cast<size_t>(w)].outputs.push_back(v);
  };
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    if (n->opcode == Opcode::Output || is_move(n)) {
      for (const Node* v : n->input_nodes()) read_by(v, -1);
    } else if (is_call(n) && !n->is_getitem()) {
      for (const Node* v : n->input_nodes()) read_by(v, owner(n));
    }
  }

  // Each part's subgraph, compiled through the backend on examples of its inputs.
  std::vector<std::string> reasons;
  for (size_t k = 0; k < plan->parts.size(); ++k) {
    Part& p = plan->parts[k];
    auto sub = std::make_shared<graph::Graph>();
    std::unordered_map<const Node*, Node*> m;
    std::vector<Tensor> examples;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const Node* v = p.inputs[i];
      TensorMeta meta = v->meta;
      p.upload.push_back(!(meta.device == p.device));
      // An input's own example, unless it stands on another device than the
      // value (the AOT layer's zeros for a backward compiled ahead are made on
      // one device).
      Tensor example;
      if (v->opcode == Opcode::Placeholder) example = r.examples.at(static_cast<size_t>(v->input_index));
      if (!example.defined() || !(example.device() == meta.device)) example = example_of(meta);
      if (p.upload.back()) {
        meta = TensorMeta::contiguous(meta.sizes, meta.dtype);
        meta.device = p.device;
        example = move_to_device(example, p.device);
      }
      m[v] = sub->placeholder(v->name, meta, static_cast<int>(i));
      p.input_metas.push_back(meta);
      examples.push_back(example);
    }
    for (const Node* n : p.nodes) {
      for (const Node* v : n->input_nodes())
        if (v && v->opcode == Opcode::GetAttr && !m.count(v)) graph::copy_node(*sub, v, m);
      graph::copy_node(*sub, n, m);
    }
    std::vector<graph::Arg> outs;
    for (const Node* v : p.outputs) outs.emplace_back(m.at(v));
    sub->output(std::move(outs));
    sub->lint();
    p.graph = sub;
    if (p.outputs.empty()) continue;  // nothing it computes is read: never run
    std::vector<stax::KernelInfo> kernels;
    std::string reason;
    p.run = compile_part(BackendRequest{sub, examples, r.options, part_name(r.region, k, plan->parts.size(), p.device),
                                        r.source, r.warn_fallback, r.kernels ? &kernels : nullptr,
                                        r.fallback_reason ? &reason : nullptr, {}});
    if (r.kernels) r.kernels->insert(r.kernels->end(), kernels.begin(), kernels.end());
    if (!reason.empty()) reasons.push_back(reason);
  }
  if (r.fallback_reason && !reasons.empty()) *r.fallback_reason = reasons.front();

  // The steps: by stage, a stage's moves before its parts; graph order within.
  for (const Node* mv : moves) {
    Step s;
    s.move = mv;
    s.move_in = slot_of(mv->input_nodes().at(0));
    s.move_out = slot_of(mv);
    plan->steps.push_back(std::move(s));
  }
  for (size_t k = 0; k < plan->parts.size(); ++k) {
    Part& p = plan->parts[k];
    if (!p.run) continue;
    for (const Node* v : p.inputs) p.in_slots.push_back(slot_of(v));
    for (const Node* v : p.outputs) p.out_slots.push_back(slot_of(v));
    Step s;
    s.part = static_cast<int>(k);
    plan->steps.push_back(std::move(s));
  }
  auto stage_of = [&](const Step& s) { return s.move ? stage.at(s.move) : plan->parts[static_cast<size_t>(s.part)].stage; };
  auto first_node = [&](const Step& s) { return s.move ? s.move : plan->parts[static_cast<size_t>(s.part)].nodes.front(); };
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < g.nodes().size(); ++i) position[g.nodes()[i].get()] = i;
  std::stable_sort(plan->steps.begin(), plan->steps.end(), [&](const Step& a, const Step& b) {
    if (stage_of(a) != stage_of(b)) return stage_of(a) < stage_of(b);
    if (!a.move != !b.move) return a.move != nullptr;
    return position.at(first_node(a)) < position.at(first_node(b));
  });

  // The graph's outputs; the inputs and constants that steps or the output read.
  for (const graph::Arg& a : g.output_node()->args) {
    const Node* const* v = std::get_if<Node*>(&a);
    plan->outputs.emplace_back(v && *v ? slot_of(*v) : -1, a);
  }
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    auto it = plan->slot.find(n);
    if (it == plan->slot.end()) continue;
    if (n->opcode == Opcode::Placeholder) plan->inputs.emplace_back(it->second, n->input_index);
    if (n->opcode == Opcode::GetAttr) plan->constants.emplace_back(it->second, n->constant);
  }
  // Free each value after its last reader (the graph's results are kept).
  std::vector<int> last(static_cast<size_t>(plan->num_slots), -1);
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const Step& s = plan->steps[i];
    if (s.move) last[static_cast<size_t>(s.move_in)] = static_cast<int>(i);
    else
      for (int sl : plan->parts[static_cast<size_t>(s.part)].in_slots) last[static_cast<size_t>(sl)] = static_cast<int>(i);
  }
  for (const auto& [sl, a] : plan->outputs)
    if (sl >= 0) last[static_cast<size_t>(sl)] = -1;
  for (size_t sl = 0; sl < last.size(); ++sl)
    if (last[sl] >= 0) plan->steps[static_cast<size_t>(last[sl])].release.push_back(static_cast<int>(sl));

  if (log_enabled("graph") || log_enabled("explain"))
    std::fprintf(stderr, "[tp.compile] region %s: split at %zu device move(s) into %zu part(s)\n", r.region.c_str(),
                 moves.size(), plan->parts.size());

  return [plan](const std::vector<Tensor>& in) {
    std::vector<Tensor> env(static_cast<size_t>(plan->num_slots));
    for (const auto& [sl, i] : plan->inputs) env[static_cast<size_t>(sl)] = in.at(static_cast<size_t>(i));
    for (const auto& [sl, t] : plan->constants) env[static_cast<size_t>(sl)] = t;
    std::vector<Tensor> args;
    for (const Step& s : plan->steps) {
      if (s.move) {
        env[static_cast<size_t>(s.move_out)] = call_op1(*s.move->target, {env[static_cast<size_t>(s.move_in)]}, s.move->attrs);
      } else {
        const Part& p = plan->parts[static_cast<size_t>(s.part)];
        args.clear();
        bool laid_out = true;
        for (size_t i = 0; i < p.in_slots.size(); ++i) {
          const Tensor& t = env[static_cast<size_t>(p.in_slots[i])];
          args.push_back(p.upload[i] && t.defined() ? move_to_device(t, p.device) : t);
          laid_out = laid_out && same_layout(args.back(), p.input_metas[i]);
        }
        // A layout the part was not compiled for: its eager form, for this call.
        std::vector<Tensor> outs = laid_out ? p.run(args) : graph::interpret(*p.graph, args);
        for (size_t i = 0; i < p.out_slots.size(); ++i) env[static_cast<size_t>(p.out_slots[i])] = std::move(outs.at(i));
      }
      for (int sl : s.release) env[static_cast<size_t>(sl)] = Tensor();
    }
    std::vector<Tensor> result;
    result.reserve(plan->outputs.size());
    for (const auto& [sl, a] : plan->outputs) {
      if (sl >= 0) result.push_back(env[static_cast<size_t>(sl)]);
      else if (std::holds_alternative<Scalar>(a)) result.push_back(Tensor::wrapped_scalar(std::get<Scalar>(a)));
      else result.emplace_back();  // an absent optional
    }
    return result;
  };
}

}  // namespace tp::compile
