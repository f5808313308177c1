// llama.cpp's outputs on the golden models (../shared/golden): the prompt
// tokens (llama_tokenize with add_special, BOS per the vocabulary) and the
// detokenized greedy continuation (llama_detokenize, specials rendered,
// invalid UTF-8 shown as U+FFFD). These vocabularies are cut to 512-50257
// tokens, so byte fallbacks and dropped merges are exercised. Only each
// file's vocabulary is read: the DeepSeek, GPT-OSS and GLM-4.5 models are
// there for their tokenizers too (deepseek-v3 uses qwen2's, gpt-oss a cut
// o200k_harmony with its harmony markers, glm4moe cl100k with GLM-4.5's
// special tokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> golden_jsons() {
  std::vector<fs::path> out;
  const fs::path dir = test::shared_dir() / "golden";
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string fn = e.path().filename().string();
    if (e.path().extension() == ".json" && fn.find(".dequant-") == std::string::npos)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Golden, PromptTokensAndGeneratedTextMatchLlamaCpp) {
  const auto jsons = golden_jsons();
  if (jsons.empty()) GTEST_SKIP() << "test data absent: " << test::shared_dir() / "golden";
  EXPECT_EQ(jsons.size(), 30u);
  size_t n_cases = 0;
  for (const fs::path& jp : jsons) {
    SCOPED_TRACE(jp.filename().string());
    const auto j = nlohmann::json::parse(test::read_file(jp));
    const auto f = test::open_vocab_only(jp.parent_path() / j.at("model").get<std::string>());
    auto tok = Tokenizer::from_gguf(*f.file);

    const auto& v = j.at("vocab");
    EXPECT_EQ(tok->n_vocab(), v.at("n_tokens").get<int32_t>());
    EXPECT_EQ(tok->bos(), v.at("bos").get<int32_t>());
    EXPECT_EQ(tok->eos(), v.at("eos").get<int32_t>());
    EXPECT_EQ(tok->add_bos(), v.at("add_bos").get<bool>());
    EXPECT_EQ(tok->add_eos(), v.at("add_eos").get<bool>());
    EXPECT_EQ(tok->kind() == VocabKind::kSpm ? "spm" : "bpe", v.at("type").get<std::string>());

    for (const auto& c : j.at("cases")) {
      SCOPED_TRACE(c.at("name").get<std::string>());
      const std::string prompt = c.at("prompt").get<std::string>();
      EXPECT_EQ(tok->encode(prompt, true, false), c.at("tokens").get<std::vector<int32_t>>());

      const auto gen = c.at("gen_tokens").get<std::vector<int32_t>>();
      EXPECT_EQ(test::escaped(utf8_sanitize(tok->decode(gen))),
                test::escaped(c.at("gen_text").get<std::string>()));
      for (size_t s = 0; s < gen.size(); ++s)
        EXPECT_EQ(tok->is_eog(gen[s]), c.at("gen").at(s).at("eog").get<bool>()) << "step " << s;
      ++n_cases;
    }
  }
  EXPECT_GE(n_cases, 30u * 4);
}

// Streaming the generated tokens one by one gives the whole text's bytes,
// never splitting a UTF-8 sequence (the SPM leading space is kept here).
TEST(Golden, StreamingMatchesWholeText) {
  const auto jsons = golden_jsons();
  if (jsons.empty()) GTEST_SKIP() << "test data absent: " << test::shared_dir() / "golden";
  for (const fs::path& jp : jsons) {
    SCOPED_TRACE(jp.filename().string());
    const auto j = nlohmann::json::parse(test::read_file(jp));
    const auto f = test::open_vocab_only(jp.parent_path() / j.at("model").get<std::string>());
    auto tok = Tokenizer::from_gguf(*f.file);
    for (const auto& c : j.at("cases")) {
      const auto gen = c.at("gen_tokens").get<std::vector<int32_t>>();
      std::string pending, out, whole;
      for (int32_t id : gen) {
        const size_t before = out.size();
        tok->append_piece(id, pending, out);
        EXPECT_TRUE(utf8_is_valid(std::string_view(out).substr(before)));
        whole += tok->token_to_piece(id);
      }
      Tokenizer::flush_pending(pending, out);
      EXPECT_TRUE(pending.empty());
      EXPECT_EQ(test::escaped(out), test::escaped(utf8_sanitize(whole)));
    }
  }
}

}  // namespace
}  // namespace colibri
