// parallel_for over [begin, end) in chunks of at least `grain` iterations.
// Small ranges run inline on the calling thread: entering an OpenMP region
// costs microseconds, which would dominate an 8-element operator.
#pragma once
#include <cstdint>

namespace tp {

int num_threads();
void set_num_threads(int n);
bool in_parallel_region();

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& body) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int nt = num_threads();
  if (n <= grain || nt <= 1 || in_parallel_region()) {
    body(begin, end);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks > nt) chunks = nt;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = begin + n * c / chunks;
    int64_t e = begin + n * (c + 1) / chunks;
    body(b, e);
  }
}

// Elements per thread below which pointwise work stays on one thread.
constexpr int64_t kGrainSize = 32768;

}  // namespace tp
