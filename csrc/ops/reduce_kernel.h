// The eager reduction engine shared by the reduction operators (sum, prod,
// amax/amin, all/any, mean, ...): a policy says how values combine, the
// engine walks the layout.
//
// Strategy (after PyTorch): the input and an output view with stride 0 on the
// reduced dims are put through the TensorIterator's geometry (dims ordered by
// the input's strides, then coalesced). The innermost remaining dim then
// decides the loop:
//   - it is reduced ("inner" mode, e.g. sum(-1) of a row-major matrix): each
//     output reduces contiguous rows with kLanes independent accumulators that
//     GCC vectorizes, flushed every few thousand elements into a wider total
//     (segmented summation: fast and more accurate than one running sum);
//   - it is kept ("outer" mode, e.g. sum(0)): rows of the input are accumulated
//     into a block of output columns, again vectorized along the row.
// Both split the outputs over threads, or, when there are too few outputs,
// split the reduced range and merge per-thread partial results in order.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/kernel_util.h"
#include "ops/tensor_iterator.h"
#include "ops/vec_math.h"

namespace tp::reduce {

// ---------------------------------------------------------------------------
// Reduction policies: Acc accumulates a short run (vector lanes), Tot the whole
// reduction, Out is the stored result.
template <class In>
struct SumPolicy {
  using Out = std::conditional_t<std::is_same_v<In, bool>, int64_t, In>;
  // Integers wrap through uint64_t (signed overflow is undefined behaviour).
  using Acc = std::conditional_t<std::is_floating_point_v<In>, In, uint64_t>;
  using Tot = std::conditional_t<std::is_floating_point_v<In>, double, uint64_t>;
  static constexpr int kLanes = sizeof(Acc) == 4 ? 32 : 16;
  static Acc acc_identity() { return Acc(0); }
  static Tot identity() { return Tot(0); }
  static Acc step(Acc a, In v) { return a + static_cast<Acc>(v); }
  static Acc combine(Acc a, Acc b) { return a + b; }
  static Tot flush(Tot t, Acc a) { return t + static_cast<Tot>(a); }
  static Tot merge(Tot a, Tot b) { return a + b; }
  static Out finish(Tot t) { return static_cast<Out>(t); }
};

template <class In>
struct MaxPolicy {
  using Out = In;
  using Acc = In;
  using Tot = In;
  static constexpr int kLanes = sizeof(In) == 8 ? 16 : 32;
  static In acc_identity() {
    if constexpr (std::is_floating_point_v<In>) return -std::numeric_limits<In>::infinity();
    else return std::numeric_limits<In>::lowest();
  }
  static In identity() { return acc_identity(); }
  // A NaN, once seen, stays: `v > a` is false against a NaN accumulator.
  static In step(In a, In v) {
    if constexpr (std::is_same_v<In, bool>) return a | v;
    else return select(v > a || v != v, v, a);
  }
  // The hot loops use a plain compare-and-pick (one maxps) and keep NaNs in a
  // separate flag (see kNaNFlag below).
  static constexpr bool kNaNFlag = std::is_floating_point_v<In>;
  static In fast_step(In a, In v) { return a > v ? a : v; }
  static In combine(In a, In b) { return step(a, b); }
  static In flush(In t, In a) { return step(t, a); }
  static In merge(In a, In b) { return step(a, b); }
  static In finish(In t) { return t; }
};


// Minimum: MaxPolicy mirrored (NaN also sticks).
template <class In>
struct MinPolicy {
  using Out = In;
  using Acc = In;
  using Tot = In;
  static constexpr int kLanes = sizeof(In) == 8 ? 16 : 32;
  static In acc_identity() {
    if constexpr (std::is_floating_point_v<In>) return std::numeric_limits<In>::infinity();
    else return std::numeric_limits<In>::max();
  }
  static In identity() { return acc_identity(); }
  static In step(In a, In v) {
    if constexpr (std::is_same_v<In, bool>) return a & v;
    else return select(v < a || v != v, v, a);
  }
  static constexpr bool kNaNFlag = std::is_floating_point_v<In>;
  static In fast_step(In a, In v) { return a < v ? a : v; }
  static In combine(In a, In b) { return step(a, b); }
  static In flush(In t, In a) { return step(t, a); }
  static In merge(In a, In b) { return step(a, b); }
  static In finish(In t) { return t; }
};

// Product: floats multiply in double (a float partial product of a run could
// overflow or underflow where the whole product does not). Integers wrap
// through uint64_t like the sum.
template <class In>
struct ProdPolicy {
  using Out = std::conditional_t<std::is_same_v<In, bool>, int64_t, In>;
  using Acc = std::conditional_t<std::is_floating_point_v<In>, double, uint64_t>;
  using Tot = Acc;
  static constexpr int kLanes = 16;
  static Acc acc_identity() { return Acc(1); }
  static Tot identity() { return Tot(1); }
  static Acc step(Acc a, In v) { return a * static_cast<Acc>(v); }
  static Acc combine(Acc a, Acc b) { return a * b; }
  static Tot flush(Tot t, Acc a) { return t * static_cast<Tot>(a); }
  static Tot merge(Tot a, Tot b) { return a * b; }
  static Out finish(Tot t) { return static_cast<Out>(t); }
};

// Float max/min: a NaN-sticky select in the hot loop costs about three times
// a plain compare-and-pick, so policies with kNaNFlag run fast_step (which may
// drop a NaN) and OR a per-lane "saw a NaN" mask on the side.
template <class P>
constexpr bool nan_flag_of() {
  if constexpr (requires { P::kNaNFlag; }) return P::kNaNFlag;
  else return false;
}
template <class P>
constexpr bool nan_flag_v = nan_flag_of<P>();
template <class In>
using NaNMask = std::conditional_t<sizeof(In) == 4, int32_t, int64_t>;
template <class In>
inline NaNMask<In> nan_bits(In v) {
  return -static_cast<NaNMask<In>>(v != v);
}

// Reduces n contiguous elements at p.
template <class P, class In>
[[gnu::always_inline]] inline typename P::Tot reduce_contig(const In* p, int64_t n) {
  using Acc = typename P::Acc;
  using Tot = typename P::Tot;
  constexpr int L = P::kLanes;
  constexpr int64_t kBlock = 128 * L;  // elements between flushes into the total
  Tot tot = P::identity();
  int64_t i = 0;
  while (n - i >= L) {
    Acc acc[L];
    for (int j = 0; j < L; ++j) acc[j] = P::acc_identity();
    int64_t stop = i + std::min<int64_t>(kBlock, (n - i) / L * L);
    bool saw_nan = false;
    if constexpr (nan_flag_v<P>) {
      NaNMask<In> nan[L] = {};
      for (; i < stop; i += L)
        for (int j = 0; j < L; ++j) {
          acc[j] = P::fast_step(acc[j], p[i + j]);
          nan[j] |= nan_bits(p[i + j]);
        }
      NaNMask<In> any = 0;
      for (int j = 0; j < L; ++j) any |= nan[j];
      saw_nan = any != 0;
    } else {
      for (; i < stop; i += L)
        for (int j = 0; j < L; ++j) acc[j] = P::step(acc[j], p[i + j]);
    }
    for (int w = L / 2; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] = P::combine(acc[j], acc[j + w]);
    if constexpr (nan_flag_v<P>)
      if (saw_nan) acc[0] = std::numeric_limits<In>::quiet_NaN();
    tot = P::flush(tot, acc[0]);
  }
  for (; i < n; ++i) tot = P::flush(tot, P::step(P::acc_identity(), p[i]));
  return tot;
}

// The float32 sum/max/min rows (the hot ones: sum/mean/amax/softmax over the
// last dim) compiled once more for AVX2 and picked by the CPU at load time
// (reduce_kernel.cpp): at memory bandwidth the 4-lane SSE2 loop of max/min
// is still instruction-bound.
double contig_sum_f32(const float* p, int64_t n);
float contig_max_f32(const float* p, int64_t n);
float contig_min_f32(const float* p, int64_t n);

// Reduces n elements at p (element stride s).
template <class P, class In>
typename P::Tot reduce_row(const In* p, int64_t n, int64_t s) {
  if (s == 1) {
    if constexpr (std::is_same_v<P, SumPolicy<float>>) return contig_sum_f32(p, n);
    else if constexpr (std::is_same_v<P, MaxPolicy<float>>) return contig_max_f32(p, n);
    else if constexpr (std::is_same_v<P, MinPolicy<float>>) return contig_min_f32(p, n);
    else return reduce_contig<P>(p, n);
  }
  using Acc = typename P::Acc;
  using Tot = typename P::Tot;
  constexpr int64_t kBlock = 128 * P::kLanes;
  Tot tot = P::identity();
  int64_t i = 0;
  while (i < n) {
    Acc acc = P::acc_identity();
    int64_t stop = std::min(n, i + kBlock);
    for (; i < stop; ++i) acc = P::step(acc, p[i * s]);
    tot = P::flush(tot, acc);
  }
  return tot;
}

// Walks a set of dims (outermost first) with two element-stride sets.
struct DimWalker {
  int nd = 0;
  int64_t size[64], s0[64], s1[64], idx[64];
  int64_t off0 = 0, off1 = 0;
  void add(int64_t sz, int64_t a, int64_t b) {
    size[nd] = sz;
    s0[nd] = a;
    s1[nd] = b;
    ++nd;
  }
  int64_t count() const {
    int64_t c = 1;
    for (int d = 0; d < nd; ++d) c *= size[d];
    return c;
  }
  void start(int64_t linear) {
    off0 = off1 = 0;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = linear % size[d];
      linear /= size[d];
      off0 += idx[d] * s0[d];
      off1 += idx[d] * s1[d];
    }
  }
  void next() {
    for (int d = nd - 1; d >= 0; --d) {
      off0 += s0[d];
      off1 += s1[d];
      if (++idx[d] < size[d]) return;
      off0 -= size[d] * s0[d];
      off1 -= size[d] * s1[d];
      idx[d] = 0;
    }
  }
};

constexpr int64_t kMaxChunks = 256;

// Splits [0, total) into at most num_threads() (and kMaxChunks) chunks and runs body(chunk, b, e) in parallel.
template <class F>
int64_t split_range(int64_t total, const F& body) {
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>({num_threads(), kMaxChunks, total / kGrainSize}));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) body(c, total * c / chunks, total * (c + 1) / chunks);
  });
  return chunks;
}

// out[kept] = reduce(in) over the dims where mask is true. `out` is contiguous
// with the reduced shape (with or without keepdim).
template <class P, class In>
void reduce_kernel(const Tensor& in, const Tensor& out, const std::vector<bool>& mask) {
  using Out = typename P::Out;
  using Tot = typename P::Tot;
  const int64_t out_numel = out.numel();
  if (out_numel == 0) return;
  Out* o = out.data_as<Out>();
  if (in.numel() == 0) {
    for (int64_t i = 0; i < out_numel; ++i) o[i] = P::finish(P::identity());
    return;
  }
  // Byte strides of the output seen in the input's shape (0 on reduced dims).
  const int64_t nd_in = in.dim();
  Shape out_strides(nd_in, 0), in_strides(nd_in, 0);
  const bool keepdim = out.dim() == nd_in;
  for (int64_t d = 0, j = 0; d < nd_in; ++d) {
    in_strides[d] = in.strides()[d] * static_cast<int64_t>(sizeof(In));
    if (!mask[d]) out_strides[d] = out.strides()[keepdim ? d : j++] * static_cast<int64_t>(sizeof(Out));
    else if (keepdim) ++j;
  }
  TensorIterator it(in.sizes(), {out_strides, in_strides},
                    {static_cast<char*>(out.data()), static_cast<char*>(in.data())}, /*order_by=*/1);
  const int nd = it.ndim();
  const int64_t n = it.shape()[nd - 1];
  const int64_t in_s = it.stride(1, nd - 1) / static_cast<int64_t>(sizeof(In));
  const int64_t out_s = it.stride(0, nd - 1) / static_cast<int64_t>(sizeof(Out));
  const In* x = reinterpret_cast<const In*>(it.data(1));
  // Outer dims, split into kept (walked per output) and reduced (walked per output).
  DimWalker kept, red;
  for (int d = 0; d < nd - 1; ++d) {
    int64_t so = it.stride(0, d) / static_cast<int64_t>(sizeof(Out));
    int64_t si = it.stride(1, d) / static_cast<int64_t>(sizeof(In));
    if (so != 0) kept.add(it.shape()[d], si, so);
    else red.add(it.shape()[d], si, 0);
  }
  const int64_t K = kept.count(), R = red.count();
  const int nt = num_threads();

  if (out_s == 0) {
    // ---- inner mode: each output reduces R rows of n elements ----
    // Reduces the linear range [b, e) of (reduced row, element) for the output at in-offset `base`.
    auto partial = [&](int64_t base, int64_t b, int64_t e) {
      Tot tot = P::identity();
      DimWalker w = red;
      w.start(b / n);
      int64_t i = b % n, pos = b;
      while (pos < e) {
        int64_t len = std::min(n - i, e - pos);
        tot = P::merge(tot, reduce_row<P>(x + base + w.off0 + i * in_s, len, in_s));
        pos += len;
        i = 0;
        w.next();
      }
      return tot;
    };
    if (K >= 2 * nt || K * R * n < 2 * kGrainSize) {
      int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, R * n));
      parallel_for(0, K, grain, [&](int64_t b, int64_t e) {
        DimWalker w = kept;
        w.start(b);
        for (int64_t k = b; k < e; ++k, w.next()) o[w.off1] = P::finish(partial(w.off0, 0, R * n));
      });
    } else {
      DimWalker w = kept;
      w.start(0);
      for (int64_t k = 0; k < K; ++k, w.next()) {
        Tot parts[kMaxChunks];
        int64_t chunks = split_range(R * n, [&](int64_t c, int64_t b, int64_t e) { parts[c] = partial(w.off0, b, e); });
        Tot tot = parts[0];
        for (int64_t c = 1; c < chunks; ++c) tot = P::merge(tot, parts[c]);
        o[w.off1] = P::finish(tot);
      }
    }
    return;
  }

  // ---- outer mode: the innermost dim is kept; accumulate rows into columns ----
  using Acc = typename P::Acc;
  constexpr int64_t W = 2048;          // columns per task (acc + tot stay in L1/L2)
  constexpr int64_t kFlushRows = 128;  // rows between flushes of Acc into Tot
  const int64_t blocks = (n + W - 1) / W;
  // Reduces rows [r0, r1) of columns [c0, c0 + w) for the kept outer offset `base` into tot[0..w).
  auto column_task = [&](int64_t base, int64_t c0, int64_t w, int64_t r0, int64_t r1, Tot* tot) {
    Acc acc[W];
    [[maybe_unused]] NaNMask<In> nan[W];
    for (int64_t j = 0; j < w; ++j) {
      tot[j] = P::identity();
      acc[j] = P::acc_identity();
      if constexpr (nan_flag_v<P>) nan[j] = 0;
    }
    auto flush = [&] {
      for (int64_t j = 0; j < w; ++j) {
        Acc a = acc[j];
        if constexpr (nan_flag_v<P>) a = nan[j] ? std::numeric_limits<In>::quiet_NaN() : a;
        tot[j] = P::flush(tot[j], a);
        acc[j] = P::acc_identity();
      }
    };
    DimWalker rw = red;
    rw.start(r0);
    int64_t since_flush = 0;
    for (int64_t r = r0; r < r1; ++r, rw.next()) {
      const In* row = x + base + rw.off0 + c0 * in_s;
      if constexpr (nan_flag_v<P>) {
        if (in_s == 1) {
          for (int64_t j = 0; j < w; ++j) {
            acc[j] = P::fast_step(acc[j], row[j]);
            nan[j] |= nan_bits(row[j]);
          }
        } else {
          for (int64_t j = 0; j < w; ++j) {
            acc[j] = P::fast_step(acc[j], row[j * in_s]);
            nan[j] |= nan_bits(row[j * in_s]);
          }
        }
      } else if (in_s == 1) {
        for (int64_t j = 0; j < w; ++j) acc[j] = P::step(acc[j], row[j]);
      } else {
        for (int64_t j = 0; j < w; ++j) acc[j] = P::step(acc[j], row[j * in_s]);
      }
      if (++since_flush == kFlushRows) {
        flush();
        since_flush = 0;
      }
    }
    flush();
  };
  const int64_t tasks = K * blocks;
  if (tasks >= 2 * nt || K * R * n < 2 * kGrainSize || K * n > (1 << 16)) {
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, R * std::min(n, W)));
    parallel_for(0, tasks, grain, [&](int64_t b, int64_t e) {
      Tot tot[W];
      for (int64_t t = b; t < e; ++t) {
        DimWalker w = kept;
        w.start(t / blocks);
        int64_t c0 = (t % blocks) * W, cw = std::min(W, n - c0);
        column_task(w.off0, c0, cw, 0, R, tot);
        for (int64_t j = 0; j < cw; ++j) o[w.off1 + (c0 + j) * out_s] = P::finish(tot[j]);
      }
    });
    return;
  }
  // Few, narrow outputs and many rows: split the rows, merge partial columns in order.
  const int64_t width = K * n;
  std::unique_ptr<Tot[]> parts(new Tot[static_cast<size_t>(std::clamp<int64_t>(nt, 1, kMaxChunks) * width)]);
  int64_t chunks = split_range(R, [&](int64_t c, int64_t r0, int64_t r1) {
    Tot* dst = parts.get() + c * width;
    DimWalker w = kept;
    w.start(0);
    for (int64_t k = 0; k < K; ++k, w.next())
      for (int64_t c0 = 0; c0 < n; c0 += W) column_task(w.off0, c0, std::min(W, n - c0), r0, r1, dst + k * n + c0);
  });
  DimWalker w = kept;
  w.start(0);
  for (int64_t k = 0; k < K; ++k, w.next())
    for (int64_t j = 0; j < n; ++j) {
      Tot tot = parts[k * n + j];
      for (int64_t c = 1; c < chunks; ++c) tot = P::merge(tot, parts[c * width + k * n + j]);
      o[w.off1 + j * out_s] = P::finish(tot);
    }
}

// A contiguous copy (or `in` itself) of `in` with the kept dims first and the
// reduced dims last, seen as rows: rows() outputs of row_len() elements each.
// Kernels that need a whole reduced slice at once (var, argmax, logsumexp, ...)
// work on this simple layout.
struct Rows {
  Tensor data;
  int64_t rows = 1, row_len = 1;
};
Rows rows_last(const Tensor& in, const std::vector<bool>& mask);

}  // namespace tp::reduce
