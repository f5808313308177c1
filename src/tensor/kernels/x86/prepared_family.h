// The dot and tile entries of a kernel that prepares its activations once
// per call (ISA-neutral; included by each x86 level's .cpp).
//
// K provides: Act (one step's activations for one token, in the layout its
// tile reads), XBlock (the activation block type), kBlocksPerStep (weight
// blocks per step), kSegSteps (steps per activation segment), kBlockElems and
// kBlockBytes (elements and bytes of one weight block),
// prep(xb, nblk, act) and tile<R, T>(w, w_stride, act, nb, y, y_stride,
// accumulate). Every (row, token) pair runs the same instruction sequence
// whatever R and T are, so the 1 x 1 tile (the dot) and larger tiles give
// identical results.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

// Dot and tile entries for a kernel that prepares its activations: per group
// of up to four tokens and per segment of the row, the activations are
// prepared once and every row of the call uses them.
template <typename K, int kRowsPerTile = 4, int kTokensPerTile = 4>
struct PreparedFamily {
  using Seg = typename K::Act[K::kSegSteps];
  using Fn = void (*)(const uint8_t*, size_t, const Seg*, int64_t, float*, size_t, bool);
  static constexpr int kRows = kRowsPerTile, kTokens = kTokensPerTile;

  template <int R, int... Ts>
  static constexpr void fill_row(Fn (&f)[kRows][kTokens], std::integer_sequence<int, Ts...>) {
    ((f[R - 1][Ts] = K::template tile<R, Ts + 1>), ...);
  }
  template <int... Rs>
  static constexpr void fill(Fn (&f)[kRows][kTokens], std::integer_sequence<int, Rs...>) {
    (fill_row<Rs + 1>(f, std::make_integer_sequence<int, kTokens>{}), ...);
  }
  static const Fn (&table())[kRows][kTokens] {
    static const auto t = [] {
      struct {
        Fn f[kRows][kTokens];
      } s{};
      fill(s.f, std::make_integer_sequence<int, kRows>{});
      return s;
    }();
    return t.f;
  }

  static void tile(const uint8_t* w, size_t w_stride, int64_t nr, const uint8_t* x, size_t x_stride,
                   int64_t nt, int64_t n, float* y, size_t y_stride) {
    constexpr int64_t kPer = K::kBlocksPerStep, kSegBlocks = kPer * K::kSegSteps;
    const auto& f = table();
    const int64_t nb = n / K::kBlockElems;
    alignas(64) Seg act[kTokens];
    for (int64_t t = 0; t < nt; t += kTokens) {
      const int tn = static_cast<int>(std::min<int64_t>(kTokens, nt - t));
      for (int64_t b0 = 0; b0 < nb; b0 += kSegBlocks) {
        const int64_t sb = std::min<int64_t>(kSegBlocks, nb - b0);
        for (int k = 0; k < tn; ++k) {
          const auto* xb = reinterpret_cast<const typename K::XBlock*>(x + (t + k) * x_stride) + b0;
          for (int64_t g = 0; g < (sb + kPer - 1) / kPer; ++g)
            K::prep(xb + kPer * g, static_cast<int>(std::min<int64_t>(kPer, sb - kPer * g)),
                    act[k][g]);
        }
        for (int64_t r = 0; r < nr; r += kRows) {
          const int rn = static_cast<int>(std::min<int64_t>(kRows, nr - r));
          f[rn - 1][tn - 1](w + r * w_stride + b0 * K::kBlockBytes, w_stride, act, sb,
                            y + t * y_stride + r, y_stride, b0 > 0);
        }
      }
    }
  }

  static float dot(const void* w, const void* x, int64_t n) {
    float y;
    tile(static_cast<const uint8_t*>(w), 0, 1, static_cast<const uint8_t*>(x), 0, 1, n, &y, 0);
    return y;
  }
};

}  // namespace
}  // namespace colibri
