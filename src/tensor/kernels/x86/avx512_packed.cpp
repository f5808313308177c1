// AVX-512 VNNI kernels over packed row groups (kernels/ref/packed.cpp has the
// layout and the arithmetic, which these reproduce bit for bit).
//
// Lane i of every vector is row i of the group. Per block, each 64-byte word
// vector meets one broadcast 4-byte word of the token's activations in one
// vpdpbusd, so a block of 16 rows x 32 elements is 8 vpdpbusd per token (the
// weights are the unsigned operand: q4_0 nibbles as they are, q5_0 with
// its fifth bit added from a mask, q8_0 stored as q + 128, mxfp4 codes
// looked up (vpermb) as twice their E2M1 value + 12),
// and the lane's integer sum starts at -zero * sum(x) to undo the offset.
// Two chains of four keep the dependency short; integer sums are exact in
// any order. Then one conversion and one fma per block and token, and no
// horizontal sum at the end: the 16 lanes are the 16 outputs.
//
// Loop order: 64-token blocks, then groups, then tiles of tokens, so a
// group's weights (16 rows, 18 KB at n = 2048 for q4_0) stay in L1 while every
// tile of the token block reads them, and a token block's activations stay in
// L2. A product of several tokens takes its groups two at a time, in tiles of
// up to 6 tokens (Packed::pair_tile): each activation word then meets two
// groups' weights from one register.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/kernels/packed_layout.h"
#include "tensor/kernels/x86/q6_k_fields.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

constexpr int kTileTokens = 8;
// Tokens of a two-group tile (Packed::pair_tile): 2 x 8 weight vectors and
// 2 x kPairTokens accumulators in the 32 registers.
constexpr int kPairTokens = 6;
// How far ahead of its reads a kernel prefetches: into L1 4 KiB ahead, into
// L2 16 KiB ahead (kernels/x86/avx512.cpp has the measurements).
constexpr int kPrefetchBytes = 4096;
constexpr int kPrefetchFarBytes = 16384;

// prefetcht0 (kLevel 0) or prefetcht1 (1) of the lines of [p + kAhead, p +
// kAhead + kBytes), each as p's register and a constant offset. Written with
// _mm_prefetch, GCC 12 hoists each line's address out of the loop around it
// as a loop invariant and spills them: the q8_0 pair tile loaded 68 of them
// from the stack a unit, beside its 32 weight loads. (asm volatile: never
// dropped, which prefetch_unit below has to guard against.)
template <size_t kOffset, int kLevel>
[[gnu::always_inline]] inline void prefetch_line(const uint8_t* p) {
  if constexpr (kLevel == 0)
    asm volatile("prefetcht0 %c1(%0)" : : "r"(p), "i"(kOffset));
  else
    asm volatile("prefetcht1 %c1(%0)" : : "r"(p), "i"(kOffset));
}
template <size_t kAhead, int kLevel, size_t... k>
[[gnu::always_inline]] inline void prefetch_lines(const uint8_t* p, std::index_sequence<k...>) {
  (prefetch_line<kAhead + 64 * k, kLevel>(p), ...);
}
template <size_t kBytes, size_t kAhead, int kLevel>
[[gnu::always_inline]] inline void lines_ahead(const uint8_t* p) {
  prefetch_lines<kAhead, kLevel>(p, std::make_index_sequence<(kBytes + 63) / 64>{});
}

// The lines of [p, p + kBytes) kPrefetchBytes ahead into L1 and
// kPrefetchFarBytes ahead into L2 (inlined early: prefetch_unit says why).
template <size_t kBytes>
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* p) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t k = 0; k < kBytes; k += 64) {
    _mm_prefetch(c + k + kPrefetchBytes, _MM_HINT_T0);
    _mm_prefetch(c + k + kPrefetchFarBytes, _MM_HINT_T1);
  }
}

// A k-quant super-block's share of the stream (kBytes from p: the group's
// bytes over its super-blocks, so that the shares tile the stream) ahead, as
// prefetch_ahead, during its products, which come in 4 parts: a one-token
// tile, bound by memory, issues it all at part 0; a tile of several tokens,
// bound by its arithmetic, a quarter at each part. (bench/kernel_ab.sh, 1 GiB
// of 1024 x 2048 q6_K matrices from DRAM, 2 threads: a whole unit of two
// super-blocks, 105 lines, at once ran the 8-token tile at 0.65 of quarters;
// one token in quarters ran at 0.77 of its whole share at once.)
template <int T, size_t kBytes>
[[gnu::always_inline]] inline void prefetch_share(const uint8_t* p, int part) {
  if constexpr (T == 1) {
    if (part == 0) prefetch_ahead<kBytes>(p);
  } else {
    prefetch_ahead<kBytes / 4>(p + part * (kBytes / 4));
  }
}

// The lines kPrefetchBytes ahead of a unit (u: its first byte) into L1
// and kPrefetchFarBytes ahead into L2: a one-group tile reads its groups as
// one forward stream (kernels/packed_layout.h), a decode step streaming
// weights from DRAM once, so a distance in bytes lands on the lines it will
// read next, the next group's past a group's end. Inlined early on purpose:
// GCC 12 counts a function of prefetches alone as free of side effects and
// drops its calls (measured: no prefetch left in any tile, OLMoE Q4_0 decode
// 8% slower) unless its body is already in the caller.
template <typename Units>
[[gnu::always_inline]] inline void prefetch_unit(const uint8_t* u) {
  prefetch_ahead<Units::kUnitBytes>(u);
}

constexpr int64_t kTokenBlock = 64;

// The next tile's tokens of `left`, tiles of up to `step` as even as that
// allows (8 as two pair tiles of 4, not 6 and 2). A decode step's one token
// takes no division.
inline int64_t even_tile(int64_t left, int64_t step) {
  if (left <= step) return left;
  const int64_t tiles = (left + step - 1) / step;
  return (left + tiles - 1) / tiles;
}

// Per token and block: -zero * sum(x) and d_x.
struct XPrep {
  int32_t corr;
  float d;
};

// Which input a thread's kernel last prepared (each block's sum and scale,
// or the blocks in tile order). Within one input epoch (kernels/
// kernel_table.h) the next call on the same bytes keeps that preparation: a
// prompt's job calls a kernel once per chunk and matrix, and prepared each
// input row about ten times in OLMoE's pp512; q4_0's and q8_0's products
// there took 6% less time with it kept (the two alternating in one process).
struct LastInput {
  uint64_t epoch = 0;
  const uint8_t* x = nullptr;
  size_t x_stride = 0;
  int64_t nt = 0, nb = 0;

  // Whether the last preparation is this input's; if not, this input
  // becomes the last one (the caller prepares it).
  bool repeats(const uint8_t* x_, size_t x_stride_, int64_t nt_, int64_t nb_) {
    const uint64_t e = t_input_epoch;
    if (e != 0 && e == epoch && x_ == x && x_stride_ == x_stride && nt_ == nt && nb_ == nb)
      return true;
    epoch = e, x = x_, x_stride = x_stride_, nt = nt_, nb = nb_;
    return false;
  }
};

// Sizes prep for nt x nb preparations (it grows to the largest call, then is
// reused: no allocation per token) and says whether they must be made, that
// is unless `last` already holds this input's.
template <typename Prep>
bool must_prepare(std::vector<Prep>& prep, LastInput& last, const uint8_t* x, size_t x_stride,
                  int64_t nt, int64_t nb) {
  if (prep.size() < static_cast<size_t>(nt * nb)) prep.resize(static_cast<size_t>(nt * nb));
  return !last.repeats(x, x_stride, nt, nb);
}

// acc + vpdpbusd(w, the 4 bytes at p in every lane), and the same for
// vpdpwssd, with the 4 bytes broadcast by the instruction's own memory
// operand ({1to16}). GCC 12 does not fold _mm512_set1_epi32 of a load into
// either and issues a vpbroadcastd, one more vector operation per product:
// the packed q4_0 decode kernel spent as many broadcasts as vpdpbusds.
// Measured on Zen 4 (tests/tensor/bench/bench_stream, 1 GiB of 1024 x 2048
// q4_0 matrices, 2 threads, 8 a job, passes alternating): 19.9 -> 21.1 GB/s
// (with the q4_0 high nibbles below 22.3), from L2 one core 49.5 -> 53.3.
using AliasedWord = int32_t __attribute__((may_alias));
inline __m512i dpbusd_x(__m512i acc, __m512i w, const void* p) {
  asm("vpdpbusd %[x]%{1to16%}, %[w], %[acc]"
      : [acc] "+v"(acc)
      : [w] "v"(w), [x] "m"(*static_cast<const AliasedWord*>(p)));
  return acc;
}
inline __m512i dpwssd_x(__m512i acc, __m512i w, const void* p) {
  asm("vpdpwssd %[x]%{1to16%}, %[w], %[acc]"
      : [acc] "+v"(acc)
      : [w] "v"(w), [x] "m"(*static_cast<const AliasedWord*>(p)));
  return acc;
}

// The 4 bytes at p (any alignment) in every lane.
inline __m512i broadcast_word(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// sum over k < 8 of vpdpbusd(w[k], the k-th 4 bytes at x), added to start:
// two chains of four, exact in any order.
inline __m512i dot8(__m512i start, const __m512i (&w)[8], const int8_t* x) {
  __m512i s0 = start, s1 = _mm512_setzero_si512();
  for (int k = 0; k < 8; k += 2) {
    s0 = dpbusd_x(s0, w[k], x + 4 * k);
    s1 = dpbusd_x(s1, w[k + 1], x + 4 * k + 4);
  }
  return _mm512_add_epi32(s0, s1);
}

// q4_0, q5_0 and mxfp4: 4 word vectors per block, each giving low nibbles
// (elements 4k..4k+3) and high nibbles (16 + 4k..); q5_0's fifth bits are
// 8 masks after them, added as 16 to the bytes they mark (one kmov and one
// masked add per word vector); q8_0: 8 word vectors, elements 4k..4k+3.
template <DType kType>
struct Packed {
  static constexpr bool kQ4 = kType == DType::Q4_0, kQ5 = kType == DType::Q5_0,
                        kMx = kType == DType::MXFP4;
  static constexpr int kVecs = kType == DType::Q8_0 ? 8 : 4;
  static constexpr size_t kQsBytes = 64 * kVecs + (kQ5 ? 64 : 0);  // per block
  static constexpr size_t kScaleBytes = kMx ? 16 : 32;             // per block: 16 rows' e or d
  static constexpr int32_t kZero = kQ4 ? 8 : kQ5 ? 16 : kMx ? 12 : 128;
  // A group's units: 2 blocks' quants and their scales' line (mxfp4: 4).
  using Units = PackedUnits<kQsBytes, kScaleBytes>;
  // The fewest tokens a product takes in two-group tiles (pair_tile). Below
  // it one-group tiles are faster for the types whose two groups' weights
  // fill most of the registers (q8_0's 16 weight vectors; q5_0's and mxfp4's
  // unpacking): a 2-thread A/B from DRAM of 1024 x 2048 matrices at 5-8
  // tokens (the experts of a 64-token prompt) gave q8_0 +3-13%, mxfp4 +0-20%,
  // q5_0 +5-35% in one-group tiles, and q4_0 -8..+10% (pairs kept from 2).
  static constexpr int64_t kPairFrom = kQ4 ? 2 : kTileTokens + 1;
  // Whether a one-token tile prefetches (prefetch_unit). q4_0's and q8_0's
  // one-token tiles stream faster on the hardware prefetchers alone, their
  // groups being one forward stream of small units; every other tile needs
  // the software prefetch. bench/kernel_ab.sh, 1 GiB of 1024 x 2048 matrices
  // from DRAM, 2 threads, without against with (bench/RESULTS.md): q4_0
  // 1.06-1.14 split over the threads, 1.11-1.33 whole matrices in 2 MiB
  // pages; q8_0 1.26-1.35; q5_0 0.88 and mxfp4 1.02 split; q8_0 at 2 tokens
  // 1.08-1.09 but at 4 tokens 0.63-0.67, at 8 0.40-0.43.
  static constexpr bool kOneTokenPrefetch = !kQ4 && kType != DType::Q8_0;

  // The 16 rows' weight scales of a block (s: its scale bytes): fp16 d, or
  // 2^(e - 128) exactly (e8m0_to_float_half; subnormal at e < 2, which
  // vscalefps gives exactly).
  static __m512 scales_of(const uint8_t* s) {
    if constexpr (kMx) {
      const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      return _mm512_scalef_ps(_mm512_set1_ps(1.0f),
                              _mm512_sub_ps(_mm512_cvtepi32_ps(e), _mm512_set1_ps(128.0f)));
    } else {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    }
  }

  // A two-group tile's (pair_tile) unit of one group (u: its bytes): into
  // L1 kPrefetchBytes ahead in the group, into L2 the same unit of the next
  // pair. The pair's own groups are next to each other, so a fixed distance
  // ahead of the first lands in the second, which is being read already
  // (2-thread A/B from DRAM, bench/kernel_ab.sh, 1024 x 2048 matrices, 8-24
  // tokens, against that: q4_0 +4-20%, q8_0 +7-16%, mxfp4 +9-17%, q5_0
  // +4-12%). Each line as the unit's address and a constant (lines_ahead):
  // as 64-token products from DRAM, q8_0 +14-20%, mxfp4 +15%, q5_0 +10-12%,
  // q4_0 +1-3% against _mm_prefetch's spilled addresses.
  [[gnu::always_inline]] static void prefetch_pair_unit(const uint8_t* u, size_t group_bytes) {
    const uint8_t* next = u + 2 * group_bytes;
    lines_ahead<Units::kUnitBytes, kPrefetchBytes, 0>(u);
    lines_ahead<Units::kUnitBytes, 0, 1>(next);
  }

  // kMxfp4Values + 12 in every 16 bytes: vpermb reads an index's low 6
  // bits, so a code with any 2 bits above it finds its value.
  static __m512i mxfp4_table() {
    return _mm512_add_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values))),
        _mm512_set1_epi8(12));
  }

  // Block b's weight vectors of one group (q: the block's bytes), as the
  // products take them (the comment above Packed has each type's form).
  static void weights_of(const uint8_t* q, __m512i m4, __m512i table, __m512i (&w)[8]) {
    if constexpr (kMx) {
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        w[k] = _mm512_permutexvar_epi8(v, table);
        w[4 + k] = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), table);
      }
    } else if constexpr (kQ5) {
      const __m512i c16 = _mm512_set1_epi8(16);
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        const __m512i lo = _mm512_and_si512(v, m4),
                      hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        w[k] = _mm512_mask_add_epi8(
            lo, _load_mask64(reinterpret_cast<__mmask64*>(const_cast<uint8_t*>(q + 256 + 8 * k))),
            lo, c16);
        w[4 + k] = _mm512_mask_add_epi8(
            hi, _load_mask64(reinterpret_cast<__mmask64*>(const_cast<uint8_t*>(q + 288 + 8 * k))),
            hi, c16);
      }
    } else if constexpr (kQ4) {
      // The high nibbles stay in place, as 16 x their value: one and
      // instead of a shift and an and (their chain is divided by 16 once,
      // exactly). With the broadcast operands above: 21.1 -> 22.3 GB/s.
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(q + 64 * k);
        w[k] = _mm512_and_si512(v, m4);
        w[4 + k] = _mm512_andnot_si512(m4, v);
      }
    } else {
      for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(q + 64 * k);
    }
  }

  template <int T>
  static void tile(const uint8_t* g, int64_t nb, const block_q8_0* const* xb,
                   const XPrep* const* xp, float* y, size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), table = mxfp4_table();
    Units::walk(
        nb,
        [&](size_t u) __attribute__((always_inline)) {
          if constexpr (T > 1 || kOneTokenPrefetch) prefetch_unit<Units>(g + u);
        },
        [&](int64_t b, size_t q, size_t s) __attribute__((always_inline)) {
          __m512i w[8];
          weights_of(g + q, m4, table, w);
          const __m512 dw = scales_of(g + s);
          for (int t = 0; t < T; ++t) {
            const int8_t* x = xb[t][b].qs;
            // Word j of the activations pairs with w[j] (q4_0, mxfp4: 0..3 low
            // nibbles = elements 0..15, 4..7 high = 16..31; q8: elements 4j..4j+3).
            __m512i isum;
            if constexpr (kQ4) {
              __m512i lo = _mm512_set1_epi32(xp[t][b].corr), hi = _mm512_setzero_si512();
              for (int k = 0; k < 4; ++k) {
                lo = dpbusd_x(lo, w[k], x + 4 * k);
                hi = dpbusd_x(hi, w[4 + k], x + 16 + 4 * k);
              }
              isum = _mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4));
            } else {
              isum = dot8(_mm512_set1_epi32(xp[t][b].corr), w, x);
            }
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xp[t][b].d));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[t]);
          }
        });
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  // Two groups (group_bytes apart) and T tokens at once, for products of
  // more than one token: each activation word is broadcast into a register
  // once and meets both groups' weights there, and each token's scalars (its
  // correction and scale) serve 32 rows, so a vpdpbusd carries half the
  // loads and other operations it does in the one-group tile. Measured on
  // Zen 5, one thread, 1024 x 2048 q4_0 in L2, 64 tokens: 257 -> 335-343
  // GMAC/s (the vpdpbusd chains alone: 457); q8_0 +34%, mxfp4 +27%, q5_0
  // +19%. The sums and the float steps are the one-group tile's, in its
  // order, so the bits are too.
  template <int T>
  static void pair_tile(const uint8_t* g, size_t group_bytes, int64_t nb,
                        const block_q8_0* const* xb, const XPrep* const* xp, float* y,
                        size_t y_stride) {
    __m512 acc[T][2];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    const uint8_t* const gq[2] = {g, g + group_bytes};
    const __m512i m4 = _mm512_set1_epi8(0x0F), table = mxfp4_table();
    Units::walk(
        nb,
        [&](size_t u) __attribute__((always_inline)) {
          prefetch_pair_unit(gq[0] + u, group_bytes);
          prefetch_pair_unit(gq[1] + u, group_bytes);
        },
        [&](int64_t b, size_t q, size_t s) __attribute__((always_inline)) {
          __m512i w[2][8];
          __m512 dw[2];
#pragma GCC unroll 2
          for (int i = 0; i < 2; ++i) {
            weights_of(gq[i] + q, m4, table, w[i]);
            dw[i] = scales_of(gq[i] + s);
          }
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int8_t* x = xb[t][b].qs;  // 2 bytes into its block: words unaligned
            const __m512i corr = _mm512_set1_epi32(xp[t][b].corr);
            // Two chains per group, as in the one-group tile: q4_0's low and
            // high nibbles (words 0..3 and 4..7), the others' even and odd words.
            __m512i s0[2] = {corr, corr}, s1[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              const int j0 = kQ4 ? k : 2 * k, j1 = kQ4 ? 4 + k : 2 * k + 1;
              const __m512i x0 = broadcast_word(x + 4 * j0), x1 = broadcast_word(x + 4 * j1);
#pragma GCC unroll 2
              for (int i = 0; i < 2; ++i) {
                s0[i] = _mm512_dpbusd_epi32(s0[i], w[i][j0], x0);
                s1[i] = _mm512_dpbusd_epi32(s1[i], w[i][j1], x1);
              }
            }
            const __m512 dx = _mm512_set1_ps(xp[t][b].d);
#pragma GCC unroll 2
            for (int i = 0; i < 2; ++i) {
              const __m512i isum =
                  _mm512_add_epi32(s0[i], kQ4 ? _mm512_srai_epi32(s1[i], 4) : s1[i]);
              acc[t][i] =
                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw[i], dx), acc[t][i]);
            }
          }
        });
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      _mm512_storeu_ps(y + t * y_stride, acc[t][0]);
      _mm512_storeu_ps(y + t * y_stride + kPackRows, acc[t][1]);
    }
  }

  using TileFn = void (*)(const uint8_t*, int64_t, const block_q8_0* const*, const XPrep* const*,
                          float*, size_t);
  using PairFn = void (*)(const uint8_t*, size_t, int64_t, const block_q8_0* const*,
                          const XPrep* const*, float*, size_t);
  template <int... Ts>
  static constexpr auto make_tiles(std::integer_sequence<int, Ts...>) {
    struct Tiles {
      TileFn f[kTileTokens];
    };
    return Tiles{{&tile<Ts + 1>...}};
  }
  template <int... Ts>
  static constexpr auto make_pairs(std::integer_sequence<int, Ts...>) {
    struct Pairs {
      PairFn f[kPairTokens];
    };
    return Pairs{{&pair_tile<Ts + 1>...}};
  }

  static void run(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                  int64_t nt, int64_t n, float* y, size_t y_stride) {
    static constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kTileTokens>{});
    static constexpr auto kPairs = make_pairs(std::make_integer_sequence<int, kPairTokens>{});
    const int64_t nb = n / kQK;
    const size_t group_bytes = Units::group_bytes(nb);
    thread_local std::vector<XPrep> prep_all;  // every token's
    thread_local LastInput last;
    if (must_prepare(prep_all, last, x, x_stride, nt, nb))
      for (int64_t t = 0; t < nt; ++t) {
        const auto* xr = reinterpret_cast<const block_q8_0*>(x + t * x_stride);
        XPrep* xp = prep_all.data() + t * nb;
        for (int64_t b = 0; b < nb; ++b) {
          // sum(x) = sum(x + 128) - 32 x 128, the biased bytes summed by vpsadbw.
          const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr[b].qs)),
                                             _mm256_set1_epi8(static_cast<char>(0x80)));
          const __m256i q = _mm256_sad_epu8(v, _mm256_setzero_si256());
          const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
          const int32_t s = static_cast<int32_t>(_mm_cvtsi128_si64(_mm_add_epi64(h, _mm_unpackhi_epi64(h, h)))) -
                            kQK * 128;
          xp[b] = {-kZero * s, _cvtsh_ss(xr[b].d)};
        }
      }
    for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
      const int64_t tn = std::min(kTokenBlock, nt - t0);
      const XPrep* prep = prep_all.data() + t0 * nb;
      // Groups two at a time where a product has kPairFrom tokens or more
      // (a decode step's one token has nothing to share a broadcast with),
      // the last token block's few as well: its weights are in cache then.
      for (int64_t gi = 0; gi < n_groups;) {
        const uint8_t* g = w + gi * group_bytes;
        const bool pair = tn > 1 && nt >= kPairFrom && gi + 1 < n_groups;
        const int64_t step = pair ? kPairTokens : kTileTokens;
        for (int64_t t = 0, m; t < tn; t += m) {
          m = even_tile(tn - t, step);
          const block_q8_0* xb[kTileTokens];
          const XPrep* xp[kTileTokens];
          for (int k = 0; k < m; ++k) {
            xb[k] = reinterpret_cast<const block_q8_0*>(x + (t0 + t + k) * x_stride);
            xp[k] = prep + (t + k) * nb;
          }
          float* yt = y + (t0 + t) * y_stride + gi * kPackRows;
          if (pair)
            kPairs.f[m - 1](g, group_bytes, nb, xb, xp, yt, y_stride);
          else
            kTiles.f[m - 1](g, nb, xb, xp, yt, y_stride);
        }
        gi += pair ? 2 : 1;
      }
    }
  }
};

// q4_K: per super-block the 16 rows' 6-bit scales and mins are unpacked once
// into lanes; each sub-block's exact dot (8 vpdpbusd, nibbles against the
// q8_K activations) is scaled in integers (vpdpwssd) into S, the mins meet
// the activations' sub-block sums in 4 vpdpwssd into M, and the float work is
// two fmas per super-block. Tiles of up to 8 tokens share each unpacking of
// the weights (measured against 4: OLMoE Q4_K_M pp64 111 -> 117 tok/s, with
// some of the sums spilled to the stack).
struct PackedQ4K {
  static constexpr int kTile = 8;
  using Units = Q4KUnits;  // a super-block a unit (kernels/packed_layout.h)

  // Per token and super-block: the activations' sums over sub-blocks 2p and
  // 2p + 1 as two int16 halves of word p (the vpdpwssd operand of the mins),
  // computed once per call instead of once per group.
  struct XPrepK {
    int32_t pair[4];
  };

  // One super-block of a group ready for the products: the nibbles as bytes
  // (sub-block s, vector k at 8s + k), each scale in both 16-bit halves of
  // its lane, the mins as int16 pairs, and the group's d and dmin. A tile
  // unpacks as it goes; a product of more tokens than one tile unpacks each
  // super-block once into these and every tile reads them.
  struct Unpacked {
    __m512i nib[64];
    __m512i sc[8];
    __m512i mp[4];
    __m512 dw, dmin;
  };

  // The file's scales and mins (raw words w0..w2 of 16 rows, lanes are rows)
  // as int32 lanes: what the packer rearranges.
  static void raw_fields(__m512i w0, __m512i w1, __m512i w2, __m512i (&sc)[8], __m512i (&mn)[8]) {
    const __m512i m6 = _mm512_set1_epi32(63), m4w = _mm512_set1_epi32(0xF), m2 = _mm512_set1_epi32(3);
    for (int j = 0; j < 4; ++j) {
      sc[j] = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j), m6);
      mn[j] = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
      sc[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 8 * j), m4w),
                                  _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 8 * j + 6), m2), 4));
      mn[4 + j] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 8 * j + 4), m4w),
                                  _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 8 * j + 6), m2), 4));
    }
  }

  // Their packed words (kernels/ref/packed.cpp has the layout).
  static void encode_scales(const __m512i (&sc)[8], const __m512i (&mn)[8], __m512i (&w)[3]) {
    const __m512i m4w = _mm512_set1_epi32(0xF);
    auto sl = [](__m512i v, int n) { return _mm512_slli_epi32(v, n); };
    auto lo4 = [&](__m512i v) { return _mm512_and_si512(v, m4w); };
    auto hi2 = [](__m512i v) { return _mm512_srli_epi32(v, 4); };
    auto or3 = [](__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xFE); };
    w[0] = or3(or3(sc[0], sl(sc[2], 6), sl(lo4(mn[4]), 12)), or3(sl(sc[1], 16), sl(sc[3], 22), sl(lo4(mn[5]), 28)),
               _mm512_setzero_si512());
    w[1] = or3(or3(sc[4], sl(sc[6], 6), sl(lo4(mn[6]), 12)), or3(sl(sc[5], 16), sl(sc[7], 22), sl(lo4(mn[7]), 28)),
               _mm512_setzero_si512());
    w[2] = or3(or3(mn[0], sl(mn[2], 6), sl(hi2(mn[4]), 12)), or3(sl(hi2(mn[6]), 14), sl(mn[1], 16), sl(mn[3], 22)),
               or3(sl(hi2(mn[5]), 28), sl(hi2(mn[7]), 30), _mm512_setzero_si512()));
  }

  // From the packed words: sp[p] = sc[2p] | sc[2p + 1] << 16 and mp[p] the
  // same for the mins, per row lane.
  static void scale_pairs(const uint8_t* sb, __m512i (&sp)[4], __m512i (&mp)[4]) {
    const __m512i m6 = _mm512_set1_epi32(0x003F003F), m4 = _mm512_set1_epi32(0x000F000F),
                  h2 = _mm512_set1_epi32(0x00300030);
    const __m512i w0 = _mm512_loadu_si512(sb), w1 = _mm512_loadu_si512(sb + 64), w2 = _mm512_loadu_si512(sb + 128);
    sp[0] = _mm512_and_si512(w0, m6);
    sp[1] = _mm512_and_si512(_mm512_srli_epi32(w0, 6), m6);
    sp[2] = _mm512_and_si512(w1, m6);
    sp[3] = _mm512_and_si512(_mm512_srli_epi32(w1, 6), m6);
    mp[0] = _mm512_and_si512(w2, m6);
    mp[1] = _mm512_and_si512(_mm512_srli_epi32(w2, 6), m6);
    // (a & m4) | b, b already masked to the high bits.
    mp[2] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(w0, 12), m4,
                                      _mm512_and_si512(_mm512_srli_epi32(w2, 8), h2), 0xEA);
    mp[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(w1, 12), m4,
                                      _mm512_and_si512(_mm512_srli_epi32(w2, 10), h2), 0xEA);
  }

  // Each scale alone in both 16-bit halves of its lane (for products of
  // several tokens, which take a sub-block at a time).
  static void unpack_scales(const uint8_t* sb, __m512i (&sc)[8], __m512i (&sp)[4], __m512i (&mp)[4]) {
    scale_pairs(sb, sp, mp);
    const __m512i lo = _mm512_set4_epi32(0x0D0C0D0C, 0x09080908, 0x05040504, 0x01000100);
    const __m512i hi = _mm512_set4_epi32(0x0F0E0F0E, 0x0B0A0B0A, 0x07060706, 0x03020302);
    for (int p = 0; p < 4; ++p) {
      sc[2 * p] = _mm512_shuffle_epi8(sp[p], lo);
      sc[2 * p + 1] = _mm512_shuffle_epi8(sp[p], hi);
    }
  }

  static __m512i nibbles(const uint8_t* q, int s, int k) {
    const __m512i v = _mm512_loadu_si512(q + 64 * (8 * (s / 2) + k));
    return _mm512_and_si512(s % 2 ? _mm512_srli_epi16(v, 4) : v, _mm512_set1_epi8(0x0F));
  }
  // The same for one token, where odd sub-blocks keep their nibbles in place
  // as 16x their value (one andnot instead of a shift and an and): their
  // chains come out 16x too, which the one-token products undo for free.
  static __m512i nibbles_in_place(const uint8_t* q, int s, int k) {
    const __m512i v = _mm512_loadu_si512(q + 64 * (8 * (s / 2) + k)), m = _mm512_set1_epi8(0x0F);
    return s % 2 ? _mm512_andnot_si512(m, v) : _mm512_and_si512(v, m);
  }
  static void unpack(const uint8_t* g, int64_t nb, int64_t b, Unpacked& u) {
    static_assert(Units::kBlocks == 1);  // each super-block is a unit
    const uint8_t* q = g + Units::quants(b);
    prefetch_unit<Units>(q);
    for (int s = 0; s < 8; ++s)
      for (int k = 0; k < 8; ++k) u.nib[8 * s + k] = nibbles(q, s, k);
    __m512i sp[4];
    unpack_scales(q + Units::kScaleWords, u.sc, sp, u.mp);
    const uint8_t* ds = g + Units::scales(nb, b);
    u.dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ds)));
    u.dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ds + Units::kDmin)));
  }

  // The products of one super-block for T tokens: S from the sub-blocks'
  // exact dots, M from the mins, two fmas into acc. sp: the scale pairs, for
  // one token read straight from the weights, its odd sub-blocks' nibbles in
  // place (nibbles_in_place; null: sub-block at a time, every nibble as it is).
  template <int T, typename Nib, typename Prefetch>
  static void products(Nib nib_of, const __m512i (&sc)[8], const __m512i* sp,
                       const __m512i (&mp)[4], __m512 dw, __m512 dmin, int64_t b,
                       const block_q8_K* const* xb, const XPrepK* const* xp, __m512 (&acc)[T],
                       Prefetch prefetch) {
    __m512i S[T];
    for (int t = 0; t < T; ++t) S[t] = _mm512_setzero_si512();
    if (T == 1 && sp) {
      // One token: sub-blocks 2p and 2p + 1 together, their chains as the
      // two int16 halves of a lane, so one vpdpwssd applies both scales of
      // the pair sp[p] (no scale is duplicated into both halves).
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        prefetch(p);
        const int8_t* x = xb[0][b].qs + 64 * p;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, b0 = a0, b1 = a0;
        for (int k = 0; k < 8; k += 2) {
          a0 = dpbusd_x(a0, nib_of(2 * p, k), x + 4 * k);
          a1 = dpbusd_x(a1, nib_of(2 * p, k + 1), x + 4 * k + 4);
          b0 = dpbusd_x(b0, nib_of(2 * p + 1, k), x + 32 + 4 * k);
          b1 = dpbusd_x(b1, nib_of(2 * p + 1, k + 1), x + 36 + 4 * k);
        }
        // b0 and b1 are 16x the odd chains, whose true values fit an int16,
        // so << 12 puts exactly them in the high halves.
        S[0] = _mm512_dpwssd_epi32(
            S[0], _mm512_mask_blend_epi16(0xAAAAAAAA, a0, _mm512_slli_epi32(b0, 12)), sp[p]);
        S[0] = _mm512_dpwssd_epi32(
            S[0], _mm512_mask_blend_epi16(0xAAAAAAAA, a1, _mm512_slli_epi32(b1, 12)), sp[p]);
      }
    } else {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const int j = s / 2, hi = s % 2;
        if (!hi) prefetch(j);
        __m512i nib[8];
        for (int k = 0; k < 8; ++k) nib[k] = nib_of(s, k);
        for (int t = 0; t < T; ++t) {
          // The sub-block's dot in two chains of 16 products each, |sum| <=
          // 16 * 15 * 128: each fits an int16, so one vpdpwssd scales both
          // and adds them to S: exactly sc * (s0 + s1), 1.5% faster than
          // adding the chains and multiplying with vpmulld.
          const int8_t* x = xb[t][b].qs + 64 * j + 32 * hi;
          __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
          for (int k = 0; k < 8; k += 2) {
            s0 = dpbusd_x(s0, nib[k], x + 4 * k);
            s1 = dpbusd_x(s1, nib[k + 1], x + 4 * k + 4);
          }
          const __m512i halves = _mm512_mask_blend_epi16(0xAAAAAAAA, s0, _mm512_slli_epi32(s1, 16));
          S[t] = _mm512_dpwssd_epi32(S[t], halves, sc[s]);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const XPrepK& pk = xp[t][b];
      __m512i M = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) M = dpwssd_x(M, mp[p], &pk.pair[p]);
      const __m512 dx = _mm512_set1_ps(xb[t][b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dw, dx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dmin, dx), acc[t]);
    }
  }

  template <int T>
  static void tile(const uint8_t* g, int64_t nb, const block_q8_K* const* xb, const XPrepK* const* xp,
                   float* y, size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    Units::walk(
        nb, [](size_t) {},
        [&](int64_t b, size_t qo, size_t so) __attribute__((always_inline)) {
          const uint8_t* q = g + qo;
          const uint8_t* ds = g + so;
          __m512i sc[8], sp[4], mp[4];
          if constexpr (T == 1)
            scale_pairs(q + Units::kScaleWords, sp, mp);  // one token takes the pairs as they are
          else
            unpack_scales(q + Units::kScaleWords, sc, sp, mp);
          const __m512 dw =
              _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ds)));
          const __m512 dmin = _mm512_cvtph_ps(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ds + Units::kDmin)));
          products<T>(
              [&](int s, int k) { return T == 1 ? nibbles_in_place(q, s, k) : nibbles(q, s, k); },
              sc, T == 1 ? sp : nullptr, mp, dw, dmin, b, xb, xp, acc,
              [&](int part) __attribute__((always_inline)) {
                prefetch_share<T, Units::kUnitBytes>(q, part);
              });
        });
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  // The same products over super-blocks unpacked beforehand.
  template <int T>
  static void tile_unpacked(const Unpacked* u, int64_t nb, const block_q8_K* const* xb, const XPrepK* const* xp,
                            float* y, size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const Unpacked& ub = u[b];
      products<T>([&](int s, int k) { return _mm512_load_si512(&ub.nib[8 * s + k]); }, ub.sc,
                  nullptr, ub.mp, ub.dw, ub.dmin, b, xb, xp, acc, [](int) {});
    }
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  using TileFn = void (*)(const uint8_t*, int64_t, const block_q8_K* const*, const XPrepK* const*, float*,
                          size_t);
  using UnpackedTileFn = void (*)(const Unpacked*, int64_t, const block_q8_K* const*, const XPrepK* const*,
                                  float*, size_t);
  template <int... Ts>
  static constexpr auto make_tiles(std::integer_sequence<int, Ts...>) {
    struct Tiles {
      TileFn f[kTile];
      UnpackedTileFn u[kTile];
    };
    return Tiles{{&tile<Ts + 1>...}, {&tile_unpacked<Ts + 1>...}};
  }

  static void run(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                  int64_t n, float* y, size_t y_stride) {
    static constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kTile>{});
    const int64_t nb = n / kQK_K;
    const size_t group_bytes = Units::group_bytes(nb);
    thread_local std::vector<XPrepK> prep_all;  // every token's
    thread_local std::vector<Unpacked> unpacked;
    thread_local LastInput last;
    if (must_prepare(prep_all, last, x, x_stride, nt, nb))
      for (int64_t t = 0; t < nt; ++t) {
        const auto* xr = reinterpret_cast<const block_q8_K*>(x + t * x_stride);
        for (int64_t b = 0; b < nb; ++b)
          for (int p = 0; p < 4; ++p) {
            const int16_t* bs = xr[b].bsums + 4 * p;
            const int lo = bs[0] + bs[1], hi = bs[2] + bs[3];
            prep_all[t * nb + b].pair[p] =
                static_cast<int32_t>(static_cast<uint16_t>(lo) |
                                     (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
          }
      }
    for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
      const int64_t tn = std::min(kTokenBlock, nt - t0);
      const XPrepK* prep = prep_all.data() + t0 * nb;
      // More tokens than two tiles: each super-block unpacked once for all.
      const bool unpack_once = tn > 2 * kTile;
      if (unpack_once && unpacked.size() < static_cast<size_t>(nb)) unpacked.resize(static_cast<size_t>(nb));
      for (int64_t gi = 0; gi < n_groups; ++gi) {
        const uint8_t* g = w + gi * group_bytes;
        if (unpack_once)
          for (int64_t b = 0; b < nb; ++b) unpack(g, nb, b, unpacked[b]);
        for (int64_t t = 0; t < tn; t += kTile) {
          const int m = static_cast<int>(std::min<int64_t>(kTile, tn - t));
          const block_q8_K* xb[kTile];
          const XPrepK* xp[kTile];
          for (int k = 0; k < m; ++k) {
            xb[k] = reinterpret_cast<const block_q8_K*>(x + (t0 + t + k) * x_stride);
            xp[k] = prep + (t + k) * nb;
          }
          float* yt = y + (t0 + t) * y_stride + gi * kPackRows;
          if (unpack_once)
            kTiles.u[m - 1](unpacked.data(), nb, xb, xp, yt, y_stride);
          else
            kTiles.f[m - 1](g, nb, xb, xp, yt, y_stride);
        }
      }
    }
  }
};

// iq4_xs: per super-block the 16 rows' eight 6-bit scales are unpacked
// once into int32 lanes, and each code word vector into two of values + 128
// (a 16-byte table, vpshufb: unsigned, so vpdpbusd takes them as they are).
// Per sub-block and token one chain of 8 vpdpbusd starts at -128 x the
// activations' sum over the sub-block (undoing the offset), and vpmulld
// applies the lane's scale (the chain does not fit 16 bits: values reach
// 241): the sub-block's exact integer dot times its scale, as PackedQ6K's
// direct tiles do. Then one conversion and one fma per super-block and token.
struct PackedIq4Xs {
  static constexpr int kTile = 8;
  using Units = Iq4XsUnits;  // two super-blocks a unit (kernels/packed_layout.h)
  static constexpr size_t kShare = Units::group_bytes(1);  // a super-block's bytes

  // Per token and super-block: -128 x the activations' sum over each sub-block.
  struct XPrepI {
    int32_t neg[8];
  };

  // The 16 rows' scales of sub-block s (ls - 32) in the int32 lanes.
  static void scales(const uint8_t* q, __m512i (&ls)[8]) {
    const __m512i lo = _mm512_loadu_si512(q + Units::kScalesL);
    const __m512i hi =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + Units::kScalesH)));
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
    for (int s = 0; s < 8; ++s) {
      const __m512i l = _mm512_and_si512(_mm512_srli_epi32(lo, 4 * s), m4);
      const __m512i h = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hi, 2 * s), m2), 4);
      ls[s] = _mm512_sub_epi32(_mm512_or_si512(l, h), bias);
    }
  }

  template <int T>
  static void tile(const uint8_t* g, int64_t nb, const block_q8_K* const* xb, const XPrepI* const* xp,
                   float* y, size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    alignas(16) static constexpr uint8_t kOffset[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                        129, 141, 153, 166, 181, 197, 217, 241};
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kOffset)));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* q = g + Units::quants(b);
      __m512i ls[8];
      scales(q, ls);
      __m512i S[T];
      for (int t = 0; t < T; ++t) S[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        if (s % 2 == 0) prefetch_share<T, kShare>(g + b * kShare, s / 2);
        __m512i lo[4], hi[4];  // elements 4w + c and 16 + 4w + c of the sub-block
        for (int w = 0; w < 4; ++w) {
          const __m512i v = _mm512_loadu_si512(q + 64 * (4 * s + w));
          lo[w] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, m4));
          hi[w] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        for (int t = 0; t < T; ++t) {
          const int8_t* x = xb[t][b].qs + 32 * s;
          __m512i c0 = _mm512_set1_epi32(xp[t][b].neg[s]), c1 = _mm512_setzero_si512();
          for (int w = 0; w < 4; ++w) {
            c0 = dpbusd_x(c0, lo[w], x + 4 * w);
            c1 = dpbusd_x(c1, hi[w], x + 16 + 4 * w);
          }
          S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(_mm512_add_epi32(c0, c1), ls[s]));
        }
      }
      const __m512 dw = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + Units::scales(nb, b))));
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dw, _mm512_set1_ps(xb[t][b].d)),
                                 acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  using TileFn = void (*)(const uint8_t*, int64_t, const block_q8_K* const*, const XPrepI* const*, float*,
                          size_t);
  template <int... Ts>
  static constexpr auto make_tiles(std::integer_sequence<int, Ts...>) {
    struct Tiles {
      TileFn f[kTile];
    };
    return Tiles{{&tile<Ts + 1>...}};
  }

  static void run(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                  int64_t n, float* y, size_t y_stride) {
    static constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kTile>{});
    const int64_t nb = n / kQK_K;
    const size_t group_bytes = Units::group_bytes(nb);
    thread_local std::vector<XPrepI> prep_all;  // every token's
    thread_local LastInput last;
    if (must_prepare(prep_all, last, x, x_stride, nt, nb))
      for (int64_t t = 0; t < nt; ++t) {
        const auto* xr = reinterpret_cast<const block_q8_K*>(x + t * x_stride);
        for (int64_t b = 0; b < nb; ++b)
          for (int s = 0; s < 8; ++s)
            prep_all[t * nb + b].neg[s] = -128 * (xr[b].bsums[2 * s] + xr[b].bsums[2 * s + 1]);
      }
    for (int64_t t0 = 0; t0 < nt; t0 += kTokenBlock) {
      const int64_t tn = std::min(kTokenBlock, nt - t0);
      const XPrepI* prep = prep_all.data() + t0 * nb;
      for (int64_t gi = 0; gi < n_groups; ++gi) {
        const uint8_t* g = w + gi * group_bytes;
        for (int64_t t = 0, m; t < tn; t += m) {
          m = even_tile(tn - t, kTile);
          const block_q8_K* xb[kTile];
          const XPrepI* xp[kTile];
          for (int k = 0; k < m; ++k) {
            xb[k] = reinterpret_cast<const block_q8_K*>(x + (t0 + t + k) * x_stride);
            xp[k] = prep + (t + k) * nb;
          }
          kTiles.f[m - 1](g, nb, xb, xp, y + (t0 + t) * y_stride + gi * kPackRows, y_stride);
        }
      }
    }
  }
};

// Packing (the layout of kernels/ref/packed.cpp, byte for byte), on every
// expert a streaming store loads: 16 rows' 16-byte pieces at p, p + stride,
// ... are transposed so that out[k] holds word k of row i in lane i. Row
// 4j + m goes to 128-bit lane j of z[m]; a 4x4 word transpose inside each
// lane across z[0..3] then leaves lane j of out[k] = word k of rows 4j..4j+3.
inline void transpose_words(const uint8_t* p, size_t stride, __m512i (&out)[4]) {
  __m512i z[4];
  for (int m = 0; m < 4; ++m) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + m * stride)));
    for (int j = 1; j < 4; ++j) {
      const __m128i r = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (4 * j + m) * stride));
      v = j == 1 ? _mm512_inserti32x4(v, r, 1) : j == 2 ? _mm512_inserti32x4(v, r, 2) : _mm512_inserti32x4(v, r, 3);
    }
    z[m] = v;
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]),
                t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// q4_0 and mxfp4 (kWords 4) and q8_0 (8, each byte stored as q + 128): per
// block, the quants in kWords / 4 transposes, the 16 scales (the block's
// first kScale bytes: fp16 d, or E8M0 e) copied.
template <DType kType, int kWords, size_t kBlockBytes, size_t kScale>
void pack_group_q(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  if (rows < kPackRows) return type_traits(kType).pack_group(src, src_stride, rows, dst, n);
  using Units = PackedUnits<kWords * 64, kPackRows * kScale>;
  const __m512i flip = _mm512_set1_epi8(kWords == 8 ? static_cast<char>(0x80) : 0);
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * kBlockBytes;
    uint8_t* q = dst + Units::quants(b);
    for (int h = 0; h < kWords / 4; ++h) {
      __m512i w[4];
      transpose_words(blk + kScale + 16 * h, src_stride, w);
      for (int k = 0; k < 4; ++k)
        _mm512_storeu_si512(q + 64 * (4 * h + k), _mm512_xor_si512(w[k], flip));
    }
    uint8_t* scales = dst + Units::scales(nb, b);
    for (int i = 0; i < kPackRows; ++i)
      std::memcpy(scales + kScale * i, blk + i * src_stride, kScale);
  }
}

// q5_0: the quants in one transpose (the block's bytes 6..21), the 16 d
// copied, and each of the 8 masks from the 16 rows' qh words: nibble m of
// every row, narrowed to bytes and paired into one 64-bit word.
void pack_group_q5_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  if (rows < kPackRows) return type_traits(DType::Q5_0).pack_group(src, src_stride, rows, dst, n);
  using Units = Packed<DType::Q5_0>::Units;
  const int64_t nb = n / kQK;
  const __m512i m4 = _mm512_set1_epi32(0xF);
  const __m128i pair = _mm_set1_epi16(0x1001);  // byte 2p + 16 x byte 2p + 1
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * sizeof(block_q5_0);
    uint8_t* out = dst + Units::quants(b);
    uint8_t* scales = dst + Units::scales(nb, b);
    __m512i w[4];
    transpose_words(blk + 6, src_stride, w);
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(out + 64 * k, w[k]);
    alignas(64) uint32_t qh[kPackRows];
    for (int i = 0; i < kPackRows; ++i) {
      std::memcpy(&qh[i], blk + i * src_stride + 2, 4);
      std::memcpy(scales + 2 * i, blk + i * src_stride, 2);
    }
    const __m512i q = _mm512_load_si512(qh);
    for (int m = 0; m < 8; ++m) {
      const __m128i nib = _mm512_cvtepi32_epi8(_mm512_and_si512(_mm512_srli_epi32(q, 4 * m), m4));
      const __m128i packed = _mm_packus_epi16(_mm_maddubs_epi16(nib, pair), _mm_setzero_si128());
      const uint64_t mask = static_cast<uint64_t>(_mm_cvtsi128_si64(packed));
      std::memcpy(out + 256 + 8 * m, &mask, 8);
    }
  }
}

// q4_K: one transpose of a block's first 16 bytes gives d | dmin << 16 and
// the three scale words (rearranged into the packed scale layout); eight
// more give the 32 quant words.
void pack_group_q4_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  if (rows < kPackRows) return type_traits(DType::Q4_K).pack_group(src, src_stride, rows, dst, n);
  using Units = PackedQ4K::Units;
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * sizeof(block_q4_K);
    uint8_t* qs = dst + Units::quants(b);
    uint8_t* ds = dst + Units::scales(nb, b);
    __m512i h[4];
    transpose_words(blk, src_stride, h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ds), _mm512_cvtepi32_epi16(h[0]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ds + Units::kDmin),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
    __m512i sc[8], mn[8], sw[3];
    PackedQ4K::raw_fields(h[1], h[2], h[3], sc, mn);
    PackedQ4K::encode_scales(sc, mn, sw);
    for (int w = 0; w < 3; ++w) _mm512_storeu_si512(qs + Units::kScaleWords + 64 * w, sw[w]);
    for (int m = 0; m < 8; ++m) {
      __m512i q[4];
      transpose_words(blk + 16 + 16 * m, src_stride, q);
      for (int k = 0; k < 4; ++k) _mm512_storeu_si512(qs + 64 * (4 * m + k), q[k]);
    }
  }
}

// q6_K prompts: each super-block of a packed group (its words, below) is
// unpacked once per call into the lanes-are-rows form (u = 0..63 as bytes,
// four consecutive weights of a row per lane; per sub-block the rows' scales
// as int32 lanes and -32 x the scales as int16 pairs; the rows' d), and every
// tile of up to 8 tokens runs over it with one vpdpbusd per 4 weights x 16
// rows: per sub-block, 4 of them then one vpmulld by the scales; the -32
// offset is 8 vpdpwssd of the scales against the activations' sub-block
// sums. Per (row, token) and super-block that is the exact integer dot I,
// added as fma(I, d_w x d_x, acc) in super-block order: the arithmetic of the
// plain kernel (Q6_KKernel in avx512.cpp).
struct Q6KGroups {
  static constexpr int kTile = 8;
  struct Block {
    __m512i u[64];   // word 4j + i: weights 16j + 4i .. 16j + 4i + 3 of each row
    __m512i sc[16];  // sub-block j's scale, per row
    __m512i scb[8];  // -32 scale of sub-blocks 2p and 2p + 1 as int16 halves
    __m512 d;
  };

  // The 16 rows' words of one super-block, lanes are rows: QA = [ql 0..31 |
  // ql 64..95], QB = [ql 32..63 | ql 96..127] and qh (byte j of the three go
  // together), the 16 sub-blocks' scales as int32 lanes, and d. The packed
  // layout (kernels/ref/packed.cpp) stores the words as they are here.
  struct Words {
    __m512i qa[16], qb[16], qh[16], sc[16];
    __m512 d;
  };

  static void from_rows(const uint8_t* rows, size_t stride, Words& o) {
    const size_t ql = offsetof(block_q6_K, ql), qhs = offsetof(block_q6_K, qh),
                 scs = offsetof(block_q6_K, scales);
    __m512i sv[4];
    auto words = [&](size_t off, __m512i* out) {
      __m512i t[4];
      transpose_words(rows + off, stride, t);
      for (int k = 0; k < 4; ++k) out[k] = t[k];
    };
    for (int h = 0; h < 2; ++h) {
      words(ql + 64 * h, o.qa + 8 * h);
      words(ql + 64 * h + 16, o.qa + 8 * h + 4);
      words(ql + 64 * h + 32, o.qb + 8 * h);
      words(ql + 64 * h + 48, o.qb + 8 * h + 4);
    }
    for (int m = 0; m < 4; ++m) words(qhs + 16 * m, o.qh + 4 * m);
    words(scs, sv);
    for (int j = 0; j < 16; ++j)
      o.sc[j] = _mm512_srai_epi32(_mm512_slli_epi32(sv[j / 4], 24 - 8 * (j % 4)), 24);
    alignas(64) float d[kPackRows];
    for (int i = 0; i < kPackRows; ++i) {
      uint16_t h;
      std::memcpy(&h, rows + i * stride + offsetof(block_q6_K, d), 2);
      d[i] = _cvtsh_ss(h);
    }
    o.d = _mm512_load_ps(d);
  }

  static void unpack(const Words& in, Block& o) {
    for (int w = 0; w < 16; ++w) {
      // Word w of field k holds weights 32k + 4w (w < 8) or 128 + 32k + 4(w - 8).
      __m512i f[4];
      q6_K_fields(in.qa[w], in.qb[w], in.qh[w], f);
      for (int k = 0; k < 4; ++k) o.u[w < 8 ? 8 * k + w : 32 + 8 * k + (w - 8)] = f[k];
    }
    for (int j = 0; j < 16; ++j) o.sc[j] = in.sc[j];
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    for (int p = 0; p < 8; ++p) {
      const __m512i a = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(o.sc[2 * p], 5));
      const __m512i b = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(o.sc[2 * p + 1], 5));
      o.scb[p] = _mm512_or_si512(_mm512_and_si512(a, lo16), _mm512_slli_epi32(b, 16));
    }
    o.d = in.d;
  }

  template <int T>
  static void tile(const Block* g, int64_t nb, const block_q8_K* const* xb, float* y, size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const Block& o = g[b];
      __m512i S[T];
      for (int t = 0; t < T; ++t) {
        __m512i m = _mm512_setzero_si512();
        for (int p = 0; p < 8; ++p) m = dpwssd_x(m, o.scb[p], xb[t][b].bsums + 2 * p);
        S[t] = m;
      }
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const __m512i u0 = o.u[4 * j], u1 = o.u[4 * j + 1], u2 = o.u[4 * j + 2], u3 = o.u[4 * j + 3];
        const __m512i sc = o.sc[j];
        for (int t = 0; t < T; ++t) {
          const int8_t* x = xb[t][b].qs + 16 * j;
          __m512i s = dpbusd_x(_mm512_setzero_si512(), u0, x);
          s = dpbusd_x(s, u1, x + 4);
          s = dpbusd_x(s, u2, x + 8);
          s = dpbusd_x(s, u3, x + 12);
          S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(s, sc));
        }
      }
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(o.d, _mm512_set1_ps(xb[t][b].d)),
                                 acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  using TileFn = void (*)(const Block*, int64_t, const block_q8_K* const*, float*, size_t);
  template <int... Ts>
  static constexpr auto make_tiles(std::integer_sequence<int, Ts...>) {
    struct Tiles {
      TileFn f[kTile];
    };
    return Tiles{{&tile<Ts + 1>...}};
  }
};

// q6_K over packed groups (kernels/ref/packed.cpp has the layout: the
// words Q6KGroups::from_rows makes, as they are, then the scales and d).
// Products of up to kDirectUpTo tokens read the words straight into
// vpdpbusd, in tiles of up to kDirect tokens: per word quad, q6_K_fields
// gives 16 vectors of codes (4 sub-blocks x 4 words); each sub-block's chain
// starts at -32 x its activation sum (the codes' offset), takes 4 vpdpbusd
// and one vpmulld by the scales into S, then one fma per super-block: the
// arithmetic of Q6KGroups and of the plain kernel (Q6_KKernel in
// avx512.cpp), so all three give the same bits. More tokens unpack each
// super-block once into Q6KGroups blocks and run its tiles. Measured
// (bench/kernel_ab.sh, 1024 x 2048 from DRAM, 2 threads), direct against
// unpacked: 8 tokens 1.72x, 12 1.45x, 16 1.36x, 32 1.14x, 40 1.05x, 48
// 0.96x, 64 0.88x (before, products of more than 4 tokens unpacked).
struct PackedQ6K {
  static constexpr int kDirect = 8;
  static constexpr int64_t kDirectUpTo = 40;
  using Units = Q6KUnits;  // two super-blocks a unit (kernels/packed_layout.h)
  static constexpr size_t kShare = Units::group_bytes(1);  // a super-block's bytes

  static void load(const uint8_t* g, int64_t nb, int64_t b, Q6KGroups::Words& o) {
    const uint8_t* q = g + Units::quants(b);
    prefetch_ahead<kShare>(g + b * kShare);  // the block's share of the stream
    for (int w = 0; w < 16; ++w) {
      o.qa[w] = _mm512_loadu_si512(q + 64 * w);
      o.qb[w] = _mm512_loadu_si512(q + 64 * (16 + w));
      o.qh[w] = _mm512_loadu_si512(q + 64 * (32 + w));
    }
    const uint8_t* sb = q + Units::kScales;
    for (int j = 0; j < 16; ++j)
      o.sc[j] =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 16 * j)));
    o.d = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + Units::scales(nb, b))));
  }

  // A tile's activations token by token within each super-block, so that one
  // pointer and fixed offsets reach every token's: xi[b * T + t] is token t's
  // block b, xo[(b * T + t) * 16 + j] -32 x its activation sum over sub-block
  // j. (With a pointer to each token's blocks and sums, 8 tokens' 16 pointers
  // spilled: the tile alone in L1 ran 2.7-3.3 G vpdpbusd/s against 3.8-4.0
  // now; bench/RESULTS.md.)
  template <int T>
  static void tile(const uint8_t* g, int64_t nb, const block_q8_K* xi, const int32_t* xo, float* y,
                   size_t y_stride) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    // A plain loop, the offsets from the index (a shift and a min a
    // super-block): Units::walk would compile the body three times (a
    // unit's two super-blocks unrolled, and the last unit's one), 21 KB of
    // code for 8 tokens, which from DRAM ran 15% slower.
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* q = g + Units::quants(b);
      const uint8_t* sb = q + Units::kScales;
      const block_q8_K* xb = xi + b * T;
      const int32_t* ob = xo + b * T * 16;
      __m512i S[T];
      for (int t = 0; t < T; ++t) S[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int wq = 0; wq < 4; ++wq) {
        prefetch_share<T, kShare>(g + b * kShare, wq);
        __m512i u[4][4];  // [word of the quad][field]
        for (int c = 0; c < 4; ++c) {
          const int w = 4 * wq + c;
          q6_K_fields(_mm512_loadu_si512(q + 64 * w), _mm512_loadu_si512(q + 64 * (16 + w)),
                      _mm512_loadu_si512(q + 64 * (32 + w)), u[c]);
        }
        for (int k = 0; k < 4; ++k) {
          // Field k of words 4 wq .. 4 wq + 3: the 16 weights of sub-block j.
          const int j = 2 * k + (wq & 1) + (wq >= 2 ? 8 : 0);
          const __m512i sc =
              _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 16 * j)));
          for (int t = 0; t < T; ++t) {
            const int8_t* x = xb[t].qs + 16 * j;
            __m512i c = _mm512_set1_epi32(ob[16 * t + j]);
            c = dpbusd_x(c, u[0][k], x);
            c = dpbusd_x(c, u[1][k], x + 4);
            c = dpbusd_x(c, u[2][k], x + 8);
            c = dpbusd_x(c, u[3][k], x + 12);
            S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(c, sc));
          }
        }
      }
      const __m512 dw = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + Units::scales(nb, b))));
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(xb[t].d)), acc[t]);
    }
    for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
  }

  using TileFn = void (*)(const uint8_t*, int64_t, const block_q8_K*, const int32_t*, float*,
                          size_t);
  template <int... Ts>
  static constexpr auto make_tiles(std::integer_sequence<int, Ts...>) {
    struct Tiles {
      TileFn f[kDirect];
    };
    return Tiles{{&tile<Ts + 1>...}};
  }

  static void run(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                  int64_t n, float* y, size_t y_stride) {
    const int64_t nb = n / kQK_K;
    const size_t group_bytes = Units::group_bytes(nb);
    if (nt <= kDirectUpTo) {
      static constexpr auto kTiles = make_tiles(std::make_integer_sequence<int, kDirect>{});
      // Each tile's activations in its order (tile above), the tiles one
      // after the other; grows to the largest call, then is reused: no
      // allocation per token.
      thread_local std::vector<block_q8_K> xi;
      thread_local std::vector<int32_t> xo;
      thread_local LastInput last;
      if (xi.size() < static_cast<size_t>(nt * nb)) {
        xi.resize(static_cast<size_t>(nt * nb));
        xo.resize(static_cast<size_t>(nt * nb * 16));
      }
      const bool ready = last.repeats(x, x_stride, nt, nb);
      for (int64_t t0 = 0, m; t0 < nt && !ready; t0 += m) {
        m = even_tile(nt - t0, kDirect);
        for (int64_t t = 0; t < m; ++t) {
          const auto* xr = reinterpret_cast<const block_q8_K*>(x + (t0 + t) * x_stride);
          for (int64_t b = 0; b < nb; ++b) {
            const int64_t k = t0 * nb + b * m + t;
            if (nt > 1) xi[k] = xr[b];  // one token's blocks are in that order already
            for (int j = 0; j < 16; ++j) xo[k * 16 + j] = -32 * xr[b].bsums[j];
          }
        }
      }
      for (int64_t gi = 0; gi < n_groups; ++gi) {
        for (int64_t t = 0, m; t < nt; t += m) {
          m = even_tile(nt - t, kDirect);
          kTiles.f[m - 1](w + gi * group_bytes, nb,
                          nt > 1 ? xi.data() + t * nb : reinterpret_cast<const block_q8_K*>(x),
                          xo.data() + t * nb * 16, y + t * y_stride + gi * kPackRows, y_stride);
        }
      }
      return;
    }
    static constexpr auto kTiles =
        Q6KGroups::make_tiles(std::make_integer_sequence<int, Q6KGroups::kTile>{});
    thread_local std::vector<Q6KGroups::Block> blocks;
    if (blocks.size() < static_cast<size_t>(nb)) blocks.resize(static_cast<size_t>(nb));
    for (int64_t gi = 0; gi < n_groups; ++gi) {
      const uint8_t* g = w + gi * group_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        Q6KGroups::Words words;
        load(g, nb, b, words);
        Q6KGroups::unpack(words, blocks[b]);
      }
      for (int64_t t = 0; t < nt; t += Q6KGroups::kTile) {
        const int m = static_cast<int>(std::min<int64_t>(Q6KGroups::kTile, nt - t));
        const block_q8_K* xb[Q6KGroups::kTile];
        for (int k = 0; k < m; ++k)
          xb[k] = reinterpret_cast<const block_q8_K*>(x + (t + k) * x_stride);
        kTiles.f[m - 1](blocks.data(), nb, xb, y + t * y_stride + gi * kPackRows, y_stride);
      }
    }
  }
};

// q6_K: the words of Q6KGroups::from_rows stored as they are, the scales
// narrowed back to bytes, d copied.
void pack_group_q6_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  if (rows < kPackRows) return type_traits(DType::Q6_K).pack_group(src, src_stride, rows, dst, n);
  using Units = PackedQ6K::Units;
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * sizeof(block_q6_K);
    Q6KGroups::Words w;
    Q6KGroups::from_rows(blk, src_stride, w);
    uint8_t* q = dst + Units::quants(b);
    uint8_t* ds = dst + Units::scales(nb, b);
    for (int v = 0; v < 16; ++v) {
      _mm512_storeu_si512(q + 64 * v, w.qa[v]);
      _mm512_storeu_si512(q + 64 * (16 + v), w.qb[v]);
      _mm512_storeu_si512(q + 64 * (32 + v), w.qh[v]);
    }
    for (int j = 0; j < 16; ++j)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + Units::kScales + 16 * j),
                       _mm512_cvtepi32_epi8(w.sc[j]));
    for (int i = 0; i < kPackRows; ++i)
      std::memcpy(ds + 2 * i, blk + i * src_stride + offsetof(block_q6_K, d), 2);
  }
}

// iq4_xs: the codes in 8 transposes (the block's bytes 8..135), the 16 rows'
// scales_l, scales_h and d copied.
void pack_group_iq4_xs(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  if (rows < kPackRows) return type_traits(DType::IQ4_XS).pack_group(src, src_stride, rows, dst, n);
  using Units = Iq4XsUnits;
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = src + b * sizeof(block_iq4_xs);
    uint8_t* q = dst + Units::quants(b);
    for (int h = 0; h < 8; ++h) {
      __m512i w[4];
      transpose_words(blk + offsetof(block_iq4_xs, qs) + 16 * h, src_stride, w);
      for (int k = 0; k < 4; ++k) _mm512_storeu_si512(q + 64 * (4 * h + k), w[k]);
    }
    uint8_t* ds = dst + Units::scales(nb, b);
    for (int i = 0; i < kPackRows; ++i) {
      const uint8_t* r = blk + i * src_stride;
      std::memcpy(q + Units::kScalesL + 4 * i, r + offsetof(block_iq4_xs, scales_l), 4);
      std::memcpy(q + Units::kScalesH + 2 * i, r + offsetof(block_iq4_xs, scales_h), 2);
      std::memcpy(ds + 2 * i, r + offsetof(block_iq4_xs, d), 2);
    }
  }
}

}  // namespace

void add_avx512_packed_kernels(KernelTable& t) {
  t.packed[slot(DType::Q4_0)] = Packed<DType::Q4_0>::run;
  t.packed[slot(DType::Q8_0)] = Packed<DType::Q8_0>::run;
  t.packed[slot(DType::MXFP4)] = Packed<DType::MXFP4>::run;
  t.packed[slot(DType::Q4_K)] = PackedQ4K::run;
  t.packed[slot(DType::Q5_0)] = Packed<DType::Q5_0>::run;
  t.pack_group[slot(DType::Q5_0)] = pack_group_q5_0;
  t.pack_group[slot(DType::Q4_0)] = pack_group_q<DType::Q4_0, 4, sizeof(block_q4_0), 2>;
  t.pack_group[slot(DType::Q8_0)] = pack_group_q<DType::Q8_0, 8, sizeof(block_q8_0), 2>;
  t.pack_group[slot(DType::MXFP4)] = pack_group_q<DType::MXFP4, 4, sizeof(block_mxfp4), 1>;
  t.pack_group[slot(DType::Q4_K)] = pack_group_q4_K;
  t.packed[slot(DType::Q6_K)] = PackedQ6K::run;
  t.pack_group[slot(DType::Q6_K)] = pack_group_q6_K;
  t.packed[slot(DType::IQ4_XS)] = PackedIq4Xs::run;
  t.pack_group[slot(DType::IQ4_XS)] = pack_group_iq4_xs;
}

}  // namespace colibri
