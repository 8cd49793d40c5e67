#include "stax/backend/unit_split.h"

#include <algorithm>

namespace tp::stax {
namespace {

const char kEntryMarker[] = "\nextern \"C\" void tp_entry(";
const char kHidden[] = "__attribute__((visibility(\"hidden\"))) void ";

struct KernelText {
  std::string name;
  size_t begin = 0, end = 0;  // [begin, end) of the source: comments + definition
  size_t def = 0;             // where "static void <name>(" starts
};

}  // namespace

std::vector<std::string> split_translation_units(const std::string& source, const std::vector<std::string>& kernel_names,
                                                 int max_units, size_t min_unit_bytes) {
  const std::vector<std::string> whole{source};
  if (max_units <= 1 || kernel_names.size() < 2) return whole;
  const size_t entry = source.find(kEntryMarker);
  if (entry == std::string::npos || source.find(kEntryMarker, entry + 1) != std::string::npos) return whole;
  const size_t entry_begin = entry + 1;

  // Locate every kernel, in order, before the entry.
  std::vector<KernelText> kernels;
  size_t from = 0;
  for (const std::string& name : kernel_names) {
    const size_t at = source.find("\n// " + name + ": ", from);
    if (at == std::string::npos || at >= entry) return whole;
    KernelText k;
    k.name = name;
    k.begin = at + 1;
    k.def = source.find("\nstatic void " + name + "(", k.begin);
    if (k.def == std::string::npos || k.def >= entry) return whole;
    k.def += 1;
    if (!kernels.empty()) {
      if (kernels.back().def >= k.begin) return whole;  // this kernel's comment precedes the previous definition
      kernels.back().end = k.begin;
    }
    kernels.push_back(k);
    from = k.begin;
  }
  kernels.back().end = entry_begin;
  const size_t prelude_end = kernels.front().begin;
  const size_t kernel_bytes = entry_begin - prelude_end;

  size_t units = std::min(static_cast<size_t>(max_units), kernels.size());
  if (min_unit_bytes > 0) units = std::min(units, kernel_bytes / min_unit_bytes);
  if (units <= 1) return whole;

  // Contiguous groups of about equal text: a kernel starts a new group when
  // more than half of it would lie past the current group's share of the
  // bytes still to place (or when the remaining kernels are just enough to
  // give every remaining group one).
  std::vector<std::vector<size_t>> groups(1);
  size_t group_bytes = 0, placed = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const size_t size = kernels[i].end - kernels[i].begin;
    const size_t left_kernels = kernels.size() - i, left_groups = units - groups.size();
    const size_t share = (kernel_bytes - placed + group_bytes) / (left_groups + 1);
    if (!groups.back().empty() && left_groups > 0 && (group_bytes + size / 2 > share || left_kernels <= left_groups)) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().push_back(i);
    group_bytes += size;
    placed += size;
  }

  const std::string prelude = source.substr(0, prelude_end);
  std::vector<std::string> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string unit = "// Stax translation unit " + std::to_string(g + 1) + " of " + std::to_string(groups.size()) + "\n";
    unit += prelude;
    for (size_t i : groups[g]) {
      const KernelText& k = kernels[i];
      unit.append(source, k.begin, k.def - k.begin);
      unit += kHidden;  // replaces "static void "
      unit.append(source, k.def + 12, k.end - (k.def + 12));
    }
    if (g + 1 == groups.size()) {
      // Declarations of the kernels defined in the other units: the
      // definition's first line up to its ") {".
      for (size_t h = 0; h + 1 < groups.size(); ++h)
        for (size_t i : groups[h]) {
          const KernelText& k = kernels[i];
          const size_t close = source.find(") {\n", k.def);
          if (close == std::string::npos || close >= k.end) return whole;
          unit += kHidden;
          unit.append(source, k.def + 12, close + 1 - (k.def + 12));
          unit += ";\n";
        }
      unit.append(source, entry_begin, std::string::npos);
    }
    out.push_back(std::move(unit));
  }
  return out;
}

}  // namespace tp::stax
