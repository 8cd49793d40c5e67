// Launch-configuration search (Section 9.6), device-neutral: a space of named
// integer parameters, each with its candidate values, explored by coordinate
// descent from the default point plus a few random points, under a budget of
// evaluations and seconds. The cost of a point comes from a callback (on a
// GPU: the region's kernels timed with CUDA events); a callback that throws
// marks the point invalid and the search goes on without it. Knows nothing of
// CUDA: the space and the callback are the caller's (cuda_launch_space.h).
//
// The order of the work, all of it cut short when the budget runs out:
//  1. the default point;
//  2. coordinate descent from it: for each parameter in turn, every other
//     value with the rest held, moving to the best when it gains; sweeps
//     repeat until a whole sweep moves nowhere;
//  3. `random_points` points drawn uniformly (seeded: the same seed draws the
//     same points), which reach basins a one-parameter move cannot (two
//     parameters that only pay off together);
//  4. if a random point beat the descent's result, descent again from it.
// A point is evaluated at most once (costs are remembered). A move, and the
// final choice, needs a gain of at least `min_gain` (relative) over the
// incumbent, so measurement noise keeps the default.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tp::stax {

struct SearchParam {
  std::string name;             // [A-Za-z0-9_], unique in its space
  std::vector<int64_t> values;  // candidates, distinct
  int default_index = 0;        // values[default_index] is the default point's value
};

// One value per parameter of the space, in the space's order.
using SearchPoint = std::vector<int64_t>;

struct SearchSpace {
  std::vector<SearchParam> params;
  SearchPoint default_point() const;
  // "name=value name=value" (the on-disk form of a tuning result).
  std::string describe(const SearchPoint& p) const;
  // The inverse of describe: nullopt unless every parameter appears once with
  // one of its candidate values and nothing else does.
  std::optional<SearchPoint> parse(const std::string& text) const;
  // Throws std::invalid_argument for an empty parameter, repeated names or
  // values, a default index out of range, or a bad name.
  void validate() const;
  // Points in the full product (saturating at INT64_MAX).
  int64_t size() const;
};

struct SearchOptions {
  int max_evaluations = 64;  // cost calls, invalid points included
  double max_seconds = 60;   // wall time from the start of the search
  int random_points = 8;
  uint64_t seed = 0;
  double min_gain = 0;       // a move needs cost < incumbent * (1 - min_gain)
  // Seconds on some monotonic clock (default: steady_clock); tests pass a fake.
  std::function<double()> clock;
};

struct SearchResult {
  SearchPoint best;          // the default point when nothing valid beat it
  double best_cost = std::numeric_limits<double>::infinity();
  double default_cost = std::numeric_limits<double>::infinity();  // inf: the default point was invalid
  bool found = false;        // some evaluated point was valid
  int evaluated = 0;         // cost calls made
  int invalid = 0;           // of which threw
  bool budget_exhausted = false;  // stopped by max_evaluations / max_seconds
};

// cost(point) > 0, smaller is better; throwing std::exception: invalid point.
using SearchCost = std::function<double(const SearchPoint&)>;

SearchResult launch_search(const SearchSpace& space, const SearchCost& cost, const SearchOptions& options);

}  // namespace tp::stax
