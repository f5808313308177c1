// The fast kernels against the scalar ones on whole models: on every golden
// model, greedy decoding with each SIMD ISA the CPU has and with
// set_kernel_isa(kScalar)
// picks the same tokens. The two paths quantize activations bit for bit alike
// and differ only in the order of float additions, so their logits must stay
// within the golden tolerance of each other, and a token may differ only at a
// near-tie (where the check of that case ends).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

// ../shared/golden/README.md "Tolerances" for the native path.
double tolerance_for(const std::string& model) {
  if (model.find("f32") != std::string::npos || model.rfind("stories260K", 0) == 0) return 1e-3;
  if (model.find("bf16") != std::string::npos) return 0.2;
  if (model.find("f16") != std::string::npos) return 3e-2;
  return 0.6;
}

int32_t argmax(const float* x, int n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

std::vector<std::string> golden_models() {
  std::vector<std::string> ms;
  if (!fs::exists(kGolden)) return ms;
  for (const auto& e : fs::directory_iterator(kGolden))
    if (e.path().extension() == ".gguf") ms.push_back(e.path().stem().string());
  std::sort(ms.begin(), ms.end());
  return ms;
}

// Whether two one-token traces chose different expert sets in any layer.
bool routing_differs(const RoutingTrace& a, const RoutingTrace& b) {
  for (int l = 0; l < a.n_layer; ++l) {
    std::vector<int32_t> x(a.experts(0, l), a.experts(0, l) + a.k), y(b.experts(0, l), b.experts(0, l) + b.k);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y) return true;
  }
  return false;
}

class IsaEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(IsaEquivalence, ScalarPathGivesTheSameGreedyTokens) {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm})
    if (isa_supported(isa)) isas.push_back(isa);
  if (isas.empty()) GTEST_SKIP() << "this CPU has no SIMD kernels to compare";
  const Isa saved = active_isa();
  const std::string& model = GetParam();
  std::ifstream in(kGolden / (model + ".json"));
  ASSERT_TRUE(in) << model << ".json missing";
  const nlohmann::json j = nlohmann::json::parse(in);
  EngineOptions o;
  o.model_path = (kGolden / (model + ".gguf")).string();
  o.n_ctx = 512;
  o.n_batch = 64;
  o.n_threads = 2;
  o.kv_type = DType::F32;  // the golden tolerances are for an F32 cache
  o.store.no_history = true;
  Engine engine(o);
  const int n_vocab = engine.n_vocab();
  const double T = tolerance_for(model);
  constexpr int kSteps = 12;

  int steps_checked = 0;
  for (const Isa fast : isas)
    for (const auto& c : j["cases"]) {
      const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
      const int n = static_cast<int>(tokens.size());
      // This ISA, free-running.
      set_kernel_isa(fast);
      std::vector<int32_t> ids;
      std::vector<float> fast_logits;
      std::vector<RoutingTrace> fast_routes(kSteps);  // step s's routing (decoded steps)
      const float* l = engine.eval_prompt(tokens, 0, 0);
      for (int s = 0; s < kSteps; ++s) {
        ids.push_back(argmax(l, n_vocab));
        fast_logits.insert(fast_logits.end(), l, l + n_vocab);
        if (s + 1 < kSteps) {
          fast_routes[s + 1].resize(1, engine.config().n_layer, std::max(engine.config().n_expert_used, 1));
          l = engine.eval_token(ids.back(), 0, n + s, &fast_routes[s + 1]);
        }
      }
      // Scalar, fed the same tokens.
      set_kernel_isa(Isa::kScalar);
      l = engine.eval_prompt(tokens, 0, 0);
      RoutingTrace route;
      for (int s = 0; s < kSteps; ++s) {
        // A routed model whose router picked other experts at a near tie
        // (float sums in another order) computes another function from
        // there: the case ends, as the golden test's rows do.
        if (s > 0 && routing_differs(route, fast_routes[s])) {
          std::printf("  %s \"%s\" %s: routing differs from step %d on (a near tie); compared up to it\n",
                      model.c_str(), c["name"].get<std::string>().c_str(), isa_name(fast), s);
          break;
        }
        const float* f = fast_logits.data() + static_cast<size_t>(s) * n_vocab;
        double max_d = 0;
        for (int v = 0; v < n_vocab; ++v)
          max_d = std::max(max_d, static_cast<double>(std::fabs(l[v] - f[v])));
        EXPECT_LE(max_d, T) << model << " " << c["name"] << " " << isa_name(fast) << " step " << s;
        const int32_t want = argmax(l, n_vocab);
        if (want != ids[s]) {
          // Only a near-tie may flip: the scalar path rates both within T.
          EXPECT_LE(l[want] - l[ids[s]], T)
              << model << " " << c["name"] << " step " << s << ": scalar picks " << want << ", "
              << isa_name(fast) << " picks " << ids[s];
          std::printf("  %s \"%s\" %s: a near tie at step %d picks another token; compared up to it\n",
                      model.c_str(), c["name"].get<std::string>().c_str(), isa_name(fast), s);
          break;
        }
        ++steps_checked;
        if (s + 1 < kSteps) {
          route.resize(1, engine.config().n_layer, std::max(engine.config().n_expert_used, 1));
          l = engine.eval_token(ids[s], 0, n + s, &route);
        }
      }
    }
  set_kernel_isa(saved);
  std::printf("  %-36s %d greedy steps equal on %zu ISA(s)\n", model.c_str(), steps_checked,
              isas.size());
  EXPECT_GT(steps_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Golden, IsaEquivalence, ::testing::ValuesIn(golden_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(IsaEquivalence);

TEST(IsaEquivalencePresence, SharedDataAvailable) {
  if (!fs::exists(kGolden))
    GTEST_SKIP() << "../shared/golden is absent: ISA equivalence on models skipped";
  EXPECT_FALSE(golden_models().empty());
}

}  // namespace
}  // namespace colibri
