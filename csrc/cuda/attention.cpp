// Fused attention on CUDA: see attention.h.
//
// Tiling (256 threads = 16 × 16, thread (ty, tx)): a block owns query rows
// row0 .. row0+63 and walks the keys 64 at a time. Shared memory holds the Q
// tile (64 × 64), one K tile that is then overwritten by the tile's
// probabilities P (64 × 64), and the V tile (64 × 64): 48 KiB, the static
// limit. Each thread computes a 4 × 4 block of scores (rows ty·4 + i, keys
// tx + 16·j) as dot products over 128-bit chunks of d, then a 4 × 4 block of
// the output (rows ty·4 + i, columns tx·4 + j) as P·V. The 16 threads of a row
// share its maximum through warp shuffles; each keeps a partial row sum (the
// rescaling factor is the same for all of them), added up once at the end.
//
// Bank conflicts: a K row is stored with its 16-byte chunks permuted (chunk c
// of key r at c ^ (r mod 16)), so the 16 keys a warp reads at one chunk fall
// into 16 different chunk positions; Q and P rows permute by (r / 4) mod 8, so
// the two rows a warp reads at once (ty and ty+1) sit in different banks.
//
// The Q tile is scaled by scale · log2(e) as it is loaded, so that exp2 of a
// score minus the row maximum is exp(scale · q·k − m).
#include "cuda/attention.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/kernels.h"
#include "ops/dispatch.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRows = 64;  // query rows per block (and keys per tile)

// Kernel parameters (one struct, passed by value; the device declares the same
// members in the same order). Strides in elements: batch dims 0 and 1, row, d.
struct AttentionParams {
  long long q0, q1, qr, qd;
  long long k0, k1, kr, kd;
  long long v0, v1, vr, vd;
  long long o0, o1, orow, od;
  int b1, L, S, D, DV, tiles;
  float scale_log2;
};

const char* kBody = R"(
struct AP {
  long long q0, q1, qr, qd, k0, k1, kr, kd, v0, v1, vr, vd, o0, o1, orow, od;
  int b1, L, S, D, DV, tiles;
  float scale_log2;
};
// Four consecutive elements d0 .. d0+3 of a row (zeros past D or for a missing row).
__device__ __forceinline__ float4 tp_ld4(const float* __restrict__ p, long long sd, int d0, int D, bool ok) {
  float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
  if (!ok || d0 >= D) return r;
#if TP_VEC
  r = __ldg(reinterpret_cast<const float4*>(p + d0));
#else
  r.x = p[d0 * sd];
  if (d0 + 1 < D) r.y = p[(d0 + 1) * sd];
  if (d0 + 2 < D) r.z = p[(d0 + 2) * sd];
  if (d0 + 3 < D) r.w = p[(d0 + 3) * sd];
#endif
  return r;
}
#define TP_QSW(r) ((((r) >> 2) & 7))
#define TP_NEG_INF __int_as_float(0xff800000)
extern "C" __global__ __launch_bounds__(256, 2) void TP_NAME(const float* __restrict__ q, const float* __restrict__ k,
    const float* __restrict__ v, float* __restrict__ o, AP p) {
  __shared__ __align__(16) float Qs[64 * 64];
  __shared__ __align__(16) float KP[64 * 64];
  __shared__ __align__(16) float Vs[64 * 64];
  const int t = threadIdx.x, tx = t & 15, ty = t >> 4;
  const int tile = blockIdx.x % p.tiles;
  const long long bb = blockIdx.x / p.tiles;
  const long long b1 = bb % p.b1, b0 = bb / p.b1;
  const int row0 = tile * 64;
  q += b0 * p.q0 + b1 * p.q1;
  k += b0 * p.k0 + b1 * p.k1;
  v += b0 * p.v0 + b1 * p.v1;
  o += b0 * p.o0 + b1 * p.o1;
  #pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int r = it * 16 + ty, row = row0 + r;
    float4 x = tp_ld4(q + (long long)row * p.qr, p.qd, tx * 4, p.D, row < p.L);
    x.x *= p.scale_log2;
    x.y *= p.scale_log2;
    x.z *= p.scale_log2;
    x.w *= p.scale_log2;
    *reinterpret_cast<float4*>(&Qs[r * 64 + ((tx ^ TP_QSW(r)) << 2)]) = x;
  }
  // Row bases with the chunk permutation folded in: chunk dc of this thread's
  // Q/P rows is at qbase ^ (dc << 2) (+ 64 per row i), of its keys at
  // kbase ^ (dc << 2) (+ 1024 per key group j): one XOR per chunk, the rest
  // immediate offsets once the loops are unrolled.
  const int qbase = (ty * 256) | ((ty & 7) << 2), kbase = (tx * 64) | (tx << 2);
  float acc[4][4], m[4], l[4];
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = TP_NEG_INF;
    l[i] = 0.f;
    #pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  // The K and V rows of a tile are loaded into registers one tile ahead
  // (issued before the previous tile's P·V, stored after it), so the global
  // loads' latency hides behind that work.
  float4 kx[4], vx[4];
  #pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int key = it * 16 + ty;
    kx[it] = tp_ld4(k + (long long)key * p.kr, p.kd, tx * 4, p.D, key < p.S);
    vx[it] = tp_ld4(v + (long long)key * p.vr, p.vd, tx * 4, p.DV, key < p.S);
  }
  for (int c0 = 0; c0 < p.S; c0 += 64) {
    __syncthreads();  // the previous tile's P and V are no longer read
    #pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int r = it * 16 + ty;
      *reinterpret_cast<float4*>(&KP[r * 64 + ((tx ^ (r & 15)) << 2)]) = kx[it];
      *reinterpret_cast<float4*>(&Vs[r * 64 + tx * 4]) = vx[it];
    }
    __syncthreads();
    float s[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
    #pragma unroll
    for (int dc = 0; dc < 16; ++dc) {
      float4 a[4], b[4];
      const int qa = qbase ^ (dc << 2), ka = kbase ^ (dc << 2);
      #pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const float4*>(&Qs[qa + i * 64]);
      #pragma unroll
      for (int j = 0; j < 4; ++j)  // key tx + 16 j: its chunks are permuted by tx
        b[j] = *reinterpret_cast<const float4*>(&KP[ka + j * 1024]);
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          float x = s[i][j];
          x = fmaf(a[i].x, b[j].x, x);
          x = fmaf(a[i].y, b[j].y, x);
          x = fmaf(a[i].z, b[j].z, x);
          x = fmaf(a[i].w, b[j].w, x);
          s[i][j] = x;
        }
    }
    // Online softmax over this tile's keys.
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = TP_NEG_INF;
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float x = c0 + tx + 16 * j < p.S ? s[i][j] : TP_NEG_INF;
        s[i][j] = x;
        mx = fmaxf(mx, x);
      }
      #pragma unroll
      for (int w = 1; w < 16; w <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
      const float mn = fmaxf(m[i], mx);
      const float alpha = exp2f(m[i] - mn);  // 0 on the first tile (m = -inf)
      m[i] = mn;
      l[i] *= alpha;
      #pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] *= alpha;
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float e = exp2f(s[i][j] - mn);
        s[i][j] = e;
        l[i] += e;
      }
    }
    __syncthreads();  // every thread is done reading K: KP takes P
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty * 4 + i;
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = tx + 16 * j;
        KP[r * 64 + (((c >> 2) ^ TP_QSW(r)) << 2) + (c & 3)] = s[i][j];
      }
    }
    __syncthreads();
    if (c0 + 64 < p.S) {
      #pragma unroll
      for (int it = 0; it < 4; ++it) {
        const int key = c0 + 64 + it * 16 + ty;
        kx[it] = tp_ld4(k + (long long)key * p.kr, p.kd, tx * 4, p.D, key < p.S);
        vx[it] = tp_ld4(v + (long long)key * p.vr, p.vd, tx * 4, p.DV, key < p.S);
      }
    }
    #pragma unroll TP_PV_UNROLL
    for (int cc = 0; cc < 16; ++cc) {
      float4 pr[4], vv[4];
      const int pa = qbase ^ (cc << 2);
      #pragma unroll
      for (int i = 0; i < 4; ++i) pr[i] = *reinterpret_cast<const float4*>(&KP[pa + i * 64]);
      #pragma unroll
      for (int u = 0; u < 4; ++u) vv[u] = *reinterpret_cast<const float4*>(&Vs[(cc * 4 + u) * 64 + tx * 4]);
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[i][0] = fmaf(pr[i].x, vv[0].x, fmaf(pr[i].y, vv[1].x, fmaf(pr[i].z, vv[2].x, fmaf(pr[i].w, vv[3].x, acc[i][0]))));
        acc[i][1] = fmaf(pr[i].x, vv[0].y, fmaf(pr[i].y, vv[1].y, fmaf(pr[i].z, vv[2].y, fmaf(pr[i].w, vv[3].y, acc[i][1]))));
        acc[i][2] = fmaf(pr[i].x, vv[0].z, fmaf(pr[i].y, vv[1].z, fmaf(pr[i].z, vv[2].z, fmaf(pr[i].w, vv[3].z, acc[i][2]))));
        acc[i][3] = fmaf(pr[i].x, vv[0].w, fmaf(pr[i].y, vv[1].w, fmaf(pr[i].z, vv[2].w, fmaf(pr[i].w, vv[3].w, acc[i][3]))));
      }
    }
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    float sum = l[i];
    #pragma unroll
    for (int w = 1; w < 16; w <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
    const int row = row0 + ty * 4 + i;
    if (row >= p.L) continue;
    const float inv = 1.f / sum;
    float* dst = o + (long long)row * p.orow;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int d = tx * 4 + j;
      if (d < p.DV) dst[d * p.od] = acc[i][j] * inv;
    }
  }
}
)";

std::string kernel_name(bool vec) { return vec ? "tp_attention_f32_v4" : "tp_attention_f32"; }

std::string attention_source(bool vec) {
  // The P·V loop's unrolling: the one each variant needs to fit 128 registers
  // without spilling (ptxas for sm_90; the scalar loads take fewer registers).
  // The kernel's name spelled out in its signature (tests find "void <name>(").
  std::string body = kBody;
  const std::string macro = "void TP_NAME(";
  body.replace(body.find(macro), macro.size(), "void " + kernel_name(vec) + "(");
  return str("#define TP_VEC ", vec ? 1 : 0, "\n#define TP_PV_UNROLL ", vec ? 8 : 16, "\n", body);
}

// Batch dims as (b0, b1): a 3-D operand has one (b0 = 1, stride 0).
void batch_strides(const Tensor& t, long long& s0, long long& s1, long long& sr, long long& sd) {
  const int64_t n = t.dim();
  s0 = n == 4 ? t.strides()[0] : 0;
  s1 = t.strides()[static_cast<size_t>(n - 3)];
  sr = t.strides()[static_cast<size_t>(n - 2)];
  sd = t.strides()[static_cast<size_t>(n - 1)];
}

// 128-bit loads: unit d stride, 16-byte aligned rows, head dims a multiple of 4.
bool vector_loads(const Tensor& t) {
  const int64_t n = t.dim();
  if (t.strides()[static_cast<size_t>(n - 1)] != 1 || t.sizes()[static_cast<size_t>(n - 1)] % 4 != 0) return false;
  if (reinterpret_cast<uintptr_t>(t.data()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < n; ++d)
    if (t.sizes()[static_cast<size_t>(d)] > 1 && t.strides()[static_cast<size_t>(d)] % 4 != 0) return false;
  return true;
}

}  // namespace

bool attention_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                      const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (std::string(op.name) != "_attention" || out_meta.size() != 1 || in.size() != 3) return false;
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int dev = q.device().index;
  for (const Tensor* t : {&k, &v})
    TP_CHECK(t->device().kind == Device::Kind::CUDA && t->device().index == dev, Error,
             "_attention: Expected all tensors to be on the same device, but found cuda:", dev, " and ",
             t->device().str());
  const TensorMeta& om = out_meta[0];
  const double scale = attrs.get_double("scale");
  const int64_t nd = q.dim();
  const int64_t L = q.sizes()[static_cast<size_t>(nd - 2)], D = q.sizes()[static_cast<size_t>(nd - 1)];
  const int64_t S = k.sizes()[static_cast<size_t>(nd - 2)], DV = v.sizes()[static_cast<size_t>(nd - 1)];
  int64_t b0 = nd == 4 ? q.sizes()[0] : 1, b1 = q.sizes()[static_cast<size_t>(nd - 3)];
  Tensor r = empty(Shape{std::max<int64_t>(numel(om.sizes), 1)}, om.dtype, dev).as_strided(om.sizes, om.strides, 0);
  const bool fused = om.dtype == DType::Float32 && q.dtype() == om.dtype && k.dtype() == om.dtype &&
                     v.dtype() == om.dtype && (nd == 3 || nd == 4) && D <= kAttentionMaxHeadDim &&
                     DV <= kAttentionMaxHeadDim && S > 0 && L < (int64_t(1) << 30) && S < (int64_t(1) << 30);
  if (!fused) {
    // The unfused operators (an empty key range gives zeros, as matmul does).
    Shape ks = k.sizes(), kst = k.strides();
    std::swap(ks[static_cast<size_t>(nd - 2)], ks[static_cast<size_t>(nd - 1)]);
    std::swap(kst[static_cast<size_t>(nd - 2)], kst[static_cast<size_t>(nd - 1)]);
    Tensor s = run_kernel(get_op("matmul"), {q, k.as_strided(ks, kst, k.offset())}, {})[0];
    s = run_kernel(get_op("mul"), {s, Tensor::wrapped_scalar(Scalar(scale))}, {})[0];
    s = run_kernel(get_op("softmax"), {s}, {{"dim", int64_t(-1)}, {"dtype", AttrValue{}}})[0];
    s = run_kernel(get_op("matmul"), {s, v}, {})[0];
    run_kernel(get_op("copy_"), {r, s}, {});
    out = {r};
    return true;
  }
  if (r.numel() == 0) {
    out = {r};
    return true;
  }
  AttentionParams p{};
  batch_strides(q, p.q0, p.q1, p.qr, p.qd);
  batch_strides(k, p.k0, p.k1, p.kr, p.kd);
  batch_strides(v, p.v0, p.v1, p.vr, p.vd);
  batch_strides(r, p.o0, p.o1, p.orow, p.od);
  p.b1 = static_cast<int>(b1);
  p.L = static_cast<int>(L);
  p.S = static_cast<int>(S);
  p.D = static_cast<int>(D);
  p.DV = static_cast<int>(DV);
  p.tiles = static_cast<int>((L + kRows - 1) / kRows);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // log2(e)
  const int64_t blocks = int64_t(p.tiles) * b0 * b1;
  TP_CHECK(blocks < (int64_t(1) << 31), ValueError, "_attention: ", blocks, " blocks exceed the grid limit");
  const bool vec = vector_loads(q) && vector_loads(k) && vector_loads(v);
  void* pq = q.data();
  void* pk = k.data();
  void* pv = v.data();
  void* po = r.data();
  void* args[] = {&pq, &pk, &pv, &po, &p};
  launch_generated(dev, kernel_name(vec), attention_source(vec), static_cast<unsigned>(blocks), kThreads, args);
  out = {r};
  return true;
}

std::vector<std::pair<std::string, std::string>> attention_kernel_sources() {
  return {{kernel_name(false), attention_source(false)}, {kernel_name(true), attention_source(true)}};
}

}  // namespace tp::cuda
