#include "stax/runtime/region_times.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "core/logs.h"

namespace tp::stax::region_times {
namespace {

struct Row {
  std::string label;
  double seconds = 0;
  bool is_extern = false;
};
struct Region {
  int order = 0;   // first-call order: regions print as #1, #2, ...
  long calls = 0;  // ended calls
  std::map<std::string, Row> rows;
};

struct Table {
  std::mutex mu;
  std::map<const void*, Region> regions;
  ~Table() {
    if (!regions.empty()) std::fputs(render().c_str(), stderr);
  }
  std::string render() const {
    std::vector<const Region*> order;
    for (auto& [key, r] : regions) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->order < b->order; });
    std::string out = "[tp.compile] region_times (mean ms per call):\n";
    char line[320];
    for (const Region* r : order) {
      const double calls = static_cast<double>(std::max(1L, r->calls));
      double gen = 0, ext = 0;
      std::vector<const Row*> rows;
      for (auto& [k, row] : r->rows) {
        (row.is_extern ? ext : gen) += row.seconds;
        rows.push_back(&row);
      }
      std::snprintf(line, sizeof line, "  region #%d: %ld calls, %.3f ms: generated code %.3f, externs %.3f\n", r->order,
                    r->calls, (gen + ext) / calls * 1e3, gen / calls * 1e3, ext / calls * 1e3);
      out += line;
      std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
      for (const Row* row : rows) {
        if (row->seconds / calls < 1e-6) continue;  // glue between marks
        std::snprintf(line, sizeof line, "    %9.3f  %s\n", row->seconds / calls * 1e3, row->label.c_str());
        out += line;
      }
    }
    return out;
  }
};
Table& table() {
  static Table t;
  return t;
}
Region& region_of(Table& t, const void* region) {
  auto [it, fresh] = t.regions.try_emplace(region);
  if (fresh) it->second.order = static_cast<int>(t.regions.size());
  return it->second;
}

}  // namespace

bool enabled() {
  static const bool on = log_enabled("region_times");
  return on;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void record(const void* region, const std::string& key, const std::string& label, double seconds, bool is_extern) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  Row& row = region_of(t, region).rows[key];
  row.label = label;
  row.seconds += seconds;
  row.is_extern = is_extern;
}

void end_call(const void* region) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  ++region_of(t, region).calls;
}

std::string report() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.regions.empty() ? std::string() : t.render();
}

}  // namespace tp::stax::region_times
