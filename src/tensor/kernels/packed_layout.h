// Where a block of a packed row group lies (kernels/ref/packed.cpp has the
// layout): for the 32-element block types the group is a run of units of
// kBlocks = 64 / kScaleBytes blocks, each unit its blocks' quant bytes, then
// their scales in one 64-byte line (a last unit of fewer blocks has as few
// scales). A group, and a matrix of groups, is then one forward stream of
// bytes: the kernels read every line once, in address order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace colibri {

// kQs: a block's quant bytes in the group (all 16 rows); kScaleBytes: its
// scales' (16 rows x 2 for fp16 d, x 1 for E8M0), a divisor of 64.
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

};

}  // namespace colibri
