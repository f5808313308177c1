// Where a block of a packed row group lies (kernels/ref/packed.cpp has the
// layout): a group is a run of units of kBlocks blocks, each unit its
// blocks' quant bytes, then their scales in one 64-byte line (a last unit of
// fewer blocks has as few scales). For the 32-element block types a block's
// "quants" are its quant bytes and its "scales" the 16 rows' d or e (2 or 4
// blocks a unit); for q4_K and q6_K the quants are the super-block's quant
// and scale words and the scales its 16 rows' d (and dmin): one super-block
// a unit for q4_K, two for q6_K. A group, and a matrix of groups, is then one
// forward stream of bytes: the kernels read every line once, in address
// order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace colibri {

// kQs: a block's quant bytes in the group (all 16 rows); kScaleBytes: its
// scales' (16 rows x 2 for fp16 d, x 1 for E8M0, x 4 for q4_K's d and dmin),
// a divisor of 64.
template <size_t kQs, size_t kScaleBytes>
struct PackedUnits {
  static_assert(64 % kScaleBytes == 0);
  static constexpr size_t kBlocks = 64 / kScaleBytes;
  static constexpr size_t kUnitBytes = kBlocks * (kQs + kScaleBytes);

  // Byte offsets in the group of block b's quants and of its scales (b is
  // never negative: unsigned arithmetic makes the division a shift).
  static constexpr size_t quants(int64_t b) {
    const auto u = static_cast<size_t>(b);
    return u / kBlocks * kUnitBytes + u % kBlocks * kQs;
  }
  static constexpr size_t scales(int64_t nb, int64_t b) {
    const auto u = static_cast<size_t>(b), j = u % kBlocks, b0 = u - j;
    const size_t count = std::min(kBlocks, static_cast<size_t>(nb) - b0);  // blocks in b's unit
    return b0 / kBlocks * kUnitBytes + count * kQs + j * kScaleBytes;
  }
  // A group of nb blocks' bytes.
  static constexpr size_t group_bytes(int64_t nb) {
    return static_cast<size_t>(nb) * (kQs + kScaleBytes);
  }

  // A group of nb blocks in its order: unit(u) at each unit (u: its offset
  // in the group) before its blocks, then block(b, q, s) for each of them
  // (q and s: quants(b) and scales(nb, b)). Whole units take a fixed count
  // of blocks, unrolled; the last unit takes the rest. (The SIMD kernels
  // walk: addresses from the block index instead, with a division and a min
  // a block, cost the q4_0 prompt tiles 2-6%.)
  template <typename Unit, typename Block>
  [[gnu::always_inline]] static inline void walk(int64_t nb, Unit&& unit, Block&& block) {
    int64_t b = 0;
    size_t u = 0;
    for (; b + static_cast<int64_t>(kBlocks) <= nb; b += kBlocks, u += kUnitBytes) {
      unit(u);
#pragma GCC unroll 4
      for (size_t j = 0; j < kBlocks; ++j)
        block(b + j, u + j * kQs, u + kBlocks * kQs + j * kScaleBytes);
    }
    const auto left = static_cast<size_t>(nb - b);
    if (left == 0) return;
    unit(u);
    for (size_t j = 0; j < left; ++j) block(b + j, u + j * kQs, u + left * kQs + j * kScaleBytes);
  }
};

// q4_K: a super-block's 32 quant word vectors (2048 bytes) and 3 scale word
// vectors (192, at kScaleWords in its quants), then its d and dmin (64; dmin
// kDmin bytes after d): one super-block a unit.
struct Q4KUnits : PackedUnits<2048 + 192, 64> {
  static constexpr size_t kScaleWords = 2048, kDmin = 32;
};
// q6_K: a super-block's 48 code word vectors (3072 bytes) and its scales
// (256, at kScales in its quants), then its d (32): two super-blocks a unit.
struct Q6KUnits : PackedUnits<3072 + 256, 32> {
  static constexpr size_t kScales = 3072;
};

// iq4_xs: a super-block's 32 code word vectors (2048 bytes), then its 16
// rows' scales_l words (64, at kScalesL) and scales_h halves (32, at
// kScalesH), then its d (32): two super-blocks a unit.
struct Iq4XsUnits : PackedUnits<2048 + 96, 32> {
  static constexpr size_t kScalesL = 2048, kScalesH = 2112;
};

}  // namespace colibri
