// The partitioner's max-flow solver against hand-computed cuts.
#include <gtest/gtest.h>

#include "aot/max_flow.h"

using tp::aot::MaxFlow;

TEST(MaxFlow, ClassicNetworkHasFlow23) {
  // CLRS Figure 26.1: max flow 23.
  MaxFlow f(6);
  f.add_edge(0, 1, 16);
  f.add_edge(0, 2, 13);
  f.add_edge(1, 3, 12);
  f.add_edge(2, 1, 4);
  f.add_edge(2, 4, 14);
  f.add_edge(3, 2, 9);
  f.add_edge(3, 5, 20);
  f.add_edge(4, 3, 7);
  f.add_edge(4, 5, 4);
  EXPECT_EQ(f.solve(0, 5), 23);
  EXPECT_TRUE(f.on_source_side(0));
  EXPECT_FALSE(f.on_source_side(5));
}

TEST(MaxFlow, CutClosestToTheSourceOnTies) {
  // s -inf-> a -4-> b -4-> t: both edges are minimum cuts; the residual
  // reachability picks a->b (the value nearest the inputs: Example 5.1's h).
  MaxFlow f(4);
  f.add_edge(0, 1, MaxFlow::kInfinite);
  f.add_edge(1, 2, 4);
  f.add_edge(2, 3, 4);
  EXPECT_EQ(f.solve(0, 3), 4);
  EXPECT_TRUE(f.on_source_side(1));
  EXPECT_FALSE(f.on_source_side(2));
}

TEST(MaxFlow, InfiniteWhenNoFiniteCutExists) {
  MaxFlow f(2);
  f.add_edge(0, 1, MaxFlow::kInfinite);
  EXPECT_GE(f.solve(0, 1), MaxFlow::kInfinite);
}

TEST(MaxFlow, ParallelPathsAdd) {
  MaxFlow f(2);
  int a = f.add_vertex(), b = f.add_vertex();
  f.add_edge(0, a, 3);
  f.add_edge(a, 1, 5);
  f.add_edge(0, b, 7);
  f.add_edge(b, 1, 2);
  EXPECT_EQ(f.solve(0, 1), 5);
  EXPECT_TRUE(f.on_source_side(b));   // b->t saturated, s->b not
  EXPECT_FALSE(f.on_source_side(a));  // s->a saturated
}
