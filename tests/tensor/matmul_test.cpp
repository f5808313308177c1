// matmul_rows (prefill) equals matvec_rows per token, bit for bit, for every
// weight type, ISA and precision, on row ranges and token counts that do not
// fill whole tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "tensor/kernels/dispatch.h"
#include "tensor/quant_blocks.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

TEST(Matmul, EqualsMatvecPerToken) {
  std::mt19937 rng(31);
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (DType t : testing::kWeightTypes)
      // Row lengths of whole and of partial SIMD steps (7 blocks: a tail).
      for (int64_t n : {2 * std::max<int64_t>(dtype_info(t).block_size, 64),
                        7 * std::max<int64_t>(dtype_info(t).block_size, 32)}) {
        const int64_t n_rows = 37;
        const auto w = testing::random_weights(t, n * n_rows, rng);
        TensorView v;
        v.data = w.data();
        v.type = t;
        v.ne[0] = n;
        v.ne[1] = n_rows;
        for (Precision p : {Precision::kNative, Precision::kReference}) {
          for (int64_t n_tok : {1, 5, 8, 13, 19}) {
            const size_t xs = activation_bytes(t, p, n) + 64;  // a padded stride
            std::vector<uint8_t> xq(xs * n_tok);
            for (int64_t k = 0; k < n_tok; ++k) {
              const auto x = testing::random_activations(n, rng);
              quantize_activation(t, p, x.data(), xq.data() + k * xs, n);
            }
            const int64_t r0 = 3, r1 = n_rows - 1;
            const size_t ys = (r1 - r0) + 5;
            std::vector<float> y(ys * n_tok, -1.0f), want(r1 - r0), scratch(n);
            matmul_rows(v, p, xq.data(), xs, n_tok, y.data(), ys, r0, r1, scratch.data());
            for (int64_t k = 0; k < n_tok; ++k) {
              matvec_rows(v, p, xq.data() + k * xs, want.data(), r0, r1, scratch.data());
              for (int64_t r = 0; r < r1 - r0; ++r)
                ASSERT_EQ(f32_bits(y[k * ys + r]), f32_bits(want[r]))
                    << isa_name(isa) << " " << dtype_name(t) << " tok " << k << " row " << r;
              for (size_t r = r1 - r0; r < ys; ++r)
                ASSERT_EQ(y[k * ys + r], -1.0f);  // padding untouched
            }
          }
        }
      }
  }
  set_kernel_isa(saved);
}

// Products of many tokens at the ends of the integer ranges, where the
// prompt kernels take other paths than decode (q6_K: 16-row groups with the
// offset folded into the scales): every value equals the token's matvec bit
// for bit and the F64 dot of the dequantized operands. Weights: every code at
// its largest, or random codes, and for q6_K also all codes 0 (-32) or 63
// with sub-block scales of -128 and 127; activations quantize to +-127.
TEST(Matmul, ExtremeInputsEqualMatvecAndOracle) {
  std::mt19937 rng(33);
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (DType t : testing::kWeightTypes) {
      const int64_t n = 4 * std::max<int64_t>(dtype_info(t).block_size, 256), n_rows = 35, n_tok = 24;
      const size_t rb = row_bytes(t, n);
      std::vector<uint8_t> w(rb * n_rows);
      for (int64_t r = 0; r < n_rows; ++r) {
        const auto row = testing::random_weights(t, n, rng, testing::Scales::kTypical, r % 4 == 0);
        std::copy(row.begin(), row.end(), w.begin() + r * rb);
        if (t != DType::Q6_K || r % 4 < 2) continue;
        auto* blk = reinterpret_cast<block_q6_K*>(w.data() + r * rb);
        for (int64_t b = 0; b < n / kQK_K; ++b) {
          const bool low = r % 4 == 2;  // codes 0 with scale -128, or 63 with 127
          std::fill(std::begin(blk[b].ql), std::end(blk[b].ql), low ? 0x00 : 0xFF);
          std::fill(std::begin(blk[b].qh), std::end(blk[b].qh), low ? 0x00 : 0xFF);
          std::fill(std::begin(blk[b].scales), std::end(blk[b].scales), low ? -128 : 127);
        }
      }
      TensorView v;
      v.data = w.data();
      v.type = t;
      v.ne[0] = n;
      v.ne[1] = n_rows;
      const DType at = activation_type(t, Precision::kNative);
      const size_t xs = activation_bytes(t, Precision::kNative, n);
      std::vector<uint8_t> xq(xs * n_tok);
      for (int64_t k = 0; k < n_tok; ++k) {
        std::vector<float> x(static_cast<size_t>(n), k % 2 ? 3.0f : -3.0f);
        if (k % 3 == 1)
          for (int64_t i = 0; i < n; i += 2) x[static_cast<size_t>(i)] = -x[static_cast<size_t>(i)];
        if (k % 3 == 2) x = testing::random_activations(n, rng);
        quantize_activation(t, Precision::kNative, x.data(), xq.data() + k * xs, n);
      }
      std::vector<float> y(static_cast<size_t>(n_rows * n_tok)), want(n_rows), scratch(n);
      matmul_rows(v, Precision::kNative, xq.data(), xs, n_tok, y.data(), n_rows, 0, n_rows, scratch.data());
      for (int64_t k = 0; k < n_tok; ++k) {
        matvec_rows(v, Precision::kNative, xq.data() + k * xs, want.data(), 0, n_rows, scratch.data());
        for (int64_t r = 0; r < n_rows; ++r) {
          ASSERT_EQ(f32_bits(y[k * n_rows + r]), f32_bits(want[r]))
              << isa_name(isa) << " " << dtype_name(t) << " tok " << k << " row " << r;
          const testing::Oracle o = testing::oracle_dot(t, v.row(r), at, xq.data() + k * xs, n);
          ASSERT_NEAR(y[k * n_rows + r], o.value, o.tolerance())
              << isa_name(isa) << " " << dtype_name(t) << " tok " << k << " row " << r;
        }
      }
    }
  }
  set_kernel_isa(saved);
}

TEST(Matvec, ReferencePrecisionIsDequantizeThenF32Dot) {
  std::mt19937 rng(32);
  for (DType t : testing::kWeightTypes) {
    const int64_t n = 512, n_rows = 5;
    const auto w = testing::random_weights(t, n * n_rows, rng);
    TensorView v;
    v.data = w.data();
    v.type = t;
    v.ne[0] = n;
    v.ne[1] = n_rows;
    const auto x = testing::random_activations(n, rng);
    ASSERT_EQ(activation_type(t, Precision::kReference), DType::F32);
    std::vector<float> xq(n), y(n_rows), scratch(n);
    quantize_activation(t, Precision::kReference, x.data(), xq.data(), n);
    ASSERT_EQ(xq, x);
    matvec_rows(v, Precision::kReference, xq.data(), y.data(), 0, n_rows, scratch.data());
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto wd = testing::dequantized(t, v.row(r), n);
      double exact = 0, abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(wd[i]) * x[i];
        abs_sum += std::fabs(static_cast<double>(wd[i]) * x[i]);
      }
      EXPECT_NEAR(y[r], exact, 1e-5 * abs_sum) << dtype_name(t);
    }
  }
}

TEST(Isa, SelectionAndScalarFallback) {
  const Isa saved = active_isa();
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  set_kernel_isa(Isa::kScalar);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  EXPECT_EQ(&active_kernel_table(), &kernel_table(Isa::kScalar));
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm})
    if (!isa_supported(isa)) {
      EXPECT_THROW(set_kernel_isa(isa), Error);
    }
  set_kernel_isa(saved);
  EXPECT_EQ(active_isa(), saved);
}

}  // namespace
}  // namespace colibri
