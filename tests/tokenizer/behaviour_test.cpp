// Special tokens, end of generation, hostile input and vocabulary validation.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "base/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> load_suite_vocab(const std::string& name) {
  const fs::path p = test::vocab_dir() / ("ggml-vocab-" + name + ".gguf");
  if (!fs::exists(p)) return nullptr;
  auto f = GgufFile::open(p.string());
  return Tokenizer::from_gguf(*f);
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  auto tok = load_suite_vocab("qwen2");
  if (!tok) GTEST_SKIP() << "test data absent: qwen2 vocabulary";
  const int32_t start = *tok->find_token("<|im_start|>");
  const int32_t end = *tok->find_token("<|im_end|>");
  const std::string text = "<|im_start|>user\nHello<|im_end|>\n";
  EXPECT_EQ(tok->encode(text, false, true),
            concat({{start}, tok->encode("user\nHello", false, false), {end},
                    tok->encode("\n", false, false)}));
  const auto plain = tok->encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), start), 0);
  EXPECT_EQ(tok->decode(plain), text);
  // Rendering: control tokens show their text unless asked not to.
  const auto ids = tok->encode(text, false, true);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->decode(ids, /*render_special=*/false), "user\nHello\n");
}

TEST(SpecialTokens, LongestMatchWins) {
  // GPT-NeoX vocabularies (mpt) have user-defined tokens that are prefixes of
  // each other (runs of spaces "  ", "   ", ...): the longest is taken first,
  // and user-defined tokens are split out even without parse_special.
  auto tok = load_suite_vocab("mpt");
  if (!tok) GTEST_SKIP() << "test data absent: mpt vocabulary";
  std::optional<int32_t> two = tok->find_token("  "), three = tok->find_token("   ");
  ASSERT_TRUE(two && three);
  EXPECT_EQ(tok->encode("a   b", false, false), concat({tok->encode("a", false, false), {*three},
                                                        tok->encode("b", false, false)}));
}

TEST(SpecialTokens, Phi3SpecialTokensEatTheWhitespaceAfterThem) {
  auto tok = load_suite_vocab("phi-3");
  if (!tok) GTEST_SKIP() << "test data absent: phi-3 vocabulary";
  const int32_t user = *tok->find_token("<|user|>"), end = *tok->find_token("<|end|>"),
                assistant = *tok->find_token("<|assistant|>");
  EXPECT_EQ(tok->encode("<|user|>\nHello<|end|>\n<|assistant|>", false, true),
            concat({{user}, tok->encode("Hello", false, false), {end, assistant}}));
  EXPECT_EQ(tok->encode("<|user|>\nHello", true, true),
            concat({{tok->bos(), user}, tok->encode("Hello", false, false)}));
}

TEST(EndOfGeneration, FollowsLlamaCppRules) {
  if (auto tok = load_suite_vocab("qwen2")) {
    EXPECT_TRUE(tok->is_eog(*tok->find_token("<|im_end|>")));
    EXPECT_TRUE(tok->is_eog(*tok->find_token("<|endoftext|>")));
    EXPECT_FALSE(tok->is_eog(*tok->find_token("<|im_start|>")));
    EXPECT_FALSE(tok->is_eog(*tok->find_token("Hello")));
  }
  if (auto tok = load_suite_vocab("phi-3")) {
    EXPECT_TRUE(tok->is_eog(*tok->find_token("<|end|>")));
    EXPECT_TRUE(tok->is_eog(tok->eos()));
    EXPECT_FALSE(tok->is_eog(tok->bos()));
  }
}

TEST(Decode, RejectsIdsOutOfRange) {
  auto tok = load_suite_vocab("llama-spm");
  if (!tok) GTEST_SKIP() << "test data absent: llama-spm vocabulary";
  const std::vector<int32_t> bad = {1, tok->n_vocab()};
  EXPECT_THROW(tok->decode(bad), Error);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(tok->decode(negative), Error);
  EXPECT_THROW(tok->token_to_piece(tok->n_vocab()), Error);
  EXPECT_THROW(tok->token_text(-5), Error);
}

TEST(Decode, SpmDropsOneLeadingSpaceUnlessBosComesFirst) {
  auto tok = load_suite_vocab("llama-spm");
  if (!tok) GTEST_SKIP() << "test data absent: llama-spm vocabulary";
  const auto ids = tok->encode("Hello world", false, false);
  EXPECT_EQ(tok->token_to_piece(ids[0]), " Hello");
  EXPECT_EQ(tok->decode(ids), "Hello world");
  const auto with_bos = tok->encode("Hello world", true, false);
  ASSERT_EQ(with_bos.front(), tok->bos());
  EXPECT_EQ(tok->decode(with_bos), "<s> Hello world");
  EXPECT_EQ(tok->decode(with_bos, false), " Hello world");
}

TEST(Decode, CleanSpacesOnlyWhereTheVocabularyAsks) {
  auto gpt2 = load_suite_vocab("gpt-2");
  auto qwen2 = load_suite_vocab("qwen2");
  if (!gpt2 || !qwen2) GTEST_SKIP() << "test data absent: gpt-2/qwen2 vocabularies";
  const std::string text = "Hi , you 're here . Don 't go !";
  EXPECT_EQ(gpt2->decode(gpt2->encode(text, false, false)), "Hi, you're here. Don 't go!");
  EXPECT_EQ(gpt2->decode(gpt2->encode(text, false, false), true, false), text);
  EXPECT_EQ(qwen2->decode(qwen2->encode(text, false, false)), text);
}

// Random bytes, valid or not, never break the tokenizers. BPE sees invalid
// bytes as U+FFFD, so decoding gives the sanitized text; SPM keeps them as
// <0xXX> tokens (but may swallow the next characters into one: it cuts
// characters by lead byte alone, as llama.cpp does).
TEST(HostileInput, RandomBytesEncodeAndDecode) {
  auto bpe = load_suite_vocab("qwen2");
  auto spm = load_suite_vocab("llama-spm");
  if (!bpe || !spm) GTEST_SKIP() << "test data absent: qwen2/llama-spm vocabularies";
  std::mt19937 rng(1234);
  const std::string alphabet[] = {"a", "Z", " ", "\n", "\t", "1", "'s", "\xC3\xA9", "\xE4\xBD\xA0",
                                  "\xF0\x9F\xA6\x99", "\xE2\x96\x81", "<|im_end|>", "<s>"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0)
        s += static_cast<char>(rng() & 0xFF);
      else
        s += alphabet[rng() % std::size(alphabet)];
    }
    for (bool special : {false, true}) {
      const auto b = bpe->encode(s, true, special);
      EXPECT_EQ(test::escaped(bpe->decode(b, true, false)), test::escaped(utf8_sanitize(s)));
      const auto p = spm->encode(s, false, special);
      for (int32_t id : p) ASSERT_TRUE(id >= 0 && id < spm->n_vocab());
      // SPM cannot give back a literal U+2581 (its space marker), and puts a
      // space prefix after each parsed special token.
      if (utf8_is_valid(s) && !special && s.find("\xE2\x96\x81") == std::string::npos) {
        EXPECT_EQ(test::escaped(spm->decode(p, true, false)), test::escaped(s));
      }
    }
  }
}

TEST(HostileInput, SpmKeepsInvalidBytesAsByteTokens) {
  auto spm = load_suite_vocab("llama-spm");
  if (!spm) GTEST_SKIP() << "test data absent: llama-spm vocabulary";
  const auto ids = spm->encode("a\xFF" "b\x80", false, false);
  EXPECT_NE(std::find(ids.begin(), ids.end(), *spm->find_token("<0xFF>")), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), *spm->find_token("<0x80>")), ids.end());
  EXPECT_EQ(spm->decode(ids), "a\xFF" "b\x80");
}

// --- validation of crafted vocabularies --------------------------------------

struct Crafted {
  GgufWriter w;
  Crafted(const std::string& model, std::vector<std::string> tokens) {
    w.set_string("tokenizer.ggml.model", model);
    w.set_array_str("tokenizer.ggml.tokens", tokens);
  }
  // Loads the file and returns the error message ("" if it loaded).
  std::string load_error() {
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "crafted.gguf");
    try {
      Tokenizer::from_gguf(*f);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

std::vector<std::string> tiny_bpe_tokens() { return {"a", "b", "ab", "<|endoftext|>"}; }

TEST(Validation, AcceptsAMinimalVocabulary) {
  Crafted c("gpt2", tiny_bpe_tokens());
  c.w.set_string("tokenizer.ggml.pre", "gpt-2");
  c.w.set_array_str("tokenizer.ggml.merges", {"a b"});
  c.w.set_u32("tokenizer.ggml.eos_token_id", 3);
  c.w.set_u32("tokenizer.ggml.bos_token_id", 3);
  EXPECT_EQ(c.load_error(), "");
  const std::vector<uint8_t> bytes = c.w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "crafted.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->encode("abba", false, false), (std::vector<int32_t>{2, 1, 0}));
}

TEST(Validation, NamesTheOffendingKey) {
  struct Case {
    const char* want;  // substrings of the message
    const char* want2;
    std::function<void(Crafted&)> edit;
    std::string model = "gpt2";
  };
  const std::vector<Case> cases = {
      {"tokenizer.ggml.model", "\"t5\"", [](Crafted&) {}, "t5"},
      {"tokenizer.ggml.pre", "\"no-such-pre\"",
       [](Crafted& c) { c.w.set_string("tokenizer.ggml.pre", "no-such-pre"); }},
      {"tokenizer.ggml.merges", "missing", [](Crafted& c) { c.w.set_string("tokenizer.ggml.pre", "gpt-2"); }},
      {"tokenizer.ggml.scores", "4",
       [](Crafted& c) { c.w.set_array_f32("tokenizer.ggml.scores", {0, 0, 0}); }, "llama"},
      {"tokenizer.ggml.token_type", "5",
       [](Crafted& c) { c.w.set_array_i32("tokenizer.ggml.token_type", {1, 1, 1, 1, 1}); }, "llama"},
      {"tokenizer.ggml.bos_token_id", "out of range",
       [](Crafted& c) { c.w.set_u32("tokenizer.ggml.bos_token_id", 4); }, "llama"},
      {"tokenizer.ggml.eos_token_id", "out of range",
       [](Crafted& c) { c.w.set_u32("tokenizer.ggml.eos_token_id", 1000); }, "llama"},
      {"tokenizer.ggml.add_bos_token", "no BOS",
       [](Crafted& c) {
         c.w.set_string("tokenizer.ggml.pre", "chatglm-bpe");
         c.w.set_array_str("tokenizer.ggml.merges", {"a b"});
         c.w.set_bool("tokenizer.ggml.add_bos_token", true);
       }},
      {"tokenizer.ggml.tokens", "repeats",
       [](Crafted& c) { c.w.set_array_str("tokenizer.ggml.tokens", {"a", "b", "a"}); }, "llama"},
      {"tokenizer.ggml.token_type", "<0xHH>",
       [](Crafted& c) { c.w.set_array_i32("tokenizer.ggml.token_type", {1, 6, 1, 1}); }, "llama"},
  };
  for (const Case& k : cases) {
    Crafted c(k.model, tiny_bpe_tokens());
    k.edit(c);
    const std::string msg = c.load_error();
    EXPECT_NE(msg.find(k.want), std::string::npos) << "message: " << msg;
    EXPECT_NE(msg.find(k.want2), std::string::npos) << "message: " << msg;
  }
}

}  // namespace
}  // namespace colibri
