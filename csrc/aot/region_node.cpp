#include "aot/region_node.h"

#include <algorithm>

#include "aot/device_constants.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tp::aot {

std::vector<Tensor> CompiledRegionNode::apply(const std::vector<Tensor>& grad_outputs) {
  // create_graph=True: the compiled backward is not itself differentiable
  // (its graph has no derivative recorded), so a silent run would give wrong
  // higher-order gradients (Section 5.7).
  TP_CHECK(!GradMode::is_enabled(), Error, "double backward (create_graph=True) through the compiled region ",
           region_, " is not supported: its backward is a compiled graph without derivatives; compute the "
           "higher-order gradient without tp.compile, or call the region under tp.no_grad() and differentiate eagerly");
  TP_CHECK(!released_, Error, "Trying to backward through the graph a second time: the compiled region ", region_,
           " has already freed the values it saved for backward. Pass retain_graph=True to the first backward()/"
           "autograd.grad() call to go through the same graph again.");
  TP_CHECK(backward_error.empty(), Error, backward_error);
  for (size_t i = 0; i < saved.size(); ++i)
    TP_CHECK(saved[i].autograd_version() == saved_versions[i], Error,
             "one of the variables needed for gradient computation has been modified by an inplace operation: [",
             dtype_name(saved[i].dtype()), " ", shape_str(saved[i].sizes()), "] is at version ",
             saved[i].autograd_version(),
             "; expected version ", saved_versions[i], " instead (the compiled region ", region_, " saved it)");
  for (const WatchedResult& w : watched_results) {
    const bool read = std::any_of(w.triggers.begin(), w.triggers.end(), [&](int k) {
      return static_cast<size_t>(k) < grad_outputs.size() && grad_outputs[static_cast<size_t>(k)].defined();
    });
    TP_CHECK(!read || w.result.autograd_version() == w.version, Error,
             "one of the variables needed for gradient computation has been modified by an inplace operation: [",
             dtype_name(w.result.dtype()), " ", shape_str(w.result.sizes()), "] is at version ",
             w.result.autograd_version(), "; expected version ", w.version, " instead (a result of the compiled region ",
             region_, " that the backward reads; clone() it before the in-place write)");
  }
  // The backward graph's inputs are contiguous (partition.cpp): expanded
  // gradients (`y.sum().backward()`) and strided saved values are copied once.
  std::vector<Tensor> unpacked;  // saved-tensor hooks: what the unpack hook gives back
  for (size_t i = 0; i < packed_saved.size(); ++i) {
    Tensor t = packed_saved[i]->unpack();
    const TensorMeta& m = packed_metas[i];
    TP_CHECK(t.sizes() == m.sizes && t.dtype() == m.dtype && t.device() == m.device, ValueError,
             "saved_tensors_hooks: the unpack hook returned a ", dtype_name(t.dtype()), " ", shape_str(t.sizes()),
             " tensor on ", t.device().str(), " for the compiled region ", region_, "'s saved ", dtype_name(m.dtype),
             " ", shape_str(m.sizes), " tensor on ", m.device.str(), "; it must give back what pack received");
    unpacked.push_back(std::move(t));
  }
  const std::vector<Tensor>& kept = packed_saved.empty() ? saved : unpacked;
  std::vector<Tensor> in;
  in.reserve(kept.size() + tangent_metas.size());
  for (auto& s : kept) in.push_back(ops::contiguous(s));
  in.resize(kept.size() + tangent_metas.size());
  std::vector<bool> tangent_given(tangent_metas.size(), false);
  for (size_t o = 0; o < tangent_of_output.size(); ++o) {
    int k = tangent_of_output[o];
    if (k < 0) continue;
    Tensor g = o < grad_outputs.size() ? grad_outputs[o] : Tensor();
    const TensorMeta& m = tangent_metas[static_cast<size_t>(k)];
    if (g.defined()) tangent_given[static_cast<size_t>(k)] = true;
    if (!g.defined()) g = zeros_on(m.sizes, m.dtype, m.device);
    else if (g.dtype() != m.dtype) g = ops::to_dtype(g, m.dtype);
    in[kept.size() + static_cast<size_t>(k)] = ops::contiguous(g);
  }
  std::vector<Tensor> r = backward_(in);
  std::vector<Tensor> grads(next_edges.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    int k = i < grad_of_input.size() ? grad_of_input[i] : -1;
    if (k < 0 || !next_edges[i].fn) continue;
    if (i < tangents_of_input.size() && !tangents_of_input[i].empty() &&
        std::none_of(tangents_of_input[i].begin(), tangents_of_input[i].end(),
                     [&](int t) { return tangent_given[static_cast<size_t>(t)]; }))
      continue;  // not reached in eager: no gradient (None), not zeros
    grads[i] = r.at(static_cast<size_t>(k));
  }
  return grads;
}

void CompiledRegionNode::check_observed(const std::vector<Tensor>& grad_outputs, const std::vector<uint32_t>& captured) {
  if (downstream_of_output.empty()) return;
  auto shape_of = [&](size_t o) -> std::string {
    const int k = o < tangent_of_output.size() ? tangent_of_output[o] : -1;
    return k >= 0 ? shape_str(tangent_metas[static_cast<size_t>(k)].sizes) : std::string("?");
  };
  auto check = [&](uint32_t o, const char* how) {
    if (o >= downstream_of_output.size()) return;
    for (int k : downstream_of_output[o])
      TP_CHECK(static_cast<size_t>(k) >= grad_outputs.size() || !grad_outputs[static_cast<size_t>(k)].defined(),
               Error, "the gradient of a result of the compiled region ", region_, " (shape ", shape_of(o),
               ") is observed (", how, "), but another result of the same call (shape ",
               shape_of(static_cast<size_t>(k)), ") is computed from it inside the region and got a gradient too: "
               "the compiled backward takes that gradient to the inputs without passing through the first result, "
               "so what is observed would miss it (eager includes it). Compute the second result from the first "
               "after the compiled call, observe the gradient of a tensor outside the compiled function, or run "
               "the function without tp.compile");
  };
  for (const auto& [o, h] : pre_hooks) check(o, "a hook registered on it");
  for (const auto& [o, w] : retained)
    if (!w.expired()) check(o, "retain_grad()");
  for (uint32_t o : captured) check(o, "autograd.grad with respect to it");
}

void CompiledRegionNode::release_saved() {
  saved.clear();
  packed_saved.clear();
  watched_results.clear();
  released_ = true;
}

}  // namespace tp::aot
