#include "stax/backend/cuda_specialize.h"

#include <atomic>
#include <unordered_map>

#include "graph/interpreter.h"
#include "graph/sym_shape_rules.h"
#include "ops/registry.h"

namespace tp::stax {

namespace {
std::atomic<int64_t> g_versions{0};

std::string layout_key(const std::vector<Tensor>& inputs) {
  std::string k;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      k += "none|";
      continue;
    }
    for (int64_t s : t.sizes()) k += std::to_string(s) + ",";
    k += ';';
    for (int64_t s : t.strides()) k += std::to_string(s) + ",";
    k += std::string(dtype_name(t.dtype())) + t.device().str() + "|";
  }
  return k;
}
}  // namespace

std::unique_ptr<graph::Graph> specialize_graph(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  std::unique_ptr<graph::Graph> s = g.clone();
  const std::unordered_map<int, int64_t> values = graph::symbol_values(*s, inputs);
  for (auto& up : s->nodes()) {
    graph::Node& n = *up;
    switch (n.opcode) {
      case graph::Opcode::Placeholder: {
        TP_CHECK(n.input_index >= 0 && n.input_index < static_cast<int>(inputs.size()) &&
                     inputs[static_cast<size_t>(n.input_index)].defined(),
                 Error, "internal: specializing a CUDA region: no input ", n.input_index);
        const Device dev = n.meta.device;
        n.meta = inputs[static_cast<size_t>(n.input_index)].meta();
        n.meta.device = dev;
        break;
      }
      case graph::Opcode::CallFunction:
      case graph::Opcode::CallMethod:
      case graph::Opcode::CallModule: {
        if (n.is_getitem()) {
          const graph::Node* src = std::get<graph::Node*>(n.args.at(0));
          n.meta = src->output_metas.at(static_cast<size_t>(n.getitem_index()));
          break;
        }
        if (!n.sym_attrs.empty()) n.attrs = graph::evaluate_sym_attrs(n, values);
        std::vector<TensorMeta> in;
        for (const graph::Arg& a : n.args) {
          if (auto* p = std::get_if<graph::Node*>(&a)) {
            TensorMeta m;
            if (*p) m = (*p)->meta;
            else m.defined = false;
            in.push_back(m);
          } else {
            in.push_back(Tensor::wrapped_scalar(std::get<Scalar>(a)).meta());  // as the capture saw it
          }
        }
        std::vector<TensorMeta> out = n.target->infer(*n.target, in, n.attrs);
        TP_CHECK(!out.empty(), Error, "internal: specializing a CUDA region: ", n.target->name, " inferred no result");
        // The device does not depend on sizes: keep the capture's (CUDA).
        for (size_t i = 0; i < out.size(); ++i)
          out[i].device = i < n.output_metas.size() ? n.output_metas[i].device : n.meta.device;
        n.meta = out[0];
        if (!n.output_metas.empty()) n.output_metas = std::move(out);
        break;
      }
      default: break;
    }
  }
  graph::make_static(*s);
  return s;
}

std::vector<Tensor> SpecializingCudaRegion::run(const std::vector<Tensor>& inputs) { return version(inputs)(inputs); }

SpecializingCudaRegion::RunFn SpecializingCudaRegion::version(const std::vector<Tensor>& inputs) {
  const std::string key = layout_key(inputs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = versions_.find(key); it != versions_.end()) return it->second;
  }
  std::unique_ptr<graph::Graph> s = specialize_graph(*graph_, inputs);
  RunFn fn = build_(*s, inputs);
  ++g_versions;
  std::lock_guard<std::mutex> lock(mu_);
  return versions_.emplace(key, std::move(fn)).first->second;
}

int SpecializingCudaRegion::versions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(versions_.size());
}

int64_t cuda_specialized_versions() { return g_versions.load(); }

}  // namespace tp::stax
