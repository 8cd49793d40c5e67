// Float32 GEMM for CPUs with AVX-512, on one thread (ops/blas.cpp splits a
// product across threads and decides when this kernel runs rather than the
// BLAS library). CMakeLists.txt gives this file the AVX-512 flags; it is
// reached only through vec::Table::sgemm, which is null on other CPUs.
//
// Why our own: OpenBLAS picks its kernels from OPENBLAS_CORETYPE when it is
// set, and machines that pin it to Haswell (a common workaround for CPUs an
// OpenBLAS build does not know) run float32 GEMMs on AVX2 kernels at half the
// FMA width of an AVX-512 core. GEMM is most of a training step's time, so it
// sets how fast eager and compiled code can be.
//
// The scheme is the usual one of BLIS and OpenBLAS (Goto's algorithm): B is
// packed KC x NC at a time into panels NR columns wide, A MC x KC at a time
// into panels MR rows high, and a register-tiled kernel multiplies one A panel
// by one B panel into an MR x NR tile of C held in 28 zmm registers. Panels
// are zero-padded to full tiles, so the kernel's inner loop has no edge cases;
// only the store masks the columns and skips the rows past the edge.
// Each element of C sums its K products in the same order whatever the
// thread split, so results do not depend on the thread count.
#if defined(__AVX512F__)
// GCC 12's AVX-512 headers pass an undefined vector (_mm512_undefined_ps) as
// the unused operand of the shuffles' unmasked forms, which -Wmaybe-uninitialized
// reports inside the header once transpose16 is inlined: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace tp::vec::avx512 {
namespace {

constexpr int64_t MR = 14;  // rows of the register tile: 14 x 2 accumulators + 2 B vectors + 1 broadcast
constexpr int64_t NR = 32;  // columns: two zmm of floats
// KC x NR floats of B (64 KB) stay in L2 beside the MC x KC block of A
// (~690 KB); a longer K block means fewer read-modify-write passes over C.
constexpr int64_t KC = 512;
constexpr int64_t MC = MR * 24;
constexpr int64_t NC = 3072;  // KC x NC floats of B (6 MB) in the shared L3

// A 64-byte aligned scratch buffer per thread, grown on demand, freed when the thread ends.
struct Scratch {
  float* p = nullptr;
  size_t n = 0;
  float* get(size_t want) {
    if (want > n) {
      std::free(p);
      p = static_cast<float*>(std::aligned_alloc(64, (want * sizeof(float) + 63) / 64 * 64));
      if (!p) throw std::bad_alloc();
      n = want;
    }
    return p;
  }
  ~Scratch() { std::free(p); }
};

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

// Packing: a panel holds, for each k, W adjacent values (W = MR rows of A or
// NR columns of B), zero past `valid`. Two storage orders reach it.
// The W values of one k are adjacent in memory (A transposed, B as stored),
// `step` apart from one k to the next: masked vector copies.
template <int64_t W>
void pack_adjacent(const float* src, int64_t step, int64_t valid, int64_t kc, float* out) {
  static_assert(W <= 32, "two vectors per k at most");
  const __mmask16 m0 = lanes(valid), m1 = lanes(valid - 16), s0 = lanes(W), s1 = lanes(W - 16);
  for (int64_t k = 0; k < kc; ++k, src += step, out += W) {
    _mm512_mask_storeu_ps(out, s0, _mm512_maskz_loadu_ps(m0, src));
    if (W > 16) _mm512_mask_storeu_ps(out + 16, s1, _mm512_maskz_loadu_ps(m1, src + 16));
  }
}
// r[i] := column i of the 16 x 16 block whose rows are r[0..15], in registers
// (four rounds of 16 shuffles).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // 128-bit lane L: (r_i, r_i+1) at columns 4L, 4L+1 / 4L+2, 4L+3
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // r[i + j], lane L: rows i..i+3 at column 4L + j
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  for (int j = 0; j < 4; ++j) {  // gather the four 128-bit lanes of column 4L + j
    const __m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), b = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 c = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD), d = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    t[j] = _mm512_shuffle_f32x4(a, b, 0x88);
    t[8 + j] = _mm512_shuffle_f32x4(a, b, 0xDD);
    t[4 + j] = _mm512_shuffle_f32x4(c, d, 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(c, d, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Each of the W lanes is a run along k (A as stored, B transposed), the runs
// `ld` apart: 16 runs x 16 k at a time are loaded (contiguous), transposed in
// registers and stored as 16 k-steps of the panel.
template <int64_t W>
void pack_runs(const float* src, int64_t ld, int64_t valid, int64_t kc, float* out) {
  for (int64_t g = 0; g < W; g += 16) {
    const int64_t width = std::min<int64_t>(16, W - g), live = std::min(width, valid - g);
    const __mmask16 store = lanes(width);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t steps = std::min<int64_t>(16, kc - k0);
      const __mmask16 load = lanes(steps);
      __m512 r[16];
      for (int64_t w = 0; w < 16; ++w)
        r[w] = w < live ? _mm512_maskz_loadu_ps(load, src + (g + w) * ld + k0) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t i = 0; i < steps; ++i) _mm512_mask_storeu_ps(out + (k0 + i) * W + g, store, r[i]);
    }
  }
}

// Rows [0, mc) and columns [0, kc) of op(A) into panels of MR rows.
void pack_a(bool ta, const float* A, int64_t lda, int64_t mc, int64_t kc, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * kc) {
    const int64_t m = std::min(MR, mc - i0);
    if (ta)
      pack_adjacent<MR>(A + i0, lda, m, kc, out);
    else
      pack_runs<MR>(A + i0 * lda, lda, m, kc, out);
  }
}

// Rows [0, kc) and columns [0, nc) of op(B) into panels of NR columns.
void pack_b(bool tb, const float* B, int64_t ldb, int64_t kc, int64_t nc, float* out) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR, out += NR * kc) {
    const int64_t n = std::min(NR, nc - j0);
    if (tb)
      pack_runs<NR>(B + j0 * ldb, ldb, n, kc, out);
    else
      pack_adjacent<NR>(B + j0, ldb, n, kc, out);
  }
}

// One MR x NR tile: acc = a_panel * b_panel over kc, then the first K block
// stores alpha * acc (+ beta * C when beta != 0; C is not read when beta == 0,
// as BLAS promises), later K blocks add alpha * acc to C. m x n is the part
// of the tile inside C.
template <bool kFirst>
void tile(int64_t kc, const float* __restrict a, const float* __restrict b, float* C, int64_t ldc, int64_t m,
          int64_t n, float alpha, float beta) {
  // C's rows lie ldc apart; at a power-of-two stride they share cache sets, so
  // they are fetched (for writing) now, while the products run, not at the store.
#pragma GCC unroll 14
  for (int64_t r = 0; r < MR; ++r)
    if (r < m) {
      __builtin_prefetch(C + r * ldc, 1, 2);
      __builtin_prefetch(C + r * ldc + 16, 1, 2);
    }
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int64_t r = 0; r < MR; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int64_t r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = lanes(n), m1 = lanes(n - 16);
#pragma GCC unroll 14
  for (int64_t r = 0; r < MR; ++r) {
    if (r >= m) break;
    float* c = C + r * ldc;
    __m512 x0 = _mm512_mul_ps(va, c0[r]), x1 = _mm512_mul_ps(va, c1[r]);
    if (!kFirst) {
      x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, c));
      x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, c + 16));
    } else if (beta != 0.f) {
      x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), x0);
      x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), x1);
    }
    _mm512_mask_storeu_ps(c, m0, x0);
    _mm512_mask_storeu_ps(c + 16, m1, x1);
  }
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // no products: C = beta * C, and C is not read when beta == 0
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  static thread_local Scratch sa, sb;
  const int64_t kc_max = std::min(KC, K);
  float* pa = sa.get(static_cast<size_t>(std::min(MC, (M + MR - 1) / MR * MR) * kc_max));
  float* pb = sb.get(static_cast<size_t>(std::min(NC, (N + NR - 1) / NR * NR) * kc_max));
  for (int64_t j0 = 0; j0 < N; j0 += NC) {
    const int64_t nc = std::min(NC, N - j0);
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
      const int64_t kc = std::min(KC, K - p0);
      pack_b(tb, tb ? B + j0 * ldb + p0 : B + p0 * ldb + j0, ldb, kc, nc, pb);
      for (int64_t i0 = 0; i0 < M; i0 += MC) {
        const int64_t mc = std::min(MC, M - i0);
        pack_a(ta, ta ? A + p0 * lda + i0 : A + i0 * lda + p0, lda, mc, kc, pa);
        for (int64_t jr = 0; jr < nc; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR) {
            float* c = C + (i0 + ir) * ldc + j0 + jr;
            const int64_t m = std::min(MR, mc - ir), n = std::min(NR, nc - jr);
            if (p0 == 0)
              tile<true>(kc, pa + ir * kc, pb + jr * kc, c, ldc, m, n, alpha, beta);
            else
              tile<false>(kc, pa + ir * kc, pb + jr * kc, c, ldc, m, n, alpha, beta);
          }
      }
    }
  }
}

}  // namespace tp::vec::avx512
#endif
