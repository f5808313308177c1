// moe/router against a float64 oracle written from llama.cpp's build_moe_ffn
// description (shared/golden/README.md, "Routing"): random scores for every
// option combination, and adversarial ones (exact ties, tied groups, all
// weights ~0) where only the tie rule decides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "moe/router.h"

namespace colibri {
namespace {

struct OracleResult {
  std::vector<int> ids;
  std::vector<double> weights;
  double gap;  // the smallest margin any decision had (selection or group)
};

// Sorted indices by value descending, equal values by ascending index.
std::vector<int> order_desc(const std::vector<double>& v) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
  return idx;
}

OracleResult oracle(const std::vector<float>& logits, const RouterOptions& o) {
  const int n = o.n_expert, k = o.n_expert_used;
  std::vector<double> s(n);
  if (o.gating == Gating::kSoftmax) {
    double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
    for (int e = 0; e < n; ++e) z += std::exp(logits[e] - mx);
    for (int e = 0; e < n; ++e) s[e] = std::exp(logits[e] - mx) / z;
  } else if (o.gating == Gating::kSigmoid) {
    for (int e = 0; e < n; ++e) s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  } else {
    for (int e = 0; e < n; ++e) s[e] = logits[e];
  }
  std::vector<double> sel(n);
  for (int e = 0; e < n; ++e) sel[e] = s[e] + (o.selection_bias ? o.selection_bias[e] : 0.0);
  double gap = INFINITY;
  if (o.n_group > 1) {
    const int per = n / o.n_group;
    std::vector<double> g(o.n_group);
    for (int i = 0; i < o.n_group; ++i) {
      std::vector<double> m(sel.begin() + i * per, sel.begin() + (i + 1) * per);
      std::sort(m.rbegin(), m.rend());
      g[i] = per >= 2 ? m[0] + m[1] : m[0];
    }
    std::vector<int> go = order_desc(g);
    gap = g[go[o.n_group_used - 1]] - g[go[o.n_group_used]];
    for (int j = o.n_group_used; j < o.n_group; ++j)
      for (int e = go[j] * per; e < (go[j] + 1) * per; ++e) sel[e] = -INFINITY;
  }
  std::vector<int> ord = order_desc(sel);
  OracleResult r;
  r.ids.assign(ord.begin(), ord.begin() + k);
  if (k < n && std::isfinite(sel[ord[k]])) gap = std::min(gap, sel[ord[k - 1]] - sel[ord[k]]);
  r.gap = gap;
  if (o.gating == Gating::kSoftmaxSelected) {
    double mx = -INFINITY, z = 0;
    for (int id : r.ids) mx = std::max(mx, s[id]);
    for (int id : r.ids) z += std::exp(s[id] - mx);
    for (int id : r.ids) r.weights.push_back(std::exp(s[id] - mx) / z);
  } else {
    for (int id : r.ids) r.weights.push_back(s[id]);
  }
  if (o.renormalize) {
    double z = std::accumulate(r.weights.begin(), r.weights.end(), 0.0);
    z = std::max(z, 6.103515625e-5);
    for (double& w : r.weights) w /= z;
  }
  if (o.scale != 0 && o.scale != 1)
    for (double& w : r.weights) w *= o.scale;
  return r;
}

void expect_matches(const std::vector<float>& logits, const RouterOptions& o, bool must_decide) {
  const int k = o.n_expert_used;
  std::vector<float> scratch(router_scratch_floats(o.n_expert));
  std::vector<int32_t> ids(k);
  std::vector<float> w(k);
  route(logits.data(), o, scratch.data(), ids.data(), w.data());
  const OracleResult r = oracle(logits, o);
  // A float computation may order two scores closer than float resolution
  // either way; only decisions with a real margin (or exact ties, decided by
  // the lower id in both) must agree.
  if (!must_decide && r.gap < 1e-5) return;
  for (int j = 0; j < k; ++j) {
    ASSERT_EQ(ids[j], r.ids[j]) << "rank " << j;
    EXPECT_NEAR(w[j], r.weights[j], 2e-6 * std::max(1.0, std::fabs(r.weights[j]))) << "rank " << j;
  }
}

TEST(Router, MatchesTheFloat64OracleOnRandomScores) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f), bd(0.f, 0.1f);
  struct Case { int n, k, groups, used; Gating g; bool renorm, bias; float scale; };
  const Case cases[] = {
      {8, 2, 1, 1, Gating::kSoftmax, true, false, 1.f},        // Mixtral, Qwen3
      {64, 8, 1, 1, Gating::kSoftmax, false, false, 1.f},      // OLMoE
      {16, 3, 1, 1, Gating::kSoftmax, false, false, 1.f},      // DeepSeek-V2-Lite
      {256, 8, 8, 4, Gating::kSigmoid, true, true, 2.5f},      // DeepSeek-V3
      {16, 4, 4, 2, Gating::kSigmoid, true, true, 2.5f},       // the V3 golden's shape
      {384, 8, 1, 1, Gating::kSigmoid, true, true, 2.827f},    // Kimi K2
      {128, 8, 1, 1, Gating::kSigmoid, true, true, 1.8f},      // GLM-4.5-Air shape
      {32, 4, 1, 1, Gating::kSoftmaxSelected, false, false, 0.f},  // GPT-OSS
      {160, 6, 8, 3, Gating::kSoftmax, true, false, 16.f},     // DeepSeek-V2 (softmax with groups)
      {64, 6, 64, 6, Gating::kSigmoid, false, true, 1.f},      // groups of one expert
  };
  for (const Case& c : cases) {
    std::vector<float> bias(c.n);
    for (float& b : bias) b = bd(rng);
    RouterOptions o;
    o.n_expert = c.n;
    o.n_expert_used = c.k;
    o.gating = c.g;
    o.renormalize = c.renorm;
    o.scale = c.scale;
    o.n_group = c.groups;
    o.n_group_used = c.used;
    o.selection_bias = c.bias ? bias.data() : nullptr;
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> logits(c.n);
      for (float& x : logits) x = nd(rng);
      SCOPED_TRACE(testing::Message() << "n " << c.n << " k " << c.k << " trial " << trial);
      expect_matches(logits, o, false);
    }
  }
}

TEST(Router, ExactTiesGoToTheLowerExpert) {
  RouterOptions o;
  o.n_expert = 16;
  o.n_expert_used = 4;
  o.renormalize = true;
  for (Gating g : {Gating::kSoftmax, Gating::kSigmoid, Gating::kSoftmaxSelected}) {
    o.gating = g;
    std::vector<float> all_equal(16, 0.25f);
    expect_matches(all_equal, o, true);
    std::vector<int32_t> ids(4);
    std::vector<float> w(4), scratch(32);
    route(all_equal.data(), o, scratch.data(), ids.data(), w.data());
    EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 2, 3}));
    for (float x : w) EXPECT_FLOAT_EQ(x, 0.25f);
    // A tie at the k-th place, higher ids holding the larger scores.
    std::vector<float> tail = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3};
    expect_matches(tail, o, true);
  }
}

TEST(Router, TiedGroupsAndTheBiasDecideOnlyTheSelection) {
  RouterOptions o;
  o.n_expert = 16;
  o.n_expert_used = 4;
  o.gating = Gating::kSigmoid;
  o.renormalize = true;
  o.scale = 2.5f;
  o.n_group = 4;
  o.n_group_used = 2;
  // Groups 1 and 3 tie on their top-2 sum; group 2 has the best single
  // expert but a worse pair, so a max-based group score would pick it.
  std::vector<float> logits = {0, 0, 0, 0, 1, 1, -3, -3, 4, -5, -5, -5, 1, -3, 1, -3};
  expect_matches(logits, o, true);
  std::vector<int32_t> ids(4);
  std::vector<float> w(4), scratch(32);
  route(logits.data(), o, scratch.data(), ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 5, 12, 14}));
  float sum = 0;
  for (float x : w) sum += x;
  EXPECT_NEAR(sum, 2.5f, 1e-6);  // renormalised, then scaled

  // A bias large enough to change the choice leaves the weights unbiased.
  std::vector<float> bias(16, 0.f);
  bias[0] = 10.f;
  o.selection_bias = bias.data();
  o.n_group = 1;
  o.renormalize = false;
  o.scale = 1.f;
  route(logits.data(), o, scratch.data(), ids.data(), w.data());
  EXPECT_EQ(ids[0], 0);
  EXPECT_FLOAT_EQ(w[0], 0.5f);  // sigmoid(0), not 10.5
  expect_matches(logits, o, true);
}

TEST(Router, RenormalisationOfVanishingSigmoidWeightsIsClamped) {
  RouterOptions o;
  o.n_expert = 8;
  o.n_expert_used = 2;
  o.gating = Gating::kSigmoid;
  o.renormalize = true;
  std::vector<float> logits(8, -80.f);  // sigmoid ~1.8e-35: the sum is clamped to 2^-14
  expect_matches(logits, o, true);
}

TEST(Router, GapIsTheClosestDecision) {
  RouterOptions o;
  o.n_expert = 8;
  o.n_expert_used = 2;
  std::vector<float> scratch(16);
  const std::vector<float> logits = {3, 1, 2.5f, 0, 0, 0, 0, 0};
  EXPECT_FLOAT_EQ(route_gap(logits.data(), o, scratch.data()), 1.5f);  // logits: 2.5 - 1
  o.gating = Gating::kSigmoid;
  const float s = 1 / (1 + std::exp(-2.5f)) - 1 / (1 + std::exp(-1.f));
  EXPECT_NEAR(route_gap(logits.data(), o, scratch.data()), s, 1e-6);
}

}  // namespace
}  // namespace colibri
