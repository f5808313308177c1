// tiktoken tokenizers (tiktoken.h) -> tokenizer.json -> GGUF keys. The real
// tiktoken files of ../shared/data/tokenizers, with the split regex as their
// Python modules write it, must encode the 46 strings of llamacpp-tests.inp
// as the models' own tokenizers did: qwen.tiktoken as Qwen3's tokenizer.json,
// o200k_base as GPT-OSS's. Kimi-K2's layout (reserved special ids after the
// ranks, added_tokens_decoder names) is checked on cl100k_base's ranks.
#include "tokenizer/tiktoken.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../tiktoken_modules.h"
#include "base/error.h"
#include "hf_import_util.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Loaded {
  std::string ranks;
  test::Imported m;
};

Loaded import_tiktoken(const fs::path& ranks_path, const char* module,
                       const json* tokenizer_config = nullptr, const json* config = nullptr) {
  Loaded l;
  l.ranks = test::read_file(ranks_path);
  TiktokenFiles tk;
  tk.ranks = l.ranks;
  tk.ranks_name = ranks_path.filename().string();
  tk.module = module;
  tk.module_name = "tokenization_test.py";
  tk.tokenizer_config = tokenizer_config;
  const json tok = tiktoken_tokenizer_json(tk, "model");
  HfTokenizerFiles files;
  files.tokenizer = &tok;
  files.tokenizer_config = tokenizer_config;
  files.config = config;
  l.m = test::import_tokenizer(files);
  return l;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- Real tiktoken files against their models' reference ids ----

TEST(Tiktoken, QwenTiktokenEncodesLikeQwen3) {
  const fs::path p = test::tokenizers_dir() / "qwen/qwen.tiktoken";
  if (!fs::exists(p) || !fs::exists(test::vectors_dir() / "qwen3.out"))
    GTEST_SKIP() << "test data absent: " << p;
  const Loaded l = import_tiktoken(p, test::kQwenModule);
  const Tokenizer& tok = *l.m.tok;
  EXPECT_EQ(tok.model_name(), "gpt2");
  EXPECT_EQ(tok.pre_name(), "qwen2");
  EXPECT_EQ(tok.n_vocab(), 151643);
  // Every token but the 256 bytes is one merge.
  EXPECT_EQ(l.m.file->get_string_array("tokenizer.ggml.merges")->size(), 151643u - 256u);
  test::expect_suite(tok, "qwen3.out");
}

TEST(Tiktoken, O200kEncodesLikeGptOss) {
  const fs::path p = test::tokenizers_dir() / "tiktoken/o200k_base.tiktoken";
  if (!fs::exists(p) || !fs::exists(test::vectors_dir() / "gptoss.out"))
    GTEST_SKIP() << "test data absent: " << p;
  const Loaded l = import_tiktoken(p, test::kO200kModule);
  EXPECT_EQ(l.m.tok->pre_name(), "gpt-4o");
  EXPECT_EQ(l.m.tok->n_vocab(), 199998);
  test::expect_suite(*l.m.tok, "gptoss.out");
}

// Kimi-K2's layout on cl100k's ranks: 256 reserved special ids after the
// ranks, named by added_tokens_decoder or <|reserved_token_<id>|>.
TEST(Tiktoken, KimiLayoutAndSplit) {
  const fs::path p = test::tokenizers_dir() / "tiktoken/cl100k_base.tiktoken";
  if (!fs::exists(p)) GTEST_SKIP() << "test data absent: " << p;
  const json cfg = {
      {"added_tokens_decoder",
       {{"100256", {{"content", "[BOS]"}, {"special", true}}},
        {"100257", {{"content", "[EOS]"}, {"special", true}}},
        {"100258", {{"content", "<|im_end|>"}, {"special", true}}}}},
      {"bos_token", "[BOS]"},
      {"eos_token", "<|im_end|>"},
      {"auto_map", {{"AutoTokenizer", {"tokenization_kimi.TikTokenTokenizer", nullptr}}}}};
  const json config = {{"vocab_size", 100256 + 256}};
  const Loaded l = import_tiktoken(p, test::kimi_module().c_str(), &cfg, &config);
  const Tokenizer& tok = *l.m.tok;
  EXPECT_EQ(tok.pre_name(), "kimi-k2");
  EXPECT_EQ(tok.n_vocab(), 100512);
  EXPECT_EQ(tok.bos(), 100256);
  EXPECT_EQ(tok.eos(), 100258);
  EXPECT_EQ(*tok.find_token("[EOS]"), 100257);
  EXPECT_EQ(tok.vocab().text[100259], "<|reserved_token_100259|>");
  EXPECT_EQ(tok.vocab().text[100511], "<|reserved_token_100511|>");
  for (int32_t id : {100256, 100257, 100258, 100259, 100511}) EXPECT_TRUE(tok.is_control(id)) << id;
  EXPECT_FALSE(tok.is_control(100255));

  // Han runs are words of their own (o200k's rule keeps them in the word).
  const std::string han = "\xE4\xBD\xA0\xE5\xA5\xBD";  // 你好
  auto cat = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(tok.encode(han + "world", false, false),
            cat(tok.encode(han, false, false), tok.encode("world", false, false)));
  EXPECT_EQ(tok.encode("12345", false, false),
            cat(tok.encode("123", false, false), tok.encode("45", false, false)));
  const auto ids = tok.encode("[BOS]hi<|im_end|>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 100256);
  EXPECT_EQ(ids.back(), 100258);
  EXPECT_EQ(tok.decode(ids, true, false), "[BOS]hi<|im_end|>");
}

// ---- The BPE file ----

std::string b64(std::string_view s) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= s.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(s[i]) << 16 | static_cast<uint8_t>(s[i + 1]) << 8 |
                       static_cast<uint8_t>(s[i + 2]);
    for (int k = 3; k >= 0; --k) out += a[v >> (6 * k) & 63];
  }
  if (s.size() - i == 1) {
    const uint32_t v = static_cast<uint8_t>(s[i]) << 16;
    out += a[v >> 18 & 63];
    out += a[v >> 12 & 63];
    out += "==";
  } else if (s.size() - i == 2) {
    const uint32_t v = static_cast<uint8_t>(s[i]) << 16 | static_cast<uint8_t>(s[i + 1]) << 8;
    out += a[v >> 18 & 63];
    out += a[v >> 12 & 63];
    out += a[v >> 6 & 63];
    out += '=';
  }
  return out;
}

// The 256 bytes at ranks 0..255, then `more` at 256, 257, ...
std::string ranks_file(const std::vector<std::string>& more) {
  std::string f;
  for (int b = 0; b < 256; ++b)
    f += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  for (size_t i = 0; i < more.size(); ++i) f += b64(more[i]) + " " + std::to_string(256 + i) + "\n";
  return f;
}

TEST(Tiktoken, MergesAreRecoveredByRank) {
  // "ab" then "bc" then "abc": abc's lowest-rank pair is ab, so ab + c.
  const auto tokens = read_tiktoken_ranks(ranks_file({"ab", "bc", "abc", "bcd", "abcd"}), "t");
  ASSERT_EQ(tokens.size(), 261u);
  EXPECT_EQ(tokens[258], "abc");
  const auto merges = recover_tiktoken_merges(tokens, "t");
  using P = std::pair<int32_t, int32_t>;
  ASSERT_EQ(merges.size(), 5u);
  EXPECT_EQ(merges[0], (P{'a', 'b'}));
  EXPECT_EQ(merges[1], (P{'b', 'c'}));
  EXPECT_EQ(merges[2], (P{256, 'c'}));
  EXPECT_EQ(merges[3], (P{257, 'd'}));
  // abcd: ab (256) first, then ab+c (258), then abc+d.
  EXPECT_EQ(merges[4], (P{258, 'd'}));
}

TEST(Tiktoken, MalformedBpeFilesAreRefused) {
  auto err = [](const std::string& text) {
    return error_of([&] { read_tiktoken_ranks(text, "x.tiktoken"); });
  };
  const std::string bytes = ranks_file({});
  EXPECT_NE(err(bytes + "YWI= 300\n").find("no token has rank 256"), std::string::npos);
  EXPECT_NE(err(bytes + "YWI= 255\n").find("line 257: rank 255 is given twice"), std::string::npos);
  EXPECT_NE(err(bytes + "YQ== 256\n").find("repeats rank 97"), std::string::npos);
  EXPECT_NE(err(bytes + "YW*= 256\n").find("line 257: \"YW*=\" is not a base64 token"),
            std::string::npos);
  EXPECT_NE(err(bytes + "YWJ= 256\n").find("is not a base64 token"),
            std::string::npos);  // bits after the end
  EXPECT_NE(err(bytes + "YWI=256\n").find("expected \"<base64 token> <rank>\""), std::string::npos);
  EXPECT_NE(err(bytes + "YWI= -1\n").find("rank \"-1\" is not an integer"), std::string::npos);
  EXPECT_NE(err(bytes + "YWI= 99999999999\n").find("is not an integer below"), std::string::npos);
  EXPECT_NE(err("").find("x.tiktoken: no tokens"), std::string::npos);
  // A byte missing: cut the line of byte 0x41 ('A' is "QQ==").
  std::string no_a = bytes;
  no_a.erase(no_a.find("QQ== 65\n"), 8);
  EXPECT_NE(err(no_a).find("no token has rank 65"), std::string::npos);
  EXPECT_NE(err(no_a + b64("xy") + " 65\n").find("byte 0x41 is no token"), std::string::npos);
  // A token no merge of lower ranks makes.
  const auto tokens = read_tiktoken_ranks(ranks_file({"abc"}), "x.tiktoken");
  EXPECT_NE(error_of([&] {
              recover_tiktoken_merges(tokens, "x.tiktoken");
            }).find("the token of rank 256 (3 bytes) is not the merge of two tokens of lower rank"),
            std::string::npos);
}

// ---- Python constants ----

TEST(Tiktoken, PythonStringConstants) {
  auto get = [](const std::string& src) { return python_string_constant(src, "pat_str", "m.py"); };
  EXPECT_EQ(get("pat_str = r\"\"\"a\\sb|\"c\\\"\"\"\"\n"), "a\\sb|\"c\\\"");
  EXPECT_EQ(get("x = 1\n    pat_str: str = 'a' \"b\"  # comment\n"), "ab");
  EXPECT_EQ(get("pat_str = (\n  r'x'  # one\n  r'|y'\n)\n"), "x|y");
  EXPECT_EQ(get("pat_str = \"|\".join((r'a', ('b' 'c'),  # two\n 'd',))\n"), "a|bc|d");
  EXPECT_EQ(get("pat_str = ''.join([])\n"), "");
  EXPECT_EQ(get("pat_str = '\\\\p{L}\\p{N}\\u00e9\\x41\\n'\n"),
            "\\p{L}\\p{N}\xC3\xA9"
            "A\n");
  EXPECT_EQ(get("pat_str = 'a' \\\n  'b'\n"), "ab");
  EXPECT_EQ(get("pat_strx = 'a'\nif pat_str == 'b': pass\n"), std::nullopt);
  // A keyword argument of the same name is passed over.
  EXPECT_EQ(get("  enc = Encoding(\n    pat_str=self.pat_str,\n  )\npat_str = r'x'\n"), "x");
  EXPECT_EQ(python_int_constant("  num_reserved_special_tokens = 1_024  # ids\n",
                                "num_reserved_special_tokens", "m.py"),
            1024);

  auto err = [&](const std::string& src) { return error_of([&] { get(src); }); };
  EXPECT_NE(
      err("\n\npat_str = make_pattern()\n").find("m.py: pat_str line 3: expected a string literal"),
      std::string::npos);
  EXPECT_NE(err("pat_str = 'a' + b\n").find("not only string literals"), std::string::npos);
  EXPECT_NE(err("pat_str = f'{x}'\n").find("f-string"), std::string::npos);
  EXPECT_NE(err("pat_str = b'x'\n").find("bytes literal"), std::string::npos);
  EXPECT_NE(err("pat_str = r\"\"\"abc").find("not closed"), std::string::npos);
  EXPECT_NE(err("pat_str = 'abc\n'").find("not closed on its line"), std::string::npos);
  EXPECT_NE(err("pat_str = '|'.join(['a' 'b'\n").find("end of the list"), std::string::npos);
  EXPECT_NE(err("pat_str = '|'.join(x)\n").find("list or tuple"), std::string::npos);
  EXPECT_NE(err("pat_str = '\\N{DASH}'\n").find("\\N{...}"), std::string::npos);
  EXPECT_NE(err("pat_str = '\\u12'\n").find("malformed"), std::string::npos);
  EXPECT_NE(error_of([] { python_int_constant("n = 'x'\n", "n", "m.py"); }).find("not an integer"),
            std::string::npos);
}

TEST(Tiktoken, ModuleWithoutARegexIsRefused) {
  const std::string ranks = ranks_file({"ab"});
  TiktokenFiles tk;
  tk.ranks = ranks;
  tk.ranks_name = "tiktoken.model";
  tk.module = "class T:\n    pass\n";
  tk.module_name = "tokenization_x.py";
  EXPECT_NE(error_of([&] {
              tiktoken_tokenizer_json(tk, "dir");
            }).find("dir: tokenization_x.py: no pat_str or PAT_STR assignment"),
            std::string::npos);
  // A regex no known pre-tokenizer has, named as the files it came from.
  tk.module = "PAT_STR = r'\\w+|\\s+'\n";
  const json tok = tiktoken_tokenizer_json(tk, "dir");
  HfTokenizerFiles files;
  files.tokenizer = &tok;
  files.tokenizer_name = "tiktoken.model with tokenization_x.py";
  GgufWriter w;
  const std::string e = error_of([&] { import_hf_tokenizer(files, w, "dir"); });
  EXPECT_NE(
      e.find("dir: tiktoken.model with tokenization_x.py: pre_tokenizer: regex \"\\w+|\\s+\""),
      std::string::npos)
      << e;
  // added_tokens_decoder that is not id -> {content}.
  const json bad = {{"added_tokens_decoder", {{"x1", {{"content", "a"}}}}}};
  tk.tokenizer_config = &bad;
  EXPECT_NE(error_of([&] {
              tiktoken_tokenizer_json(tk, "dir");
            }).find("added_tokens_decoder key \"x1\" is not a token id"),
            std::string::npos);
  const json bad2 = {{"added_tokens_decoder", {{"300", {{"content", 5}}}}}};
  tk.tokenizer_config = &bad2;
  EXPECT_NE(error_of([&] { tiktoken_tokenizer_json(tk, "dir"); }).find("has no string content"),
            std::string::npos);
}

}  // namespace
}  // namespace colibri
