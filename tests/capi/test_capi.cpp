// The C API: results equal the C++ engine's, and every misuse is a status
// code with a message, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "colibri.h"
#include "engine/engine.h"
#include "engine/sampler.h"

namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

std::string model(const char* name) { return (kGolden / name).string(); }

TEST(CApi, InitReportsMissingFile) {
  colibri_engine* e = reinterpret_cast<colibri_engine*>(0x1);
  EXPECT_EQ(colibri_init("/nonexistent/model.gguf", nullptr, &e), COLIBRI_ERR_MODEL);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(colibri_last_error()).find("/nonexistent/model.gguf"), std::string::npos)
      << colibri_last_error();
}

TEST(CApi, InitRejectsNullsAndBadOptions) {
  colibri_engine* e = nullptr;
  EXPECT_EQ(colibri_init(nullptr, nullptr, &e), COLIBRI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(colibri_init("x", nullptr, nullptr), COLIBRI_ERR_INVALID_ARGUMENT);
  colibri_options o;
  colibri_default_options(&o);
  o.precision = 7;
  EXPECT_EQ(colibri_init("x", &o, &e), COLIBRI_ERR_INVALID_ARGUMENT);
  colibri_default_options(&o);
  o.kv_type = 5;
  EXPECT_EQ(colibri_init("x", &o, &e), COLIBRI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(colibri_forward(nullptr, 0, nullptr, nullptr), COLIBRI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(colibri_get_stats(nullptr, nullptr), COLIBRI_ERR_INVALID_ARGUMENT);
  colibri_free(nullptr);
}

TEST(CApi, InitReportsNonGguf) {
  fs::path p = fs::temp_directory_path() / ("colibri_capi_" + std::to_string(::getpid()) + ".bin");
  FILE* f = std::fopen(p.c_str(), "wb");
  std::fputs("this is not a model file", f);
  std::fclose(f);
  colibri_engine* e = nullptr;
  EXPECT_EQ(colibri_init(p.c_str(), nullptr, &e), COLIBRI_ERR_MODEL);
  EXPECT_NE(std::string(colibri_last_error()).find("not a GGUF file"), std::string::npos)
      << colibri_last_error();
  fs::remove(p);
}

class CApiModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGolden)) GTEST_SKIP() << "../shared/golden is absent";
    colibri_options o;
    colibri_default_options(&o);
    o.n_ctx = 16;
    o.n_threads = 1;
    ASSERT_EQ(colibri_init(model("qwen3moe-f32.gguf").c_str(), &o, &e_), COLIBRI_OK)
        << colibri_last_error();
  }
  void TearDown() override { colibri_free(e_); }
  colibri_engine* e_ = nullptr;
};

TEST_F(CApiModel, ForwardMatchesEngine) {
  colibri::EngineOptions eo;
  eo.model_path = model("qwen3moe-f32.gguf");
  eo.n_ctx = 16;
  eo.n_threads = 1;
  colibri::Engine engine(eo);
  const int n_vocab = colibri_n_vocab(e_);
  ASSERT_EQ(n_vocab, engine.n_vocab());
  std::vector<int32_t> ids(32);
  int32_t n = colibri_tokenize(e_, "The old lighthouse", 1, ids.data(), 32);
  ASSERT_GT(n, 0);
  ids.resize(n);
  EXPECT_EQ(ids, engine.tokenizer().encode("The old lighthouse", true, false));
  std::vector<float> logits(n_vocab);
  for (int i = 0; i < n; ++i) {
    int32_t next = -1;
    ASSERT_EQ(colibri_forward(e_, ids[i], logits.data(), &next), COLIBRI_OK);
    const float* want = engine.eval_token(ids[i], 0, i);
    for (int v = 0; v < n_vocab; ++v) ASSERT_EQ(logits[v], want[v]) << "position " << i;
    EXPECT_EQ(next, colibri::argmax(want, n_vocab));
  }
  char buf[256];
  int64_t len = colibri_detokenize(e_, ids.data(), n, buf, sizeof buf);
  EXPECT_EQ(std::string(buf, len), engine.tokenizer().decode(ids));

  colibri_stats s;
  ASSERT_EQ(colibri_get_stats(e_, &s), COLIBRI_OK);
  EXPECT_EQ(s.n_tokens, static_cast<uint64_t>(n));
  EXPECT_EQ(s.n_layer, 2);
  EXPECT_EQ(s.n_expert, 8);
  ASSERT_NE(s.expert_usage, nullptr);
  // Every token routes to k experts in every MoE layer.
  for (int l = 0; l < s.n_layer; ++l) {
    uint64_t sum = 0;
    for (int x = 0; x < s.n_expert; ++x) sum += s.expert_usage[l * s.n_expert + x];
    EXPECT_EQ(sum, static_cast<uint64_t>(n) * s.n_expert_used) << "layer " << l;
  }
}

TEST_F(CApiModel, BadTokenAndFullContext) {
  EXPECT_EQ(colibri_forward(e_, -1, nullptr, nullptr), COLIBRI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(colibri_forward(e_, colibri_n_vocab(e_), nullptr, nullptr), COLIBRI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(colibri_last_error()).find("outside the vocabulary"), std::string::npos);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(colibri_forward(e_, 1, nullptr, nullptr), COLIBRI_OK);
  EXPECT_EQ(colibri_forward(e_, 1, nullptr, nullptr), COLIBRI_ERR_CONTEXT_FULL);
  EXPECT_NE(std::string(colibri_last_error()).find("context is full"), std::string::npos);
  EXPECT_EQ(colibri_reset(e_), COLIBRI_OK);
  EXPECT_EQ(colibri_forward(e_, 1, nullptr, nullptr), COLIBRI_OK);
  int32_t small[1];
  EXPECT_GT(colibri_tokenize(e_, "a b c d e f", 0, small, 1), 1);  // full count returned
  EXPECT_LT(colibri_detokenize(e_, small, 1, nullptr, 8), 0);
  int32_t bad = 1 << 30;
  char buf[8];
  EXPECT_LT(colibri_detokenize(e_, &bad, 1, buf, sizeof buf), 0);
}

}  // namespace
