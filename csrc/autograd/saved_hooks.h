// Saved-tensor hooks (tp.autograd.graph.saved_tensors_hooks, save_on_cpu):
// while hooks are installed on a thread, every tensor autograd saves for a
// backward (an operator's SavedTensor, a compiled region's activations) is
// handed to pack() and only the packed value is kept; the backward calls
// unpack() on it. The Python binding implements the two with the user's
// functions. Hooks nest: the innermost installed pair applies.
#pragma once
#include <memory>

#include "core/tensor.h"

namespace tp::autograd {

class PackedSaved {
 public:
  virtual ~PackedSaved() = default;
  virtual Tensor unpack() const = 0;
};

class SavedHooks {
 public:
  virtual ~SavedHooks() = default;
  virtual std::shared_ptr<PackedSaved> pack(const Tensor& t) = 0;
};

void push_saved_hooks(std::shared_ptr<SavedHooks> hooks);
void pop_saved_hooks();
// The innermost hooks of this thread, or null.
SavedHooks* current_saved_hooks();

}  // namespace tp::autograd
