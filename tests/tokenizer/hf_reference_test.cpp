// Tokenizers with no GGUF at hand, checked against the ids their Hugging Face
// tokenizer.json gives (../shared/data/tokenizer-vectors): the GGUF vocabulary
// is built in memory from the model's own tokenizer files (o200k by hand,
// dolma2 by import_hf_tokenizer; more imports in hf_import_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

std::string base64_decode(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = val(c);
    if (v < 0) continue;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

std::string byte_symbols(const std::string& bytes) {
  std::string s;
  append_byte_symbols(bytes, s);
  return s;
}

void expect_suite(const Tokenizer& tok, const std::string& out_name) {
  const fs::path vectors = test::shared_dir() / "data/tokenizer-vectors";
  const auto inputs = test::read_suite_inputs(vectors / "llamacpp-tests.inp");
  const auto outputs = test::read_suite_outputs(vectors / out_name);
  ASSERT_EQ(inputs.size(), outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(tok.encode(inputs[i], false, false), outputs[i])
        << out_name << " case " << i << " \"" << test::escaped(inputs[i]) << "\"";
    EXPECT_EQ(tok.decode(outputs[i], true, false), inputs[i]) << out_name << " case " << i;
  }
}

// GPT-OSS (o200k, pre-tokenizer "gpt-4o") from o200k_base.tiktoken: tokens in
// the byte-level alphabet, and as merges every split of a token into two
// tokens, ranked by the rank of the token they make. tiktoken merges the
// adjacent pair whose union has the lowest rank, so these merges reproduce it.
TEST(HfReference, GptOssFromTiktoken) {
  const fs::path ranks_path = test::shared_dir() / "data/tokenizers/tiktoken/o200k_base.tiktoken";
  const fs::path vectors = test::shared_dir() / "data/tokenizer-vectors";
  if (!fs::exists(ranks_path) || !fs::exists(vectors / "gptoss.out"))
    GTEST_SKIP() << "test data absent: " << ranks_path;

  std::vector<std::string> tokens;  // raw bytes, by rank
  {
    std::istringstream in(test::read_file(ranks_path));
    std::string b64;
    size_t rank;
    while (in >> b64 >> rank) {
      ASSERT_EQ(rank, tokens.size());
      tokens.push_back(base64_decode(b64));
    }
  }
  std::unordered_map<std::string, int32_t> rank_of;
  for (size_t i = 0; i < tokens.size(); ++i) rank_of.emplace(tokens[i], static_cast<int32_t>(i));

  struct Merge {
    int32_t rank, left;
    std::string text;
  };
  std::vector<Merge> merges;
  for (size_t r = 0; r < tokens.size(); ++r) {
    const std::string& t = tokens[r];
    for (size_t cut = 1; cut < t.size(); ++cut) {
      auto l = rank_of.find(t.substr(0, cut)), rt = rank_of.find(t.substr(cut));
      if (l == rank_of.end() || rt == rank_of.end()) continue;
      merges.push_back({static_cast<int32_t>(r), l->second,
                        byte_symbols(l->first) + " " + byte_symbols(rt->first)});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.left < b.left;
  });

  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-4o");
  std::vector<std::string> texts;
  for (const std::string& t : tokens) texts.push_back(byte_symbols(t));
  w.set_array_str("tokenizer.ggml.tokens", texts);
  std::vector<std::string> merge_texts;
  for (const Merge& m : merges) merge_texts.push_back(m.text);
  w.set_array_str("tokenizer.ggml.merges", merge_texts);
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "o200k.gguf");
  auto tok = Tokenizer::from_gguf(*f);

  expect_suite(*tok, "gptoss.out");
}

// OLMoE-0125's dolma2 tokenizer (cl100k's regex, merges applied to every
// word: llama.cpp's "dbrx" pre-tokenizer) imported from its tokenizer.json as
// `colibri convert` imports it; the pre-tokenizer is the importer's choice.
TEST(HfReference, Dolma2FromTokenizerJson) {
  const fs::path json_path = test::shared_dir() / "data/tokenizers/olmoe/allenai_dolma2.json";
  if (!fs::exists(json_path) ||
      !fs::exists(test::shared_dir() / "data/tokenizer-vectors/olmo2-olmoe-0125_dolma2.out"))
    GTEST_SKIP() << "test data absent: " << json_path;
  const auto j = nlohmann::json::parse(test::read_file(json_path));
  HfTokenizerFiles files;
  files.tokenizer = &j;
  GgufWriter w;
  import_hf_tokenizer(files, w, json_path.parent_path().string());
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "dolma2.gguf");
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->pre_name(), "dbrx");
  EXPECT_EQ(tok->n_vocab(), 100278);
  EXPECT_TRUE(tok->is_control(*tok->find_token("<|endoftext|>")));
  expect_suite(*tok, "olmo2-olmoe-0125_dolma2.out");
}

}  // namespace
}  // namespace colibri
