// UTF-8 helpers against the Unicode standard's definitions (Table 3-7,
// well-formed byte sequences) and GPT-2's byte alphabet against GPT-2's own
// vocabulary.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/gguf.h"
#include "test_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace colibri {
namespace {

TEST(Utf8, DecodesWellFormedSequences) {
  uint32_t cp = 0;
  EXPECT_EQ(utf8_decode("A", 0, &cp), 1u);
  EXPECT_EQ(cp, 0x41u);
  EXPECT_EQ(utf8_decode("\xC3\xA9", 0, &cp), 2u);  // é
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(utf8_decode("\xE2\x82\xAC", 0, &cp), 3u);  // €
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(utf8_decode("\xF0\x9F\xA6\x99", 0, &cp), 4u);  // 🦙
  EXPECT_EQ(cp, 0x1F999u);
  EXPECT_EQ(utf8_decode("\xF4\x8F\xBF\xBF", 0, &cp), 4u);  // U+10FFFF
  EXPECT_EQ(cp, 0x10FFFFu);
}

TEST(Utf8, RejectsIllFormedSequences) {
  uint32_t cp = 0;
  for (const char* bad : {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80",
                          "\xF0\x80\x80\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF",
                          "\xE2\x82", "\xC3"})
    EXPECT_EQ(utf8_decode(bad, 0, &cp), 0u) << test::escaped(bad);
}

TEST(Utf8, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(utf8_sanitize("plain \xC3\xA9"), "plain \xC3\xA9");
  // A truncated 3-byte sequence is two bad bytes.
  EXPECT_EQ(utf8_sanitize("a\xE4\xB8" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_sanitize("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(utf8_is_valid(utf8_sanitize("\xC0\x80\xF4\x90\x80\x80z")));
}

TEST(Utf8, CompletePrefixWaitsOnlyForFinishableSequences) {
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xB8"), 2u);          // 你 lacks its last byte
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\xA6"), 2u);      // 🦙 lacks its last byte
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\xA6\x99"), 6u);  // complete
  EXPECT_EQ(utf8_complete_prefix("ab\x80"), 3u);              // can never complete
  EXPECT_EQ(utf8_complete_prefix("ab\xE0\x80"), 4u);          // overlong: never valid
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

// GPT-2's encoder.json lists the 256 byte symbols first: the 188 printable
// bytes in byte order, then the 68 remapped ones in byte order.
TEST(ByteLevel, MatchesGpt2VocabularyOrder) {
  const auto p = test::vocab_dir() / "ggml-vocab-gpt-2.gguf";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "test data absent: " << p;
  auto f = GgufFile::open(p.string());
  auto tok = Tokenizer::from_gguf(*f);
  int32_t printable = 0, remapped = 188;
  for (int b = 0; b < 256; ++b) {
    const bool is_printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int32_t want = is_printable ? printable++ : remapped++;
    EXPECT_EQ(tok->find_token(byte_to_symbol(static_cast<uint8_t>(b))), want) << "byte " << b;
    uint32_t cp = 0;
    ASSERT_GT(utf8_decode(byte_to_symbol(static_cast<uint8_t>(b)), 0, &cp), 0u);
    EXPECT_EQ(symbol_to_byte(cp), b);
    EXPECT_EQ(tok->token_to_piece(want), std::string(1, static_cast<char>(b)));
  }
  EXPECT_EQ(byte_to_symbol(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(symbol_to_byte(0x4E00), -1);
}

}  // namespace
}  // namespace colibri
