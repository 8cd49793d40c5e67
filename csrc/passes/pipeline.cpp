// The default pass pipeline: the passes iterated to a fixed point, by name, so a
// user (or the bisection tool) can turn any of them off.
#include <mutex>

#include "passes/passes.h"

namespace tp::passes {
using namespace tp::graph;

namespace {
struct TestingPass {
  std::string name;
  PassFn fn;
  bool stax_only = true;
};
std::mutex g_mutex;
std::vector<TestingPass>& testing_passes() {
  static std::vector<TestingPass> p;
  return p;
}
const char* const kBuiltin[] = {"decompose", "simplify_algebra", "transpose_products", "cse", "dce"};
}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> names(std::begin(kBuiltin), std::end(kBuiltin));
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& p : testing_passes()) names.push_back(p.name);
  return names;
}

std::set<std::string> parse_pass_list(const std::string& text) {
  std::set<std::string> out;
  std::vector<std::string> known = pass_names();
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    bool ok = false;
    for (auto& k : known) ok = ok || k == cur;
    if (!ok) {
      std::string list;
      for (auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw ValueError(str("tp.compile: options['disable_passes'] names an unknown pass '", cur, "' (known: ", list, ")"));
    }
    out.insert(cur);
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == '[' || c == ']' || c == '(' || c == ')' || c == '\'' || c == '"' || c == ' ') flush();
    else cur += c;
  }
  flush();
  return out;
}

void register_testing_pass(const std::string& name, PassFn fn, bool stax_only) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& p : testing_passes())
    if (p.name == name) {
      p.fn = std::move(fn);
      p.stax_only = stax_only;
      return;
    }
  testing_passes().push_back({name, std::move(fn), stax_only});
}

void clear_testing_passes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  testing_passes().clear();
}

void run_default_passes(Graph& g, const PassOptions& options) {
  auto on = [&](const char* name) { return !options.disabled.count(name); };
  std::vector<TestingPass> extra;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto& p : testing_passes())
      if ((options.decompose || !p.stax_only) && !options.disabled.count(p.name)) extra.push_back(p);
  }
  // Each pass strictly shrinks the graph or removes a composite node, so the
  // loop terminates (a well-founded measure: #composites, then #nodes).
  for (int iter = 0; iter < 100; ++iter) {
    bool changed = false;
    if (options.decompose && on("decompose")) changed |= decompose_composites(g, options.keep_whole);
    if (on("simplify_algebra")) changed |= simplify_algebra(g);
    if (options.decompose && on("transpose_products")) changed |= transpose_products(g);
    if (on("cse")) changed |= eliminate_common_subexpressions(g);
    if (on("dce")) changed |= eliminate_dead_code(g);
    for (auto& p : extra) changed |= p.fn(g);
    if (!changed) break;
  }
  g.lint();
}

}  // namespace tp::passes
