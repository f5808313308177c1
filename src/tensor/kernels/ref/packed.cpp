// Row-group packing and the scalar kernels over packed groups.
//
// A packed group holds kPackRows (16) consecutive weight rows, interleaved so
// that one 64-byte vector carries the same 4 bytes of every row: a VNNI dot
// instruction then sums 4 products for each of 16 rows at once, with the
// activations broadcast. Each block's quants and its 16 rows' scales stay
// together: the group is a run of units of U = 64 / S blocks (S: a block's
// scale bytes, 64, 32 or 16), each unit its U blocks' quants (Q bytes a
// block) and then their U x S scale bytes, one 64-byte line
// (kernels/packed_layout.h; a last unit of r < U blocks has r x S). A group
// is then one forward stream, which the memory system reads up to a third
// faster than the quants and the scales as two streams. Per block:
//
//   q4_0: Q = 256, word k (k < 4) of row i's qs at 64 k + 4 i; S = 32, row
//         i's d (a half) at 2 i of the block's scales.
//   q8_0: Q = 512, word k (k < 8) of row i's qs at 64 k + 4 i, each byte
//         stored as q + 128 (unsigned); scales as q4_0's.
//   mxfp4: Q = 256, word k (k < 4) of row i's qs (the E2M1 codes, as in the
//         file) at 64 k + 4 i; S = 16, row i's E8M0 e at i.
//   q5_0: Q = 320, word k (k < 4) of row i's qs at 64 k + 4 i (the low four
//         bits of each value, as q4_0's nibbles); then at 256 + 8 m (m < 8) a
//         64-bit word whose bit 4 i + j is the fifth bit of element 4 m + j
//         of row i (bit 4 m + j of its qh), so that bit p of mask m goes with
//         byte p of word vector m mod 4 (low nibbles for m < 4, high ones for
//         m >= 4); scales as q4_0's.
//   q4_K: one super-block a unit (Q4KUnits): word k (k < 32) of row i's qs
//         at 64 k + 4 i; then word w (w < 3) of its scales and mins at 2048 +
//         64 w + 4 i; then d at 2240 + 2 i and dmin 32 bytes after (2304
//         bytes a super-block). The 8 six-bit scales sc and 8 mins m take the
//         same 96 bits as in the file, rearranged so that a SIMD kernel gets
//         each pair (sc[2p] | sc[2p + 1] << 16, and the same for m) with one
//         to four operations instead of eleven:
//           W0 = sc0 | sc2 << 6 | (m4 & 15) << 12 | sc1 << 16 | sc3 << 22 | (m5 & 15) << 28
//           W1 = sc4 | sc6 << 6 | (m6 & 15) << 12 | sc5 << 16 | sc7 << 22 | (m7 & 15) << 28
//           W2 = m0 | m2 << 6 | (m4 >> 4) << 12 | (m6 >> 4) << 14 | m1 << 16 | m3 << 22
//                | (m5 >> 4) << 28 | (m7 >> 4) << 30
//   q6_K: units of two super-blocks (Q6KUnits): per super-block (Q = 3328),
//         48 word vectors at 64 v + 4 i: v = w (w < 16) is word w of row i's
//         QA = [ql 0..31 | ql 64..95], v = 16 + w word w of QB = [ql 32..63 |
//         ql 96..127], v = 32 + w word w of qh (bytes 4 w .. 4 w + 3), so
//         that byte j of QA, QB and qh words w go together as the plain
//         AVX-512 kernel pairs them (kernels/x86/q6_k_fields.h: four vectors
//         of 6-bit codes for weights 32 k + 4 w (w < 8) or 128 + 32 k + 4 (w
//         - 8), k < 4); then the scales, row i's of sub-block j at 3072 + 16 j
//         + i; after the unit's super-blocks their d (S = 32), row i's at 2 i.
//   iq4_xs: units of two super-blocks (Iq4XsUnits): per super-block (Q =
//         2144), word k (k < 32) of row i's qs at 64 k + 4 i; row i's
//         scales_l at 2048 + 4 i and scales_h at 2112 + 2 i; after the unit's
//         super-blocks their d (S = 32), row i's at 2 i.
//
// A group takes exactly the bytes of its 16 rows, so packing happens in place
// and row ranges that are whole groups keep their offsets.
//
// The packed kernels' arithmetic, which the SIMD kernels reproduce bit for
// bit: per row and token, acc = 0; for each block, isum = the exact integer
// sum of (q - zero) * x over the block, then acc = fma(float(isum), d_w * d_x,
// acc) (q5_0's q is its five-bit value, zero 16); mxfp4's q - zero is kMxfp4Values[code] (twice the
// E2M1 value) and its d_w = 2^(e - 128) (e8m0_to_float_half: the doubling undone). q4_K per
// super-block: S = sum over its 8 sub-blocks of scale_s * (exact integer dot
// of the sub-block), M = sum of min_s * (the activations' sum over the
// sub-block), then acc = fma(float(S), d_w * d_x, acc) and acc =
// fma(-float(M), dmin_w * d_x, acc). q6_K per super-block: I = sum over its
// 16 sub-blocks of scale_j * (exact integer dot of (u - 32) with the
// activations), then acc = fma(float(I), d_w * d_x, acc). iq4_xs per
// super-block: I = sum over its 8 sub-blocks of (ls - 32) * (exact integer
// dot of kIq4nlValues[code] with the activations), then acc = fma(float(I),
// d_w * d_x, acc).
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/kernels/packed_layout.h"
#include "tensor/kernels/ref/ref.h"
#include "tensor/quant_blocks.h"

namespace colibri::ref {

namespace {

constexpr int kRows = 16;

// Writes word k of each of `rows` source rows' block b (the rest zero), a
// 32-bit word at a time (packing runs on every expert load). A block's scale
// is its first kQsOffset bytes (fp16 d, or mxfp4's E8M0 e).
template <int kWords, size_t kBlockBytes, size_t kQsOffset>
void pack_group(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n,
                uint32_t flip) {
  constexpr size_t kS = kQsOffset;
  using Units = PackedUnits<64 * kWords, kRows * kS>;
  const int64_t nb = n / kQK;
  for (int i = 0; i < kRows; ++i) {
    const uint8_t* row = src + i * src_stride;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = dst + Units::quants(b) + 4 * i;
      uint8_t* scale = dst + Units::scales(nb, b) + kS * i;
      if (i >= rows) {  // zero quants and zero scales: the row adds nothing
        for (int k = 0; k < kWords; ++k) std::memcpy(out + 64 * k, &flip, 4);
        std::memset(scale, 0, kS);
        continue;
      }
      const uint8_t* blk = row + b * kBlockBytes;
      std::memcpy(scale, blk, kS);
      for (int k = 0; k < kWords; ++k) {
        uint32_t v;
        std::memcpy(&v, blk + kQsOffset + 4 * k, 4);
        v ^= flip;
        std::memcpy(out + 64 * k, &v, 4);
      }
    }
  }
}

// The inverse of pack_group for row i of a group.
template <int kWords, size_t kBlockBytes, size_t kQsOffset>
void unpack_row(const uint8_t* group, int i, uint8_t* dst, int64_t n, uint8_t flip) {  // flip: per byte
  constexpr size_t kS = kQsOffset;
  using Units = PackedUnits<64 * kWords, kRows * kS>;
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = dst + b * kBlockBytes;
    const uint8_t* q = group + Units::quants(b);
    std::memcpy(blk, group + Units::scales(nb, b) + kS * i, kS);
    for (int k = 0; k < kWords; ++k)
      for (int j = 0; j < 4; ++j) blk[kQsOffset + 4 * k + j] = q[64 * k + 4 * i + j] ^ flip;
  }
}

// A q4_K row's 12 scale bytes as the packed layout's three words, and back.
void encode_scales_k(const uint8_t* raw, uint32_t (&w)[3]) {
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) k4_scale_min(j, raw, &sc[j], &m[j]);
  auto u = [](int v) { return static_cast<uint32_t>(v); };
  w[0] = u(sc[0]) | u(sc[2]) << 6 | u(m[4] & 15) << 12 | u(sc[1]) << 16 | u(sc[3]) << 22 | u(m[5] & 15) << 28;
  w[1] = u(sc[4]) | u(sc[6]) << 6 | u(m[6] & 15) << 12 | u(sc[5]) << 16 | u(sc[7]) << 22 | u(m[7] & 15) << 28;
  w[2] = u(m[0]) | u(m[2]) << 6 | u(m[4] >> 4) << 12 | u(m[6] >> 4) << 14 | u(m[1]) << 16 | u(m[3]) << 22 |
         u(m[5] >> 4) << 28 | u(m[7] >> 4) << 30;
}

void decode_scales_k(const uint32_t (&w)[3], uint8_t (&sc)[8], uint8_t (&m)[8]) {
  for (int p = 0; p < 4; ++p) {
    const uint32_t ws = w[p / 2] >> (6 * (p % 2));  // sc[2p] at bit 0, sc[2p + 1] at bit 16
    sc[2 * p] = static_cast<uint8_t>(ws & 63);
    sc[2 * p + 1] = static_cast<uint8_t>((ws >> 16) & 63);
  }
  for (int p = 0; p < 2; ++p) {
    const uint32_t wm = w[2] >> (6 * p);
    m[2 * p] = static_cast<uint8_t>(wm & 63);
    m[2 * p + 1] = static_cast<uint8_t>((wm >> 16) & 63);
  }
  for (int p = 2; p < 4; ++p) {  // low nibbles in the spare bits of W0 (p = 2) or W1, high bits in W2
    const uint32_t lo = w[p - 2] >> 12, hi = w[2] >> (8 + 2 * (p - 2));
    m[2 * p] = static_cast<uint8_t>((lo & 15) | (hi & 0x30));
    m[2 * p + 1] = static_cast<uint8_t>(((lo >> 16) & 15) | ((hi >> 16) & 0x30));
  }
}

// The scalar kernel over packed groups of a super-block type (Units: its
// layout): per row and token, acc = block(q, ds, xb, i, acc) over the
// super-blocks, q and ds the block's quants and scales in the group, xb the
// token's q8_K block.
template <typename Units, typename Block>
void packed_super_blocks(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                         int64_t nt, int64_t n, float* y, size_t y_stride, Block block) {
  const int64_t nb = n / kQK_K;
  const size_t group_bytes = Units::group_bytes(nb);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* gw = w + g * group_bytes;
    for (int64_t t = 0; t < nt; ++t) {
      const auto* xb = reinterpret_cast<const block_q8_K*>(x + t * x_stride);
      for (int i = 0; i < kRows; ++i) {
        float acc = 0;
        for (int64_t b = 0; b < nb; ++b)
          acc = block(gw + Units::quants(b), gw + Units::scales(nb, b), xb[b], i, acc);
        y[t * y_stride + g * kRows + i] = acc;
      }
    }
  }
}

// fp16 d of row i at ds (+ offset).
float row_half(const uint8_t* ds, int i) {
  uint16_t d;
  std::memcpy(&d, ds + 2 * i, 2);
  return half_to_float(d);
}

}  // namespace

void pack_group_q4_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int i = 0; i < kRows; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* q = dst + Q4KUnits::quants(b);
      uint8_t* sc = q + Q4KUnits::kScaleWords;
      uint8_t* ds = dst + Q4KUnits::scales(nb, b);
      if (i >= rows) {  // zero quants, scales and d: the row adds nothing
        for (int k = 0; k < 32; ++k) std::memset(q + 64 * k + 4 * i, 0, 4);
        for (int w = 0; w < 3; ++w) std::memset(sc + 64 * w + 4 * i, 0, 4);
        std::memset(ds + 2 * i, 0, 2);
        std::memset(ds + Q4KUnits::kDmin + 2 * i, 0, 2);
        continue;
      }
      const auto* blk = reinterpret_cast<const block_q4_K*>(src + i * src_stride) + b;
      for (int k = 0; k < 32; ++k) std::memcpy(q + 64 * k + 4 * i, blk->qs + 4 * k, 4);
      uint32_t sw[3];
      encode_scales_k(blk->scales, sw);
      for (int w = 0; w < 3; ++w) std::memcpy(sc + 64 * w + 4 * i, &sw[w], 4);
      std::memcpy(ds + 2 * i, &blk->d, 2);
      std::memcpy(ds + Q4KUnits::kDmin + 2 * i, &blk->dmin, 2);
    }
}

void unpack_row_q4_K(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    auto* blk = reinterpret_cast<block_q4_K*>(dst) + b;
    const uint8_t* q = group + Q4KUnits::quants(b);
    const uint8_t* ds = group + Q4KUnits::scales(nb, b);
    for (int k = 0; k < 32; ++k) std::memcpy(blk->qs + 4 * k, q + 64 * k + 4 * i, 4);
    uint32_t sw[3];
    for (int w = 0; w < 3; ++w) std::memcpy(&sw[w], q + Q4KUnits::kScaleWords + 64 * w + 4 * i, 4);
    uint8_t sc[8], m[8];
    decode_scales_k(sw, sc, m);
    k4_pack_scale_min(sc, m, blk->scales);
    std::memcpy(&blk->d, ds + 2 * i, 2);
    std::memcpy(&blk->dmin, ds + Q4KUnits::kDmin + 2 * i, 2);
  }
}

void packed_q4_K(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride) {
  packed_super_blocks<Q4KUnits>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* q, const uint8_t* ds, const block_q8_K& xb, int i, float acc) {
        uint32_t sw[3];
        for (int k = 0; k < 3; ++k) std::memcpy(&sw[k], q + Q4KUnits::kScaleWords + 64 * k + 4 * i, 4);
        uint8_t scs[8], ms[8];
        decode_scales_k(sw, scs, ms);
        int32_t S = 0, M = 0;
        for (int s = 0; s < 8; ++s) {
          const int j = s / 2, shift = 4 * (s % 2);
          int32_t isum = 0;
          for (int l = 0; l < 32; ++l) {
            const uint8_t v = q[64 * (8 * j + l / 4) + 4 * i + l % 4];
            isum += ((v >> shift) & 0xF) * xb.qs[64 * j + 32 * (s % 2) + l];
          }
          S += scs[s] * isum;
          M += ms[s] * (xb.bsums[2 * s] + xb.bsums[2 * s + 1]);
        }
        acc = std::fma(static_cast<float>(S), row_half(ds, i) * xb.d, acc);
        return std::fma(-static_cast<float>(M), row_half(ds + Q4KUnits::kDmin, i) * xb.d, acc);
      });
}

namespace {

// Plain byte offset (in ql, or in qh for v >= 32) of byte c of word vector v.
size_t q6_K_plain_byte(int v, int c) {
  const int w = v % 16;
  const size_t in_half = static_cast<size_t>(4 * (w % 8) + c);
  if (v >= 32) return static_cast<size_t>(4 * w + c);
  return (w < 8 ? 0 : 64) + (v >= 16 ? 32 : 0) + in_half;
}

}  // namespace

void pack_group_q6_K(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int i = 0; i < kRows; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* q = dst + Q6KUnits::quants(b);
      uint8_t* scales = q + Q6KUnits::kScales;
      uint8_t* ds = dst + Q6KUnits::scales(nb, b);
      if (i >= rows) {  // zero codes, scales and d: the row adds nothing
        for (int v = 0; v < 48; ++v) std::memset(q + 64 * v + 4 * i, 0, 4);
        for (int j = 0; j < 16; ++j) scales[16 * j + i] = 0;
        std::memset(ds + 2 * i, 0, 2);
        continue;
      }
      const auto* blk = reinterpret_cast<const block_q6_K*>(src + i * src_stride) + b;
      for (int v = 0; v < 48; ++v)
        for (int c = 0; c < 4; ++c)
          q[64 * v + 4 * i + c] = (v >= 32 ? blk->qh : blk->ql)[q6_K_plain_byte(v, c)];
      for (int j = 0; j < 16; ++j) scales[16 * j + i] = static_cast<uint8_t>(blk->scales[j]);
      std::memcpy(ds + 2 * i, &blk->d, 2);
    }
}

void unpack_row_q6_K(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    auto* blk = reinterpret_cast<block_q6_K*>(dst) + b;
    const uint8_t* q = group + Q6KUnits::quants(b);
    for (int v = 0; v < 48; ++v)
      for (int c = 0; c < 4; ++c)
        (v >= 32 ? blk->qh : blk->ql)[q6_K_plain_byte(v, c)] = q[64 * v + 4 * i + c];
    for (int j = 0; j < 16; ++j)
      blk->scales[j] = static_cast<int8_t>(q[Q6KUnits::kScales + 16 * j + i]);
    std::memcpy(&blk->d, group + Q6KUnits::scales(nb, b) + 2 * i, 2);
  }
}

void packed_q6_K(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride) {
  packed_super_blocks<Q6KUnits>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* q, const uint8_t* ds, const block_q8_K& xb, int i, float acc) {
        int32_t I = 0;
        for (int j = 0; j < 16; ++j) {
          int32_t isum = 0;
          for (int l = 0; l < 16; ++l) {
            // Weight e = 16 j + l: half h, field k (its 32-weight quarter of
            // the half) and position p < 32 within it.
            const int e = 16 * j + l, h = e / 128, k = (e % 128) / 32, p = e % 32;
            const int word = 8 * h + p / 4, c = p % 4;
            const uint8_t qa = q[64 * (k % 2 ? 16 + word : word) + 4 * i + c];
            const uint8_t qh = q[64 * (32 + word) + 4 * i + c];
            const int nib = k < 2 ? qa & 0xF : qa >> 4;
            const int u = nib | ((qh >> (2 * k)) & 3) << 4;
            isum += (u - 32) * xb.qs[e];
          }
          I += static_cast<int8_t>(q[Q6KUnits::kScales + 16 * j + i]) * isum;
        }
        return std::fma(static_cast<float>(I), row_half(ds, i) * xb.d, acc);
      });
}

void unpack_row_q4_0(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  unpack_row<4, sizeof(block_q4_0), 2>(group, i, dst, n, 0);
}

void unpack_row_q8_0(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  unpack_row<8, sizeof(block_q8_0), 2>(group, i, dst, n, 0x80);
}

void unpack_row_mxfp4(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  unpack_row<4, sizeof(block_mxfp4), 1>(group, i, dst, n, 0);
}

void pack_group_q4_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  pack_group<4, sizeof(block_q4_0), 2>(src, src_stride, rows, dst, n, 0u);
}

void pack_group_q8_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  pack_group<8, sizeof(block_q8_0), 2>(src, src_stride, rows, dst, n, 0x80808080u);
}

void pack_group_mxfp4(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  pack_group<4, sizeof(block_mxfp4), 1>(src, src_stride, rows, dst, n, 0u);
}

constexpr size_t kQ5Qs = 320;  // per block and group: 4 word vectors, 8 masks
using Q5Units = PackedUnits<kQ5Qs, 32>;

void pack_group_q5_0(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = dst + Q5Units::quants(b);
    uint8_t* scales = dst + Q5Units::scales(nb, b);
    uint64_t masks[8] = {};
    for (int i = 0; i < kRows; ++i) {
      if (i >= rows) {  // zero quants and scale: the row adds nothing
        for (int k = 0; k < 4; ++k) std::memset(out + 64 * k + 4 * i, 0, 4);
        std::memset(scales + 2 * i, 0, 2);
        continue;
      }
      const auto* blk = reinterpret_cast<const block_q5_0*>(src + i * src_stride) + b;
      std::memcpy(scales + 2 * i, &blk->d, 2);
      for (int k = 0; k < 4; ++k) std::memcpy(out + 64 * k + 4 * i, blk->qs + 4 * k, 4);
      uint32_t qh;
      std::memcpy(&qh, blk->qh, 4);
      for (int m = 0; m < 8; ++m)
        masks[m] |= static_cast<uint64_t>((qh >> (4 * m)) & 0xF) << (4 * i);
    }
    std::memcpy(out + 256, masks, sizeof(masks));
  }
}

void unpack_row_q5_0(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    auto* blk = reinterpret_cast<block_q5_0*>(dst) + b;
    const uint8_t* in = group + Q5Units::quants(b);
    std::memcpy(&blk->d, group + Q5Units::scales(nb, b) + 2 * i, 2);
    for (int k = 0; k < 4; ++k) std::memcpy(blk->qs + 4 * k, in + 64 * k + 4 * i, 4);
    uint64_t masks[8];
    std::memcpy(masks, in + 256, sizeof(masks));
    uint32_t qh = 0;
    for (int m = 0; m < 8; ++m) qh |= static_cast<uint32_t>((masks[m] >> (4 * i)) & 0xF) << (4 * m);
    std::memcpy(blk->qh, &qh, 4);
  }
}

namespace {

// The scalar kernel over packed groups of a 32-element block type with
// kWords quant words per row and block and kScaleBytes scale bytes per row
// and block; block_sum(words, i, x) is the exact integer dot of row i's block
// (its words at words + 64 k + 4 i), scale(p) the weight scale at p.
template <int kWords, size_t kScaleBytes, typename BlockSum, typename Scale>
void packed_blocks(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                   int64_t nt, int64_t n, float* y, size_t y_stride, BlockSum block_sum,
                   Scale scale) {
  const int64_t nb = n / kQK;
  using Units = PackedUnits<64 * kWords, kRows * kScaleBytes>;
  const size_t group_bytes = Units::group_bytes(nb);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* gw = w + g * group_bytes;
    for (int64_t t = 0; t < nt; ++t) {
      const auto* xb = reinterpret_cast<const block_q8_0*>(x + t * x_stride);
      for (int i = 0; i < kRows; ++i) {
        float acc = 0;
        for (int64_t b = 0; b < nb; ++b) {
          const int32_t isum = block_sum(gw + Units::quants(b), i, xb[b].qs);
          const float dw = scale(gw + Units::scales(nb, b) + kScaleBytes * i);
          acc = std::fma(static_cast<float>(isum), dw * half_to_float(xb[b].d), acc);
        }
        y[t * y_stride + g * kRows + i] = acc;
      }
    }
  }
}

float fp16_scale(const uint8_t* p) {
  uint16_t d;
  std::memcpy(&d, p, 2);
  return half_to_float(d);
}

// Row i's integer dot over one block of 4-bit codes in the packed words (low
// nibbles the block's first 16 values, high nibbles the next 16), each code
// read as value(code).
template <class Value>
int32_t nibble_isum(const uint8_t* words, int i, const int8_t* xq, Value value) {
  int32_t isum = 0;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) {
      const uint8_t q = words[64 * k + 4 * i + j];
      isum += value(q & 0x0F) * xq[4 * k + j];
      isum += value(q >> 4) * xq[16 + 4 * k + j];
    }
  return isum;
}

}  // namespace

void packed_q4_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride) {
  packed_blocks<4, 2>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* words, int i, const int8_t* xq) {
        return nibble_isum(words, i, xq, [](int c) { return c - 8; });
      },
      fp16_scale);
}

void packed_q5_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride) {
  // Five 64-byte vectors a block: q4_0's four of nibbles, then the fifth
  // bits as eight 64-bit masks (bit 4i + j of mask m: row i's word j of
  // vector m, low nibbles m < 4, high nibbles m - 4).
  static_assert(kQ5Qs == 64 * 5);
  packed_blocks<5, 2>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* words, int i, const int8_t* xq) {
        uint64_t masks[8];
        std::memcpy(masks, words + 256, sizeof(masks));
        int32_t isum = 0;
        for (int k = 0; k < 4; ++k)
          for (int j = 0; j < 4; ++j) {
            const uint8_t q = words[64 * k + 4 * i + j];
            const int lo = (q & 0x0F) | static_cast<int>((masks[k] >> (4 * i + j)) & 1) << 4;
            const int hi = (q >> 4) | static_cast<int>((masks[4 + k] >> (4 * i + j)) & 1) << 4;
            isum += (lo - 16) * xq[4 * k + j] + (hi - 16) * xq[16 + 4 * k + j];
          }
        return isum;
      },
      fp16_scale);
}

void packed_q8_0(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                 int64_t n, float* y, size_t y_stride) {
  packed_blocks<8, 2>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* words, int i, const int8_t* xq) {
        int32_t isum = 0;
        for (int k = 0; k < 8; ++k)
          for (int j = 0; j < 4; ++j) isum += (words[64 * k + 4 * i + j] - 128) * xq[4 * k + j];
        return isum;
      },
      fp16_scale);
}

void packed_mxfp4(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                  int64_t n, float* y, size_t y_stride) {
  packed_blocks<4, 1>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* words, int i, const int8_t* xq) {
        return nibble_isum(words, i, xq, [](int c) { return static_cast<int>(kMxfp4Values[c]); });
      },
      [](const uint8_t* p) { return e8m0_to_float_half(*p); });
}

void pack_group_iq4_xs(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int i = 0; i < kRows; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* q = dst + Iq4XsUnits::quants(b);
      uint8_t* ds = dst + Iq4XsUnits::scales(nb, b);
      if (i >= rows) {  // zero codes, scales and d: the row adds nothing
        for (int k = 0; k < 32; ++k) std::memset(q + 64 * k + 4 * i, 0, 4);
        std::memset(q + Iq4XsUnits::kScalesL + 4 * i, 0, 4);
        std::memset(q + Iq4XsUnits::kScalesH + 2 * i, 0, 2);
        std::memset(ds + 2 * i, 0, 2);
        continue;
      }
      const auto* blk = reinterpret_cast<const block_iq4_xs*>(src + i * src_stride) + b;
      for (int k = 0; k < 32; ++k) std::memcpy(q + 64 * k + 4 * i, blk->qs + 4 * k, 4);
      std::memcpy(q + Iq4XsUnits::kScalesL + 4 * i, blk->scales_l, 4);
      std::memcpy(q + Iq4XsUnits::kScalesH + 2 * i, &blk->scales_h, 2);
      std::memcpy(ds + 2 * i, &blk->d, 2);
    }
}

void unpack_row_iq4_xs(const uint8_t* group, int i, uint8_t* dst, int64_t n) {
  const int64_t nb = n / kQK_K;
  for (int64_t b = 0; b < nb; ++b) {
    auto* blk = reinterpret_cast<block_iq4_xs*>(dst) + b;
    const uint8_t* q = group + Iq4XsUnits::quants(b);
    for (int k = 0; k < 32; ++k) std::memcpy(blk->qs + 4 * k, q + 64 * k + 4 * i, 4);
    std::memcpy(blk->scales_l, q + Iq4XsUnits::kScalesL + 4 * i, 4);
    std::memcpy(&blk->scales_h, q + Iq4XsUnits::kScalesH + 2 * i, 2);
    std::memcpy(&blk->d, group + Iq4XsUnits::scales(nb, b) + 2 * i, 2);
  }
}

void packed_iq4_xs(const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride, int64_t nt,
                   int64_t n, float* y, size_t y_stride) {
  packed_super_blocks<Iq4XsUnits>(
      w, n_groups, x, x_stride, nt, n, y, y_stride,
      [](const uint8_t* q, const uint8_t* ds, const block_q8_K& xb, int i, float acc) {
        block_iq4_xs blk;  // row i's scales, as the file has them
        std::memcpy(blk.scales_l, q + Iq4XsUnits::kScalesL + 4 * i, 4);
        std::memcpy(&blk.scales_h, q + Iq4XsUnits::kScalesH + 2 * i, 2);
        int32_t I = 0;
        for (int s = 0; s < 8; ++s)  // sub-block s: words 4 s .. 4 s + 3, laid out as one IQ4_NL block's
          I += iq4_xs_scale(blk, s) *
               nibble_isum(q + 64 * 4 * s, i, xb.qs + 32 * s, [](int c) { return kIq4nlValues[c]; });
        return std::fma(static_cast<float>(I), row_half(ds, i) * xb.d, acc);
      });
}

}  // namespace colibri::ref
