#include "stax/backend/region_times.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "core/logs.h"

namespace tp::stax::region_times {
namespace {

struct Segment {
  std::string op;  // empty: generated code only
  double gen = 0, ext = 0;
  long calls = 0;
};
struct Region {
  int order = 0;  // first-call order: regions print as #1, #2, ...
  long calls = 0;  // calls of the region (counted at its last segment)
  std::map<int, Segment> segments;
};

struct Table {
  std::mutex mu;
  std::map<const void*, Region> regions;
  ~Table() {
    if (!regions.empty()) std::fputs(render().c_str(), stderr);
  }
  std::string render() {
    std::vector<std::pair<int, const Region*>> order;
    for (auto& [key, r] : regions) order.push_back({r.order, &r});
    std::sort(order.begin(), order.end());
    std::string out = "[tp.compile] region_times (mean ms per call):\n";
    char line[256];
    for (auto& [n, r] : order) {
      double gen = 0, ext = 0;
      const double calls = static_cast<double>(std::max(1L, r->calls));
      std::vector<std::pair<double, std::string>> rows;
      for (auto& [k, s] : r->segments) {
        gen += s.gen;
        ext += s.ext;
        if (s.gen > 0) {
          if (k < 0)
            std::snprintf(line, sizeof line, "    %9.3f  generated code after the last extern\n", s.gen / calls * 1e3);
          else
            std::snprintf(line, sizeof line, "    %9.3f  generated code before extern %d\n", s.gen / calls * 1e3, k);
          rows.push_back({s.gen, line});
        }
        if (!s.op.empty()) {
          std::snprintf(line, sizeof line, "    %9.3f  extern %d: %s\n", s.ext / calls * 1e3, k, s.op.c_str());
          rows.push_back({s.ext, line});
        }
      }
      std::snprintf(line, sizeof line, "  region #%d: %ld calls, %.3f ms: generated code %.3f, externs %.3f\n", n,
                    r->calls, (gen + ext) / calls * 1e3, gen / calls * 1e3, ext / calls * 1e3);
      out += line;
      std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first > b.first; });
      for (auto& row : rows) out += row.second;
    }
    return out;
  }
};
Table& table() {
  static Table t;
  return t;
}

}  // namespace

bool enabled() {
  static const bool on = log_enabled("region_times");
  return on;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void record(const void* region, int segment, const std::string& op, double gen_s, double ext_s) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto [it, fresh] = t.regions.try_emplace(region);
  if (fresh) it->second.order = static_cast<int>(t.regions.size());
  Segment& s = it->second.segments[segment];
  s.op = op;
  s.gen += gen_s;
  s.ext += ext_s;
  ++s.calls;
  if (segment < 0) ++it->second.calls;
}

std::string report() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.regions.empty() ? std::string() : t.render();
}

}  // namespace tp::stax::region_times
