#include "aot/max_flow.h"

#include <algorithm>
#include <queue>

namespace tp::aot {

MaxFlow::MaxFlow(int num_vertices) : adj_(static_cast<size_t>(num_vertices)) {}

int MaxFlow::add_vertex() {
  adj_.emplace_back();
  return static_cast<int>(adj_.size()) - 1;
}

void MaxFlow::add_edge(int from, int to, int64_t capacity) {
  adj_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({to, std::min(capacity, kInfinite)});
  adj_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({from, 0});
}

// BFS levels over edges with residual capacity; true if the sink is reachable.
bool MaxFlow::levels(int s, int t) {
  level_.assign(adj_.size(), -1);
  std::queue<int> q;
  level_[static_cast<size_t>(s)] = 0;
  q.push(s);
  while (!q.empty()) {
    int v = q.front();
    q.pop();
    for (int id : adj_[static_cast<size_t>(v)]) {
      const Edge& e = edges_[static_cast<size_t>(id)];
      if (e.cap > 0 && level_[static_cast<size_t>(e.to)] < 0) {
        level_[static_cast<size_t>(e.to)] = level_[static_cast<size_t>(v)] + 1;
        q.push(e.to);
      }
    }
  }
  return level_[static_cast<size_t>(t)] >= 0;
}

// One blocking-flow augmentation along strictly increasing levels (depth is
// bounded by the number of graph nodes; regions are far below stack limits).
int64_t MaxFlow::push(int v, int t, int64_t limit) {
  if (v == t) return limit;
  auto& it = next_[static_cast<size_t>(v)];
  const auto& out = adj_[static_cast<size_t>(v)];
  for (; it < static_cast<int>(out.size()); ++it) {
    int id = out[static_cast<size_t>(it)];
    Edge& e = edges_[static_cast<size_t>(id)];
    if (e.cap <= 0 || level_[static_cast<size_t>(e.to)] != level_[static_cast<size_t>(v)] + 1) continue;
    int64_t f = push(e.to, t, std::min(limit, e.cap));
    if (f > 0) {
      e.cap -= f;
      edges_[static_cast<size_t>(id ^ 1)].cap += f;
      return f;
    }
  }
  return 0;
}

int64_t MaxFlow::solve(int s, int t) {
  int64_t flow = 0;
  while (levels(s, t)) {
    next_.assign(adj_.size(), 0);
    while (int64_t f = push(s, t, kInfinite)) {
      flow += f;
      if (flow >= kInfinite) break;  // no finite cut: the caller reports it
    }
    if (flow >= kInfinite) break;
  }
  // Source side: reachable in the residual graph (the BFS of levels() marks it).
  levels(s, t);
  side_.assign(adj_.size(), false);
  for (size_t v = 0; v < adj_.size(); ++v) side_[v] = level_[v] >= 0;
  return flow;
}

}  // namespace tp::aot
