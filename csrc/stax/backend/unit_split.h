// Splitting a printed C++ region into several translation units (Section
// 11.2: "large regions may be split into several TUs so that the pool has
// work"). The C++ printer writes one unit: prelude, then one `static void
// <name>(...)` per kernel (each after a `// <name>: ` comment), then the
// `extern "C" tp_entry` calling them in order. A split keeps that text: each
// unit is the prelude plus a contiguous run of kernels (made hidden-visibility
// functions with external linkage, so the entry can call them from another
// unit of the same library); the last unit also holds the entry, after
// declarations of the other units' kernels. The units are compiled to objects
// concurrently and linked into one library (runtime::CodeCache::load_or_build_units),
// so the dlopen path and the entry point are unchanged.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tp::stax {

// Units of `source` (printed by CppPrinter, kernels named `kernel_names` in
// order): at most `max_units`, none with fewer than `min_unit_bytes` bytes of
// kernel text (0: any size), kernels grouped in order by size. One unit,
// {source} itself, when max_units <= 1, when the kernels are too small to
// split, or when the text does not have the printer's shape (never a wrong split).
std::vector<std::string> split_translation_units(const std::string& source, const std::vector<std::string>& kernel_names,
                                                 int max_units, size_t min_unit_bytes);

// The default ("auto"): units of about this much kernel text (regions from
// twice this size are split), at most kAutoMaxUnits. Not capped at the number
// of compile workers: a worker helping a region takes one unit at a time and
// goes back to the queue (run_parallel), so smaller units let a build
// submitted meanwhile (a training step's forward, waited for first) start
// sooner. Each unit costs a compiler start and a prelude parse (~30 ms).
constexpr size_t kAutoUnitBytes = 24 * 1024;
constexpr int kAutoMaxUnits = 8;

}  // namespace tp::stax
