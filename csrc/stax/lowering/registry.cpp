#include "stax/lowering/registry.h"

#include <mutex>

#include "stax/lowering/extern.h"
#include "stax/lowering/families.h"

namespace tp::stax {

namespace {

struct Registry {
  std::mutex mu;
  LoweringTable rules;
  LoweringTable builtin;  // as registered at start-up, for restore
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: rules may run during static destruction
    register_pointwise_lowerings(reg->builtin);
    register_view_lowerings(reg->builtin);
    register_reduction_lowerings(reg->builtin);
    register_factory_lowerings(reg->builtin);
    register_movement_lowerings(reg->builtin);
    register_indexing_lowerings(reg->builtin);
    register_window_lowerings(reg->builtin);
    register_random_lowerings(reg->builtin);
    register_norm_lowerings(reg->builtin);
    register_scatter_lowerings(reg->builtin);
    register_extern_lowerings(reg->builtin);
    reg->rules = reg->builtin;
    return reg;
  }();
  return *r;
}

}  // namespace

void register_lowering(const std::string& op, LoweringFn fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.rules[op] = std::move(fn);
}

LoweringFn find_lowering(const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.rules.find(op);
  return it == r.rules.end() ? LoweringFn() : it->second;
}

void unregister_lowering(const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.rules.erase(op);
}

void restore_builtin_lowering(const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.builtin.find(op);
  if (it == r.builtin.end()) r.rules.erase(op);
  else r.rules[op] = it->second;
}

}  // namespace tp::stax
