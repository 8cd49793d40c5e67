// TP_LOGS=region_times: where a compiled CPU region's time goes. A region is
// one generated entry function that runs its kernels in order and calls back
// for extern steps (GEMMs, sorts, ...). With the topic on, the printer puts a
// timing callback after every kernel (a different source, so a different
// cache entry) and the backend times each extern call, so every call of a
// region is cut into rows: each generated kernel by name, each extern call by
// operator, and whatever code runs between them. At exit the process prints,
// per region, each row's mean time per call, heaviest first, and the totals
// (generated code against externs). perf cannot name the generated kernels
// (they live in anonymous mappings); this answers "how much of this training
// step is BLAS, and which kernel is the rest".
#pragma once
#include <string>

namespace tp::stax::region_times {

// Whether TP_LOGS names region_times (read once).
bool enabled();
// Monotonic seconds.
double now();
// One row of one call: `seconds` spent in `label` ("kernel <name>", "extern 3:
// matmul", ...), keyed by `key` within the region; `is_extern` sorts it into the
// externs' total.
void record(const void* region, const std::string& key, const std::string& label, double seconds, bool is_extern);
// A call of `region` ended (the per-call means divide by this count).
void end_call(const void* region);
// The table (also printed to stderr at exit when enabled); empty when nothing was recorded.
std::string report();

}  // namespace tp::stax::region_times
