#include "autograd/saved_hooks.h"

#include <vector>

#include "core/error.h"

namespace tp::autograd {
namespace {
thread_local std::vector<std::shared_ptr<SavedHooks>> t_hooks;
}

void push_saved_hooks(std::shared_ptr<SavedHooks> hooks) { t_hooks.push_back(std::move(hooks)); }

void pop_saved_hooks() {
  TP_CHECK(!t_hooks.empty(), Error, "saved_tensors_hooks: no hooks to remove on this thread");
  t_hooks.pop_back();
}

SavedHooks* current_saved_hooks() { return t_hooks.empty() ? nullptr : t_hooks.back().get(); }

}  // namespace tp::autograd
