// AVX-512 (F, BW, VL, DQ, VNNI, BF16, VBMI) kernels: x86_common.h with VNNI int8
// products, plus 512-bit float dots and, for the weight types that take q8_0
// activations, a rows x tokens int8 GEMM tile used for both matvec and prefill.
#define CLB_X86_VNNI 1
// GCC 12 flags the deliberately undefined vectors inside its own AVX-512
// intrinsics as uninitialized (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <type_traits>

#include "tensor/kernels/x86/prepared_family.h"
#include "tensor/kernels/x86/q6_k_fields.h"
#include "tensor/kernels/x86/x86_common.h"

namespace colibri {
namespace {

// How far ahead of a weight row's reads a kernel prefetches. Rows are read
// 4 at a time in short steps, and the hardware prefetcher alone left a 512 MB
// matvec from DRAM (2 threads, Xeon VM) at 0.65-0.73 of a plain read of the
// same bytes; prefetching 1 KB ahead gave 0.86-0.89, 4 KB 1.02-1.14 (above
// the plain read, which has no prefetch), 8 KB no more. A second prefetch
// into L2 only, 16 KB ahead, keeps more lines in flight than L1's miss
// buffers allow: the packed q4_0 kernel streaming 600 MB on 2 threads went
// from 25.8-26.8 to 28.7-30.0 GB/s (q8_0 28.5-29.9 -> 30.3-30.9; 24-48 KB
// ahead measured the same).
constexpr int kPrefetchBytes = 4096;
constexpr int kPrefetchFarBytes = 16384;

// Prefetches `lines` cache lines kPrefetchBytes past p into L1 and
// kPrefetchFarBytes past p into L2. Always inlined, as prefetch_row
// (x86_common.h) says why.
[[gnu::always_inline]] inline void prefetch_ahead(const void* p, int lines) {
  for (int i = 0; i < lines; ++i) {
    _mm_prefetch(static_cast<const char*>(p) + kPrefetchBytes + 64 * i, _MM_HINT_T0);
    _mm_prefetch(static_cast<const char*>(p) + kPrefetchFarBytes + 64 * i, _MM_HINT_T1);
  }
}

// ---- float types: 16-wide, masked tails ----

float dot_f32_512(const void* w, const void* xv, int64_t n) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(xv);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

float dot_f16_512(const void* w, const void* xv, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(xv);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  auto ld = [](const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(ld(a + i), ld(b + i), acc0);
    acc1 = _mm512_fmadd_ps(ld(a + i + 16), ld(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)),
                           _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i)), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// vdpbf16ps: pairs of bf16 products summed into F32 lanes (the products are
// exact in F32; the instruction treats subnormal inputs as zero).
float dot_bf16_512(const void* w, const void* xv, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(xv);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  auto ld = [](const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_dpbf16_ps(acc0, ld(a + i), ld(b + i));
    acc1 = _mm512_dpbf16_ps(acc1, ld(a + i + 32), ld(b + i + 32));
  }
  for (; i < n; i += 32) {
    const __mmask32 m = n - i >= 32 ? ~0u : static_cast<__mmask32>((1u << (n - i)) - 1);
    acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_maskz_loadu_epi16(m, a + i),
                            (__m512bh)_mm512_maskz_loadu_epi16(m, b + i));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// ---- q5_0: an R x T register tile, two blocks per step ----
//
// Weights are made unsigned (u = q + kOffset) for vpdpbusd; per token the
// lanes start at -kOffset * (sum of 4 activations), so each lane ends exact
// and a block's 8 lanes add up to its signed integer dot. Every (row, token)
// pair runs the same instruction sequence whatever R and T are, so the 1 x 1
// tile (the dot kernel) and larger tiles give identical results.

struct Q5_0Weights {
  using Block = block_q5_0;
  static constexpr int kOffset = 16;
  static __m256i unpack(const Block& b) {
    return _mm256_or_si256(nibbles_32(b.qs),
                           _mm256_and_si256(bits_32(b.qh), _mm256_set1_epi8(0x10)));
  }
  static float scale(const Block& b) { return h2f(b.d); }
};
// IQ4_NL's codes through a 16-byte table to kIq4nlValues + 128, in 1..241.
struct Iq4NlWeights {
  using Block = block_iq4_nl;
  static constexpr int kOffset = 128;
  static __m256i unpack(const Block& b) {
    const __m256i table = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128(
                                               reinterpret_cast<const __m128i*>(kIq4nlValues))),
                                           _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_shuffle_epi8(table, nibbles_32(b.qs));
  }
  static float scale(const Block& b) { return h2f(b.d); }
};
// mxfp4 takes x86_common.h's Mxfp4Weights (u = code value + 12) in the dot
// and tile entries; its products run over packed row groups
// (avx512_packed.cpp), as q4_0's and q8_0's do.

// Two 8-lane halves: a for block b, b2 for block b + 1 (or zero).
inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m512 join_scales(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}

template <typename W, int R, int T>
void q8_0_tile(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nb,
               float* y, size_t y_stride) {
  using Block = typename W::Block;
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::kOffset));
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    __m512i a[T], a_off[T];
    __m512 da[T];
    for (int t = 0; t < T; ++t) {
      const auto* xb = reinterpret_cast<const block_q8_0*>(x + t * x_stride) + b;
      a[t] = join(load32(xb[0].qs), two ? load32(xb[1].qs) : zero);
      a_off[t] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset,
                                     _mm512_sub_epi8(_mm512_setzero_si512(), a[t]));
      da[t] = join_scales(h2f(xb[0].d), two ? h2f(xb[1].d) : 0.0f);
    }
    for (int r = 0; r < R; ++r) {
      const Block* wb = reinterpret_cast<const Block*>(w + r * w_stride) + b;
      prefetch_ahead(wb, 2);
      const __m512i u = join(W::unpack(wb[0]), two ? W::unpack(wb[1]) : zero);
      const __m512 dw = join_scales(W::scale(wb[0]), two ? W::scale(wb[1]) : 0.0f);
      for (int t = 0; t < T; ++t) {
        const __m512i s = _mm512_dpbusd_epi32(a_off[t], u, a[t]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, da[t]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
}

// The end of every tile kernel: each (row, token) accumulator summed into y,
// or added to what y holds when a row is computed in segments.
template <int R, int T>
inline void store_tile(const __m512 (&acc)[R][T], float* y, size_t y_stride, bool accumulate) {
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      const float v = _mm512_reduce_add_ps(acc[r][t]);
      y[t * y_stride + r] = accumulate ? y[t * y_stride + r] + v : v;
    }
}

// q4_0, q8_0 and q4_K run on packed row groups (avx512_packed.cpp).

// ---- q6_K: one super-block (210 bytes, 256 weights) per step ----
//
// Each 128-weight half h has 64 bytes of low nibbles ql_h (byte l < 32 holds
// weights l (low) and l + 64 (high), byte 32 + l weights l + 32 and l + 96)
// and 32 bytes of 2-bit high parts qh_h (bits 0-1, 2-3, 4-5, 6-7 of byte l
// for weights l, l + 32, l + 64, l + 96). The kernel pairs byte j of the whole
// 64-byte qh with byte j of QA = [ql_0[0..31] | ql_1[0..31]] and QB =
// [ql_0[32..63] | ql_1[32..63]], so the four vectors of weights come out with
// the same shift per vector and no shuffle:
//   u0 = QA low  | field 0   weights   0..31 | 128..159
//   u1 = QB low  | field 1   weights  32..63 | 160..191
//   u2 = QA high | field 2   weights  64..95 | 192..223
//   u3 = QB high | field 3   weights 96..127 | 224..255
// and the activations are prepared in that order (q6_k_fields.h, shared with
// the row groups of avx512_packed.cpp). Values are u - 32
// with u in 0..63: dot u, then take 32 * scale * bsum off, as (4 scale) x
// (-8 bsum), which both fit 16 bits (|bsum| <= 16 x 128), in the same
// vpdpwssd chain.
// Measured in L2 on one core: matvec 17.2 -> 24.5 GB/s, 16-token matmul
// 42 -> 124 Gop/s, against the shared 256-bit kernel. This layout against
// one that unpacked each half with a qh shuffle and shifts per field
// (tests/tensor/bench: bench_kernels, 64 MB matrix, one core): matvec
// 21.4 -> 23.8-25.1 GB/s, 8 tokens 6.0-6.1 -> 6.8-7.1 GB/s of weights; OLMoE
// Q4_K_M pp512 157-160 -> 161-165 tok/s.

struct Q6_KAct {
  __m512i y[4];   // weights in u0..u3's order (above)
  __m256i bsm;    // -8 x the 16 sub-block sums (int16)
  float d;
};

struct Q6_KKernel {
  using Act = Q6_KAct;
  using XBlock = block_q8_K;
  static constexpr int kBlocksPerStep = 1;
  static constexpr int kSegSteps = 16;
  static constexpr int kBlockElems = kQK_K;
  static constexpr size_t kBlockBytes = sizeof(block_q6_K);
  static void prep(const XBlock* xb, int, Act& a) {
    for (int k = 0; k < 4; ++k)
      a.y[k] = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb->qs + 32 * k))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb->qs + 128 + 32 * k)), 1);
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb->bsums));
    a.bsm = _mm256_mullo_epi16(bs, _mm256_set1_epi16(-8));
    a.d = xb->d;
  }

  // Per (row, token) the sum is one float chain over the super-blocks: acc
  // = fma(I, d_w x d_x, acc) with I the super-block's exact integer dot, so
  // the 16-row groups of avx512_packed.cpp (prompts) give the same bits.
  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_stride, const Act (*act)[kSegSteps], int64_t nb,
                   float* y, size_t y_stride, bool accumulate) {
    float acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = accumulate ? y[t * y_stride + r] : 0.0f;
    __m512i sel[4];  // 16-bit lane -> its sub-block (8 lanes each): 2k, 2k + 1, 2k + 8, 2k + 9
    for (int k = 0; k < 4; ++k)
      sel[k] = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_setr_m128i(_mm_set1_epi16(2 * k), _mm_set1_epi16(2 * k + 1))),
          _mm256_setr_m128i(_mm_set1_epi16(2 * k + 8), _mm_set1_epi16(2 * k + 9)), 1);
    for (int64_t b = 0; b < nb; ++b) {
      __m512i isum[R][T];
      float dw[R];
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const block_q6_K*>(w + r * w_stride) + b;
        prefetch_ahead(blk, 4);
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        const __m512i sc4 = _mm512_castsi256_si512(_mm256_slli_epi16(sc16, 2));
        const __m512i qh = _mm512_loadu_si512(blk->qh);
        const __m512i qa = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 64)), 1);
        const __m512i qb = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 32))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 96)), 1);
        __m512i u[4];
        q6_K_fields(qa, qb, qh, u);
        __m512i scv[4];
        for (int k = 0; k < 4; ++k) scv[k] = _mm512_permutexvar_epi16(sel[k], sc);
        dw[r] = h2f(blk->d);
        for (int t = 0; t < T; ++t) {
          const Q6_KAct& a = act[t][b];
          __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), sc4, _mm512_zextsi256_si512(a.bsm));
          for (int k = 0; k < 4; ++k) s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(u[k], a.y[k]), scv[k]);
          isum[r][t] = s;
        }
      }
      // The super-block's integer dots, two rows per reduction.
      for (int t = 0; t < T; ++t) {
        int32_t tot[R];
        int r = 0;
        for (; r + 1 < R; r += 2) {
          const __m512i a = isum[r][t], c = isum[r + 1][t];
          // 256-bit halves of a, then of c, added: [a | c] in 8 lanes each.
          __m512i v = _mm512_add_epi32(_mm512_shuffle_i64x2(a, c, 0x44), _mm512_shuffle_i64x2(a, c, 0xEE));
          v = _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, 0xB1));
          v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
          v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));
          tot[r] = _mm512_cvtsi512_si32(v);
          tot[r + 1] = _mm_cvtsi128_si32(_mm512_extracti32x4_epi32(v, 2));
        }
        if (r < R) tot[r] = _mm512_reduce_add_epi32(isum[r][t]);
        for (int i = 0; i < R; ++i)
          acc[i][t] = std::fma(static_cast<float>(tot[i]), dw[i] * act[t][b].d, acc[i][t]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * y_stride + r] = acc[r][t];
  }
};

// ---- iq4_xs: one super-block (136 bytes, 256 weights) per step ----
//
// Quarter k (64 weights, sub-blocks 2k and 2k + 1) of a block unpacks from
// its 32 code bytes as [low nibbles | high nibbles], i.e. weights 64k + (0..15,
// 32..47, 16..31, 48..63), through a 16-byte table to kIq4nlValues; the
// activations are prepared in that order (128-bit lanes 0, 2, 1, 3). Values
// are signed (-127..113, never 0), so the product takes |v| unsigned and the
// activation with v's sign (a masked negation: zmm has no vpsignb); pair sums
// stay within 16 bits (2 x 127 x 127) and vpdpwssd applies the sub-block's
// 6-bit scale. Per (row, token) one float chain over the super-blocks:
// acc = fma(I, d_w x d_x, acc) lane by lane, I the lanes' exact integer sums.
struct Iq4XsAct {
  __m512i y[4];
  float d;
};

struct Iq4XsKernel {
  using Act = Iq4XsAct;
  using XBlock = block_q8_K;
  static constexpr int kBlocksPerStep = 1;
  static constexpr int kSegSteps = 16;
  static constexpr int kBlockElems = kQK_K;
  static constexpr size_t kBlockBytes = sizeof(block_iq4_xs);
  static void prep(const XBlock* xb, int, Act& a) {
    for (int k = 0; k < 4; ++k) {
      const __m512i x = _mm512_loadu_si512(xb->qs + 64 * k);
      a.y[k] = _mm512_shuffle_i64x2(x, x, 0xD8);
    }
    a.d = xb->d;
  }

  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_stride, const Act (*act)[kSegSteps], int64_t nb,
                   float* y, size_t y_stride, bool accumulate) {
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    const __m512i magnitudes = _mm512_abs_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))));
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    const __m256i nib_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i pair_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    // 16-bit lane -> its sub-block's scale: 128-bit lanes of quarter k hold
    // sub-blocks 2k, 2k + 1, 2k, 2k + 1.
    __m512i sel[4];
    for (int k = 0; k < 4; ++k) {
      const __m128i a = _mm_set1_epi16(static_cast<int16_t>(2 * k)),
                    b = _mm_set1_epi16(static_cast<int16_t>(2 * k + 1));
      sel[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_m128i(a, b)),
                                  _mm256_setr_m128i(a, b), 1);
    }
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const block_iq4_xs*>(w + r * w_stride) + b;
        prefetch_ahead(blk, 3);
        // Scale ib: bits 4 ib .. 4 ib + 3 of scales_l as a little-endian
        // word, over bits 2 ib, 2 ib + 1 of scales_h (iq4_xs_scale), minus 32.
        uint32_t lo;
        std::memcpy(&lo, blk->scales_l, 4);
        const __m256i l = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(lo)), nib_shift), _mm256_set1_epi32(0xF));
        const __m256i h = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(blk->scales_h), pair_shift),
                                           _mm256_set1_epi32(3));
        const __m256i sc32 =
            _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32));
        const __m512i sc16 = _mm512_castsi128_si512(_mm256_cvtepi32_epi16(sc32));
        __m512i mag[4], scv[4];
        __mmask64 neg[4];
        for (int k = 0; k < 4; ++k) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * k));
          const __m512i codes = _mm512_and_si512(
              _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
          mag[k] = _mm512_shuffle_epi8(magnitudes, codes);
          neg[k] = _mm512_cmplt_epu8_mask(codes, eight);  // codes 0..7: the negative values
          scv[k] = _mm512_permutexvar_epi16(sel[k], sc16);
        }
        const float dw = h2f(blk->d);
        for (int t = 0; t < T; ++t) {
          const Iq4XsAct& a = act[t][b];
          __m512i s = _mm512_setzero_si512();
          for (int k = 0; k < 4; ++k) {
            const __m512i ys = _mm512_mask_sub_epi8(a.y[k], neg[k], _mm512_setzero_si512(), a.y[k]);
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(mag[k], ys), scv[k]);
          }
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(dw * a.d), acc[r][t]);
        }
      }
    }
    store_tile(acc, y, y_stride, accumulate);
  }
};

// ---- the codebook i-quants: one super-block (256 weights) per step ----
//
// A type's decoder turns quarter k of a block (64 weights, sub-blocks 2k and
// 2k + 1) into 64 unsigned magnitudes (the grid points' bytes), a mask of the
// negative ones (the block's sign bits as they are stored), and the block's
// 16 scales (one per 16 weights; 2 ls + 1); the IQ1 types' values become 8 g
// +- 1 (the point times 8 plus the shift's sign) and their d carries the 1/8.
// Per token the activations take the weights' signs (a masked negation),
// vpmaddubsw pairs them (at most 2 x 62 x 127) and vpdpwssd applies each
// 16's scale: per (row, token) and block the reference's exact integer sum,
// times d_w x d_x and the type's constant, in one float chain.
//
// The K-quants with mins (Q2_K, Q5_K) run in the same tile: their values are
// unsigned (no sign mask), and per 16 weights a min meets the activations'
// sum over those 16 (Q8_K's bsums, one vpmaddwd a token), taken off in the
// same float chain: the reference's d x isum - dmin x summs.
struct IqGridAct {
  __m512i y[4];
  __m256i bsums;  // sums over each 16 weights (Q8_K's)
  float d;
};

// A quarter's points, from indices in scalar registers (loads and inserts)
// or in vector lanes (a hardware gather): eight 8-byte points or sixteen
// 4-byte ones. Where an index is a byte as stored (IQ2_XXS, IQ3_XXS) the
// scalar form is faster; where it is assembled from several fields the lanes
// are. One thread, a 64 MB matrix, Zen 5 (bench_kernels matvec/T/avx512, ms):
// IQ1_S 24.6 -> 19.4, IQ1_M 33.4 -> 18.5, IQ2_XS 19.2 -> 14.1, IQ3_S 14.5 ->
// 11.6 gathered; IQ2_XXS 10.4 -> 15.4, IQ3_XXS 10.7 -> 13.7 (kept scalar).
inline __m512i points8_64(const uint64_t* g, const uint32_t* i) {
  return _mm512_setr_epi64(static_cast<int64_t>(g[i[0]]), static_cast<int64_t>(g[i[1]]), static_cast<int64_t>(g[i[2]]),
                           static_cast<int64_t>(g[i[3]]), static_cast<int64_t>(g[i[4]]), static_cast<int64_t>(g[i[5]]),
                           static_cast<int64_t>(g[i[6]]), static_cast<int64_t>(g[i[7]]));
}
inline __m512i points4_64(const uint32_t* g, const uint32_t* i) {
  auto pair = [&](int j) { return static_cast<int64_t>(g[i[2 * j]] | (static_cast<uint64_t>(g[i[2 * j + 1]]) << 32)); };
  return _mm512_setr_epi64(pair(0), pair(1), pair(2), pair(3), pair(4), pair(5), pair(6), pair(7));
}
inline __m512i points8_64(const uint64_t* g, __m512i idx) {
  return _mm512_i64gather_epi64(idx, reinterpret_cast<const long long*>(g), 8);
}
inline __m512i points4_64(const uint32_t* g, __m512i idx) {
  return _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(g), 4);
}
// Eight bytes at p, each in a 64-bit lane.
inline __m512i bytes8_64(const void* p) {
  return _mm512_cvtepu8_epi64(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
}
// Per 64-bit lane, the field (bits >> shift) & mask, moved to bit 8 and up.
inline __m512i high_bits_64(uint64_t bits, __m512i shifts, int mask) {
  return _mm512_slli_epi64(
      _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64(static_cast<int64_t>(bits)), shifts),
                       _mm512_set1_epi64(mask)),
      8);
}

// The decoded form of one block.
struct IqGridBlock {
  __m512i mag[4];
  __mmask64 neg[4];
  uint64_t sc[4];  // quarter k's four 16-bit scales, weights 64 k + 16 j in bits 16 j
  float d;         // d_w times the type's constant
};

inline uint64_t scales4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return a | (b << 16) | (static_cast<uint64_t>(c) << 32) | (static_cast<uint64_t>(d) << 48);
}

struct Iq2XxsDecoder {
  using Block = block_iq2_xxs;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint64_t* grid = grids.iq2xxs;
    for (int k = 0; k < 4; ++k) {
      const uint64_t w0 = load_u64(b.qs + 8 * k), w1 = load_u64(b.qs + 8 * k + 4);  // sub-blocks 2k, 2k + 1
      const uint32_t idx[8] = {static_cast<uint32_t>(w0 & 255),         static_cast<uint32_t>((w0 >> 8) & 255),
                               static_cast<uint32_t>((w0 >> 16) & 255), static_cast<uint32_t>((w0 >> 24) & 255),
                               static_cast<uint32_t>(w1 & 255),         static_cast<uint32_t>((w1 >> 8) & 255),
                               static_cast<uint32_t>((w1 >> 16) & 255), static_cast<uint32_t>((w1 >> 24) & 255)};
      o.mag[k] = points8_64(grid, idx);
      o.neg[k] = iq2_sign_bytes(((w0 >> 32) & 0x0FFFFFFF) | (((w1 >> 32) & 0x0FFFFFFF) << 28));
      const uint32_t l0 = 2 * static_cast<uint32_t>(w0 >> 60) + 1, l1 = 2 * static_cast<uint32_t>(w1 >> 60) + 1;
      o.sc[k] = scales4(l0, l0, l1, l1);
    }
    o.d = h2f(b.d) * 0.125f;
  }
};

template <typename Block>
inline void iq2_scales16(const Block& b, IqGridBlock& o) {
  for (int k = 0; k < 4; ++k) {
    const uint32_t s0 = b.scales[2 * k], s1 = b.scales[2 * k + 1];
    o.sc[k] = scales4(2 * (s0 & 0xF) + 1, 2 * (s0 >> 4) + 1, 2 * (s1 & 0xF) + 1, 2 * (s1 >> 4) + 1);
  }
}

struct Iq2XsDecoder {
  using Block = block_iq2_xs;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint64_t* grid = grids.iq2xs;
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
      o.mag[k] =
          points8_64(grid, _mm512_and_si512(_mm512_cvtepu16_epi64(q), _mm512_set1_epi64(511)));
      // The eight 7-bit sign fields, bits 9..15 of each 16-bit word.
      const uint64_t fields = _pext_u64(load_u64(b.qs + 8 * k), 0xFE00FE00FE00FE00ull) |
                              _pext_u64(load_u64(b.qs + 8 * k + 4), 0xFE00FE00FE00FE00ull) << 28;
      o.neg[k] = iq2_sign_bytes(fields);
    }
    iq2_scales16(b, o);
    o.d = h2f(b.d) * 0.125f;
  }
};

struct Iq2SDecoder {
  using Block = block_iq2_s;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint64_t* grid = grids.iq2s;
    for (int k = 0; k < 4; ++k) {
      // Lane l: qs[8 k + l] | (qh[2 k + l / 4] >> 2 (l % 4) & 3) << 8.
      const __m512i shifts = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
      const __m512i idx =
          _mm512_or_si512(bytes8_64(b.qs + 8 * k), high_bits_64(load_u16(b.qh + 2 * k), shifts, 3));
      o.mag[k] = points8_64(grid, idx);
      o.neg[k] = load_u64(b.qs + kQK_K / 8 + 8 * k);
    }
    iq2_scales16(b, o);
    o.d = h2f(b.d) * 0.125f;
  }
};

struct Iq3XxsDecoder {
  using Block = block_iq3_xxs;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint32_t* grid = grids.iq3xxs;
    for (int k = 0; k < 4; ++k) {
      alignas(64) uint32_t idx[16];
      for (int l = 0; l < 16; ++l) idx[l] = b.qs[16 * k + l];
      o.mag[k] = points4_64(grid, idx);
      const uint64_t sg = load_u64(b.qs + kQK_K / 4 + 8 * k);  // sub-blocks 2k, 2k + 1
      o.neg[k] = iq2_sign_bytes((sg & 0x0FFFFFFF) | ((sg >> 32) & 0x0FFFFFFF) << 28);
      const uint32_t l0 = 2 * static_cast<uint32_t>((sg >> 28) & 15) + 1, l1 = 2 * static_cast<uint32_t>(sg >> 60) + 1;
      o.sc[k] = scales4(l0, l0, l1, l1);
    }
    o.d = h2f(b.d) * 0.25f;
  }
};

struct Iq3SDecoder {
  using Block = block_iq3_s;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint32_t* grid = grids.iq3s;
    for (int k = 0; k < 4; ++k) {
      // Lane l: qs[16 k + l] | (qh[2 k + l / 8] >> (l % 8) & 1) << 8.
      const __m512i shifts =
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      const __m512i hi = _mm512_and_si512(
          _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(load_u16(b.qh + 2 * k))), shifts),
          _mm512_set1_epi32(1));
      const __m512i lo =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k)));
      o.mag[k] = points4_64(grid, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 8)));
      o.neg[k] = load_u64(b.signs + 8 * k);
      const uint32_t l0 = 2 * (b.scales[k] & 0xF) + 1, l1 = 2 * (b.scales[k] >> 4) + 1;
      o.sc[k] = scales4(l0, l0, l1, l1);
    }
    o.d = h2f(b.d);
  }
};

// IQ1: 8 g + (the shift's sign), its magnitude and sign; `minus` marks the
// lanes whose shift is negative.
inline void iq1_values(__m512i g, __mmask64 minus, IqGridBlock& o, int k) {
  const __m512i g8 = _mm512_slli_epi16(_mm512_and_si512(g, _mm512_set1_epi8(0x1F)), 3);  // (g & 31) * 8: 0, 8, 248
  const __m512i v = _mm512_mask_blend_epi8(minus, _mm512_add_epi8(g8, _mm512_set1_epi8(1)),
                                           _mm512_sub_epi8(g8, _mm512_set1_epi8(1)));
  o.mag[k] = _mm512_abs_epi8(v);
  o.neg[k] = _mm512_movepi8_mask(v);
}

struct Iq1SDecoder {
  using Block = block_iq1_s;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint64_t* grid = grids.iq1s;
    // Lane l of a quarter: qs[8 k + l] | (qh[2 k + l / 4] >> 3 (l % 4) & 7) << 8.
    const __m512i shifts = _mm512_setr_epi64(0, 3, 6, 9, 16, 19, 22, 25);
    for (int k = 0; k < 4; ++k) {
      const uint32_t qh2 = load_u32(b.qh + 2 * k);
      const __m512i idx = _mm512_or_si512(bytes8_64(b.qs + 8 * k), high_bits_64(qh2, shifts, 7));
      const uint64_t minus = ((0 - static_cast<uint64_t>((qh2 >> 15) & 1)) & 0xFFFFFFFFull) |
                             (0 - static_cast<uint64_t>(qh2 >> 31))
                                 << 32;  // no branch on random bits
      const uint32_t l0 = 2 * ((qh2 >> 12) & 7) + 1, l1 = 2 * ((qh2 >> 28) & 7) + 1;
      o.sc[k] = scales4(l0, l0, l1, l1);
      iq1_values(points8_64(grid, idx), minus, o, k);
    }
    o.d = h2f(b.d) * 0.125f;
  }
};

struct Iq1MDecoder {
  using Block = block_iq1_m;
  static void decode(const Block& b, const IqGrids& grids, IqGridBlock& o) {
    const uint64_t* grid = grids.iq1s;
    uint16_t sc[4];
    iq1_m_scale_words(b, sc);
    // Lane l of a quarter takes nibble l of qh[4 k .. 4 k + 3]: bits 0..2 its
    // index's high bits, bit 3 its shift's sign.
    const __m512i shifts = _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28);
    for (int k = 0; k < 4; ++k) {
      const uint32_t h = load_u32(b.qh + 4 * k);
      const __m512i idx = _mm512_or_si512(bytes8_64(b.qs + 8 * k), high_bits_64(h, shifts, 7));
      const uint64_t minus = _pdep_u64(_pext_u32(h, 0x88888888u), 0x0101010101010101ull) * 0xFF;
      iq1_values(points8_64(grid, idx), minus, o, k);
      const uint32_t s = sc[k];  // sub-blocks 2k (bits 0..5), 2k + 1 (bits 6..11)
      o.sc[k] = scales4(2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1, 2 * ((s >> 6) & 7) + 1, 2 * ((s >> 9) & 7) + 1);
    }
    o.d = h2f(iq1_m_d(sc)) * 0.125f;
  }
};

// A K-quant block decoded: the values as magnitudes and its mins (the tile
// reads no sign mask for these).
struct KMinBlock : IqGridBlock {
  __m256i min16;  // the min of each 16 weights
  float dmin;
};

// Quarter k's 2-bit fields of Q2_K's and Q3_K's qs: fields 2 (k % 2) and
// 2 (k % 2) + 1 of qs[32 (k / 2) ...], its first and second 32 weights.
inline __m512i k_quant_2bits(const uint8_t* qs, int k) {
  __m512i q = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 2))));
  if (k % 2) q = _mm512_srli_epi16(q, 4);
  const __m512i shift =
      _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);  // 0 | 2
  return _mm512_and_si512(_mm512_srlv_epi16(q, shift), _mm512_set1_epi8(3));
}

// v plus `add` where quarter k's high bit is set: bit 2k of the 32 bytes
// `bits` (broadcast to both halves) for its first 32 weights, 2k + 1 for the
// next (Q3_K's hmask, Q5_K's qh).
inline __m512i add_high_bit(__m512i v, __m512i bits, int k, char add) {
  const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                         _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))), 1);
  return _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(bits, bit), v, _mm512_set1_epi8(add));
}

// Q2_K: the 2-bit fields as they are; a scale (low nibble) and a min (high
// nibble) per 16.
struct Q2KDecoder {
  using Block = block_q2_K;
  using Out = KMinBlock;
  static void decode(const Block& b, const IqGrids&, KMinBlock& o) {
    for (int k = 0; k < 4; ++k) {
      o.mag[k] = k_quant_2bits(b.qs, k);
      o.sc[k] =
          _pdep_u64(_pext_u32(load_u32(b.scales + 4 * k), 0x0F0F0F0Fu), 0x000F000F000F000Full);
    }
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    o.min16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
    o.d = h2f(b.d);
    o.dmin = h2f(b.dmin);
  }
};

// Q3_K: values q2 + 4 hbit - 4 with signed 6-bit scales: the magnitudes q2
// + 4 hbit (Q2_K's fields, hbit from hmask as Q5_K's fifth bits from qh),
// and the - 4 as a min of 4 scale per 16 weights with dmin = d.
struct Q3KDecoder {
  using Block = block_q3_K;
  using Out = KMinBlock;
  static void decode(const Block& b, const IqGrids&, KMinBlock& o) {
    // The 16 scales: low nibbles from bytes 0..7 (low, then high), two high
    // bits of scale i at bit 2 (i / 4) of byte 8 + i % 4; bias 32.
    const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(3);
    const __m128i lo =
        _mm_unpacklo_epi64(_mm_and_si128(s8, m4), _mm_and_si128(_mm_srli_epi16(s8, 4), m4));
    const __m128i hi =
        _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(load_u32(b.scales + 8))),
                                     _mm_setr_epi32(0, 2, 4, 6)),
                      m2);
    const __m256i sc16 = _mm256_cvtepi8_epi16(
        _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)));
    o.min16 = _mm256_slli_epi16(sc16, 2);
    const __m512i hm =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
    for (int k = 0; k < 4; ++k) {
      o.mag[k] = add_high_bit(k_quant_2bits(b.qs, k), hm, k, 4);
    }
    o.sc[0] = static_cast<uint64_t>(_mm256_extract_epi64(sc16, 0));
    o.sc[1] = static_cast<uint64_t>(_mm256_extract_epi64(sc16, 1));
    o.sc[2] = static_cast<uint64_t>(_mm256_extract_epi64(sc16, 2));
    o.sc[3] = static_cast<uint64_t>(_mm256_extract_epi64(sc16, 3));
    o.d = h2f(b.d);
    o.dmin = o.d;
  }
};

// Q5_K: quarter k is sub-blocks 2k (low nibbles of qs[32 k ...]) and 2k + 1
// (high nibbles), fifth bits from qh; 6-bit scales and mins per 32.
struct Q5KDecoder {
  using Block = block_q5_K;
  using Out = KMinBlock;
  static void decode(const Block& b, const IqGrids&, KMinBlock& o) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    uint64_t sc, mn;  // a byte each
    k4_scales_mins(b.scales, &sc, &mn);
    const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(mn));
    o.min16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    for (int k = 0; k < 4; ++k) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * k));
      const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q, m4)),
                                           _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), 1);
      o.mag[k] = add_high_bit(v, qh, k, 16);
      // Scales 2k, 2k, 2k + 1, 2k + 1 as the four 16-bit fields.
      const uint64_t pair = _pdep_u64(sc >> (16 * k), 0x000000FF000000FFull);
      o.sc[k] = pair | (pair << 16);
    }
    o.d = h2f(b.d);
    o.dmin = h2f(b.dmin);
  }
};

// Decoders of blocks with mins name their decoded form.
template <typename D>
concept HasMins = requires {
  typename D::Out;
};

template <typename D>
struct IqGridKernel {
  using Act = IqGridAct;
  using XBlock = block_q8_K;
  static constexpr int kBlocksPerStep = 1;
  static constexpr int kSegSteps = 16;
  static constexpr int kBlockElems = kQK_K;
  static constexpr size_t kBlockBytes = sizeof(typename D::Block);
  static void prep(const XBlock* xb, int, Act& a) {
    for (int k = 0; k < 4; ++k) a.y[k] = _mm512_loadu_si512(xb->qs + 64 * k);
    a.bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb->bsums));
    a.d = xb->d;
  }

  template <int R, int T>
  static void tile(const uint8_t* w, size_t w_stride, const Act (*act)[kSegSteps], int64_t nb, float* y,
                   size_t y_stride, bool accumulate) {
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    // 16-bit lane L of a quarter pairs its weights 2 L, 2 L + 1: scale L / 8.
    alignas(64) int16_t v[32];
    for (int l = 0; l < 32; ++l) v[l] = static_cast<int16_t>(l / 8);
    const __m512i sel = _mm512_load_si512(v);
    constexpr bool kMins = HasMins<D>;
    std::conditional_t<kMins, KMinBlock, IqGridBlock> blk;
    const IqGrids& grids = iq_grids();
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < R; ++r) {
        const auto* wb = reinterpret_cast<const typename D::Block*>(w + r * w_stride) + b;
        prefetch_ahead(wb, 2);
        D::decode(*wb, grids, blk);
        __m512i scv[4];
        for (int k = 0; k < 4; ++k)
          scv[k] = _mm512_permutexvar_epi16(sel, _mm512_set1_epi64(static_cast<int64_t>(blk.sc[k])));
        for (int t = 0; t < T; ++t) {
          const IqGridAct& a = act[t][b];
          __m512i s = _mm512_setzero_si512();
          for (int k = 0; k < 4; ++k) {
            __m512i ys = a.y[k];
            if constexpr (!kMins)
              ys = _mm512_mask_sub_epi8(ys, blk.neg[k], _mm512_setzero_si512(), ys);
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(blk.mag[k], ys), scv[k]);
          }
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(blk.d * a.d), acc[r][t]);
          if constexpr (kMins) {
            // The mins' 8 partial sums in the low half; the tile's lanes are summed at the end.
            const __m512i m = _mm512_zextsi256_si512(_mm256_madd_epi16(blk.min16, a.bsums));
            acc[r][t] =
                _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(blk.dmin * a.d), acc[r][t]);
          }
        }
      }
    }
    store_tile(acc, y, y_stride, accumulate);
  }
};

template <typename D>
void add_iq_grid(KernelTable& t, DType type) {
  t.dot[slot(type)] = PreparedFamily<IqGridKernel<D>, 2, 8>::dot;
  t.tile[slot(type)] = PreparedFamily<IqGridKernel<D>, 2, 8>::tile;
}

constexpr int kTileRows = 4, kTileTokens = 4;

template <typename W>
struct GenericQ8Kernel {
  template <int R, int T>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* x, size_t x_stride, int64_t nb,
                  float* y, size_t y_stride) {
    q8_0_tile<W, R, T>(w, w_stride, x, x_stride, nb, y, y_stride);
  }
};
// Dot and tile entries from a kernel's R x T instances (R, T <= 4).
template <typename K>
struct TileFamily {
  using Fn = void (*)(const uint8_t*, size_t, const uint8_t*, size_t, int64_t, float*, size_t);

  template <int R, int... Ts>
  static constexpr void fill_row(Fn (&f)[kTileRows][kTileTokens],
                                 std::integer_sequence<int, Ts...>) {
    ((f[R - 1][Ts] = K::template run<R, Ts + 1>), ...);
  }
  template <int... Rs>
  static constexpr void fill(Fn (&f)[kTileRows][kTileTokens], std::integer_sequence<int, Rs...>) {
    (fill_row<Rs + 1>(f, std::make_integer_sequence<int, kTileTokens>{}), ...);
  }
  static const Fn (&table())[kTileRows][kTileTokens] {
    static const auto t = [] {
      struct {
        Fn f[kTileRows][kTileTokens];
      } s{};
      fill(s.f, std::make_integer_sequence<int, kTileRows>{});
      return s;
    }();
    return t.f;
  }

  static float dot(const void* w, const void* x, int64_t n) {
    float y;
    K::template run<1, 1>(static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0,
                          n / kQK, &y, 0);
    return y;
  }

  static void tile(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
                   int64_t nt, int64_t n, float* y, size_t y_stride) {
    const auto& f = table();
    for (int64_t t = 0; t < nt; t += kTileTokens) {
      const int64_t tn = std::min<int64_t>(kTileTokens, nt - t);
      for (int64_t r = 0; r < nr; r += kTileRows) {
        const int64_t rn = std::min<int64_t>(kTileRows, nr - r);
        f[rn - 1][tn - 1](w + r * w_stride, w_stride, x + t * x_stride, x_stride, n / kQK,
                          y + t * y_stride + r, y_stride);
      }
    }
  }
};

// attend_x86 at 16 lanes, for the decode step (one query over a head's
// cached rows, consecutive in the head-major cache): half the instructions
// per position. Heads narrower than 16 take the 8-wide kernel.
// Elements [i, i + 16) of a cached row as floats (kernels/x86/x86_common.h's
// load8; Q8_0, Q4_0: i a multiple of 16).
inline __m512 load16(const float* row, int i) { return _mm512_loadu_ps(row + i); }
inline __m512 load16(const uint16_t* row, int i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)));
}
inline __m512 load16(const block_q8_0* row, int i) {
  const block_q8_0& b = row[i / kQK];
  const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + i % kQK)));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(b.d)));
}
// Q4_0: elements 0..15 of a block are its bytes' low nibbles, 16..31 the high ones.
inline __m512 load16(const block_q4_0* row, int i) {
  const block_q4_0& b = row[i / kQK];
  __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
  q = i % kQK == 0 ? _mm512_and_si512(q, _mm512_set1_epi32(0x0F)) : _mm512_srli_epi32(q, 4);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(8))),
                       _mm512_set1_ps(_cvtsh_ss(b.d)));
}

// Elements [i, i + 32) of a cached row as two load16 vectors (Q8_0, Q4_0: i a
// multiple of 32, one block). Q4_0 widens its block once: the 16 values
// (j - 8) * d are a table, and each half of the block is one permute of it
// by its nibbles (vpermps reads an index's low four bits, so the low nibbles
// need no mask), the same products load16 computes, in fewer operations.
template <typename KV>
inline void load32(const KV* row, int i, __m512& lo, __m512& hi) {
  lo = load16(row, i);
  hi = load16(row, i + 16);
}
inline void load32(const block_q8_0* row, int i, __m512& lo, __m512& hi) {
  const block_q8_0& b = row[i / kQK];
  const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(b.d)));
  const auto* qs = reinterpret_cast<const __m128i*>(b.qs);
  lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs))), d);
  hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs + 1))), d);
}
inline void load32(const block_q4_0* row, int i, __m512& lo, __m512& hi) {
  const block_q4_0& b = row[i / kQK];
  const __m512 values = _mm512_mul_ps(_mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7),
                                      _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(b.d))));
  const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
  lo = _mm512_permutexvar_ps(x, values);
  hi = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), values);
}

// f(i, kv) for i = 0, 16, .. < n16, in that order, kv[r] elements [i, i + 16)
// of row r (R rows, stride apart), a block (32 elements) at a time where they
// fall in one.
template <int R, typename KV, typename F>
[[gnu::always_inline]] inline void each16(const KV* row, size_t stride, int n16, F&& f) {
  int i = 0;
  for (; i + 32 <= n16; i += 32) {
    __m512 lo[R], hi[R];
    for (int r = 0; r < R; ++r) load32(row + r * stride, i, lo[r], hi[r]);
    f(i, lo);
    f(i + 16, hi);
  }
  if (i < n16) {
    __m512 kv[R];
    for (int r = 0; r < R; ++r) kv[r] = load16(row + r * stride, i);
    f(i, kv);
  }
}

// The sums of four vectors, each in _mm512_reduce_add_ps's order (lanes j
// and j + 8, then j + 4, then 0 + 2 and 1 + 3, then those two), so each is the
// bits that reduction gives, for about a third of its shuffles.
inline __m128 reduce_add4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 u01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(a0, a1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(a2, a3, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 z = _mm512_add_ps(w, _mm512_permute_ps(w, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), z));
}

// out[0, 16A) = inv * sum over p of scores[p] * v[p][i0, i0 + 16A): A
// independent accumulators, each dimension summed in position order.
template <int A, typename KV>
inline void weighted_rows(const float* scores, const KV* v, int i0, size_t v_stride, int64_t n_pos, float inv,
                          float* out) {
  __m512 o[A];
  for (int a = 0; a < A; ++a) o[a] = _mm512_setzero_ps();
  for (int64_t p = 0; p < n_pos; ++p, v += v_stride) {
    prefetch_row(v, v_stride, 16 * A, p, n_pos, i0);
    const __m512 s = _mm512_set1_ps(scores[p]);
    if constexpr (A % 2 == 0) {
      for (int a = 0; a < A; a += 2) {
        __m512 lo, hi;
        load32(v, i0 + 16 * a, lo, hi);
        o[a] = _mm512_fmadd_ps(s, lo, o[a]);
        o[a + 1] = _mm512_fmadd_ps(s, hi, o[a + 1]);
      }
    } else {
      for (int a = 0; a < A; ++a) o[a] = _mm512_fmadd_ps(s, load16(v, i0 + 16 * a), o[a]);
    }
  }
  const __m512 iv = _mm512_set1_ps(inv);
  for (int a = 0; a < A; ++a) _mm512_storeu_ps(out + 16 * a, _mm512_mul_ps(o[a], iv));
}

template <typename KV>
void attend_512(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride, int64_t n_pos,
                int head_dim, int head_dim_v, float scale, float* scores, float* out, float sink) {
  if (head_dim < 16 || head_dim_v < 16) {
    attend_x86(q, k, k_stride, v, v_stride, n_pos, head_dim, head_dim_v, scale, scores, out, sink);
    return;
  }
  const int hd16 = head_dim & ~15;
  auto tail = [&](const KV* kp, float s) {
    for (int i = hd16; i < head_dim; ++i) s = std::fma(q[i], kv_value(kp, i), s);
    return s * scale;
  };
  int64_t p = 0;
  // A Q4_0 cache's keys eight positions at a time: their widening, not the
  // memory, bounds that loop, and eight independent sums keep more of it in
  // flight (tests/tensor/bench/bench_attend, bench/RESULTS.md); the other
  // caches read at or near the memory's rate four at a time.
  if constexpr (std::is_same_v<KV, block_q4_0>) {
    if (hd16 == head_dim) {
      for (; p + 8 <= n_pos; p += 8) {
        const KV* k0 = k + p * k_stride;
        for (int r = 0; r < 8; ++r)
          prefetch_row(k0 + r * k_stride, k_stride, head_dim, p + r, n_pos);
        __m512 a[8];
        for (int r = 0; r < 8; ++r) a[r] = _mm512_setzero_ps();
        each16<8>(k0, k_stride, hd16, [&](int i, const __m512(&kv)[8]) {
          const __m512 qv = _mm512_loadu_ps(q + i);
          for (int r = 0; r < 8; ++r) a[r] = _mm512_fmadd_ps(qv, kv[r], a[r]);
        });
        const __m128 sc = _mm_set1_ps(scale);
        _mm_storeu_ps(scores + p, _mm_mul_ps(reduce_add4(a[0], a[1], a[2], a[3]), sc));
        _mm_storeu_ps(scores + p + 4, _mm_mul_ps(reduce_add4(a[4], a[5], a[6], a[7]), sc));
      }
    }
  }
  for (; p + 4 <= n_pos; p += 4) {
    const KV* k0 = k + p * k_stride;
    for (int r = 0; r < 4; ++r) prefetch_row(k0 + r * k_stride, k_stride, head_dim, p + r, n_pos);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    each16<4>(k0, k_stride, hd16, [&](int i, const __m512 (&kv)[4]) {
      const __m512 qv = _mm512_loadu_ps(q + i);
      a0 = _mm512_fmadd_ps(qv, kv[0], a0);
      a1 = _mm512_fmadd_ps(qv, kv[1], a1);
      a2 = _mm512_fmadd_ps(qv, kv[2], a2);
      a3 = _mm512_fmadd_ps(qv, kv[3], a3);
    });
    if (hd16 == head_dim) {  // tail() with nothing to add: the four at once
      _mm_storeu_ps(scores + p, _mm_mul_ps(reduce_add4(a0, a1, a2, a3), _mm_set1_ps(scale)));
    } else {
      scores[p] = tail(k0, _mm512_reduce_add_ps(a0));
      scores[p + 1] = tail(k0 + k_stride, _mm512_reduce_add_ps(a1));
      scores[p + 2] = tail(k0 + 2 * k_stride, _mm512_reduce_add_ps(a2));
      scores[p + 3] = tail(k0 + 3 * k_stride, _mm512_reduce_add_ps(a3));
    }
  }
  for (; p < n_pos; ++p) {
    const KV* kp = k + p * k_stride;
    __m512 a = _mm512_setzero_ps();
    each16<1>(kp, k_stride, hd16, [&](int i, const __m512 (&kv)[1]) {
      a = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), kv[0], a);
    });
    scores[p] = tail(kp, _mm512_reduce_add_ps(a));
  }

  const float inv = softmax_exp(scores, n_pos, sink);
  // One pass over the rows per 128 dimensions (8 accumulators hide the fma
  // latency), then 64, then 16, then single dimensions.
  int i0 = 0;
  for (; i0 + 128 <= head_dim_v; i0 += 128) weighted_rows<8>(scores, v, i0, v_stride, n_pos, inv, out + i0);
  for (; i0 + 64 <= head_dim_v; i0 += 64) weighted_rows<4>(scores, v, i0, v_stride, n_pos, inv, out + i0);
  for (; i0 + 16 <= head_dim_v; i0 += 16) weighted_rows<1>(scores, v, i0, v_stride, n_pos, inv, out + i0);
  for (; i0 < head_dim_v; ++i0) {
    float o = 0;
    for (p = 0; p < n_pos; ++p) o = std::fma(scores[p], kv_value(v + p * v_stride, i0), o);
    out[i0] = o * inv;
  }
}

// attend_group at 16 lanes, for a prompt's queries (kernels/x86/x86_common.h
// has the 8-lane one it replaces): G <= 8 queries share each key and value
// row, two positions per step in the dots, 32 output dims per step in the
// weighted sum. The G x 2 dot vectors fold to 8 lanes and then to sums four
// at a time.
template <int G, typename KV>
void attend_group_512(const float* q, size_t q_stride, const int32_t* n_pos, const KV* k, size_t k_stride,
                      const KV* v, size_t v_stride, int head_dim, int head_dim_v, float scale, float* scores,
                      float* out, size_t out_stride, float sink) {
  if (head_dim < 16 || head_dim_v < 16) {  // the 8-lane kernel, four queries at a time
    for (int g0 = 0; g0 < G; g0 += 4) {
      const float* qg = q + g0 * q_stride;
      float* og = out + g0 * out_stride;
      switch (std::min(4, G - g0)) {
        case 1:
          attend_x86(qg, k, k_stride, v, v_stride, n_pos[g0], head_dim, head_dim_v, scale, scores, og, sink);
          break;
        case 2:
          attend_group<2>(qg, q_stride, n_pos + g0, k, k_stride, v, v_stride, head_dim, head_dim_v, scale,
                          scores, og, out_stride, sink);
          break;
        case 3:
          attend_group<3>(qg, q_stride, n_pos + g0, k, k_stride, v, v_stride, head_dim, head_dim_v, scale,
                          scores, og, out_stride, sink);
          break;
        default:
          attend_group<4>(qg, q_stride, n_pos + g0, k, k_stride, v, v_stride, head_dim, head_dim_v, scale,
                          scores, og, out_stride, sink);
      }
    }
    return;
  }
  int64_t P = 0;
  for (int g = 0; g < G; ++g) P = std::max<int64_t>(P, n_pos[g]);
  const int hd16 = head_dim & ~15;
  auto fold = [](__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  };
  constexpr int kA = G > 4 ? 8 : 4;  // accumulators (the unused ones stay zero)
  auto finish = [&](int64_t p, const __m512 (&a)[kA]) {
    float s[8];
    _mm_storeu_ps(s, hsum4(fold(a[0]), fold(a[1]), fold(a[2]), fold(a[3])));
    if constexpr (kA == 8) _mm_storeu_ps(s + 4, hsum4(fold(a[4]), fold(a[5]), fold(a[6]), fold(a[7])));
    const KV* kp = k + p * k_stride;
    for (int g = 0; g < G; ++g) {
      float d = s[g];
      for (int i = hd16; i < head_dim; ++i) d = std::fma(q[g * q_stride + i], kv_value(kp, i), d);
      scores[g * P + p] = d * scale;
    }
  };
  int64_t p = 0;
  for (; p + 2 <= P; p += 2) {
    const KV* k0 = k + p * k_stride;
    __m512 a0[kA], a1[kA];
    for (int g = 0; g < kA; ++g) a0[g] = a1[g] = _mm512_setzero_ps();
    each16<2>(k0, k_stride, hd16, [&](int i, const __m512 (&kv)[2]) {
      for (int g = 0; g < G; ++g) {
        const __m512 qv = _mm512_loadu_ps(q + g * q_stride + i);
        a0[g] = _mm512_fmadd_ps(qv, kv[0], a0[g]);
        a1[g] = _mm512_fmadd_ps(qv, kv[1], a1[g]);
      }
    });
    finish(p, a0);
    finish(p + 1, a1);
  }
  for (; p < P; ++p) {
    const KV* kp = k + p * k_stride;
    __m512 a[kA];
    for (int g = 0; g < kA; ++g) a[g] = _mm512_setzero_ps();
    each16<1>(kp, k_stride, hd16, [&](int i, const __m512 (&kv)[1]) {
      for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * q_stride + i), kv[0], a[g]);
    });
    finish(p, a);
  }

  float inv[G];
  for (int g = 0; g < G; ++g) {
    inv[g] = softmax_exp(scores + g * P, n_pos[g], sink);
    std::fill(scores + g * P + n_pos[g], scores + (g + 1) * P, 0.0f);
  }

  int i0 = 0;
  for (; i0 + 32 <= head_dim_v; i0 += 32) {
    __m512 o[G][2];
    for (int g = 0; g < G; ++g) o[g][0] = o[g][1] = _mm512_setzero_ps();
    const KV* vp = v;
    for (p = 0; p < P; ++p, vp += v_stride) {
      __m512 v0, v1;
      load32(vp, i0, v0, v1);
      for (int g = 0; g < G; ++g) {
        const __m512 a = _mm512_set1_ps(scores[g * P + p]);
        o[g][0] = _mm512_fmadd_ps(a, v0, o[g][0]);
        o[g][1] = _mm512_fmadd_ps(a, v1, o[g][1]);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 iv = _mm512_set1_ps(inv[g]);
      _mm512_storeu_ps(out + g * out_stride + i0, _mm512_mul_ps(o[g][0], iv));
      _mm512_storeu_ps(out + g * out_stride + i0 + 16, _mm512_mul_ps(o[g][1], iv));
    }
  }
  for (; i0 + 16 <= head_dim_v; i0 += 16) {
    __m512 o[G];
    for (int g = 0; g < G; ++g) o[g] = _mm512_setzero_ps();
    const KV* vp = v;
    for (p = 0; p < P; ++p, vp += v_stride) {
      const __m512 v0 = load16(vp, i0);
      for (int g = 0; g < G; ++g) o[g] = _mm512_fmadd_ps(_mm512_set1_ps(scores[g * P + p]), v0, o[g]);
    }
    for (int g = 0; g < G; ++g)
      _mm512_storeu_ps(out + g * out_stride + i0, _mm512_mul_ps(o[g], _mm512_set1_ps(inv[g])));
  }
  for (; i0 < head_dim_v; ++i0)
    for (int g = 0; g < G; ++g) {
      float o = 0;
      for (p = 0; p < P; ++p) o = std::fma(scores[g * P + p], kv_value(v + p * v_stride, i0), o);
      out[g * out_stride + i0] = o * inv[g];
    }
}

struct GroupKernel512 {
  static constexpr int kMaxGroup = 8;
  template <int G, typename KV>
  static void run(const float* q, size_t q_stride, const int32_t* n_pos, const KV* k, size_t k_stride,
                  const KV* v, size_t v_stride, int head_dim, int head_dim_v, float scale, float* scores,
                  float* out, size_t out_stride, float sink) {
    attend_group_512<G>(q, q_stride, n_pos, k, k_stride, v, v_stride, head_dim, head_dim_v, scale, scores,
                        out, out_stride, sink);
  }
};

// e^x for x <= 0 on 16 lanes: exp_nonpositive's steps (x86_common.h), lane for lane.
inline __m512 exp_nonpositive_16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

// The reference's rms_norm (kernels/ref, RmsNormFn) with its eight partial
// sums as the eight double lanes: the same bits.
void rms_norm_512(const float* x, const float* w, int64_t n, float eps, float* out) {
  __m512d acc = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    acc = _mm512_add_pd(acc, _mm512_mul_pd(v, v));
  }
  alignas(64) double part[8];
  _mm512_store_pd(part, acc);
  double sum =
      ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  const __m512 sv = _mm512_set1_ps(scale);
  i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(
        out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), sv), _mm512_loadu_ps(w + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// round_half_away (x86_common.h) on 16 lanes: roundf's ties away from zero.
inline __m512 round_half_away_16(__m512 v) {
  const __m512 rne = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 half = _mm512_or_ps(_mm512_set1_ps(0.5f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
  const __mmask16 tie_toward_zero = _mm512_cmp_ps_mask(_mm512_sub_ps(v, rne), half, _CMP_EQ_OQ);
  return _mm512_mask_add_ps(rne, tie_toward_zero, v, half);
}

// quantize_q8_0 (x86_common.h) a block as two vectors: the same scale (a max
// is exact in any order) and the same bytes (vpmovsdb saturates to int8 as
// the two packs do).
void quantize_q8_0_512(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const __m512 a = _mm512_loadu_ps(src), b = _mm512_loadu_ps(src + 16);
    const float d =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b))) /
        127;
    y[i].d = f2h(d);
    const __m512 mul = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    auto bytes = [&](__m512 x) {
      return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(round_half_away_16(_mm512_mul_ps(x, mul))));
    };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs), bytes(a));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16), bytes(b));
  }
}

// times_sigmoid_8, silu_mul_8 and swiglu_clamped_8 (x86_common.h) on 16
// lanes, lane for lane the same steps: the sign bit of a picks z / (1 + z),
// and a below -87 (not NaN) gives 0.
inline __m512 times_sigmoid_16(__m512 x, __m512 a) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 z = exp_nonpositive_16(_mm512_or_ps(a, _mm512_set1_ps(-0.0f)));  // e^-|a|
  const __m512 r = _mm512_div_ps(one, _mm512_add_ps(one, z));
  __m512 s = _mm512_mask_mul_ps(r, _mm512_movepi32_mask(_mm512_castps_si512(a)), z, r);
  s = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), s);
  return _mm512_mul_ps(x, s);
}
inline __m512 silu_mul_16(__m512 x, __m512 u) { return _mm512_mul_ps(times_sigmoid_16(x, x), u); }
inline __m512 swiglu_clamped_16(__m512 g, __m512 u) {
  const __m512 limit = _mm512_set1_ps(7.0f);
  const __m512 x = _mm512_min_ps(limit, g);
  const __m512 v = _mm512_max_ps(_mm512_set1_ps(-7.0f), _mm512_min_ps(limit, u));
  return _mm512_mul_ps(times_sigmoid_16(x, _mm512_mul_ps(_mm512_set1_ps(1.702f), x)),
                       _mm512_add_ps(v, _mm512_set1_ps(1.0f)));
}

// y = f(g, u) sixteen elements at a time, the last partial vector masked
// (its missing lanes zeros, as map8 pads them).
template <__m512 (*f)(__m512, __m512)>
void map16(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

void silu_mul_512(const float* g, const float* u, float* y, int64_t n) { map16<silu_mul_16>(g, u, y, n); }
void swiglu_clamped_512(const float* g, const float* u, float* y, int64_t n) {
  map16<swiglu_clamped_16>(g, u, y, n);
}

// The first n elements of a cached row as floats (exact: kv_row.h).
template <typename KV>
inline void row_to_f32(const KV* row, int n, float* dst) {
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 lo, hi;
    load32(row, i, lo, hi);
    _mm512_store_ps(dst + i, lo);
    _mm512_store_ps(dst + i + 16, hi);
  }
  for (; i + 16 <= n; i += 16) _mm512_store_ps(dst + i, load16(row, i));
  for (; i < n; ++i) dst[i] = kv_value(row, i);
}

// The largest head attend_lanes_512 takes. MLA's absorbed heads (576) stay
// with the group kernels: their transposed queries alone (36 KiB) and a block
// of keys leave no room in L1, and DeepSeek-V2-Lite's prompt attention ran
// 11-18% slower in the lanes kernel than in groups.
constexpr int kLaneMaxDim = 256;
// A block of 8 keys as floats, rows kLaneKeyStride floats apart: 2304 bytes,
// not packed rows, which in bench_attend_prompt (f16, 128 dims) read as fast
// or up to 13% slower (512- and 576-byte rows).
constexpr int kLaneKeyRows = 8;
constexpr int kLaneKeyStride = 576;

// s[r] lanes = scale * sum over i of k[r][i] * qt[i] lanes, R keys (rows `ld`
// apart), each lane a query: every product a broadcast of one key element
// times the 16 queries' element, in element order.
template <int R>
[[gnu::always_inline]] inline void lane_dots(const float* qt, int head_dim, const float* k,
                                             size_t ld, float scale, float* s, int s_step,
                                             __mmask16 lanes) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  auto step = [&](int i) [[gnu::always_inline]] {
    const __m512 qv = _mm512_load_ps(qt + 16 * i);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(k[r * ld + i]), qv, acc[r]);
  };
  int i = 0;
  for (; i + 4 <= head_dim; i += 4) {
    step(i);
    step(i + 1);
    step(i + 2);
    step(i + 3);
  }
  for (; i < head_dim; ++i) step(i);
  const __m512 sc = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(s + r * s_step, lanes, _mm512_mul_ps(acc[r], sc));
}

// out[g][i0, i0 + 16A) = inv[g] * sum over p < P of w[p][g] * v[p][i0, ..), for
// N queries from g0 (w: rows of `w_step` weights, one a query).
template <int N, int A, typename KV>
[[gnu::always_inline]] inline void lane_values(const float* w, int w_step, int g0, const KV* v,
                                               size_t v_stride, int64_t P, int i0, const float* inv,
                                               float* out, size_t out_stride) {
  __m512 o[N][A];
  for (int g = 0; g < N; ++g)
    for (int a = 0; a < A; ++a) o[g][a] = _mm512_setzero_ps();
  const size_t row_bytes = kv_row_bytes<KV>(16 * A);
  auto step = [&](int64_t p) [[gnu::always_inline]] {
    const KV* vp = v + p * v_stride;
    const float* wp = w + p * w_step + g0;
    __m512 x0, x1;
    if constexpr (A == 2)
      load32(vp, i0, x0, x1);
    else
      x0 = load16(vp, i0);
    for (int g = 0; g < N; ++g) {
      const __m512 a = _mm512_set1_ps(wp[g]);
      o[g][0] = _mm512_fmadd_ps(a, x0, o[g][0]);
      if constexpr (A == 2) o[g][1] = _mm512_fmadd_ps(a, x1, o[g][1]);
    }
  };
  // Rows prefetched as prefetch_row does (16 ahead into L1, 64 into L2),
  // in three loops so that none branches on it.
  auto ahead = [&](int64_t p, int64_t rows, int hint) [[gnu::always_inline]] {
    const char* r = kv_addr(v + (p + rows) * v_stride, i0);
    for (size_t c = 0; c < row_bytes; c += 64)
      hint ? _mm_prefetch(r + c, _MM_HINT_T0) : _mm_prefetch(r + c, _MM_HINT_T1);
  };
  int64_t p = 0;
  for (; p + kRowsFarAhead < P; ++p) {
    ahead(p, kRowsAhead, 1);
    ahead(p, kRowsFarAhead, 0);
    step(p);
  }
  for (; p + kRowsAhead < P; ++p) {
    ahead(p, kRowsAhead, 1);
    step(p);
  }
  for (; p < P; ++p) step(p);
  for (int g = 0; g < N; ++g) {
    const __m512 iv = _mm512_set1_ps(inv[g0 + g]);
    for (int j = 0; j < A; ++j)
      _mm512_storeu_ps(out + (g0 + g) * out_stride + i0 + 16 * j, _mm512_mul_ps(o[g][j], iv));
  }
}

// Up to 16 queries of one sequence, one a lane: a prompt's block of
// consecutive tokens on one head, or a decode step's heads that share a KV
// head. attend_group_512 keeps head dims in its lanes, so each score ends in
// a horizontal sum (fold, hadd, a scalar store); here the lanes are the
// queries: the keys' elements are broadcast against the transposed queries,
// 8 keys at a time, the softmax runs lane-wise down the positions, and the
// weighted sum of V takes 8 queries and 32 dims a step. No horizontal sum is
// left. Each query's result is computed in its own lane in the same order
// whatever the other lanes hold. scores: n_q x P floats.
template <typename KV>
void attend_lanes_512(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                      size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                      float scale, float* scores, float* out, size_t out_stride, float sink) {
  alignas(64) float qt[kLaneMaxDim * 16];
  alignas(64) float kf[kLaneKeyRows * kLaneKeyStride];
  const __mmask16 lanes = static_cast<__mmask16>((1u << n_q) - 1);
  const __m512i npos = _mm512_maskz_loadu_epi32(lanes, n_pos);
  const int64_t P = _mm512_reduce_max_epi32(npos);
  // The queries transposed: qt[i] lanes are element i of each query (0 past n_q).
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(q_stride)));
  for (int i = 0; i < head_dim; ++i)
    _mm512_store_ps(qt + 16 * i,
                    _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, rows, q + i, 4));

  // Scores, 8 keys at a time (then 4, 2, 1), each key row made floats once
  // (the dots alone, one thread, in cache: 90-94 GFMA/s with 8 keys a step,
  // 72-78 with 16).
  const int s_step = n_q;
  for (int64_t p0 = 0; p0 < P;) {
    const int64_t left = P - p0;
    const int R = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    const float* kr;
    size_t ld;
    if constexpr (std::is_same_v<KV, float>) {
      kr = k + p0 * k_stride;
      ld = k_stride;
      for (int r = 0; r < R; ++r) prefetch_row(kr + r * k_stride, k_stride, head_dim, p0 + r, P);
    } else {
      ld = kLaneKeyStride;
      for (int r = 0; r < R; ++r) {
        const KV* row = k + (p0 + r) * k_stride;
        prefetch_row(row, k_stride, head_dim, p0 + r, P);
        row_to_f32(row, head_dim, kf + r * ld);
      }
      kr = kf;
    }
    float* s = scores + p0 * s_step;
    switch (R) {
      case 8:
        lane_dots<8>(qt, head_dim, kr, ld, scale, s, s_step, lanes);
        break;
      case 4:
        lane_dots<4>(qt, head_dim, kr, ld, scale, s, s_step, lanes);
        break;
      case 2:
        lane_dots<2>(qt, head_dim, kr, ld, scale, s, s_step, lanes);
        break;
      default:
        lane_dots<1>(qt, head_dim, kr, ld, scale, s, s_step, lanes);
    }
    p0 += R;
  }

  // Softmax down each lane: the largest visible score (and the sink), then
  // e^(s - max) where the query sees the position and 0 where it does not.
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t p = 0; p < P; ++p) {
    const __mmask16 seen =
        _mm512_mask_cmpgt_epi32_mask(lanes, npos, _mm512_set1_epi32(static_cast<int>(p)));
    mx = _mm512_mask_max_ps(mx, seen, mx, _mm512_maskz_loadu_ps(lanes, scores + p * s_step));
  }
  mx = _mm512_max_ps(mx, _mm512_set1_ps(sink));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t p = 0; p < P; ++p) {
    const __mmask16 seen =
        _mm512_mask_cmpgt_epi32_mask(lanes, npos, _mm512_set1_epi32(static_cast<int>(p)));
    const __m512 e = _mm512_maskz_mov_ps(
        seen,
        exp_nonpositive_16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, scores + p * s_step), mx)));
    _mm512_mask_storeu_ps(scores + p * s_step, lanes, e);
    sum = _mm512_add_ps(sum, e);
  }
  alignas(64) float inv[16];
  {
    alignas(64) float m[16], s[16];
    _mm512_store_ps(m, mx);
    _mm512_store_ps(s, sum);
    for (int g = 0; g < n_q; ++g) inv[g] = 1.0f / (s[g] + std::exp(sink - m[g]));
  }

  // The weighted sums: 8 queries (then 4, 2, 1) by 32 dims (then 16, then one).
  for (int g0 = 0; g0 < n_q;) {
    const int left = n_q - g0;
    const int N = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    auto values = [&]<int A>(int i0) {
      switch (N) {
        case 8:
          lane_values<8, A>(scores, s_step, g0, v, v_stride, P, i0, inv, out, out_stride);
          break;
        case 4:
          lane_values<4, A>(scores, s_step, g0, v, v_stride, P, i0, inv, out, out_stride);
          break;
        case 2:
          lane_values<2, A>(scores, s_step, g0, v, v_stride, P, i0, inv, out, out_stride);
          break;
        default:
          lane_values<1, A>(scores, s_step, g0, v, v_stride, P, i0, inv, out, out_stride);
      }
    };
    int i0 = 0;
    for (; i0 + 32 <= head_dim_v; i0 += 32) values.template operator()<2>(i0);
    for (; i0 + 16 <= head_dim_v; i0 += 16) values.template operator()<1>(i0);
    for (; i0 < head_dim_v; ++i0)
      for (int g = g0; g < g0 + N; ++g) {
        float o = 0;
        for (int64_t p = 0; p < P; ++p)
          o = std::fma(scores[p * s_step + g], kv_value(v + p * v_stride, i0), o);
        out[g * out_stride + i0] = o * inv[g];
      }
    g0 += N;
  }
}

// The fewest queries the lanes kernel takes; fewer go to attend_group_512,
// whose work grows with the queries where this one's does not (one head, 1024
// F16 positions, one thread: 8 queries at a time 46.9 GFMA/s in groups against
// 34.3 here, 12 even, 16 here 79).
constexpr int kLaneMinQueries = 12;

// attend_batch at 16 lanes: blocks of kLaneMinQueries to 16 queries through
// attend_lanes_512, the rest through attend_batch_x86's group kernels.
template <typename KV>
void attend_batch_512(const float* q, size_t q_stride, int n_q, const int32_t* n_pos, const KV* k,
                      size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                      float scale, float* scores, float* out, size_t out_stride, float sink) {
  int i = 0;
  if (head_dim <= kLaneMaxDim)
    for (; n_q - i >= kLaneMinQueries; i += 16)
      attend_lanes_512(q + i * q_stride, q_stride, std::min(16, n_q - i), n_pos + i, k, k_stride, v,
                       v_stride, head_dim, head_dim_v, scale, scores, out + i * out_stride,
                       out_stride, sink);
  if (i < n_q)
    attend_batch_x86<KV, &attend_512<KV>, GroupKernel512>(
        q + i * q_stride, q_stride, n_q - i, n_pos + i, k, k_stride, v, v_stride, head_dim,
        head_dim_v, scale, scores, out + i * out_stride, out_stride, sink);
}

// Four 512-bit sums, 256 bytes (four cache lines) a step.
uint64_t read_sum_512(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m512i*>(p);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const size_t n = bytes / 64;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(v + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(v + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(v + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(v + i + 3));
  }
  // Lanes summed as unsigned: the sum wraps by design, and the intrinsic's
  // reduction adds signed 64-bit scalars, which may overflow.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t x : lanes) s += x;
  return s;
}

// Twelve independent vpdpbusd chains on zmm (64 multiply-accumulates each):
// enough in flight to cover the instruction's latency on two ports.
uint64_t int8_peak_512(int64_t rounds, int32_t* sink) {
  constexpr int kChains = 12;
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i u = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-5);
  for (int64_t r = 0; r < rounds; ++r)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], u, w);
  __m512i total = acc[0];
  for (int k = 1; k < kChains; ++k) total = _mm512_add_epi32(total, acc[k]);
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, total);
  uint32_t s = 0;  // wraps by design: the sum only keeps the chains live
  for (uint32_t x : lanes) s += x;
  *sink = static_cast<int32_t>(s);
  return static_cast<uint64_t>(rounds) * kChains * 64;
}

template <typename K>
void add_tile_family(KernelTable& t, DType type) {
  t.dot[slot(type)] = TileFamily<K>::dot;
  t.tile[slot(type)] = TileFamily<K>::tile;
}

}  // namespace

void add_avx512_kernels(KernelTable& t) {
  add_common_x86_kernels(t);
  t.read_sum = read_sum_512;
  t.int8_peak = int8_peak_512;
  t.dot[slot(DType::F32)] = dot_f32_512;
  t.dot[slot(DType::F16)] = dot_f16_512;
  t.dot[slot(DType::BF16)] = dot_bf16_512;
  // Tiles of 2 rows x 8 tokens: a row's unpacking serves 8 tokens (OLMoE
  // Q4_K_M pp64 138-140 -> 143 tok/s against 4 x 4; 1 x 16 no better).
  t.dot[slot(DType::Q6_K)] = PreparedFamily<Q6_KKernel, 2, 8>::dot;
  // Plain-layout q6_K products: every product runs the packed kernel
  // (PackedQ6K in avx512_packed.cpp, the same bits), so this tile serves
  // only callers of the table's plain entries.
  t.tile[slot(DType::Q6_K)] = PreparedFamily<Q6_KKernel, 2, 8>::tile;
  add_tile_family<GenericQ8Kernel<Q5_0Weights>>(t, DType::Q5_0);
  add_tile_family<GenericQ8Kernel<Mxfp4Weights>>(t, DType::MXFP4);
  add_tile_family<GenericQ8Kernel<Iq4NlWeights>>(t, DType::IQ4_NL);
  t.dot[slot(DType::IQ4_XS)] = PreparedFamily<Iq4XsKernel, 2, 8>::dot;
  t.tile[slot(DType::IQ4_XS)] = PreparedFamily<Iq4XsKernel, 2, 8>::tile;
  add_iq_grid<Iq2XxsDecoder>(t, DType::IQ2_XXS);
  add_iq_grid<Iq2XsDecoder>(t, DType::IQ2_XS);
  add_iq_grid<Iq2SDecoder>(t, DType::IQ2_S);
  add_iq_grid<Iq3XxsDecoder>(t, DType::IQ3_XXS);
  add_iq_grid<Iq3SDecoder>(t, DType::IQ3_S);
  add_iq_grid<Iq1SDecoder>(t, DType::IQ1_S);
  add_iq_grid<Iq1MDecoder>(t, DType::IQ1_M);
  add_iq_grid<Q2KDecoder>(t, DType::Q2_K);
  add_iq_grid<Q3KDecoder>(t, DType::Q3_K);
  add_iq_grid<Q5KDecoder>(t, DType::Q5_K);
  t.quantize[slot(DType::Q8_0)] = quantize_q8_0_512;
  t.rms_norm = rms_norm_512;
  t.silu_mul = silu_mul_512;
  t.swiglu_clamped = swiglu_clamped_512;
  t.attend = attend_512<float>;
  t.attend_f16 = attend_512<uint16_t>;
  t.attend_batch = attend_batch_512<float>;
  t.attend_batch_f16 = attend_batch_512<uint16_t>;
  t.attend_q8_0 = attend_512<block_q8_0>;
  t.attend_batch_q8_0 = attend_batch_512<block_q8_0>;
  t.attend_q4_0 = attend_512<block_q4_0>;
  t.attend_batch_q4_0 = attend_batch_512<block_q4_0>;
  add_avx512_packed_kernels(t);
}

}  // namespace colibri
