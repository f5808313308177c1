#include "model/synth_blocks.h"

#include "base/error.h"
#include "tensor/half.h"
#include "tensor/iq_grids.h"
#include "tensor/quant_blocks.h"

namespace colibri::synth {

// ---- random numbers: one stream per (seed, tensor, row), so rows can be
// generated in any order on any number of threads and the file is the same.

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}


// ---- random quant blocks with a given standard deviation of the dequantized
// values. Each type's comment gives E[q^2] (q centred) for uniform random
// quants; the scale is sigma / sqrt(E[scale^2] * E[q^2]).

namespace {
uint16_t h(float f) { return float_to_half(f); }
}  // namespace

namespace {

// Mean square of a codebook's point values.
template <typename Word, int N>
float grid_mean_square(const Word (&grid)[N], bool is_signed) {
  double s = 0;
  for (const Word& w : grid) {
    uint8_t b[sizeof(Word)];
    std::memcpy(b, &w, sizeof b);
    for (uint8_t v : b) {
      const double x = is_signed ? static_cast<int8_t>(v) : v;
      s += x * x;
    }
  }
  return static_cast<float>(s / (N * sizeof(Word)));
}

// The codebook types: random point indices and signs, every scale field at a
// fixed value L (the block's spread comes from its points), d of either sign
// so that the values' variance is sigma^2: E = (scale factor)^2 E[g^2], the
// IQ1 points shifted by +-1/8 (E[(g + delta)^2] = E[g^2] + 1/64). No value
// is 0, so zero0 zeroes the row's first super-block (d = 0) and scales the
// others' d by sqrt(nb / (nb - 1)) to keep the row's variance; a row of one
// super-block is left as drawn.
void iq_random_blocks(DType t, RowRng& rng, float sigma, uint8_t* dst, int64_t nb, bool zero0) {
  const IqGrids& g = iq_grids();
  // The codebooks' mean squares, once.
  static const float m2xxs = grid_mean_square(g.iq2xxs, false), m2xs = grid_mean_square(g.iq2xs, false),
                     m2s = grid_mean_square(g.iq2s, false), m3xxs = grid_mean_square(g.iq3xxs, false),
                     m3s = grid_mean_square(g.iq3s, false), m1 = grid_mean_square(g.iq1s, true);
  zero0 = zero0 && nb > 1;
  if (zero0) sigma *= std::sqrt(static_cast<float>(nb) / static_cast<float>(nb - 1));
  const size_t bytes = dtype_info(t).block_bytes;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = dst + i * bytes;
    rng.bytes(blk, bytes);
    const float sign = rng.next() & 1 ? -1.0f : 1.0f;
    float e = 0;
    switch (t) {
      case DType::IQ2_XXS: {  // ls = 7 in each sub-block's second word: (2 ls + 1) / 8
        auto* b = reinterpret_cast<block_iq2_xxs*>(blk);
        for (int ib = 0; ib < kQK_K / kQK; ++ib) b->qs[4 * ib + 3] = static_cast<uint16_t>((b->qs[4 * ib + 3] & 0x0FFF) | 0x7000);
        e = 1.875f * 1.875f * m2xxs;
        break;
      }
      case DType::IQ2_XS:
        std::memset(reinterpret_cast<block_iq2_xs*>(blk)->scales, 0x77, kQK_K / kQK);
        e = 1.875f * 1.875f * m2xs;
        break;
      case DType::IQ2_S:
        std::memset(reinterpret_cast<block_iq2_s*>(blk)->scales, 0x77, kQK_K / kQK);
        e = 1.875f * 1.875f * m2s;
        break;
      case DType::IQ3_XXS: {  // (2 ls + 1) / 4
        auto* b = reinterpret_cast<block_iq3_xxs*>(blk);
        for (int ib = 0; ib < kQK_K / kQK; ++ib)
          b->qs[kQK_K / 4 + 4 * ib + 3] = static_cast<uint8_t>((b->qs[kQK_K / 4 + 4 * ib + 3] & 0x0F) | 0x70);
        e = 3.75f * 3.75f * m3xxs;
        break;
      }
      case DType::IQ3_S:  // 2 ls + 1
        std::memset(reinterpret_cast<block_iq3_s*>(blk)->scales, 0x77, kQK_K / 64);
        e = 15.0f * 15.0f * m3s;
        break;
      case DType::IQ1_S: {
        auto* b = reinterpret_cast<block_iq1_s*>(blk);
        for (uint16_t& qh : b->qh) qh = static_cast<uint16_t>((qh & 0x8FFF) | 0x7000);
        e = 15.0f * 15.0f * (m1 + 1.0f / 64);
        break;
      }
      case DType::IQ1_M:  // ls = 3 for every 16: 7; d set below
        e = 7.0f * 7.0f * (m1 + 1.0f / 64);
        break;
      default:
        break;
    }
    const uint16_t d = h(zero0 && i == 0 ? 0.0f : sign * sigma / std::sqrt(e));
    if (t == DType::IQ1_M) {  // 3-bit scales 3 and 3, d's nibbles on top of the four words
      auto* b = reinterpret_cast<block_iq1_m*>(blk);
      for (int k = 0; k < 4; ++k) {
        const uint16_t w = static_cast<uint16_t>(0x6DB | (((d >> (4 * k)) & 0xF) << 12));
        b->scales[2 * k] = static_cast<uint8_t>(w);
        b->scales[2 * k + 1] = static_cast<uint8_t>(w >> 8);
      }
    } else {
      std::memcpy(blk, &d, 2);  // every other type's d is its first field
    }
  }
}

}  // namespace

// zero0: element 0 of the row is exactly 0 (matrices that read the normed
// residual must not see the constant channel; see synth.h).
void random_blocks(DType t, RowRng& rng, float sigma, uint8_t* dst, int64_t n, bool zero0) {
  const DTypeInfo& info = dtype_info(t);
  const int64_t nb = n / info.block_size;
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        float v = zero0 && i == 0 ? 0.f : sigma * rng.gauss();
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v = h(zero0 && i == 0 ? 0.f : sigma * rng.gauss());
        std::memcpy(dst + 2 * i, &v, 2);
      }
      return;
    case DType::Q4_0: {  // q - 8 in -7..7 (a drawn 0 becomes 8, so the mean is 0): E = 17.5
      auto* b = reinterpret_cast<block_q4_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qs, sizeof b[i].qs);
        for (uint8_t& q : b[i].qs) {
          if ((q & 0x0F) == 0) q |= 0x08;
          if ((q & 0xF0) == 0) q |= 0x80;
        }
        b[i].d = h(sigma / std::sqrt(17.5f));
      }
      if (zero0) b[0].qs[0] = static_cast<uint8_t>((b[0].qs[0] & 0xF0) | 8);
      return;
    }
    case DType::Q5_0: {  // q - 16, q in 0..31: E = 85.5
      auto* b = reinterpret_cast<block_q5_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qh, sizeof b[i].qh);
        rng.bytes(b[i].qs, sizeof b[i].qs);
        b[i].d = h(sigma / std::sqrt(85.5f));
      }
      if (zero0) {  // q = 16
        b[0].qs[0] &= 0xF0;
        b[0].qh[0] |= 1;
      }
      return;
    }
    case DType::Q5_1: {  // q * d + m with m = -16 d: E = 85.5
      auto* b = reinterpret_cast<block_q5_1*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qh, sizeof b[i].qh);
        rng.bytes(b[i].qs, sizeof b[i].qs);
        float d = sigma / std::sqrt(85.5f);
        b[i].d = h(d);
        b[i].m = h(-16.0f * d);
      }
      if (zero0) {  // q = 16
        b[0].qs[0] &= 0xF0;
        b[0].qh[0] |= 1;
      }
      return;
    }
    case DType::Q8_0: {  // q in -128..127: E = 5461.5
      auto* b = reinterpret_cast<block_q8_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(reinterpret_cast<uint8_t*>(b[i].qs), sizeof b[i].qs);
        b[i].d = h(sigma / std::sqrt(5461.5f));
      }
      if (zero0) b[0].qs[0] = 0;
      return;
    }
    case DType::Q4_K:    // d * sc * q - d * m, m = 7.5 sc, sc in {4, 6, 8}: E = 21.25
    case DType::Q5_K: {  // the same with q in 0..31, m = 15.5 sc, sc in {2, 4}: E = 85.25
      const bool five = t == DType::Q5_K;
      for (int64_t i = 0; i < nb; ++i) {
        uint8_t* blk = dst + i * info.block_bytes;
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; ++j) {
          sc[j] = static_cast<uint8_t>(2 * (five ? rng.uniform_int(1, 2) : rng.uniform_int(2, 4)));
          m[j] = static_cast<uint8_t>(std::lround((five ? 15.5f : 7.5f) * sc[j]));
        }
        // Element 0 at q = 16 (8) is 0 when sub-block 0's min is 16 sc (8 sc).
        if (zero0 && i == 0) {  // (6-bit mins: 16 * 2 and 8 * 4 fit)
          sc[0] = five ? 2 : 4;
          m[0] = static_cast<uint8_t>((five ? 16 : 8) * sc[0]);
        }
        float sc2 = 0;  // this block's mean squared scale, so every block has variance sigma^2
        for (int j = 0; j < 8; ++j) sc2 += sc[j] * sc[j] / 8.0f;
        float d = sigma / std::sqrt(sc2 * (five ? 85.25f : 21.25f));
        if (five) {
          auto* b = reinterpret_cast<block_q5_K*>(blk);
          b->d = b->dmin = h(d);
          k4_pack_scale_min(sc, m, b->scales);
          rng.bytes(b->qh, sizeof b->qh);
          rng.bytes(b->qs, sizeof b->qs);
          if (zero0 && i == 0) {
            b->qs[0] &= 0xF0;
            b->qh[0] |= 1;
          }
        } else {
          auto* b = reinterpret_cast<block_q4_K*>(blk);
          b->d = b->dmin = h(d);
          k4_pack_scale_min(sc, m, b->scales);
          rng.bytes(b->qs, sizeof b->qs);
          if (zero0 && i == 0) b->qs[0] = static_cast<uint8_t>((b->qs[0] & 0xF0) | 8);
        }
      }
      return;
    }
    case DType::Q6_K: {  // d * sc * (q - 32), q in 0..63, sc in 8..15: E[sc^2] = 137.5, E = 341.5
      auto* b = reinterpret_cast<block_q6_K*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].ql, sizeof b[i].ql);
        rng.bytes(b[i].qh, sizeof b[i].qh);
        for (int8_t& s : b[i].scales) s = static_cast<int8_t>(rng.uniform_int(8, 15));
        b[i].d = h(sigma / std::sqrt(137.5f * 341.5f));
      }
      if (zero0) {  // q = 32: low nibble 0, high bits 2
        b[0].ql[0] &= 0xF0;
        b[0].qh[0] = static_cast<uint8_t>((b[0].qh[0] & 0xFC) | 2);
      }
      return;
    }
    case DType::MXFP4: {  // kMxfp4Values[code] * 2^(e - 128), codes uniform: E = 34.25
      // The scale is a power of two: each block takes the one below or above
      // the wanted d, with odds that make E[d^2] exact.
      auto* b = reinterpret_cast<block_mxfp4*>(dst);
      const float d = sigma / std::sqrt(34.25f);
      const int lo = static_cast<int>(std::floor(std::log2(d)));
      const float p_hi = (d * d / std::ldexp(1.0f, 2 * lo) - 1.0f) / 3.0f;
      for (int64_t i = 0; i < nb; ++i) {
        const int e = 128 + lo + (rng.uniform() < p_hi ? 1 : 0);
        b[i].e = static_cast<uint8_t>(std::clamp(e, 2, 254));
        rng.bytes(b[i].qs, sizeof b[i].qs);
      }
      if (zero0) b[0].qs[0] &= 0xF0;
      return;
    }
    case DType::IQ4_NL: {  // d kIq4nlValues[code], d of either sign: E = 72768 / 16 = 4548
      auto* b = reinterpret_cast<block_iq4_nl*>(dst);
      const float d = sigma / std::sqrt(4548.0f);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qs, sizeof b[i].qs);
        b[i].d = h(rng.next() & 1 ? -d : d);
      }
      if (zero0) b[0].qs[0] = static_cast<uint8_t>((b[0].qs[0] & 0xF0) | 8);  // value d, near 0
      return;
    }
    case DType::IQ4_XS: {  // d (ls - 32) value, ls - 32 in 4..8 (E = 38), d of either sign
      auto* b = reinterpret_cast<block_iq4_xs*>(dst);
      const float d = sigma / std::sqrt(38.0f * 4548.0f);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qs, sizeof b[i].qs);
        b[i].d = h(rng.next() & 1 ? -d : d);
        b[i].scales_h = 0;
        std::memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int ib = 0; ib < kQK_K / kQK; ++ib) iq4_xs_set_scale(b[i], ib, rng.uniform_int(4, 8));
      }
      if (zero0) b[0].qs[0] = static_cast<uint8_t>((b[0].qs[0] & 0xF0) | 8);
      return;
    }
    case DType::Q2_K: {  // d sc q - d m, sc = 4, m = 6: 2 d (2 q - 3), q in 0..3: E = 20
      auto* b = reinterpret_cast<block_q2_K*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qs, sizeof b[i].qs);
        std::memset(b[i].scales, 0x64, sizeof b[i].scales);
        b[i].d = b[i].dmin = h(sigma / std::sqrt(20.0f));
      }
      if (zero0) {  // no code is 0 at scale 4, min 6: sub-block 0 at scale 3 (d (3 q - 6)), q0 = 2
        b[0].scales[0] = 0x63;
        b[0].qs[0] = static_cast<uint8_t>((b[0].qs[0] & 0xFC) | 2);
      }
      return;
    }
    case DType::Q3_K: {  // d 4 v, v in -3..3 (-4 drawn becomes 0, so the mean is 0): E[v^2] = 3.5,
                         // E = 56
      auto* b = reinterpret_cast<block_q3_K*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        rng.bytes(b[i].qs, sizeof b[i].qs);
        rng.bytes(b[i].hmask, sizeof b[i].hmask);
        for (int j = 0; j < kQK_K; ++j) {  // low bits 0 and high bit clear is -4: set the bit (0)
          const int byte = 32 * (j / 128) + j % 32, shift = 2 * ((j % 128) / 32);
          if (((b[i].qs[byte] >> shift) & 3) == 0)
            b[i].hmask[j % 32] = static_cast<uint8_t>(b[i].hmask[j % 32] | (1 << (j / 32)));
        }
        int8_t sc[16];
        std::fill(sc, sc + 16, 4);
        q3k_pack_scales(sc, b[i].scales);
        b[i].d = h(sigma / std::sqrt(56.0f));
      }
      if (zero0) {
        b[0].qs[0] &= 0xFC;
        b[0].hmask[0] |= 1;
      }
      return;
    }
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
      iq_random_blocks(t, rng, sigma, dst, nb, zero0);
      return;
    default:
      CLB_CHECK(false, "synth: no random block generator for type %s", info.name);
  }
}


// Patches a random embedding row so element 0 holds c and the rest of its
// (sub-)block is 0: quantizing [c, x1, x2, ...] would give c plus rounding
// noise in the neighbours, and the block's scale is set by c. K-quant blocks
// keep their other sub-blocks random; only sub-block 0 gets its own scale.
void set_channel(DType t, float c, uint8_t* dst) {
  const DTypeInfo& info = dtype_info(t);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, &c, 4);
      return;
    case DType::F16: {
      uint16_t v = h(c);
      std::memcpy(dst, &v, 2);
      return;
    }
    case DType::Q4_0: {  // (15 - 8) d = c; the other quants 8, i.e. 0
      auto* b = reinterpret_cast<block_q4_0*>(dst);
      b->d = h(c / 7);
      std::memset(b->qs, 0x88, sizeof b->qs);
      b->qs[0] = 0x8F;
      return;
    }
    case DType::Q5_0: {  // (31 - 16) d = c; the others 16: low nibble 0, fifth bit set
      auto* b = reinterpret_cast<block_q5_0*>(dst);
      b->d = h(c / 15);
      std::memset(b->qs, 0, sizeof b->qs);
      std::memset(b->qh, 0xFF, sizeof b->qh);
      b->qs[0] = 0x0F;
      return;
    }
    case DType::Q5_1: {  // q d + 0: q = 31 at element 0, 0 elsewhere
      std::memset(dst, 0, info.block_bytes);
      auto* b = reinterpret_cast<block_q5_1*>(dst);
      b->d = h(c / 31);
      b->qh[0] = 1;
      b->qs[0] = 0x0F;
      return;
    }
    case DType::Q8_0: {
      std::memset(dst, 0, info.block_bytes);
      auto* b = reinterpret_cast<block_q8_0*>(dst);
      b->d = h(c / 127);
      b->qs[0] = 127;
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {  // sub-block 0 (elements 0..31, low nibbles of qs[0..31]): min 0, q = 0 but q0 = max
      const bool five = t == DType::Q5_K;
      uint8_t* scales = five ? reinterpret_cast<block_q5_K*>(dst)->scales : reinterpret_cast<block_q4_K*>(dst)->scales;
      uint8_t* qs = five ? reinterpret_cast<block_q5_K*>(dst)->qs : reinterpret_cast<block_q4_K*>(dst)->qs;
      const float d = half_to_float(five ? reinterpret_cast<block_q5_K*>(dst)->d : reinterpret_cast<block_q4_K*>(dst)->d);
      const int qmax = five ? 31 : 15;
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) k4_scale_min(j, scales, &sc[j], &m[j]);
      // q0 = qmax (q4_K); q5_K's step d sc is coarse next to c at q0 = 31,
      // so it takes the q0 whose nearest sc lands closest to c.
      int q0 = qmax;
      sc[0] = static_cast<uint8_t>(std::clamp<long>(std::lround(c / (qmax * d)), 1, 63));
      for (int q = qmax - 1; five && q >= 1; --q) {
        const long s = std::clamp<long>(std::lround(c / (q * d)), 1, 63);
        if (std::fabs(d * s * q - c) < std::fabs(d * sc[0] * q0 - c)) {
          q0 = q;
          sc[0] = static_cast<uint8_t>(s);
        }
      }
      m[0] = 0;
      k4_pack_scale_min(sc, m, scales);
      for (int l = 0; l < 32; ++l) qs[l] &= 0xF0;
      qs[0] = static_cast<uint8_t>(qs[0] | (q0 & 0x0F));
      if (five) {
        uint8_t* qh = reinterpret_cast<block_q5_K*>(dst)->qh;
        for (int l = 0; l < 32; ++l) qh[l] &= 0xFE;
        qh[0] = static_cast<uint8_t>(qh[0] | (q0 >> 4));
      }
      return;
    }
    case DType::Q6_K: {  // sub-block 0 (elements 0..15): q = 32 (0), q0 = 63
      auto* b = reinterpret_cast<block_q6_K*>(dst);
      const float d = half_to_float(b->d);
      b->scales[0] = static_cast<int8_t>(std::clamp<long>(std::lround(c / (31 * d)), 1, 127));
      for (int l = 0; l < 16; ++l) {
        b->ql[l] &= 0xF0;
        b->qh[l] = static_cast<uint8_t>((b->qh[l] & 0xFC) | 2);
      }
      b->ql[0] |= 0x0F;
      b->qh[0] |= 3;
      return;
    }
    case DType::IQ4_NL: {  // 113 d = c (code 15); the others code 8, d = c / 113
      auto* b = reinterpret_cast<block_iq4_nl*>(dst);
      b->d = h(c / 113);
      std::memset(b->qs, 0x88, sizeof b->qs);
      b->qs[0] = 0x8F;
      return;
    }
    case DType::IQ4_XS: {  // sub-block 0: l d 113 = c (code 15), the others code 8 (l d)
      auto* b = reinterpret_cast<block_iq4_xs*>(dst);
      const float d = half_to_float(b->d);
      long l = std::lround(c / (113 * d));
      if (l < -32 || l > 31) {  // past the 6-bit scale: a larger d, the other sub-blocks' scales made smaller
        const float d2 = c / (113 * 31.0f);
        for (int ib = 1; ib < kQK_K / kQK; ++ib) {
          const long li = std::lround(iq4_xs_scale(*b, ib) * d / d2);
          iq4_xs_set_scale(*b, ib, static_cast<int>(std::clamp<long>(li, -32, 31)));
        }
        b->d = h(d2);
        l = 31;
      }
      iq4_xs_set_scale(*b, 0, static_cast<int>(l));
      std::memset(b->qs, 0x88, kQK / 2);
      b->qs[0] = 0x8F;
      return;
    }
    case DType::Q2_K: {  // sub-block 0: scale 15, min 0, q = 0 but q0 = 3; d raised to fit c, the others' scales lowered
      auto* b = reinterpret_cast<block_q2_K*>(dst);
      const float d = half_to_float(b->d), d2 = std::max(d, c / 45.0f);
      for (int j = 1; j < 16; ++j) {
        const long sc = std::lround((b->scales[j] & 0xF) * d / d2);
        b->scales[j] = static_cast<uint8_t>((b->scales[j] & 0xF0) | std::clamp<long>(sc, 0, 15));
      }
      b->d = h(d2);
      b->scales[0] = static_cast<uint8_t>(std::clamp<long>(std::lround(c / (3 * d2)), 1, 15));
      for (int l = 0; l < 16; ++l) b->qs[l] &= 0xFC;
      b->qs[0] |= 3;
      return;
    }
    case DType::Q3_K: {  // sub-block 0: scale up to 31, v = 0 but v0 = 3; d raised to fit c, the
                         // others' scales lowered
      auto* b = reinterpret_cast<block_q3_K*>(dst);
      int8_t sc[16];
      q3k_scales(b->scales, sc);
      const float d = half_to_float(b->d), d2 = std::max(d, c / 93.0f);
      for (int j = 1; j < 16; ++j)
        sc[j] = static_cast<int8_t>(std::clamp<long>(std::lround(sc[j] * d / d2), -32, 31));
      sc[0] = static_cast<int8_t>(std::clamp<long>(std::lround(c / (3 * d2)), 1, 31));
      q3k_pack_scales(sc, b->scales);
      b->d = h(d2);
      for (int l = 0; l < 16; ++l) {  // elements 0..15: low bits 0, high bit set (0)
        b->qs[l] &= 0xFC;
        b->hmask[l] |= 1;
      }
      b->qs[0] |= 3;
      return;
    }
    case DType::IQ3_S: {  // sub-block 0: the point of largest first value (the rest +-its smallest), ls = 15
      auto* b = reinterpret_cast<block_iq3_s*>(dst);
      const uint32_t* grid = iq_grids().iq3s;
      int best = 0;
      for (int p = 1; p < 512; ++p) {
        const auto key = [&](int q) { return (grid[q] & 0xFF) * 64 - ((grid[q] >> 8) & 0xFF) - ((grid[q] >> 16) & 0xFF) - (grid[q] >> 24); };
        if (key(p) > key(best)) best = p;
      }
      const float g0 = static_cast<float>(grid[best] & 0xFF);
      const float d = std::abs(half_to_float(b->d)), d2 = std::max(d, c / (31 * g0));
      for (int ib = 1; ib < kQK_K / kQK; ++ib) {  // keep (2 ls + 1) d where it fits
        const int ls = (b->scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
        const long l2 = std::clamp<long>(std::lround(((2 * ls + 1) * d / d2 - 1) / 2), 0, 15);
        b->scales[ib / 2] = static_cast<uint8_t>((b->scales[ib / 2] & ~(0xF << (4 * (ib % 2)))) | (l2 << (4 * (ib % 2))));
      }
      b->d = h(d2);
      b->scales[0] = static_cast<uint8_t>((b->scales[0] & 0xF0) | std::clamp<long>(std::lround((c / (d2 * g0) - 1) / 2), 0, 15));
      b->qs[0] = static_cast<uint8_t>(best & 0xFF);
      b->qh[0] = static_cast<uint8_t>((b->qh[0] & 0xFE) | (best >> 8));
      b->signs[0] &= 0xF0;  // the first point positive
      return;
    }
    default:
      CLB_CHECK(false, "synth: no constant-channel block for type %s", info.name);
  }
}

}  // namespace colibri::synth
