// Pre-tokenizers: every name compiles and cuts text into pieces that cover
// it; a few cuts that the published patterns define.
#include <gtest/gtest.h>

#include "test_data.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace colibri {
namespace {

std::vector<std::string> cut(std::string_view pre, std::string_view text) {
  const PreTokenizerSpec* spec = find_pre_tokenizer(pre);
  EXPECT_NE(spec, nullptr) << pre;
  if (!spec) return {};
  PreTokenizer p(*spec);
  std::vector<std::pair<size_t, size_t>> words;
  p.split(text, words);
  std::vector<std::string> out;
  for (auto [off, len] : words) out.emplace_back(text.substr(off, len));
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizer, EveryNameCompilesAndCoversItsInput) {
  std::vector<std::string> texts = {
      "Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8" "apple 1314151",
      "   \n\n\t x", "", "It'S 3.14 O'Neil\xE2\x80\x99s CamelCaseWORD\xC3\x89t\xC3\xA9 \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE",
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 "
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"};
  const auto suite = test::read_suite_inputs(test::vocab_dir() / "ggml-vocab-qwen2.gguf.inp");
  texts.insert(texts.end(), suite.begin(), suite.end());
  for (std::string_view name : known_pre_tokenizers()) {
    for (const std::string& t : texts) {
      const auto pieces = cut(name, t);
      std::string joined;
      for (const auto& p : pieces) {
        EXPECT_FALSE(p.empty()) << name;
        EXPECT_TRUE(utf8_is_valid(p)) << name << ": a piece splits a character";
        joined += p;
      }
      EXPECT_EQ(joined, t) << name;
    }
  }
  EXPECT_EQ(find_pre_tokenizer("no-such-pre"), nullptr);
  EXPECT_EQ(find_pre_tokenizer(""), find_pre_tokenizer("default"));
}

TEST(PreTokenizer, DigitGrouping) {
  EXPECT_EQ(cut("gpt-2", "a 1234567"), (V{"a", " 1234567"}));
  EXPECT_EQ(cut("llama3", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(cut("qwen2", "123"), (V{"1", "2", "3"}));
  EXPECT_EQ(cut("starcoder", " 123"), (V{" ", "1", "2", "3"}));
  EXPECT_EQ(cut("deepseek-v3", "1234"), (V{"123", "4"}));
  EXPECT_EQ(cut("gpt-4o", "1234"), (V{"123", "4"}));
}

TEST(PreTokenizer, WhitespaceLeavesTheLastSpaceToTheWord) {
  EXPECT_EQ(cut("gpt-2", "a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(cut("llama3", "a\n\n  b"), (V{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(cut("llama3", "x  \n"), (V{"x", "  \n"}));
}

TEST(PreTokenizer, CaseAndContractions) {
  // o200k splits at a lower-to-upper change and keeps contractions on words.
  EXPECT_EQ(cut("gpt-4o", "CamelCase don't"), (V{"Camel", "Case", " don't"}));
  // cl100k-style patterns match contractions case-insensitively, apart.
  EXPECT_EQ(cut("llama3", "DON'T"), (V{"DON", "'T"}));
  // GPT-2's are lower-case only.
  EXPECT_EQ(cut("gpt-2", "DON'T"), (V{"DON", "'", "T"}));
}

TEST(PreTokenizer, HanRunsStandAlone) {
  const std::string han = "\xE4\xBD\xA0\xE5\xA5\xBD";  // 你好
  EXPECT_EQ(cut("kimi-k2", "ab" + han + "cd"), (V{"ab", han, "cd"}));
  EXPECT_EQ(cut("deepseek-v3", "ab" + han), (V{"ab", han}));
}

// Long runs of one character class are one or many pieces, but never an
// error: the regex engine must not run out of stack on a 100k-letter word.
TEST(PreTokenizer, LongRunsDoNotExhaustTheMatcher) {
  for (std::string_view unit : {"a", "A", " ", "1", "!", "\n", "\xC3\xA9", "\xE4\xBD\xA0"}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += unit;
    text += "x";
    for (std::string_view name : known_pre_tokenizers()) {
      std::vector<std::string> pieces;
      ASSERT_NO_THROW(pieces = cut(name, text)) << name << " on a run of " << test::escaped(std::string(unit));
      size_t total = 0;
      for (const auto& p : pieces) total += p.size();
      EXPECT_EQ(total, text.size()) << name;
    }
  }
}

}  // namespace
}  // namespace colibri
