#pragma once
#include <vector>

#include "core/tensor.h"

namespace tp::autograd {

// Installs the recorder into the dispatcher (idempotent).
void install();

// Backpropagates from `roots` (with `grad_roots`; undefined = ones for scalars).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph);
// Returns d(roots)/d(inputs) without touching .grad (tp.autograd.grad).
std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_roots, bool retain_graph, bool allow_unused);

void set_requires_grad(const Tensor& t, bool requires_grad);  // leaves only
Tensor detach(const Tensor& t);

}  // namespace tp::autograd
