// TP_LOGS=region_times: where a compiled CPU region's time goes. A region is
// one generated entry function that runs its kernels in order and calls back
// for extern steps (GEMMs, sorts, ...); each call is cut at those callbacks
// into segments: the generated code run before extern k, extern k itself
// (named by its operator), and the generated code after the last one. At exit
// the process prints, per region, each segment's mean time per call and the
// totals (generated code against externs), heaviest first. It answers "how
// much of this training step is BLAS" without a profiler that cannot name the
// generated kernels (they live in anonymous mappings).
#pragma once
#include <string>

namespace tp::stax::region_times {

// Whether TP_LOGS names region_times (read once).
bool enabled();
// Monotonic seconds.
double now();
// One segment of one call: generated code for gen_s seconds, then (if op is
// non-empty) extern `op` for ext_s seconds. `segment` orders them within the
// region (the extern's index; -1 for the code after the last extern).
void record(const void* region, int segment, const std::string& op, double gen_s, double ext_s);
// The table (also printed to stderr at exit when enabled); empty when nothing was recorded.
std::string report();

}  // namespace tp::stax::region_times
