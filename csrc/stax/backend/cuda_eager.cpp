#include "stax/backend/cuda_eager.h"

#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/logs.h"
#include "cuda/kernels.h"
#include "graph/graph.h"
#include "passes/passes.h"
#include "stax/backend/cuda_region.h"

namespace tp::stax {

namespace {

std::mutex g_mutex;
// nullptr: Stax cannot generate this call (remembered, so it fails fast).
std::map<std::string, std::shared_ptr<CudaRegion>>& op_cache() {
  static auto* m = new std::map<std::string, std::shared_ptr<CudaRegion>>();
  return *m;
}
// Failed generation attempts per key. A failure is remembered (nullptr above)
// only at the second attempt: one seen during a compiled region's run could
// depend on that context, and remembering it made a later plain eager call of
// the same operator and sizes raise "no kernel".
std::map<std::string, int>& failures() {
  static auto* m = new std::map<std::string, int>();
  return *m;
}
constexpr int kAttemptsBeforeRefusal = 2;

void put_shape(std::string& k, const Shape& s) {
  for (int64_t v : s) k += std::to_string(v) + ",";
  k += ';';
}

bool generated_op(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (op.has(kInplace) || op.has(kView) || op.has(kRandom) || op.has(kNondeterministicShape) || out_meta.empty())
    return false;
  // The key: operator, attributes, and per input its layout (or its value for
  // a Python number, which becomes a constant of the graph).
  std::string key = op.name;
  key += '\n';
  for (auto& [name, v] : attrs.items()) key += std::string(name) + "=" + attr_repr(v) + ";";
  int dev = -1;
  for (const Tensor& t : inputs) {
    key += '\n';
    if (!t.defined()) {
      key += "none";
      continue;
    }
    if (t.device().kind != Device::Kind::CUDA) {
      // A 0-d CPU tensor is a number, as in PyTorch (a backward formula's
      // `e - 1` of a Python exponent is one); a larger CPU operand is refused.
      if (t.dim() != 0) return false;
      key += "num " + std::string(dtype_name(t.dtype())) + " " + attr_repr(t.item());
      continue;
    }
    if (dev >= 0 && dev != t.device().index) return false;
    dev = t.device().index;
    key += std::string(dtype_name(t.dtype())) + " ";
    put_shape(key, t.sizes());
    put_shape(key, t.strides());
  }
  if (dev < 0) return false;
  key += "\ncuda:" + std::to_string(dev);

  std::shared_ptr<CudaRegion> region;
  std::vector<Tensor> dev_inputs;
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind == Device::Kind::CUDA) dev_inputs.push_back(t);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = op_cache().find(key);
    if (it != op_cache().end()) {
      region = it->second;
      if (!region) return false;
    }
  }
  if (!region) {
    try {
      graph::Graph g;
      std::vector<graph::Arg> args;
      int index = 0;
      for (const Tensor& t : inputs) {
        if (!t.defined()) {
          args.push_back(static_cast<graph::Node*>(nullptr));
        } else if (t.device().kind != Device::Kind::CUDA) {
          args.push_back(t.item());
        } else {
          args.push_back(g.placeholder("x", t.meta(), index));
          ++index;
        }
      }
      graph::Node* n = g.call(op, std::move(args), attrs, out_meta[0]);
      std::vector<graph::Arg> results;
      if (out_meta.size() == 1) {
        results.push_back(n);
      } else {
        n->output_metas = out_meta;
        for (size_t i = 0; i < out_meta.size(); ++i)
          results.push_back(g.call(graph::getitem_op(), {n}, {{"index", static_cast<int64_t>(i)}}, out_meta[i]));
      }
      g.output(std::move(results));
      passes::PassOptions po;
      po.decompose = true;
      po.keep_whole = [](const std::string& name) { return cuda_keeps_whole(name, false); };
      passes::run_default_passes(g, po);
      region = compile_cuda_region(g, dev, RegionOptions{}, {});  // no tuning for one operator
      // An extern call would be this operator (or another without a loop
      // form) through the dispatcher again: not generated here.
      if (region->extern_count() > 0) region = nullptr;
    } catch (const Error& e) {
      if (log_enabled("cuda_eager"))
        std::cerr << "[tp cuda_eager] no generated kernel for " << op.name << ": " << e.what() << "\n";
      std::lock_guard<std::mutex> lock(g_mutex);
      if (++failures()[key] >= kAttemptsBeforeRefusal) op_cache()[key] = nullptr;
      return false;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    op_cache()[key] = region;
    if (!region) return false;
  }
  out = region->run(dev_inputs);
  return out.size() == out_meta.size();
}

}  // namespace

void install_cuda_generated_ops() { cuda::set_generated_op_fallback(&generated_op); }

int cuda_generated_op_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int n = 0;
  for (auto& [k, r] : op_cache()) n += r ? 1 : 0;
  return n;
}

}  // namespace tp::stax
