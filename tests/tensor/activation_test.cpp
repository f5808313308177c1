// The gated FFN's activations, silu(g) * u and GPT-OSS's clamped SwiGLU, on
// every ISA against an F64 oracle: ordinary values, both tails (where e^-x
// overflows or vanishes), odd lengths (the SIMD tails), in place, and each
// element the same alone as in a run (a token's result must not depend on
// how the rows were batched).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/kernels/dispatch.h"
#include "tensor/kernels/kernel_table.h"

namespace colibri {
namespace {

// f(g, u) against oracle on one ISA: a few ulp of the result, or nothing
// worth a float where it underflows, never NaN; in place (y = g) the same
// values, and so every element computed alone: where it falls in the SIMD
// lanes changes nothing.
template <typename Oracle>
void check_like_oracle(Isa isa, SiluMulFn f, const std::vector<float>& g,
                       const std::vector<float>& u, Oracle oracle) {
  const auto n = static_cast<int64_t>(g.size());
  std::vector<float> y(g.size());
  f(g.data(), u.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double want = oracle(g[i], u[i]);
    ASSERT_FALSE(std::isnan(y[i])) << isa_name(isa) << " g=" << g[i];
    ASSERT_NEAR(y[i], want, 4e-7 * std::fabs(want) + 1e-35)
        << isa_name(isa) << " n=" << n << " i=" << i << " g=" << g[i] << " u=" << u[i];
  }
  std::vector<float> in_place = g;
  f(in_place.data(), u.data(), in_place.data(), n);
  EXPECT_EQ(in_place, y) << isa_name(isa);
  for (int64_t i = 0; i < n; ++i) {
    float one = 0;
    f(&g[i], &u[i], &one, 1);
    ASSERT_EQ(one, y[i]) << isa_name(isa) << " n=" << n << " i=" << i;
  }
}

double silu_mul_f64(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

TEST(SiluMul, EveryIsaMatchesF64Oracle) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const SiluMulFn f = kernel_table(isa).silu_mul;
    ASSERT_NE(f, nullptr) << isa_name(isa);
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 64, 1000}) {
      std::vector<float> g(n), u(n);
      for (int64_t i = 0; i < n; ++i) {
        g[i] = normal(rng) * (i % 3 == 0 ? 10.0f : 1.0f);
        u[i] = normal(rng);
      }
      // The tails: e^-x overflows float for x < -88.7 and vanishes for x > 104.
      const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f,
                                89.0f, -89.0f, 100.0f, -100.0f, 1e30f, -1e30f, 1e-38f, -3.0e38f};
      for (int64_t i = 0; i < n && i < static_cast<int64_t>(std::size(specials)); ++i) g[i] = specials[i];
      check_like_oracle(isa, f, g, u, silu_mul_f64);
    }
  }
}

// GPT-OSS's clamped SwiGLU on every ISA against an F64 oracle of the same
// formula (its 1.702 x rounded to float first, as every kernel has it): both
// clamps and both tails of the sigmoid, odd lengths.
TEST(SwigluClamped, EveryIsaMatchesF64Oracle) {
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto oracle = [](float g, float u) {
    const float x = std::min(g, 7.0f);
    const double a = static_cast<double>(1.702f * x);
    return x / (1.0 + std::exp(-a)) * (std::clamp(static_cast<double>(u), -7.0, 7.0) + 1.0);
  };
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const SwigluFn f = kernel_table(isa).swiglu_clamped;
    ASSERT_NE(f, nullptr) << isa_name(isa);
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 64, 2880}) {
      std::vector<float> g(n), u(n);
      for (int64_t i = 0; i < n; ++i) {
        g[i] = normal(rng) * (i % 3 == 0 ? 10.0f : 2.0f);
        u[i] = normal(rng) * (i % 4 == 0 ? 10.0f : 2.0f);
      }
      // Both clamps' edges, and 1.702 x around -87 and past float's e^88.7.
      const float specials[][2] = {
          {0.0f, 0.0f},   {-0.0f, 1.0f},   {7.0f, 7.0f},    {7.5f, -7.5f},   {1e30f, 1e30f},
          {-7.0f, -1.0f}, {-51.0f, 3.0f},  {-51.2f, -3.0f}, {-60.0f, 2.0f},  {-1e30f, 0.5f},
          {1e-30f, 8.0f}, {-3e38f, -8.0f}, {-52.5f, 6.99f}, {-50.9f, -6.99f}};
      for (int64_t i = 0; i < n && i < static_cast<int64_t>(std::size(specials)); ++i) {
        g[i] = specials[i][0];
        u[i] = specials[i][1];
      }
      check_like_oracle(isa, f, g, u, oracle);
    }
  }
}

// The bandwidth probe's read: every ISA's sum of 64-bit words equals a plain
// loop's (wrapping), on lengths that end inside and at its unrolled step and
// on an unaligned start.
TEST(ReadSum, EveryIsaMatchesAPlainSum) {
  std::mt19937_64 rng(9);
  std::vector<uint64_t> words(4096 + 8);
  for (uint64_t& w : words) w = rng();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const ReadSumFn f = kernel_table(isa).read_sum;
    ASSERT_NE(f, nullptr) << isa_name(isa);
    for (size_t bytes : {size_t{256}, size_t{512}, size_t{768}, size_t{4096}, size_t{32768}})
      for (size_t start : {size_t{0}, size_t{1}}) {
        uint64_t want = 0;
        for (size_t i = 0; i < bytes / 8; ++i) want += words[start + i];
        EXPECT_EQ(f(words.data() + start, bytes), want) << isa_name(isa) << " " << bytes << " bytes";
      }
  }
}

}  // namespace
}  // namespace colibri

namespace colibri {
namespace {

// rms_norm: the reference within a few ulp of a float64 oracle, and every
// ISA the reference's bits (RmsNormFn), on lengths around the 8- and 16-wide
// steps, large and tiny values, and in place.
TEST(RmsNorm, EveryIsaGivesTheReferenceBits) {
  std::mt19937 rng(47);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const RmsNormFn ref = ref_kernel_table().rms_norm;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 64, 100, 2048, 4099}) {
    for (float mag : {1.0f, 1e-20f, 3e15f}) {
      std::vector<float> x(n), w(n), want(n);
      for (int64_t i = 0; i < n; ++i) {
        x[i] = normal(rng) * mag * (i % 5 == 0 ? 30.0f : 1.0f);
        w[i] = 1.0f + 0.1f * normal(rng);
      }
      const float eps = 1e-6f;
      ref(x.data(), w.data(), n, eps, want.data());
      double ss = 0;
      for (float v : x) ss += static_cast<double>(v) * v;
      const double s = 1.0 / std::sqrt(ss / n + eps);
      for (int64_t i = 0; i < n; ++i) {
        const double o = x[i] * s * w[i];
        ASSERT_NEAR(want[i], o, 1e-6 * std::fabs(o) + 1e-30) << "reference n=" << n << " i=" << i;
      }
      for (Isa isa : kAllIsas) {
        if (!isa_supported(isa)) continue;
        const RmsNormFn f = kernel_table(isa).rms_norm;
        ASSERT_NE(f, nullptr) << isa_name(isa);
        std::vector<float> got(n), in_place = x;
        f(x.data(), w.data(), n, eps, got.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0)
            << isa_name(isa) << " n=" << n;
        f(in_place.data(), w.data(), n, eps, in_place.data());
        ASSERT_EQ(std::memcmp(in_place.data(), want.data(), n * sizeof(float)), 0)
            << isa_name(isa) << " in place, n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace colibri
