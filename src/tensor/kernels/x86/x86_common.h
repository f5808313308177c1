// x86 kernels shared by the AVX2 and AVX-512 builds, on 256-bit vectors.
//
// Included by exactly one .cpp per ISA, each compiled with its own -m flags;
// everything here has internal linkage so the two builds never merge. With
// CLB_X86_VNNI the int8 products use AVX512-VNNI (vpdpbusd/vpdpwssd on ymm),
// otherwise AVX2's vpmaddubsw + vpmaddwd.
//
// Each dot computes the scalar reference's per-block integer sums exactly;
// only the order of the float additions differs.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "tensor/half.h"
#include "tensor/iq_grids.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/kv_row.h"
#include "tensor/quant_blocks.h"

#ifndef CLB_X86_VNNI
#error "define CLB_X86_VNNI before including x86_common.h"
#endif

namespace colibri {
namespace {

// Scales are halves: F16C converts one exactly (subnormals included) in a
// single instruction, where half_to_float's branches cost more than a block's
// integer dot.
inline float h2f(uint16_t h) {
  return _cvtsh_ss(h);
}
inline uint16_t f2h(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// int32 lanes += sum of 4 adjacent u8 * s8 products.
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if CLB_X86_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// int32 lanes += sum of 4 adjacent s8 * s8 products (|values| <= 127 on one
// side, so |x| as u8 times sign-moved y never saturates vpmaddubsw).
inline __m256i dot_s8s8(__m256i acc, __m256i x, __m256i y) {
  return dot_u8s8(acc, _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// int32 lanes += (u8 * s8 pair sums as int16) * scales16, pairwise.
inline __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i scales16) {
  const __m256i p = _mm256_maddubs_epi16(u, s);
#if CLB_X86_VNNI
  return _mm256_dpwssd_epi32(acc, p, scales16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales16));
#endif
}

// Scales for a 32-element run made of two 16-element sub-blocks.
inline __m256i scales_pair(int s0, int s1) {
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(s0)),
                           _mm_set1_epi16(static_cast<int16_t>(s1)));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles.
inline __m256i nibbles_32(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i v = _mm256_setr_m128i(b, _mm_srli_epi16(b, 4));
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, 0xFF where the bit is set.
inline __m256i bits_32(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303));
  const __m256i mask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
}
inline __m256i bits_32(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  return bits_32(bits);
}

inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// ---- legacy 32-element blocks ----

// Weight policies for kernels that take a block's 32 values as unsigned
// bytes u (so vpmaddubsw/vpdpbusd can multiply them with int8 activations)
// and undo the offset through the activations' sums: value = u - kOffset.
struct Q4_0Weights {
  using Block = block_q4_0;
  static constexpr int kOffset = 8;
  static __m256i unpack(const Block& b) { return nibbles_32(b.qs); }
  static float scale(const Block& b) { return h2f(b.d); }
};
// MXFP4's codes through a 16-byte table (vpshufb) to kMxfp4Values + 12, in
// 0..24: a sign-free operand, and vpmaddubsw's pair sums (<= 2 * 24 * 127)
// cannot saturate.
struct Mxfp4Weights {
  using Block = block_mxfp4;
  static constexpr int kOffset = 12;
  static __m256i unpack(const Block& b) {
    const __m256i table = _mm256_add_epi8(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values))),
        _mm256_set1_epi8(kOffset));
    return _mm256_shuffle_epi8(table, nibbles_32(b.qs));
  }
  // One load (and broadcast) per block from a 1 KB table, where
  // e8m0_to_float_half's select costs about nine scalar operations.
  static float scale(const Block& b) { return kScales.v[b.e]; }
  struct Scales {
    float v[256];
  };
  static constexpr Scales kScales = [] {
    Scales s{};
    for (int e = 0; e < 256; ++e)
      s.v[e] = e8m0_to_float_half(static_cast<uint8_t>(e));
    return s;
  }();
};


float dot_q8_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q8_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i s = dot_s8s8(_mm256_setzero_si256(), load32(x[i].qs), load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

float dot_q4_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q4_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
    const __m256i s = dot_s8s8(_mm256_setzero_si256(), q, load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

float dot_q5_0(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q5_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    // q - 16 as int8: a clear fifth bit sets the top nibble (nibble - 16).
    const __m256i hi =
        _mm256_andnot_si256(bits_32(x[i].qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    const __m256i q = _mm256_or_si256(nibbles_32(x[i].qs), hi);
    const __m256i s = dot_s8s8(_mm256_setzero_si256(), q, load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

// IQ4_NL and IQ4_XS codes through a 16-byte table (vpshufb) to kIq4nlValues:
// signed bytes, none 0, |v| <= 127, multiplied as dot_s8s8 does.
inline __m256i iq4_values_32(const uint8_t* qs) {
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_shuffle_epi8(table, nibbles_32(qs));
}

float dot_iq4_nl(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq4_nl*>(w);
  const auto* y = static_cast<const block_q8_0*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i s = dot_s8s8(_mm256_setzero_si256(), iq4_values_32(x[i].qs), load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum(acc);
}

// Per super-block the exact integer sum over its sub-blocks of (ls - 32)
// times the sub-block's dot (|sum| <= 256 x 127 x 127 x 32 < 2^31), then one
// float product with d_w d_x.
float dot_iq4_xs(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq4_xs*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const __m256i v = iq4_values_32(x[i].qs + 16 * ib);
      const __m256i q8 = load32(y[i].qs + kQK * ib);
      // |v| as unsigned times q8 with v's sign: pair sums <= 2 x 127 x 127.
      isum = dot_u8s8_scaled(isum, _mm256_sign_epi8(v, v), _mm256_sign_epi8(q8, v),
                             _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(x[i], ib))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// ---- the codebook i-quants: a group's point bytes gathered from the grid,
// the activations carrying the points' signs, per-block integer sums exact as
// the reference's and its float expression on them, block after block ----

inline uint32_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The sign bytes of eight 7-bit fields (a 56-bit word): each field's byte
// with its parity in bit 7 (iq2_signs, eight at a time; both x86 levels have
// BMI2).
inline uint64_t iq2_sign_bytes(uint64_t fields) {
  const uint64_t b = _pdep_u64(fields, 0x7F7F7F7F7F7F7F7Full);
  uint64_t p = b ^ (b >> 4);
  p ^= p >> 2;
  p ^= p >> 1;
  return b | ((p & 0x0101010101010101ull) << 7);
}
// Four fields (a 32-bit word's low 28 bits).
inline uint32_t iq2_sign_word(uint32_t fields) {
  return static_cast<uint32_t>(iq2_sign_bytes(fields & 0x0FFFFFFF));
}

// q8 with lane j negated where bit j of `signs` is set.
inline __m256i signed_q8(const int8_t* q8, uint32_t signs) {
  return _mm256_sign_epi8(load32(q8), _mm256_or_si256(bits_32(signs), _mm256_set1_epi8(1)));
}

inline __m256i points8_32(const uint64_t* g, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  return _mm256_setr_epi64x(static_cast<int64_t>(g[i0]), static_cast<int64_t>(g[i1]), static_cast<int64_t>(g[i2]),
                            static_cast<int64_t>(g[i3]));
}
inline __m256i points4_32(const uint32_t* g, const uint32_t* i) {
  return _mm256_setr_epi32(static_cast<int>(g[i[0]]), static_cast<int>(g[i[1]]), static_cast<int>(g[i[2]]),
                           static_cast<int>(g[i[3]]), static_cast<int>(g[i[4]]), static_cast<int>(g[i[5]]),
                           static_cast<int>(g[i[6]]), static_cast<int>(g[i[7]]));
}

inline int hsum_i32(__m256i v) {
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4E));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xB1));
  return _mm_cvtsi128_si32(r);
}

inline __m256i set16(int v) {
  return _mm256_set1_epi16(static_cast<int16_t>(v));
}

float dot_iq2_xxs(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq2_xxs*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* grid = iq_grids().iq2xxs;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint32_t idx = load_u32(x[i].qs + 4 * ib), sg = load_u32(x[i].qs + 4 * ib + 2);
      const __m256i p = points8_32(grid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24);
      isum = dot_u8s8_scaled(isum, p, signed_q8(y[i].qs + kQK * ib, iq2_sign_word(sg)),
                             set16(2 * static_cast<int>(sg >> 28) + 1));
    }
    sumf += h2f(x[i].d) * y[i].d * static_cast<float>(hsum_i32(isum));
  }
  return 0.125f * sumf;
}

// IQ2_XS and IQ2_S: a scale for each 16.
template <typename Block>
inline __m256i iq2_scales(const Block& b, int ib) {
  return scales_pair(2 * (b.scales[ib] & 0xF) + 1, 2 * (b.scales[ib] >> 4) + 1);
}

float dot_iq2_xs(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq2_xs*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* grid = iq_grids().iq2xs;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint16_t* q = x[i].qs + 4 * ib;
      const __m256i p = points8_32(grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
      const uint32_t fields = (q[0] >> 9) | ((q[1] >> 9) << 7) | ((q[2] >> 9) << 14) | ((q[3] >> 9) << 21);
      isum = dot_u8s8_scaled(isum, p, signed_q8(y[i].qs + kQK * ib, iq2_sign_word(fields)), iq2_scales(x[i], ib));
    }
    sumf += h2f(x[i].d) * y[i].d * static_cast<float>(hsum_i32(isum));
  }
  return 0.125f * sumf;
}

float dot_iq2_s(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq2_s*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* grid = iq_grids().iq2s;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint32_t qh = x[i].qh[ib];
      const __m256i p = points8_32(grid, qs[0] | ((qh << 8) & 0x300), qs[1] | ((qh << 6) & 0x300),
                                   qs[2] | ((qh << 4) & 0x300), qs[3] | ((qh << 2) & 0x300));
      isum = dot_u8s8_scaled(isum, p, signed_q8(y[i].qs + kQK * ib, load_u32(x[i].qs + kQK_K / 8 + 4 * ib)),
                             iq2_scales(x[i], ib));
    }
    sumf += h2f(x[i].d) * y[i].d * static_cast<float>(hsum_i32(isum));
  }
  return 0.125f * sumf;
}

float dot_iq3_xxs(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq3_xxs*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint32_t* grid = iq_grids().iq3xxs;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 8 * ib;
      const uint32_t idx[8] = {qs[0], qs[1], qs[2], qs[3], qs[4], qs[5], qs[6], qs[7]};
      const uint32_t sg = load_u32(x[i].qs + kQK_K / 4 + 4 * ib);
      isum = dot_u8s8_scaled(isum, points4_32(grid, idx), signed_q8(y[i].qs + kQK * ib, iq2_sign_word(sg)),
                             set16(2 * static_cast<int>(sg >> 28) + 1));
    }
    sumf += h2f(x[i].d) * y[i].d * static_cast<float>(hsum_i32(isum));
  }
  return 0.25f * sumf;
}

float dot_iq3_s(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq3_s*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint32_t* grid = iq_grids().iq3s;
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 8 * ib;
      const uint32_t qh = x[i].qh[ib];
      uint32_t idx[8];
      for (int k = 0; k < 8; ++k) idx[k] = qs[k] | (((qh >> k) & 1) << 8);
      const int ls = (x[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
      isum = dot_u8s8_scaled(isum, points4_32(grid, idx), signed_q8(y[i].qs + kQK * ib, load_u32(x[i].signs + 4 * ib)),
                             set16(2 * ls + 1));
    }
    sumf += h2f(x[i].d) * y[i].d * static_cast<float>(hsum_i32(isum));
  }
  return sumf;
}

// IQ1: the points' -1, 0, 1 applied to the activations as signs, summed
// against ones.
float dot_iq1_s(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq1_s*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* grid = iq_grids().iq1s;
  const __m256i ones = _mm256_set1_epi8(1);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i isum = _mm256_setzero_si256();
    int sumi1 = 0;
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint32_t qh = x[i].qh[ib];
      const __m256i p = points8_32(grid, qs[0] | ((qh << 8) & 0x700), qs[1] | ((qh << 5) & 0x700),
                                   qs[2] | ((qh << 2) & 0x700), qs[3] | ((qh >> 1) & 0x700));
      const int ls = 2 * static_cast<int>((qh >> 12) & 7) + 1;
      isum = dot_u8s8_scaled(isum, ones, _mm256_sign_epi8(load32(y[i].qs + kQK * ib), p), set16(ls));
      const int bs = y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1];
      sumi1 += qh & 0x8000 ? -ls * bs : ls * bs;
    }
    sumf += h2f(x[i].d) * y[i].d * (static_cast<float>(hsum_i32(isum)) + kIq1Delta * static_cast<float>(sumi1));
  }
  return sumf;
}

float dot_iq1_m(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_iq1_m*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  const uint64_t* grid = iq_grids().iq1s;
  const __m256i ones = _mm256_set1_epi8(1);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    iq1_m_scale_words(x[i], sc);
    __m256i isum1 = _mm256_setzero_si256(), isum2 = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / kQK; ++ib) {
      const uint8_t* qs = x[i].qs + 4 * ib;
      const uint32_t h0 = x[i].qh[2 * ib], h1 = x[i].qh[2 * ib + 1];
      const __m256i p = points8_32(grid, qs[0] | ((h0 << 8) & 0x700), qs[1] | ((h0 << 4) & 0x700),
                                   qs[2] | ((h1 << 8) & 0x700), qs[3] | ((h1 << 4) & 0x700));
      const int s = sc[ib / 2] >> (6 * (ib % 2));
      const __m256i ls = scales_pair(2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
      const __m256i q8 = load32(y[i].qs + kQK * ib);
      // Each group's shift sign as a whole byte of signs.
      const uint32_t minus = (h0 & 0x08 ? 0xFFu : 0) | (h0 & 0x80 ? 0xFF00u : 0) | (h1 & 0x08 ? 0xFF0000u : 0) |
                             (h1 & 0x80 ? 0xFF000000u : 0);
      isum1 = dot_u8s8_scaled(isum1, ones, _mm256_sign_epi8(q8, p), ls);
      isum2 = dot_u8s8_scaled(isum2, ones, signed_q8(y[i].qs + kQK * ib, minus), ls);
    }
    sumf += h2f(iq1_m_d(sc)) * y[i].d *
            (static_cast<float>(hsum_i32(isum1)) + kIq1Delta * static_cast<float>(hsum_i32(isum2)));
  }
  return sumf;
}

float dot_q4_1(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q4_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(xv);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i s = dot_u8s8(_mm256_setzero_si256(), nibbles_32(x[i].qs), load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    summs += h2f(x[i].m) * h2f(y[i].s);
  }
  return hsum(acc) + summs;
}

float dot_q5_1(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q5_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(xv);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i hi = _mm256_and_si256(bits_32(x[i].qh), _mm256_set1_epi8(0x10));
    const __m256i q = _mm256_or_si256(nibbles_32(x[i].qs), hi);
    const __m256i s = dot_u8s8(_mm256_setzero_si256(), q, load32(y[i].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    summs += h2f(x[i].m) * h2f(y[i].s);
  }
  return hsum(acc) + summs;
}

// ---- K-quants: per super-block an int32 vector of scale * q * x sums ----

// sum over the 16 sub-blocks of scale_i * bsum_i.
inline int scaled_bsums(const int16_t* bsums, const int8_t* scales16) {
  const __m256i b = load32(bsums);
  const __m256i s =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales16)));
  const __m256i p = _mm256_madd_epi16(b, s);
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4E));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xB1));
  return _mm_cvtsi128_si32(r);
}

float dot_q2_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q2_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc[16], mn[16];
    for (int j = 0; j < 16; ++j) {
      sc[j] = static_cast<int8_t>(x[i].scales[j] & 0xF);
      mn[j] = static_cast<int8_t>(x[i].scales[j] >> 4);
    }
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load32(x[i].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const int sb = 8 * h + 2 * k;
        isum = dot_u8s8_scaled(isum, v, load32(y[i].qs + 32 * (4 * h + k)),
                               scales_pair(sc[sb], sc[sb + 1]));
      }
    }
    const float dy = y[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * h2f(x[i].d)), _mm256_cvtepi32_ps(isum), acc);
    summs += dy * h2f(x[i].dmin) * scaled_bsums(y[i].bsums, mn);
  }
  return hsum(acc) - summs;
}

float dot_q3_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q3_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  __m256 acc = _mm256_setzero_ps();
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc[16];
    q3k_scales(x[i].scales, sc);
    const __m256i hm = load32(x[i].hmask);
    // Values are q2 + 4 * hbit - 4: dot the unsigned q2 + 4 * hbit, then take
    // 4 * scale * bsum off each sub-block.
    __m256i isum = _mm256_setr_epi32(-4 * scaled_bsums(y[i].bsums, sc), 0, 0, 0, 0, 0, 0, 0);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load32(x[i].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
        const __m256i v = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
        const int sb = 8 * h + 2 * k;
        isum = dot_u8s8_scaled(isum, v, load32(y[i].qs + 32 * (4 * h + k)),
                               scales_pair(sc[sb], sc[sb + 1]));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// q4_K and q5_K: 8 sub-blocks of 32 with 6-bit scales and mins.
template <bool kFifthBit, typename Block>
float dot_k4(const Block* x, const block_q8_K* y, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  float summs = 0;
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t sc[8];
    int8_t mn16[16];
    for (int j = 0; j < 8; ++j) {
      uint8_t m;
      k4_scale_min(j, x[i].scales, &sc[j], &m);
      mn16[2 * j] = mn16[2 * j + 1] = static_cast<int8_t>(m);  // 6-bit: fits int8
    }
    __m256i isum = _mm256_setzero_si256();
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFifthBit) qh = load32(x[i].qh);
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load32(x[i].qs + 32 * j);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFifthBit) {
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
      }
      isum = dot_u8s8_scaled(isum, lo, load32(y[i].qs + 64 * j), _mm256_set1_epi16(sc[2 * j]));
      isum = dot_u8s8_scaled(isum, hi, load32(y[i].qs + 64 * j + 32),
                             _mm256_set1_epi16(sc[2 * j + 1]));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
    summs += h2f(x[i].dmin) * y[i].d * scaled_bsums(y[i].bsums, mn16);
  }
  return hsum(acc) - summs;
}

float dot_q4_K(const void* w, const void* xv, int64_t n) {
  return dot_k4<false>(static_cast<const block_q4_K*>(w), static_cast<const block_q8_K*>(xv), n);
}
float dot_q5_K(const void* w, const void* xv, int64_t n) {
  return dot_k4<true>(static_cast<const block_q5_K*>(w), static_cast<const block_q8_K*>(xv), n);
}

float dot_q6_K(const void* w, const void* xv, int64_t n) {
  const auto* x = static_cast<const block_q6_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(xv);
  __m256 acc = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* sc = x[i].scales;
    // Values are q - 32 with q in 0..63: dot q, take 32 * scale * bsum off.
    __m256i isum = _mm256_setr_epi32(-32 * scaled_bsums(y[i].bsums, sc), 0, 0, 0, 0, 0, 0, 0);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(x[i].ql + 64 * h), ql1 = load32(x[i].ql + 64 * h + 32);
      const __m256i qh = load32(x[i].qh + 32 * h);
      const __m256i lows[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
      for (int k = 0; k < 4; ++k) {
        const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3);
        const __m256i v = _mm256_or_si256(lows[k], _mm256_slli_epi16(hb, 4));
        const int sb = 8 * h + 2 * k;
        isum = dot_u8s8_scaled(isum, v, load32(y[i].qs + 32 * (4 * h + k)),
                               scales_pair(sc[sb], sc[sb + 1]));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// ---- float types: four 8-wide F32 accumulators, scalar tail ----

inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline __m256 load_f32x8(const float* p) {
  return _mm256_loadu_ps(p);
}

template <typename T, __m256 (*Load)(const T*), float (*ToFloat)(T)>
float dot_float8(const void* w, const void* xv, int64_t n) {
  const T* a = static_cast<const T*>(w);
  const T* b = static_cast<const T*>(xv);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(Load(a + i + 8 * k), Load(b + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load(a + i), Load(b + i), acc[0]);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) s += ToFloat(a[i]) * ToFloat(b[i]);
  return s;
}

inline float f32_id(float f) {
  return f;
}

float dot_f32(const void* w, const void* x, int64_t n) {
  return dot_float8<float, load_f32x8, f32_id>(w, x, n);
}
float dot_f16(const void* w, const void* x, int64_t n) {
  return dot_float8<uint16_t, load_f16x8, half_to_float>(w, x, n);
}
float dot_bf16(const void* w, const void* x, int64_t n) {
  return dot_float8<uint16_t, load_bf16x8, bf16_to_float>(w, x, n);
}

// ---- activation quantizers, bit-equal to kernels/ref ----

// roundf (ties away from zero) from round-to-nearest-even: where v sits
// exactly halfway and RNE went toward zero, step away instead.
inline __m256 round_half_away(__m256 v) {
  const __m256 rne = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 half = _mm256_or_ps(_mm256_set1_ps(0.5f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  const __m256 tie_toward_zero = _mm256_cmp_ps(_mm256_sub_ps(v, rne), half, _CMP_EQ_OQ);
  return _mm256_blendv_ps(rne, _mm256_add_ps(v, half), tie_toward_zero);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// 32 floats of one block -> 32 int8 (roundf(x * id)); returns sum of them.
inline int quantize_block32(const float* x, float id, int8_t* out) {
  const __m256 mul = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k)
    q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul)));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  // packs interleave 128-bit lanes; the permute restores element order.
  const __m256i p =
      _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4E));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xB1));
  return _mm_cvtsi128_si32(r);
}

inline float block_amax32(const float* x) {
  __m256 m = abs_ps(_mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + 8 * k)));
  return hmax(m);
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = block_amax32(src) / 127;
    y[i].d = f2h(d);
    quantize_block32(src, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = block_amax32(src) / 127;
    y[i].d = f2h(d);
    const int sum = quantize_block32(src, d != 0.0f ? 1.0f / d : 0.0f, y[i].qs);
    y[i].s = f2h(static_cast<float>(sum) * d);
  }
}

void quantize_q8_K(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<block_q8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kQK_K; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(src + k)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    // The reference keeps the first element of largest magnitude (its sign
    // sets the scale's sign).
    int j = 0;
    while (std::fabs(src[j]) != amax) ++j;
    const float iscale = -127.f / src[j];
    const __m256 mul = _mm256_set1_ps(iscale);
    for (int k = 0; k < kQK_K; k += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + k), mul));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + k + 8), mul));
      a = _mm256_min_epi32(a, _mm256_set1_epi32(127));
      b = _mm256_min_epi32(b, _mm256_set1_epi32(127));
      const __m256i s = _mm256_add_epi32(a, b);
      __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4E));
      r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xB1));
      y[i].bsums[k / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(r));
      const __m256i p = _mm256_packs_epi32(a, b);  // 16 x int16, lane-interleaved
      const __m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
      // p8 holds a0..3 b0..3 a4..7 b4..7 -> restore order a0..7 b0..7.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + k),
                       _mm_shuffle_epi8(p8, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12,
                                                          13, 14, 15)));
    }
    y[i].d = 1 / iscale;
  }
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) h[i] = float_to_half(src[i]);
}

// Integer round-to-nearest-even on the bits (hardware bf16 conversions flush
// subnormals, the reference does not).
void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                              _mm256_set1_epi32(0x7F800000));
    const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, nan, is_nan);
    const __m256i p = _mm256_packus_epi32(r, r);  // per lane: r0..3 r0..3 | r4..7 r4..7
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
  }
  for (; i < n; ++i) h[i] = float_to_bf16(src[i]);
}

// ---- attention of one query head over the F32 KV cache ----

// The four vectors' lane sums, as one vector.
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// e^x for x <= 0 (Cephes expf: 2^n * e^r, |r| <= ln2 / 2, degree-6
// polynomial; within 2 ulp). Inputs under -87.3 give ~1e-38, not 0: against
// the softmax's largest term, 1, that is nothing.
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// scores[p] = e^(scores[p] - max) for p < n; returns 1 / their sum, with
// the sink's e^(sink - max) in the sum (max over the scores and the sink).
inline float softmax_exp(float* scores, int64_t n, float sink) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(scores + p));
  float max = hmax(mv);
  for (; p < n; ++p) max = std::max(max, scores[p]);
  max = std::max(max, sink);
  const __m256 maxv = _mm256_set1_ps(max);
  __m256 sv = _mm256_setzero_ps();
  p = 0;
  for (; p + 8 <= n; p += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(scores + p), maxv));
    _mm256_storeu_ps(scores + p, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = hsum(sv) + std::exp(sink - max);
  for (; p < n; ++p) {
    scores[p] = std::exp(scores[p] - max);
    sum += scores[p];
  }
  return 1.0f / sum;
}

// x * sigmoid(a), the sigmoid from z = e^-|a| (which never overflows):
// 1 / (1 + z) for a >= 0, z / (1 + z) below, 0 under -87 (there the sigmoid
// is below float's normal range, and the clamped e^-|a| would leave ~1e-38
// that a large x would scale back up). Within a few ulp of the scalar
// x / (1 + e^-a); 8 lanes where glibc's expf takes one.
inline __m256 times_sigmoid_8(__m256 x, __m256 a) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 z = exp_nonpositive(_mm256_or_ps(a, _mm256_set1_ps(-0.0f)));  // e^-|a|
  const __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, z));
  __m256 s = _mm256_blendv_ps(r, _mm256_mul_ps(z, r), a);  // sign bit of a picks z / (1 + z)
  s = _mm256_andnot_ps(_mm256_cmp_ps(a, _mm256_set1_ps(-87.0f), _CMP_LT_OQ), s);
  return _mm256_mul_ps(x, s);
}

// y = silu(g) * u = x sigmoid(x) u.
inline __m256 silu_mul_8(__m256 x, __m256 u) {
  return _mm256_mul_ps(times_sigmoid_8(x, x), u);
}

// GPT-OSS's clamped SwiGLU (kernel_table.h's SwigluFn): x = min(g, 7) and
// clamp(u, -7, 7), NaN passing through as in the scalar std::min and
// std::clamp (vminps and vmaxps return their second operand on NaN).
inline __m256 swiglu_clamped_8(__m256 g, __m256 u) {
  const __m256 limit = _mm256_set1_ps(7.0f);
  const __m256 x = _mm256_min_ps(limit, g);
  const __m256 v = _mm256_max_ps(_mm256_set1_ps(-7.0f), _mm256_min_ps(limit, u));
  return _mm256_mul_ps(times_sigmoid_8(x, _mm256_mul_ps(_mm256_set1_ps(1.702f), x)),
                       _mm256_add_ps(v, _mm256_set1_ps(1.0f)));
}

// y = f(g, u) eight elements at a time; the last partial vector goes through
// the same lanes, padded, so an element's value never depends on where it falls.
template <__m256 (*f)(__m256, __m256)>
void map8(const float* g, const float* u, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    float gt[8] = {}, ut[8] = {}, yt[8];
    std::copy(g + i, g + n, gt);
    std::copy(u + i, u + n, ut);
    _mm256_storeu_ps(yt, f(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
    std::copy(yt, yt + (n - i), y + i);
  }
}

void silu_mul_x86(const float* g, const float* u, float* y, int64_t n) {
  map8<silu_mul_8>(g, u, y, n);
}
void swiglu_clamped_x86(const float* g, const float* u, float* y, int64_t n) {
  map8<swiglu_clamped_8>(g, u, y, n);
}

// Eight cached key/value elements (i, i + 8) of a row as floats: F32 as they
// are, F16 through F16C, Q8_0 and Q4_0 widened and times the block's scale
// (all exact, tensor/kv_row.h), so an F16, Q8_0 or Q4_0 cache gives the bits
// an F32 cache holding the same values gives. Q8_0, Q4_0: i is a multiple of 8.
inline __m256 load8(const float* row, int i) { return _mm256_loadu_ps(row + i); }
inline __m256 load8(const uint16_t* row, int i) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
}
inline __m256 load8(const block_q8_0* row, int i) {
  const block_q8_0& b = row[i / kQK];
  const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + i % kQK)));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(_cvtsh_ss(b.d)));
}
// Q4_0: elements [j, j + 8) of a block are the low (j < 16) or high nibbles
// of bytes [j % 16, j % 16 + 8).
inline __m256 load8(const block_q4_0* row, int i) {
  const block_q4_0& b = row[i / kQK];
  const int j = i % kQK;
  __m256i q =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + j % (kQK / 2))));
  q = j < kQK / 2 ? _mm256_and_si256(q, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(q, 4);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(8))),
                       _mm256_set1_ps(_cvtsh_ss(b.d)));
}
// (The scalar tails use explicit fmas: left to the compiler, a float cache's
// tail contracted to fmas and a half cache's did not.)

// Attention reads each cached row once per step, so its loops prefetch rows
// as the weight kernels do: into L1 16 positions ahead, into L2 64 ahead
// (4 and 16 KiB for 128 F16 elements), never past the last position (at a
// short context those rows are unused cache memory).
constexpr int64_t kRowsAhead = 16;
constexpr int64_t kRowsFarAhead = 64;

// row is position p of n_pos; the `elems` elements from element i0 are read.
// Always inlined: GCC 12 takes a function of prefetches alone for one without
// side effects and drops calls it has not inlined yet (no prefetch was left
// in any attention kernel).
template <typename KV>
[[gnu::always_inline]] inline void prefetch_row(const KV* row, size_t stride, int elems, int64_t p,
                                                int64_t n_pos, int i0 = 0) {
  const size_t bytes = kv_row_bytes<KV>(elems);
  if (p + kRowsAhead < n_pos) {
    const char* near = kv_addr(row + kRowsAhead * stride, i0);
    for (size_t c = 0; c < bytes; c += 64) _mm_prefetch(near + c, _MM_HINT_T0);
  }
  if (p + kRowsFarAhead < n_pos) {
    const char* far = kv_addr(row + kRowsFarAhead * stride, i0);
    for (size_t c = 0; c < bytes; c += 64) _mm_prefetch(far + c, _MM_HINT_T1);
  }
}

// kernels/ref's attend with 8-wide dots (four positions at a time), a
// vectorised exp, and the weighted sum of V kept in registers across
// positions (64 output dims at a time), scaled by 1 / sum once at the end.
// KV: the cache's row unit (float, F16 bits, a q8_0 or q4_0 block; tensor/kv_row.h).
template <typename KV>
void attend_x86(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                int64_t n_pos, int head_dim, int head_dim_v, float scale, float* scores,
                float* out, float sink) {
  const int hd8 = head_dim & ~7;
  int64_t p = 0;
  for (; p + 4 <= n_pos; p += 4) {
    const KV* k0 = k + p * k_stride;
    for (int r = 0; r < 4; ++r) prefetch_row(k0 + r * k_stride, k_stride, head_dim, p + r, n_pos);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd8; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, load8(k0, i), a0);
      a1 = _mm256_fmadd_ps(qv, load8(k0 + k_stride, i), a1);
      a2 = _mm256_fmadd_ps(qv, load8(k0 + 2 * k_stride, i), a2);
      a3 = _mm256_fmadd_ps(qv, load8(k0 + 3 * k_stride, i), a3);
    }
    float s[4];
    _mm_storeu_ps(s, hsum4(a0, a1, a2, a3));
    for (int j = 0; j < 4; ++j) {
      for (int i = hd8; i < head_dim; ++i) s[j] = std::fma(q[i], kv_value(k0 + j * k_stride, i), s[j]);
      scores[p + j] = s[j] * scale;
    }
  }
  for (; p < n_pos; ++p) {
    const KV* kp = k + p * k_stride;
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < hd8; i += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(kp, i), a);
    float s = hsum(a);
    for (int i = hd8; i < head_dim; ++i) s = std::fma(q[i], kv_value(kp, i), s);
    scores[p] = s * scale;
  }

  const float inv = softmax_exp(scores, n_pos, sink);

  // One pass over the rows per 64 dimensions (8 accumulators hide the fma
  // latency), then 8, then single dimensions.
  int i0 = 0;
  for (; i0 + 64 <= head_dim_v; i0 += 64) {
    __m256 o[8];
    for (int a = 0; a < 8; ++a) o[a] = _mm256_setzero_ps();
    const KV* vp = v;
    for (p = 0; p < n_pos; ++p, vp += v_stride) {
      prefetch_row(vp, v_stride, 64, p, n_pos, i0);
      const __m256 a = _mm256_broadcast_ss(scores + p);
      for (int j = 0; j < 8; ++j) o[j] = _mm256_fmadd_ps(a, load8(vp, i0 + 8 * j), o[j]);
    }
    const __m256 iv = _mm256_set1_ps(inv);
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + i0 + 8 * j, _mm256_mul_ps(o[j], iv));
  }
  for (; i0 + 8 <= head_dim_v; i0 += 8) {
    __m256 o = _mm256_setzero_ps();
    const KV* vp = v;
    for (p = 0; p < n_pos; ++p, vp += v_stride)
      o = _mm256_fmadd_ps(_mm256_broadcast_ss(scores + p), load8(vp, i0), o);
    _mm256_storeu_ps(out + i0, _mm256_mul_ps(o, _mm256_set1_ps(inv)));
  }
  for (; i0 < head_dim_v; ++i0) {
    float o = 0;
    for (p = 0; p < n_pos; ++p) o = std::fma(scores[p], kv_value(v + p * v_stride, i0), o);
    out[i0] = o * inv;
  }
}

// G queries of one sequence at once: each key and value row is loaded once
// for all of them (two positions per step in the dots, 16 output dims per
// step in the weighted sum, so the AVX2 build keeps it all in 16 registers).
// Positions a query does not see get weight 0. Four queries over 1024 cached
// positions (head_dim 128, KV rows of 16 heads): 245 us one at a time, 96 us
// here.
template <int G, typename KV>
void attend_group(const float* q, size_t q_stride, const int32_t* n_pos, const KV* k,
                  size_t k_stride, const KV* v, size_t v_stride, int head_dim, int head_dim_v,
                  float scale, float* scores, float* out, size_t out_stride, float sink) {
  int64_t P = 0;
  for (int g = 0; g < G; ++g) P = std::max<int64_t>(P, n_pos[g]);
  const int hd8 = head_dim & ~7;
  auto finish = [&](int64_t p, const float* s) {
    const KV* kp = k + p * k_stride;
    for (int g = 0; g < G; ++g) {
      float d = s[g];
      for (int i = hd8; i < head_dim; ++i) d = std::fma(q[g * q_stride + i], kv_value(kp, i), d);
      scores[g * P + p] = d * scale;
    }
  };
  int64_t p = 0;
  for (; p + 2 <= P; p += 2) {
    const KV* k0 = k + p * k_stride;
    __m256 a0[4], a1[4];
    for (int g = 0; g < 4; ++g) a0[g] = a1[g] = _mm256_setzero_ps();
    for (int i = 0; i < hd8; i += 8) {
      const __m256 kv0 = load8(k0, i), kv1 = load8(k0 + k_stride, i);
      for (int g = 0; g < G; ++g) {
        const __m256 qv = _mm256_loadu_ps(q + g * q_stride + i);
        a0[g] = _mm256_fmadd_ps(qv, kv0, a0[g]);
        a1[g] = _mm256_fmadd_ps(qv, kv1, a1[g]);
      }
    }
    float s0[4], s1[4];
    _mm_storeu_ps(s0, hsum4(a0[0], a0[1], a0[2], a0[3]));
    _mm_storeu_ps(s1, hsum4(a1[0], a1[1], a1[2], a1[3]));
    finish(p, s0);
    finish(p + 1, s1);
  }
  for (; p < P; ++p) {
    const KV* kp = k + p * k_stride;
    __m256 a[4];
    for (int g = 0; g < 4; ++g) a[g] = _mm256_setzero_ps();
    for (int i = 0; i < hd8; i += 8) {
      const __m256 kv = load8(kp, i);
      for (int g = 0; g < G; ++g)
        a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * q_stride + i), kv, a[g]);
    }
    float s[4];
    _mm_storeu_ps(s, hsum4(a[0], a[1], a[2], a[3]));
    finish(p, s);
  }

  float inv[G];
  for (int g = 0; g < G; ++g) {
    inv[g] = softmax_exp(scores + g * P, n_pos[g], sink);
    std::fill(scores + g * P + n_pos[g], scores + (g + 1) * P, 0.0f);
  }

  int i0 = 0;
  for (; i0 + 16 <= head_dim_v; i0 += 16) {
    __m256 o[G][2];
    for (int g = 0; g < G; ++g) o[g][0] = o[g][1] = _mm256_setzero_ps();
    const KV* vp = v;
    for (p = 0; p < P; ++p, vp += v_stride) {
      const __m256 v0 = load8(vp, i0), v1 = load8(vp, i0 + 8);
      for (int g = 0; g < G; ++g) {
        const __m256 a = _mm256_broadcast_ss(scores + g * P + p);
        o[g][0] = _mm256_fmadd_ps(a, v0, o[g][0]);
        o[g][1] = _mm256_fmadd_ps(a, v1, o[g][1]);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m256 iv = _mm256_set1_ps(inv[g]);
      _mm256_storeu_ps(out + g * out_stride + i0, _mm256_mul_ps(o[g][0], iv));
      _mm256_storeu_ps(out + g * out_stride + i0 + 8, _mm256_mul_ps(o[g][1], iv));
    }
  }
  for (; i0 < head_dim_v; ++i0)
    for (int g = 0; g < G; ++g) {
      float o = 0;
      for (p = 0; p < P; ++p) o = std::fma(scores[g * P + p], kv_value(v + p * v_stride, i0), o);
      out[g * out_stride + i0] = o * inv[g];
    }
}

// The G-query kernel attend_batch_x86 calls by default (G <= kMaxGroup).
struct GroupKernel {
  static constexpr int kMaxGroup = 4;
  template <int G, typename KV>
  static void run(const float* q, size_t q_stride, const int32_t* n_pos, const KV* k, size_t k_stride,
                  const KV* v, size_t v_stride, int head_dim, int head_dim_v, float scale, float* scores,
                  float* out, size_t out_stride, float sink) {
    attend_group<G>(q, q_stride, n_pos, k, k_stride, v, v_stride, head_dim, head_dim_v, scale, scores,
                    out, out_stride, sink);
  }
};

// Single: the kernel for a lone query (attend_x86, or a wider one); Group:
// the one for 2..Group::kMaxGroup queries (a struct as GroupKernel).
template <typename KV, auto Single = &attend_x86<KV>, typename Group = GroupKernel>
void attend_batch_x86(const float* q, size_t q_stride, int n_q, const int32_t* n_pos,
                      const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                      int head_dim, int head_dim_v, float scale, float* scores, float* out,
                      size_t out_stride, float sink) {
  constexpr int kMax = Group::kMaxGroup;
  using Fn = void (*)(const float*, size_t, const int32_t*, const KV*, size_t, const KV*, size_t, int, int,
                      float, float*, float*, size_t, float);
  static constexpr auto kGroups = []<int... Gs>(std::integer_sequence<int, Gs...>) {
    return std::array<Fn, sizeof...(Gs)>{&Group::template run<Gs + 2, KV>...};
  }(std::make_integer_sequence<int, kMax - 1>{});
  for (int i = 0; i < n_q; i += kMax) {
    const float* qi = q + i * q_stride;
    float* oi = out + i * out_stride;
    const int m = std::min(kMax, n_q - i);
    if (m == 1)
      Single(qi, k, k_stride, v, v_stride, n_pos[i], head_dim, head_dim_v, scale, scores, oi, sink);
    else
      kGroups[m - 2](qi, q_stride, n_pos + i, k, k_stride, v, v_stride, head_dim, head_dim_v, scale,
                     scores, oi, out_stride, sink);
  }
}

// The entries every x86 level shares (AVX-512 overrides some afterwards).
void add_common_x86_kernels(KernelTable& t) {
  t.dot[slot(DType::F32)] = dot_f32;
  t.dot[slot(DType::F16)] = dot_f16;
  t.dot[slot(DType::BF16)] = dot_bf16;
  t.dot[slot(DType::Q4_0)] = dot_q4_0;
  t.dot[slot(DType::Q4_1)] = dot_q4_1;
  t.dot[slot(DType::Q5_0)] = dot_q5_0;
  t.dot[slot(DType::Q5_1)] = dot_q5_1;
  t.dot[slot(DType::Q8_0)] = dot_q8_0;
  t.dot[slot(DType::Q2_K)] = dot_q2_K;
  t.dot[slot(DType::Q3_K)] = dot_q3_K;
  t.dot[slot(DType::Q4_K)] = dot_q4_K;
  t.dot[slot(DType::Q5_K)] = dot_q5_K;
  t.dot[slot(DType::Q6_K)] = dot_q6_K;
  t.dot[slot(DType::IQ4_NL)] = dot_iq4_nl;
  t.dot[slot(DType::IQ4_XS)] = dot_iq4_xs;
  t.dot[slot(DType::IQ2_XXS)] = dot_iq2_xxs;
  t.dot[slot(DType::IQ2_XS)] = dot_iq2_xs;
  t.dot[slot(DType::IQ2_S)] = dot_iq2_s;
  t.dot[slot(DType::IQ3_XXS)] = dot_iq3_xxs;
  t.dot[slot(DType::IQ3_S)] = dot_iq3_s;
  t.dot[slot(DType::IQ1_S)] = dot_iq1_s;
  t.dot[slot(DType::IQ1_M)] = dot_iq1_m;
  t.quantize[slot(DType::F16)] = quantize_f16;
  t.quantize[slot(DType::BF16)] = quantize_bf16;
  t.quantize[slot(DType::Q8_0)] = quantize_q8_0;
  t.quantize[slot(DType::Q8_1)] = quantize_q8_1;
  t.quantize[slot(DType::Q8_K)] = quantize_q8_K;
  t.attend = attend_x86<float>;
  t.attend_batch = attend_batch_x86<float>;
  t.attend_f16 = attend_x86<uint16_t>;
  t.attend_batch_f16 = attend_batch_x86<uint16_t>;
  t.attend_q8_0 = attend_x86<block_q8_0>;
  t.attend_batch_q8_0 = attend_batch_x86<block_q8_0>;
  t.attend_q4_0 = attend_x86<block_q4_0>;
  t.attend_batch_q4_0 = attend_batch_x86<block_q4_0>;
  t.silu_mul = silu_mul_x86;
  t.swiglu_clamped = swiglu_clamped_x86;
}

}  // namespace
}  // namespace colibri
