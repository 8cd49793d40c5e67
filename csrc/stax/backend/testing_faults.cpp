#include "stax/backend/testing_faults.h"

#include <mutex>
#include <vector>

#include "core/error.h"

namespace tp::stax::testing {
namespace {
struct Fault {
  std::string kind, op;
};
std::mutex g_mutex;
std::vector<Fault>& faults() {
  static std::vector<Fault> f;
  return f;
}
std::vector<Fault> planted(const char* kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Fault> out;
  for (auto& f : faults())
    if (f.kind == kind) out.push_back(f);
  return out;
}
// An origin is "op" or "op1, op2, ..." (the graph operators a node came from).
bool names_op(const std::string& origin, const std::string& op) {
  size_t start = 0;
  while (start <= origin.size()) {
    size_t end = origin.find(", ", start);
    if (origin.substr(start, end == std::string::npos ? std::string::npos : end - start) == op) return true;
    if (end == std::string::npos) break;
    start = end + 2;
  }
  return false;
}
// (After the IR rebuild on main, the operator is spelled ir::CallOp::Add.)
ir::Expr plus_one(const ir::Expr& e) {
  if (!is_floating(e->dtype)) return e;
  return ir::call(ir::CallOp::Add, {e, ir::constant(Scalar(1.0), e->dtype)}, e->dtype);
}
}  // namespace

void plant_fault(const std::string& kind, const std::string& op) {
  TP_CHECK(kind == "lowering" || kind == "kernel" || kind == "fusion" || kind == "cuda_symbolic", ValueError,
           "_testing_plant_stax_fault: unknown kind '", kind,
           "' (expected 'lowering', 'kernel', 'fusion' or 'cuda_symbolic')");
  std::lock_guard<std::mutex> lock(g_mutex);
  faults().push_back({kind, op});
}

void clear_faults() {
  std::lock_guard<std::mutex> lock(g_mutex);
  faults().clear();
}

bool refuses_symbolic_cuda() { return !planted("cuda_symbolic").empty(); }

void apply_program_faults(ir::LoopProgram& program) {
  for (const Fault& f : planted("lowering"))
    for (auto& n : program.nodes)
      if (names_op(n.origin, f.op)) n.body = plus_one(n.body);
}

void apply_schedule_faults(const ir::LoopProgram& program, Schedule& schedule) {
  for (const Fault& f : planted("kernel"))
    for (auto& k : schedule.kernels)
      for (auto& nest : k.nests)
        if (names_op(program.nodes[nest.node].origin, f.op)) nest.body = plus_one(nest.body);
  if (!planted("fusion").empty())
    for (auto& k : schedule.kernels)
      if (k.nests.size() > 1) k.nests.back().body = plus_one(k.nests.back().body);
}

}  // namespace tp::stax::testing
