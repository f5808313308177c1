// AVX2 + FMA + F16C kernels (x86_common.h with vpmaddubsw int8 products), and
// q4_0 and mxfp4 rows x tokens tiles over prepared activations.
#define CLB_X86_VNNI 0
#include "tensor/kernels/x86/prepared_family.h"
#include "tensor/kernels/x86/x86_common.h"

namespace colibri {
namespace {

// A 4-bit type W (x86_common.h's Q4_0Weights, Mxfp4Weights) against q8_0
// activations, one block per step. The weights stay unsigned (u = value +
// kOffset, so vpmaddubsw pairs cannot saturate) and each int32 lane starts at
// -kOffset * (sum of its 4 activations), prepared once per call with the
// activations' scale; per row and block that leaves the unpacking and the
// scale, per (row, token) vpmaddubsw, vpmaddwd, one add and three float ops.
// q4_0, measured in L2 on one core: matvec 8.4 -> 12 GB/s, 16-token matmul 30
// -> 56 Gop/s, against the shared per-row dot.
template <typename W>
struct Nibble4Avx2 {
  struct Act {
    __m256i y;     // the block's 32 activations
    __m256i corr;  // -kOffset * sum of each int32 lane's 4 activations
    float d;
  };
  using XBlock = block_q8_0;
  static constexpr int kBlocksPerStep = 1;
  static constexpr int kSegSteps = 64;  // 2048 weights; 4 tokens: 24 KB
  static constexpr int kBlockElems = kQK;
  static constexpr size_t kBlockBytes = sizeof(typename W::Block);
  // Rows ahead of the reads, into L1 and into L2: as the AVX-512 tiles
  // (avx512.cpp).
  static constexpr int kPrefetchBytes = 4096, kPrefetchFarBytes = 16384;

  static void prep(const XBlock* xb, int, Act& a) {
    a.y = load32(xb->qs);
    const __m256i sum4 =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a.y), _mm256_set1_epi16(1));
    a.corr = _mm256_mullo_epi32(sum4, _mm256_set1_epi32(-W::kOffset));
    a.d = h2f(xb->d);
  }

  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_stride, const Act (*act)[kSegSteps], int64_t nb,
                   float* y, size_t y_stride, bool accumulate) {
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const typename W::Block*>(w + r * w_stride) + b;
        if ((b & 3) == 0) {  // 72 (q4_0) or 68 (mxfp4) bytes per 4 blocks: two lines
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchBytes + 64, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchFarBytes, _MM_HINT_T1);
          _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchFarBytes + 64, _MM_HINT_T1);
        }
        const __m256i u = W::unpack(*blk);
        const __m256 dw = _mm256_set1_ps(W::scale(*blk));
        for (int t = 0; t < T; ++t) {
          const Act& a = act[t][b];
          const __m256i s =
              _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, a.y), ones), a.corr);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                                      _mm256_mul_ps(dw, _mm256_broadcast_ss(&a.d)), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        const float v = hsum(acc[r][t]);
        y[t * y_stride + r] = accumulate ? y[t * y_stride + r] + v : v;
      }
  }
};

// 4 rows x 2 tokens: 8 accumulators of AVX2's 16 registers.
using Q4_0Avx2Family = PreparedFamily<Nibble4Avx2<Q4_0Weights>, 4, 2>;
using Mxfp4Avx2Family = PreparedFamily<Nibble4Avx2<Mxfp4Weights>, 4, 2>;

}  // namespace

namespace {

// Four 256-bit sums, 128 bytes a step.
uint64_t read_sum_256(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m256i*>(p);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const size_t n = bytes / 32;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(v + i + 3));
  }
  const __m256i a = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// Twelve independent chains of the int8 product on ymm (vpmaddubsw +
// vpmaddwd + vpaddd here, vpdpbusd where x86_common.h has VNNI): 32
// multiply-accumulates each.
uint64_t int8_peak_256(int64_t rounds, int32_t* sink) {
  constexpr int kChains = 12;
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i u = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-5);
  for (int64_t r = 0; r < rounds; ++r)
    for (int k = 0; k < kChains; ++k) acc[k] = dot_u8s8(acc[k], u, w);
  __m256i total = acc[0];
  for (int k = 1; k < kChains; ++k) total = _mm256_add_epi32(total, acc[k]);
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  uint32_t s = 0;  // wraps by design: the sum only keeps the chains live
  for (uint32_t x : lanes) s += x;
  *sink = static_cast<int32_t>(s);
  return static_cast<uint64_t>(rounds) * kChains * 32;
}

}  // namespace

void add_avx2_kernels(KernelTable& t) {
  add_common_x86_kernels(t);
  t.read_sum = read_sum_256;
  t.int8_peak = int8_peak_256;
  t.dot[slot(DType::Q4_0)] = Q4_0Avx2Family::dot;
  t.tile[slot(DType::Q4_0)] = Q4_0Avx2Family::tile;
  t.dot[slot(DType::MXFP4)] = Mxfp4Avx2Family::dot;
  t.tile[slot(DType::MXFP4)] = Mxfp4Avx2Family::tile;
}

}  // namespace colibri
