// Tokenizers of the large MoE families: GPT-OSS (o200k_harmony, "gpt-4o"),
// GLM-4.5 ("glm4"), DeepSeek-V3 ("deepseek-v3") and Kimi-K2 ("kimi-k2").
//
// References, none written by this project's code:
//  - gptoss.out: GPT-OSS's own tokenizer.json on llamacpp-tests.inp, against
//    the full o200k_harmony vocabulary llama.cpp would load
//    (ggml-vocab-gpt-oss.gguf);
//  - the special-token facts of ../shared/golden/README.md ("Vocabularies"),
//    i.e. what llama.cpp's llama_vocab::impl::load makes of these files;
//  - reference/pre_splits.json: DeepSeek-V3's, Kimi-K2's and o200k's split
//    patterns, verbatim, run by Python's regex module (make_split_reference.py):
//    the only check for the two families whose vocabularies are not in
//    ../shared.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "test_data.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using test::escaped;

fs::path vectors_dir() { return test::shared_dir() / "data" / "tokenizer-vectors"; }

std::vector<int32_t> ids_of(const Tokenizer& tok, std::initializer_list<std::string_view> texts) {
  std::vector<int32_t> ids;
  for (std::string_view t : texts) {
    const auto id = tok.find_token(t);
    EXPECT_TRUE(id.has_value()) << t;
    ids.push_back(id.value_or(-1));
  }
  return ids;
}

// The full GPT-OSS vocabulary (201,088 tokens, 199,742 merges) against
// GPT-OSS's Hugging Face tokenizer on all 46 strings. llama.cpp itself gets 44
// (its gpt-4o regex splits Khmer before a combining mark, U+17CB, where the
// model's pattern does not); PCRE2 runs the model's own pattern, so all 46 are
// the model's ids. Decoding the reference ids gives the strings back.
TEST(GptOss, FullVocabularyEncodesLikeTheModelsTokenizer) {
  const fs::path vocab = test::vocab_dir() / "ggml-vocab-gpt-oss.gguf";
  if (!fs::exists(vocab) || !fs::exists(vectors_dir() / "gptoss.out"))
    GTEST_SKIP() << "test data absent: " << vocab;
  const auto t0 = std::chrono::steady_clock::now();
  auto f = GgufFile::open(vocab.string());
  auto tok = Tokenizer::from_gguf(*f);
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(tok->n_vocab(), 201088);
  EXPECT_EQ(tok->vocab().merges.size(), 199742u);
  EXPECT_EQ(tok->pre_name(), "gpt-4o");

  const auto inputs = test::read_suite_inputs(vectors_dir() / "llamacpp-tests.inp");
  const auto outputs = test::read_suite_outputs(vectors_dir() / "gptoss.out");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(outputs.size(), inputs.size());
  int matched = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto got = tok->encode(inputs[i], false, false);
    if (got == outputs[i]) ++matched;
    else ADD_FAILURE() << "case " << i << " \"" << escaped(inputs[i]) << "\"";
    EXPECT_EQ(escaped(tok->decode(outputs[i], true, false)), escaped(inputs[i])) << "case " << i;
  }
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(matched, 46);
  using ms = std::chrono::duration<double, std::milli>;
  std::printf("o200k_harmony: load %.0f ms, 46 strings %.1f ms\n", ms(t1 - t0).count(),
              ms(t2 - t1).count());
}

// What llama.cpp makes of the harmony specials: <|return|> and <|call|> end
// generation (with <|endoftext|>), <|end|> is then an ordinary separator, and
// the four markers <|start|> <|message|> <|channel|> <|constrain|> plus <|end|>
// are user-defined, so they are split out of plain text (parse_special off).
TEST(GptOss, HarmonySpecialsAsLlamaCppLoadsThem) {
  const fs::path vocab = test::vocab_dir() / "ggml-vocab-gpt-oss.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << "test data absent: " << vocab;
  auto f = GgufFile::open(vocab.string());
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->eog_ids(), ids_of(*tok, {"<|endoftext|>", "<|return|>", "<|call|>"}));
  EXPECT_EQ(tok->eog_ids(), (std::vector<int32_t>{199999, 200002, 200012}));
  EXPECT_EQ(tok->eos(), *tok->find_token("<|return|>"));
  for (std::string_view t : {"<|start|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|end|>"}) {
    const int32_t id = *tok->find_token(t);
    EXPECT_TRUE(tok->vocab().has(id, kAttrUserDefined)) << t;
    EXPECT_FALSE(tok->is_control(id)) << t;
    EXPECT_FALSE(tok->is_eog(id)) << t;
  }
  EXPECT_TRUE(tok->is_control(*tok->find_token("<|return|>")));

  // A harmony transcript: the user-defined markers are tokens either way;
  // <|return|> (control) only when special tokens are parsed.
  const std::string text = "<|start|>assistant<|channel|>final<|message|>Hi<|return|>";
  const auto plain = tok->encode(text, false, false);
  const auto parsed = tok->encode(text, false, true);
  const int32_t start = *tok->find_token("<|start|>"), ret = *tok->find_token("<|return|>");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.front(), start);
  EXPECT_NE(plain.back(), ret);
  EXPECT_EQ(parsed.back(), ret);
  EXPECT_EQ(parsed.size(), 7u);  // start, "assistant", channel, "final", message, "Hi", return
  EXPECT_EQ(tok->decode(parsed), text);
}

// openai/harmony's token-level test data: model replies as o200k_harmony ids.
// Decoded, they are harmony transcripts; encoding that text again with
// special tokens parsed gives the same ids.
TEST(GptOss, HarmonyTokenStreamsRoundTrip) {
  const fs::path vocab = test::vocab_dir() / "ggml-vocab-gpt-oss.gguf";
  const fs::path harmony = test::shared_dir() / "data" / "gpt-oss-harmony";
  if (!fs::exists(vocab) || !fs::exists(harmony)) GTEST_SKIP() << "test data absent: " << harmony;
  auto f = GgufFile::open(vocab.string());
  auto tok = Tokenizer::from_gguf(*f);
  struct Case {
    const char* file;
    const char* text;
  };
  const Case cases[] = {
      {"test_simple_reasoning_response.txt",
       "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic. Provide "
       "answer.<|return|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4."},
      {"test_simple_tool_call.txt",
       "<|channel|>analysis<|message|>User asks: \"What is the weather in Tokyo?\" We need to use "
       "lookup_weather tool.<|return|><|start|>assistant to=lookup_weather<|channel|>analysis "
       "code<|message|>{\"location\": \"Tokyo\"}"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    std::vector<int32_t> ids;
    {
      std::istringstream in(test::read_file(harmony / c.file));
      int32_t id;
      while (in >> id) ids.push_back(id);
    }
    ASSERT_GT(ids.size(), 20u);
    const std::string text = tok->decode(ids);
    EXPECT_EQ(text, c.text);
    EXPECT_EQ(tok->encode(text, false, true), ids) << escaped(text);
  }
}

// The cut GLM-4.5 vocabulary: <think> and the tool tags are user-defined (in
// plain text they are tokens), [gMASK] <sop> <|user|> ... are control tokens
// (text unless parsed), and generation ends at <|endoftext|>, <|user|> or
// <|observation|>. The "glm4" branch has no BOS of its own: the file's
// [gMASK] is the BOS, never added.
TEST(Glm45, SpecialTokensAsLlamaCppLoadsThem) {
  const fs::path vocab = test::vocab_dir() / "ggml-vocab-glm45-cl100k-4096.gguf";
  if (!fs::exists(vocab)) GTEST_SKIP() << "test data absent: " << vocab;
  auto f = GgufFile::open(vocab.string());
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->pre_name(), "glm4");
  EXPECT_EQ(tok->eog_ids(), ids_of(*tok, {"<|endoftext|>", "<|user|>", "<|observation|>"}));
  EXPECT_EQ(tok->bos(), *tok->find_token("[gMASK]"));
  EXPECT_FALSE(tok->add_bos());
  for (std::string_view t : {"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>",
                             "</arg_value>", "/nothink"})
    EXPECT_TRUE(tok->vocab().has(*tok->find_token(t), kAttrUserDefined)) << t;
  for (std::string_view t : {"[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|system|>"})
    EXPECT_TRUE(tok->is_control(*tok->find_token(t))) << t;

  const std::string prompt = "[gMASK]<sop><|user|>\nHi<|assistant|>\n<think></think>";
  const auto parsed = tok->encode(prompt, false, true);
  EXPECT_EQ(std::vector<int32_t>(parsed.begin(), parsed.begin() + 3),
            ids_of(*tok, {"[gMASK]", "<sop>", "<|user|>"}));
  EXPECT_EQ(std::vector<int32_t>(parsed.end() - 2, parsed.end()),
            ids_of(*tok, {"<think>", "</think>"}));
  EXPECT_EQ(tok->decode(parsed), prompt);
  const auto plain = tok->encode(prompt, false, false);
  EXPECT_NE(plain.front(), *tok->find_token("[gMASK]"));
  EXPECT_EQ(plain.back(), *tok->find_token("</think>"));
}

std::vector<std::string> cut(const PreTokenizer& p, const std::string& text) {
  std::vector<std::pair<size_t, size_t>> words;
  p.split(text, words);
  std::vector<std::string> out;
  for (auto [off, len] : words) out.push_back(text.substr(off, len));
  return out;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s = "[";
  for (size_t i = 0; i < words.size(); ++i) s += (i ? "|" : "") + escaped(words[i]);
  return s + "]";
}

// DeepSeek-V3, Kimi-K2 and o200k cut the 46 strings (and 8 more of the
// generator's) into the words the models' own patterns give (regex module, Unicode 14 as PCRE2 10.42). DeepSeek-V3's ids
// for the strings (deepseek_v3.out) cannot be decoded without its vocabulary;
// they are checked only for being at least one token per word.
class ModelSplits : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelSplits, MatchTheModelsPattern) {
  const fs::path ref = fs::path(COLIBRI_SOURCE_DIR) / "tests/tokenizer/reference/pre_splits.json";
  const fs::path inp = vectors_dir() / "llamacpp-tests.inp";
  if (!fs::exists(inp)) GTEST_SKIP() << "test data absent: " << inp;
  const auto j = nlohmann::json::parse(test::read_file(ref));
  const auto want = j.at(GetParam()).get<std::vector<std::vector<std::string>>>();
  auto inputs = test::read_suite_inputs(inp);
  ASSERT_EQ(inputs.size(), 46u);
  for (const auto& e : j.at("extra")) inputs.push_back(e.get<std::string>());
  ASSERT_EQ(want.size(), inputs.size());
  const PreTokenizerSpec* spec = find_pre_tokenizer(GetParam());
  ASSERT_NE(spec, nullptr);
  PreTokenizer p(*spec);
  int matched = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto got = cut(p, inputs[i]);
    if (got == want[i]) ++matched;
    else ADD_FAILURE() << "case " << i << "\n  want " << joined(want[i]) << "\n  got  " << joined(got);
  }
  EXPECT_EQ(matched, static_cast<int>(inputs.size()));

  if (std::string(GetParam()) == "deepseek-v3" && fs::exists(vectors_dir() / "deepseek_v3.out")) {
    const auto ids = test::read_suite_outputs(vectors_dir() / "deepseek_v3.out");
    ASSERT_EQ(ids.size(), 46u);
    for (size_t i = 0; i < ids.size(); ++i)
      EXPECT_GE(ids[i].size(), want[i].size()) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, ModelSplits,
                         ::testing::Values("deepseek-v3", "kimi-k2", "gpt-4o"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The tokenizer.ggml.pre names these families' GGUF files carry, and the
// flags llama.cpp gives them: no space cleaning on decode, no default BOS for
// glm4.
TEST(FrontierFamilies, PreTokenizerNamesAndFlags) {
  for (const char* name : {"deepseek-v3", "kimi-k2", "gpt-4o", "glm4", "chatglm-bpe"}) {
    const PreTokenizerSpec* s = find_pre_tokenizer(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->clean_spaces, std::string_view(name) == "glm4" ||
                                   std::string_view(name) == "chatglm-bpe")
        << name;
  }
  EXPECT_TRUE(find_pre_tokenizer("glm4")->no_bos);
  // Tencent's Hunyuan dense models and JoyAI share DeepSeek-V3's pattern.
  EXPECT_EQ(find_pre_tokenizer("hunyuan-dense"), find_pre_tokenizer("deepseek-v3"));
}

}  // namespace
}  // namespace colibri
