// Deterministic algorithms (tp.use_deterministic_algorithms): while on,
// operators whose default kernel combines floats in an order that varies
// from run to run (atomic additions on CUDA) take a form that gives the same
// bits on every run, and an operator that has no such form raises
// RuntimeError naming itself (or warns, with warn_only). The CPU kernels
// already reduce sequentially in index order and ignore the mode.
#pragma once
#include <string>

namespace tp {

void set_deterministic_algorithms(bool on, bool warn_only);
bool deterministic_algorithms();
bool deterministic_algorithms_warn_only();

// Called by an operator about to run a kernel that is not deterministic:
// nothing when the mode is off; else raises Error (RuntimeError) naming
// `what`, or only warns when warn_only is set.
void alert_not_deterministic(const std::string& what);

}  // namespace tp
