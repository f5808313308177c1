// The bundled demo model against an independent reference: the PyTorch
// qwen3moe of tools/train (float64, on the file's weights dequantized to F32),
// whose outputs are in tests/data/demo_reference.json. The engine runs in the
// reference precision (F32 activations, dequantized weights).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/engine.h"
#include "engine/generate.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource(COLIBRI_SOURCE_DIR);

// Tolerances stated with the reference (its "tolerance" field): float32
// engine vs float64 reference.
constexpr double kLogitTol = 1e-3;     // |a - b| <= kLogitTol * max(1, |b|)
constexpr double kGreedyMargin = 1e-3; // ids must agree above this margin
constexpr double kRouterGap = 1e-4;    // expert sets must agree above this gap

class DemoReference : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(kSource / "tests/data/demo_reference.json");
    ASSERT_TRUE(in) << "tests/data/demo_reference.json is missing";
    ref_ = json::parse(in);
    EngineOptions o;
    o.model_path = (kSource / ref_["model"].get<std::string>()).string();
    o.n_ctx = 256;
    o.n_batch = 64;
    o.n_threads = 2;
    o.precision = Precision::kReference;
    o.kv_type = DType::F32;  // as the PyTorch reference keeps it
    o.store.no_history = true;
    engine_ = std::make_unique<Engine>(o);
  }
  json ref_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(DemoReference, LogitsRoutingAndGreedyMatchPyTorch) {
  Engine& e = *engine_;
  const int n_vocab = e.n_vocab();
  const ModelConfig& cfg = e.config();
  ASSERT_EQ(n_vocab, ref_["config"]["n_vocab"].get<int>());
  ASSERT_EQ(cfg.n_expert, ref_["config"]["n_expert"].get<int>());
  double max_delta = 0;
  int checked_rows = 0, checked_layers = 0;
  for (const json& p : ref_["prompts"]) {
    const std::string text = p["text"];
    std::vector<int32_t> prompt = p["prompt_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> gen = p["generated_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(e.tokenizer().encode(text, true, false), prompt) << text;

    // Teacher-forced: prompt and generated tokens in one batch.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    const int n = static_cast<int>(all.size());
    ASSERT_EQ(n, static_cast<int>(p["positions"].size()));
    std::vector<BatchToken> batch(n);
    for (int i = 0; i < n; ++i) batch[i] = {all[i], i, 0, true};
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
    RoutingTrace trace;
    trace.resize(n, cfg.n_layer, cfg.n_expert_used);
    e.transformer().forward(batch, e.kv(), logits.data(), &trace);

    for (int i = 0; i < n; ++i) {
      const json& pos = p["positions"][i];
      const float* row = logits.data() + static_cast<size_t>(i) * n_vocab;
      const auto ids = pos["top_ids"].get<std::vector<int>>();
      const auto want = pos["top_logits"].get<std::vector<double>>();
      for (size_t j = 0; j < ids.size(); ++j) {
        const double d = std::fabs(row[ids[j]] - want[j]);
        max_delta = std::max(max_delta, d);
        EXPECT_LE(d, kLogitTol * std::max(1.0, std::fabs(want[j])))
            << text << " position " << i << " token " << ids[j];
      }
      ++checked_rows;
      for (int l = 0; l < cfg.n_layer; ++l) {
        const auto want_e = pos["experts"][l].get<std::vector<int>>();
        const int32_t* got = trace.experts(i, l);
        std::set<int> a(want_e.begin(), want_e.end()), b(got, got + cfg.n_expert_used);
        if (pos["router_gap"][l].get<double>() <= kRouterGap) continue;
        EXPECT_EQ(a, b) << text << " position " << i << " layer " << l;
        // Weights in selection order (both sort by probability).
        const auto want_w = pos["expert_weights"][l].get<std::vector<double>>();
        for (int j = 0; j < cfg.n_expert_used; ++j)
          EXPECT_NEAR(trace.expert_weights(i, l)[j], want_w[j], 1e-4);
        ++checked_layers;
      }
    }
    // Every logit of the last prompt position.
    const auto last = p["logits_last_prompt_position"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int>(last.size()), n_vocab);
    const float* row = logits.data() + (prompt.size() - 1) * n_vocab;
    for (int v = 0; v < n_vocab; ++v)
      ASSERT_LE(std::fabs(row[v] - last[v]), kLogitTol * std::max(1.0, std::fabs(last[v]))) << v;

    // Free-running greedy generation equals the reference's up to its first
    // near-tie.
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.n_predict = static_cast<int>(gen.size());
    g.stop_at_eog = false;
    GenerateResult r = generate(e, text, g);
    for (size_t s = 0; s < gen.size(); ++s) {
      if (p["greedy"][s]["margin"].get<double>() <= kGreedyMargin) break;
      ASSERT_LT(s, r.tokens.size());
      EXPECT_EQ(r.tokens[s], gen[s]) << text << " step " << s;
    }
  }
  std::printf("  demo model vs PyTorch: %d rows, %d routed layer-rows checked, max |dlogit| %.3g\n",
              checked_rows, checked_layers, max_delta);
  EXPECT_GT(checked_layers, checked_rows * cfg.n_layer / 2);
}

// The demo is what the README runs: its greedy text is English words.
TEST_F(DemoReference, GreedyTextIsTheReferences) {
  for (const json& p : ref_["prompts"]) {
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.n_predict = static_cast<int>(p["generated_ids"].size());
    g.stop_at_eog = false;
    GenerateResult r = generate(*engine_, p["text"].get<std::string>(), g);
    EXPECT_EQ(r.text, p["generated_text"].get<std::string>());
  }
}

// A streamed token reaches the callback as soon as it is sampled, before the
// decode step that feeds it back (that step is a whole forward pass: on a
// streamed model, a disk read); only a routing trace, the token's own, waits
// for it. Counted by the tokens the first layer has routed.
TEST_F(DemoReference, StreamedTokensComeBeforeTheirDecode) {
  Engine& e = *engine_;
  const ModelConfig& cfg = e.config();
  ASSERT_GT(cfg.n_expert_used, 0);
  const auto forwarded = [&] {
    uint64_t n = 0;
    for (int x = 0; x < cfg.n_expert; ++x) n += e.transformer().expert_usage()[x];  // layer 0
    return n / static_cast<uint64_t>(cfg.n_expert_used);
  };
  for (const bool trace : {false, true}) {
    const uint64_t before = forwarded();
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.n_predict = 5;
    g.stop_at_eog = false;
    g.trace_routing = trace;
    std::vector<uint64_t> seen;  // tokens forwarded when each step arrived
    std::vector<bool> traced;
    GenerateResult r = generate(e, "The history of the", g, [&](const GenerateStep& s) {
      if (s.token < 0) return true;
      seen.push_back(forwarded() - before);
      traced.push_back(s.routing != nullptr);
      return true;
    });
    ASSERT_EQ(static_cast<int>(seen.size()), g.n_predict);
    for (int i = 0; i < g.n_predict; ++i) {
      const bool decoded_first = trace && i + 1 < g.n_predict;
      EXPECT_EQ(seen[i], r.prompt_tokens.size() + i + (decoded_first ? 1 : 0))
          << "step " << i << (trace ? " (routing traced)" : "");
      EXPECT_EQ(traced[i], decoded_first) << "step " << i;
    }
    // After the last token nothing more is decoded.
    EXPECT_EQ(forwarded() - before, r.prompt_tokens.size() + g.n_predict - 1);
  }
}

}  // namespace
}  // namespace colibri
