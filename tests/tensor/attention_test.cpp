// attend() on every ISA against a float64 oracle of softmax(q K^T) V, at
// short and long positions (past 1000, where summation order and the exp
// approximation have the most terms to go wrong over), odd head sizes, padded
// strides, and peaked scores (one position dominating the softmax).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/half.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

// A sink (GPT-OSS) is one more logit in the softmax's denominator.
std::vector<double> oracle(const std::vector<float>& q, const std::vector<float>& k, size_t ks,
                           const std::vector<float>& v, size_t vs, int64_t n_pos, int hd, int hdv,
                           float scale, float sink = -INFINITY) {
  std::vector<double> s(n_pos);
  double max = sink;
  for (int64_t p = 0; p < n_pos; ++p) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += static_cast<double>(q[i]) * k[p * ks + i];
    s[p] = d * scale;
    max = std::max(max, s[p]);
  }
  double sum = std::exp(static_cast<double>(sink) - max);
  for (double& x : s) sum += (x = std::exp(x - max));
  std::vector<double> out(hdv, 0.0);
  for (int64_t p = 0; p < n_pos; ++p)
    for (int i = 0; i < hdv; ++i) out[i] += s[p] / sum * v[p * vs + i];
  return out;
}

TEST(Attend, EveryIsaMatchesF64Oracle) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Isa saved = active_isa();
  struct Shape {
    int hd, hdv;
    int64_t n_pos;
    float scale;
  };
  const Shape shapes[] = {{8, 8, 1, 0.35f},         {64, 64, 3, 0.125f},
                          {128, 128, 37, 0.088f},   {100, 72, 1001, 0.1f},
                          {128, 128, 1500, 0.088f}, {256, 256, 2049, 0.0625f},
                          {64, 64, 1203, 4.0f},     {13, 5, 9, 1.0f}};
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (const Shape& sh : shapes) {
      const size_t ks = sh.hd + 3, vs = sh.hdv + 5;  // padded, as a KV cache row holds all heads
      std::vector<float> q(sh.hd), k(sh.n_pos * ks), v(sh.n_pos * vs), scores(sh.n_pos),
          out(sh.hdv);
      for (float& x : q) x = nd(rng);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      attend(q.data(), k.data(), ks, v.data(), vs, sh.n_pos, sh.hd, sh.hdv, sh.scale, scores.data(),
             out.data());
      const auto want = oracle(q, k, ks, v, vs, sh.n_pos, sh.hd, sh.hdv, sh.scale);
      for (int i = 0; i < sh.hdv; ++i)
        ASSERT_NEAR(out[i], want[i], 2e-5 * (1 + std::fabs(want[i]) + sh.scale * sh.hd / 8))
            << isa_name(isa) << " hd " << sh.hd << " n_pos " << sh.n_pos << " dim " << i;
    }
  }
  set_kernel_isa(saved);
}

// Large equal scores at the far end of a long context: the softmax must
// subtract the max (no overflow) and split the weight evenly.
TEST(Attend, ExtremeScoresStayFinite) {
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    const int hd = 64;
    const int64_t n_pos = 1100;
    std::vector<float> q(hd, 1.0f), k(n_pos * hd, -1.0f), v(n_pos * hd, 0.0f), scores(n_pos),
        out(hd);
    // Positions 1098 and 1099 score 64 * 100 = 6400, the rest -6400.
    for (int64_t p : {1098, 1099})
      for (int i = 0; i < hd; ++i) {
        k[p * hd + i] = 1.0f;
        v[p * hd + i] = p == 1098 ? 2.0f : 4.0f;
      }
    attend(q.data(), k.data(), hd, v.data(), hd, n_pos, hd, hd, 100.0f, scores.data(), out.data());
    for (int i = 0; i < hd; ++i) ASSERT_NEAR(out[i], 3.0f, 1e-6) << isa_name(isa);
  }
  set_kernel_isa(saved);
}

}  // namespace
}  // namespace colibri

namespace colibri {
namespace {

// attend_batch: n_q queries of one sequence, each with its own visible length
// (a prompt's consecutive positions, and unrelated ones), against the oracle.
TEST(AttendBatch, EveryIsaMatchesF64Oracle) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (int hd : {8, 64, 100, 128})
      for (int n_q : {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 29}) {
        const int hdv = hd == 100 ? 72 : hd;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const float sink = n_q % 2 ? -INFINITY : 0.7f;
        std::vector<int32_t> n_pos(n_q);
        // Far apart (each query masks most of the others' positions), or > 1000: long contexts.
        for (int i = 0; i < n_q; ++i)
          n_pos[i] = n_q == 5 || n_q == 9 || n_q == 16 || n_q == 29 ? 1 + 37 * i : 1000 + i;
        const int32_t max_pos = *std::max_element(n_pos.begin(), n_pos.end());
        const size_t ks = hd + 3, vs = hdv + 5, qs = hd + 9, os = hdv + 2;
        std::vector<float> q(n_q * qs), k(max_pos * ks), v(max_pos * vs), scores(n_q * max_pos);
        std::vector<float> out(n_q * os, -7.0f);
        for (float& x : q) x = nd(rng);
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        attend_batch(q.data(), qs, n_q, n_pos.data(), k.data(), ks, v.data(), vs, hd, hdv, scale,
                     scores.data(), out.data(), os, sink);
        for (int i = 0; i < n_q; ++i) {
          const std::vector<float> qi(q.begin() + i * qs, q.begin() + i * qs + hd);
          const auto want = oracle(qi, k, ks, v, vs, n_pos[i], hd, hdv, scale, sink);
          for (int d = 0; d < hdv; ++d)
            ASSERT_NEAR(out[i * os + d], want[d], 2e-5 * (1 + std::fabs(want[d]) + scale * hd / 8))
                << isa_name(isa) << " hd " << hd << " n_q " << n_q << " query " << i << " dim " << d
                << " sink " << sink;
          for (size_t d = hdv; d < os; ++d) ASSERT_EQ(out[i * os + d], -7.0f);  // padding untouched
        }
      }
  }
  set_kernel_isa(saved);
}

}  // namespace
}  // namespace colibri

namespace colibri {
namespace {

// An F16 cache: every ISA's F16 kernels give, bit for bit, what its F32
// kernels give on a cache holding the same (half-rounded) values, one query
// and batches, at long positions and odd head sizes; the F32 kernels are
// checked against the oracle above, and halves convert exactly.
TEST(Attend, F16CacheEqualsF32CacheOfTheSameValues) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Isa saved = active_isa();
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (int hd : {13, 64, 128})
      for (int n_q : {1, 3, 4, 6, 8, 11, 12, 16, 19}) {
        const int hdv = hd == 13 ? 5 : hd;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<int32_t> n_pos(n_q);
        for (int i = 0; i < n_q; ++i) n_pos[i] = (n_q == 3 ? 1 + 29 * i : 1030 + i);
        const int32_t max_pos = *std::max_element(n_pos.begin(), n_pos.end());
        const size_t ks = hd + 3, vs = hdv + 5, os = hdv;
        std::vector<float> q(n_q * hd), k(max_pos * ks), v(max_pos * vs), scores(n_q * max_pos);
        std::vector<uint16_t> kh(k.size()), vh(v.size());
        for (float& x : q) x = nd(rng);
        for (size_t i = 0; i < k.size(); ++i) k[i] = half_to_float(kh[i] = float_to_half(nd(rng)));
        for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(vh[i] = float_to_half(nd(rng)));
        std::vector<float> want(n_q * os), got(n_q * os);
        attend_batch(q.data(), hd, n_q, n_pos.data(), k.data(), ks, v.data(), vs, hd, hdv, scale,
                     scores.data(), want.data(), os);
        attend_batch(q.data(), hd, n_q, n_pos.data(), kh.data(), ks, vh.data(), vs, hd, hdv, scale,
                     scores.data(), got.data(), os);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << isa_name(isa) << " batch, hd " << hd << " n_q " << n_q;
        attend(q.data(), kh.data(), ks, vh.data(), vs, n_pos[0], hd, hdv, scale, scores.data(), got.data());
        attend(q.data(), k.data(), ks, v.data(), vs, n_pos[0], hd, hdv, scale, scores.data(), want.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), hdv * sizeof(float)), 0)
            << isa_name(isa) << " one query, hd " << hd << " n_pos " << n_pos[0];
      }
  }
  set_kernel_isa(saved);
}

}  // namespace
}  // namespace colibri

namespace colibri {
namespace {

// A block cache (Q8_0, Q4_0): every ISA's kernels over it give, bit for bit,
// what its F32 kernels give on a cache holding the dequantized values
// (ggml's x = q * d and x = (q - 8) * d, kernels/ref's dequantizers), one
// query and batches of every group size, at long positions, on head sizes of
// 1 to 18 blocks (MLA's 576 and 512) and padded strides; the blocks are
// written by the quantizer the cache writes with, and the F32 kernels are
// checked against the oracle above. Sinks too (GPT-OSS).
template <typename Block>
void check_block_cache(DType type, void (*quantize)(const float*, Block*, int64_t), uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const Isa saved = active_isa();
  struct Shape {
    int hd, hdv;
  };
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    set_kernel_isa(isa);
    for (Shape sh : {Shape{32, 32}, Shape{64, 64}, Shape{128, 128}, Shape{192, 128}, Shape{576, 512}})
      for (int n_q : {1, 2, 3, 4, 5, 8, 9, 12, 16}) {
        const int hd = sh.hd, hdv = sh.hdv;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<int32_t> n_pos(n_q);
        for (int i = 0; i < n_q; ++i) n_pos[i] = (n_q == 3 ? 1 + 29 * i : 1030 + i);
        const int32_t max_pos = *std::max_element(n_pos.begin(), n_pos.end());
        // Strides: one block of padding in the key rows, none in the values.
        const size_t kb = hd / 32 + 1, vb = hdv / 32;
        std::vector<float> q(n_q * hd), scores(n_q * max_pos);
        std::vector<Block> kq(max_pos * kb), vq(max_pos * vb);
        std::vector<float> k(max_pos * kb * 32), v(max_pos * vb * 32), row(kb * 32);
        for (float& x : q) x = nd(rng);
        auto fill = [&](std::vector<Block>& blocks, std::vector<float>& plain, size_t nb) {
          for (int32_t p = 0; p < max_pos; ++p) {
            for (size_t i = 0; i < nb * 32; ++i) row[i] = nd(rng) * (1 + p % 7);
            quantize(row.data(), blocks.data() + p * nb, static_cast<int64_t>(nb * 32));
            dequantize_row(type, blocks.data() + p * nb, plain.data() + p * nb * 32,
                           static_cast<int64_t>(nb * 32));
          }
        };
        fill(kq, k, kb);
        fill(vq, v, vb);
        for (float sink : {-INFINITY, 0.7f}) {
          std::vector<float> want(n_q * hdv), got(n_q * hdv);
          attend_batch(q.data(), hd, n_q, n_pos.data(), k.data(), kb * 32, v.data(), vb * 32, hd, hdv, scale,
                       scores.data(), want.data(), hdv, sink);
          attend_batch(q.data(), hd, n_q, n_pos.data(), kq.data(), kb, vq.data(), vb, hd, hdv, scale,
                       scores.data(), got.data(), hdv, sink);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << dtype_name(type) << " " << isa_name(isa) << " batch, hd " << hd << " n_q " << n_q
              << " sink " << sink;
          attend(q.data(), kq.data(), kb, vq.data(), vb, n_pos[0], hd, hdv, scale, scores.data(), got.data(),
                 sink);
          attend(q.data(), k.data(), kb * 32, v.data(), vb * 32, n_pos[0], hd, hdv, scale, scores.data(),
                 want.data(), sink);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), hdv * sizeof(float)), 0)
              << dtype_name(type) << " " << isa_name(isa) << " one query, hd " << hd << " n_pos "
              << n_pos[0] << " sink " << sink;
        }
      }
  }
  set_kernel_isa(saved);
}

TEST(Attend, Q8CacheEqualsF32CacheOfTheDequantizedValues) {
  check_block_cache<block_q8_0>(DType::Q8_0, fp32_to_q8_0_row, 10);
}

// The same for a Q4_0 cache (ggml's reference quantizer, which the cache
// writes with; byte j of a block holds element j in its low nibble and
// element 16 + j in its high one).
TEST(Attend, Q4CacheEqualsF32CacheOfTheDequantizedValues) {
  check_block_cache<block_q4_0>(DType::Q4_0, fp32_to_q4_0_row, 11);
}

}  // namespace
}  // namespace colibri
