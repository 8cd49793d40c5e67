// Maximum flow / minimum s-t cut (Dinic's algorithm): the partitioner's solver
// for the rematerialization network (Proposition 5.1: the cheapest set of saved
// values is a minimum cut). Capacities are bytes; kInfinite marks edges no cut
// may cross.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tp::aot {

class MaxFlow {
 public:
  static constexpr int64_t kInfinite = INT64_MAX / 4;
  explicit MaxFlow(int num_vertices);
  int add_vertex();
  void add_edge(int from, int to, int64_t capacity);
  // Runs Dinic's algorithm; returns the flow value (= the minimum cut's capacity).
  int64_t solve(int source, int sink);
  // After solve(): whether v is reachable from the source in the residual graph
  // (the source side of the minimum cut closest to the source).
  bool on_source_side(int v) const { return side_[static_cast<size_t>(v)]; }

 private:
  struct Edge {
    int to;
    int64_t cap;  // residual capacity
  };
  bool levels(int s, int t);
  int64_t push(int v, int t, int64_t limit);
  std::vector<Edge> edges_;           // edge 2k and its reverse 2k+1
  std::vector<std::vector<int>> adj_; // edge ids per vertex
  std::vector<int> level_, next_;
  std::vector<bool> side_;
};

}  // namespace tp::aot
