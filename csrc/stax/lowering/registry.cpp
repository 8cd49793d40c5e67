#include "stax/lowering/registry.h"

#include <mutex>
#include <set>

#include "stax/lowering/extern.h"
#include "stax/lowering/families.h"

namespace tp::stax {

namespace {

struct Registry {
  std::mutex mu;
  LoweringTable rules;
  LoweringTable builtin;  // as registered at start-up, for restore
  std::set<std::string> symbolic;  // rules that handle symbolic shapes
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
    // Whole families whose every rule handles symbolic sizes, plus single rules.
    LoweringTable sym;
    register_pointwise_lowerings(sym);
    register_view_lowerings(sym);
    register_factory_lowerings(sym);
    register_mean_lowerings(sym);
    // var/std: Welford's rules (reductions.cpp) for static sizes, the two-pass
    // rules of means.cpp (element count read at run time) for symbolic ones
    // and for CUDA regions (the CUDA printer has no Welford node) and 16-bit
    // floats (the C++ printer's Welford nests are float32/float64 only).
    LoweringTable welford_var;
    for (const char* op : {"var", "var.dim", "var.unbiased", "std", "std.dim", "std.unbiased"})
      welford_var[op] = reg->builtin.at(op);
    register_mean_lowerings(reg->builtin);
    for (auto& [op, w] : welford_var) {
      LoweringFn m = reg->builtin.at(op);
      reg->builtin[op] = [w, m](LoweringContext& c) {
        const DType t = c.node().meta.dtype;
        return c.symbolic() || c.region().cuda || t == DType::Float16 || t == DType::BFloat16 ? m(c) : w(c);
      };
    }
    for (auto& [name, fn] : sym) reg->symbolic.insert(name);
    for (const char* op : {"sum", "amax", "amin", "max", "min", "any", "all", "prod", "argmax", "argmin", "max.dim", "min.dim",
                           "cumsum", "cumprod", "mm", "bmm", "matmul", "addmm", "baddbmm", "cat",
                           "index_select", "gather", "embedding", "index", "flip", "roll", "repeat", "tril", "triu",
                           "layer_norm", "native_layer_norm"})
      reg->symbolic.insert(op);
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

bool handles_symbolic_shapes(const std::string& op) { return registry().symbolic.count(op) > 0; }

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
