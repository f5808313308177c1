// import_hf_tokenizer: Hugging Face tokenizer.json (+ configs) -> GGUF
// tokenizer metadata. The real files of ../shared/data/tokenizers are imported
// and the resulting GGUF vocabulary must encode the 46 strings of
// llamacpp-tests.inp exactly as the models' own tokenizers did
// (../shared/data/tokenizer-vectors); small hand-written tokenizer.json files
// check the choices (pre-tokenizer, special ids, chat template) and the
// refusals, whose errors must name the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "hf_import_util.h"
#include "test_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* const kSpace = "\xE2\x96\x81";  // U+2581

using test::expect_suite;
using test::Imported;
using test::tokenizers_dir;
using test::vectors_dir;

json read_json(const fs::path& p) {
  return json::parse(test::read_file(p));
}

Imported import(const HfTokenizerFiles& files) { return test::import_tokenizer(files); }

Imported import(const json& tokenizer, const json* tokenizer_config = nullptr,
                const json* config = nullptr) {
  HfTokenizerFiles files;
  files.tokenizer = &tokenizer;
  files.tokenizer_config = tokenizer_config;
  files.config = config;
  return import(files);
}

// The import fails with an Error whose message holds every one of `parts`.
void expect_refused(const HfTokenizerFiles& files, std::initializer_list<std::string> parts) {
  GgufWriter w;
  try {
    import_hf_tokenizer(files, w, "some/folder");
    ADD_FAILURE() << "imported, expected an error mentioning " << *parts.begin();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("some/folder: "), std::string::npos) << msg;
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

void expect_refused(const json& tokenizer, std::initializer_list<std::string> parts,
                    const json* tokenizer_config = nullptr, const json* config = nullptr) {
  HfTokenizerFiles files;
  files.tokenizer = &tokenizer;
  files.tokenizer_config = tokenizer_config;
  files.config = config;
  expect_refused(files, parts);
}

// A byte-level BPE tokenizer.json: the 256 byte symbols (ids 0..255), "he",
// "ll", "hell", "Ġw" made by four merges, and <|endoftext|> (special) at 260.
json tiny_byte_level() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_to_symbol(static_cast<uint8_t>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["\xC4\xA0w"] = 259;
  return {
      {"added_tokens", {{{"id", 260}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", "he ll", "\xC4\xA0 w"}}}},
  };
}

// tiny_byte_level() pre-tokenized by a Sequence of these Split regexes, then
// ByteLevel without its own regex.
json with_splits(std::initializer_list<std::string> regexes) {
  json t = tiny_byte_level();
  json steps = json::array();
  for (const std::string& r : regexes)
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", r}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  return t;
}

const char* const kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// ---- Real tokenizers against their reference ids ----

// OLMoE-0924's GPT-NeoX-style tokenizer: ByteLevel with GPT-2's regex (llama.cpp
// calls the spec "mpt" or "olmo"; colibri writes the canonical name "gpt-2"),
// NFC (not applied), user-defined PII markers and space runs as added tokens.
TEST(HfImport, Olmoe0924EncodesLikeItsTokenizerJson) {
  const fs::path p = tokenizers_dir() / "olmoe/allenai_gpt-neox-olmo-dolma-v1_5.json";
  const std::string out = "olmoe-0924_gpt-neox-olmo-dolma-v1_5.out";
  if (!fs::exists(p) || !fs::exists(vectors_dir() / out)) GTEST_SKIP() << "test data absent: " << p;
  const json j = read_json(p);
  const Imported m = import(j);
  EXPECT_EQ(m.tok->pre_name(), "gpt-2");
  EXPECT_EQ(m.tok->model_name(), "gpt2");
  EXPECT_EQ(m.tok->n_vocab(), 50280);
  const int32_t pii = *m.tok->find_token("|||IP_ADDRESS|||");
  EXPECT_TRUE(m.tok->vocab().has(pii, kAttrUserDefined));
  EXPECT_TRUE(m.tok->is_control(*m.tok->find_token("<|endoftext|>")));
  expect_suite(*m.tok, out);
}

// Mixtral-8x7B's tokenizer.json (Mistral-7B-v0.1's: Metaspace, byte_fallback,
// every split of a token listed as a merge) against SentencePiece's ids for
// its tokenizer.model.
TEST(HfImport, MixtralEncodesLikeSentencePiece) {
  const fs::path dir = tokenizers_dir() / "mixtral";
  const std::string out = "mixtral-8x7b_spm-v1.out";
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(vectors_dir() / out))
    GTEST_SKIP() << "test data absent: " << dir;
  const json j = read_json(dir / "tokenizer.json");
  const json tc = read_json(dir / "tokenizer_config.json");
  const json cfg = read_json(dir / "config.json");
  const Imported m = import(j, &tc, &cfg);
  EXPECT_EQ(m.tok->model_name(), "llama");
  EXPECT_EQ(m.tok->n_vocab(), 32000);
  expect_suite(*m.tok, out);
}

// The same import against mistral-tokenizer-js's 12 cases, which add BOS.
TEST(HfImport, MixtralMatchesMistralTokenizerJs) {
  const fs::path dir = tokenizers_dir() / "mixtral";
  const fs::path cases_path = vectors_dir() / "mistral-tokenizer-js_testcases.json";
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(cases_path))
    GTEST_SKIP() << "test data absent: " << cases_path;
  const json j = read_json(dir / "tokenizer.json");
  const json tc = read_json(dir / "tokenizer_config.json");
  const Imported m = import(j, &tc);
  const json cases = read_json(cases_path);
  ASSERT_EQ(cases.size(), 12u);
  for (const json& c : cases) {
    const std::string text = c.at("text");
    EXPECT_EQ(m.tok->encode(text, true, false), c.at("ids_with_bos").get<std::vector<int32_t>>())
        << "\"" << test::escaped(text) << "\"";
  }
}

TEST(HfImport, MixtralMetadata) {
  const fs::path dir = tokenizers_dir() / "mixtral";
  if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << "test data absent: " << dir;
  const json j = read_json(dir / "tokenizer.json");
  const json tc = read_json(dir / "tokenizer_config.json");
  const Imported m = import(j, &tc);
  const Vocab& v = m.tok->vocab();
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unk, 0);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_TRUE(v.has(0, kAttrUnknown));
  EXPECT_TRUE(v.has(1, kAttrControl));
  EXPECT_TRUE(v.has(2, kAttrControl));
  const int32_t newline = v.find("<0x0A>");
  ASSERT_GE(newline, 0);
  EXPECT_TRUE(v.has(newline, kAttrByte));
  EXPECT_EQ(v.byte_token['\n'], newline);
  // "▁t" is made by merge 0, "er" by merge 2 ("i n" is merge 1); bytes and
  // characters score below every merge.
  EXPECT_EQ(v.score[v.find(std::string(kSpace) + "t")], 0.0f);
  EXPECT_EQ(v.score[v.find("er")], -2.0f);
  const float lowest = -static_cast<float>(j.at("model").at("merges").size());
  EXPECT_EQ(v.score[newline], lowest);
  EXPECT_EQ(v.score[v.find("a")], lowest);
  EXPECT_EQ(m.file->get_string("tokenizer.ggml.pre"), "default");
}

// Why the scores: llama.cpp's own LlamaHfVocab writes -1000 for every token,
// which turns the merge order into leftmost-pair-first.
TEST(HfImport, MixtralNeedsMergeRankScores) {
  const fs::path dir = tokenizers_dir() / "mixtral";
  const std::string out = "mixtral-8x7b_spm-v1.out";
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(vectors_dir() / out))
    GTEST_SKIP() << "test data absent: " << dir;
  const json j = read_json(dir / "tokenizer.json");
  const Imported m = import(j);
  GgufWriter w;
  for (const GgufKV& kv : m.file->metadata()) w.set_value(kv.key, kv.value);
  w.set_array_f32("tokenizer.ggml.scores", std::vector<float>(m.tok->n_vocab(), -1000.0f));
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto f = GgufFile::parse(bytes.data(), bytes.size(), "flat.gguf");
  const auto flat = Tokenizer::from_gguf(*f);
  const auto inputs = test::read_suite_inputs(vectors_dir() / "llamacpp-tests.inp");
  const auto outputs = test::read_suite_outputs(vectors_dir() / out);
  int differ = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    differ += flat->encode(inputs[i], false, false) != outputs[i] ? 1 : 0;
  EXPECT_GE(differ, 10) << "of " << inputs.size();  // 16 of 46 when written
}

// Llama-2's older tokenizer.json form, U+2581 by the normalizer
// (Prepend + Replace) and no pre-tokenizer, imports to the same vocabulary.
TEST(HfImport, MixtralNormalizerFormEncodesTheSame) {
  const fs::path dir = tokenizers_dir() / "mixtral";
  const std::string out = "mixtral-8x7b_spm-v1.out";
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(vectors_dir() / out))
    GTEST_SKIP() << "test data absent: " << dir;
  json j = read_json(dir / "tokenizer.json");
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", kSpace}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}};
  const Imported m = import(j);
  EXPECT_TRUE(m.tok->vocab().add_space_prefix);
  expect_suite(*m.tok, out);
}

// ---- Choices ----

TEST(HfImport, MergesAsPairsWriteTheSameFile) {
  json strings = tiny_byte_level();
  json pairs = strings;
  json list = json::array();
  for (const json& m : strings["model"]["merges"]) {
    const std::string s = m;
    list.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  pairs["model"]["merges"] = list;
  EXPECT_EQ(import(strings).bytes, import(pairs).bytes);
  EXPECT_EQ(import(pairs).tok->encode("hello world", false, false),
            (std::vector<int32_t>{258, 'o', 259, 'o', 'r', 'l', 'd'}));
}

TEST(HfImport, PreTokenizerFromRegexesAndFlags) {
  // Llama-3 and dolma2 share cl100k's regex; model.ignore_merges tells them apart.
  json t = with_splits({kCl100kPattern});
  EXPECT_EQ(import(t).tok->pre_name(), "dbrx");
  t["model"]["ignore_merges"] = true;
  EXPECT_EQ(import(t).tok->pre_name(), "llama3");
  // Dolma2 writes the same as Removed + invert.
  t = with_splits({kCl100kPattern});
  t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  t["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
  EXPECT_EQ(import(t).tok->pre_name(), "dbrx");

  // GPT-2's regex (ByteLevel use_regex): clean_up_tokenization_spaces picks.
  const json gpt2 = tiny_byte_level();
  EXPECT_EQ(import(gpt2).tok->pre_name(), "gpt-2");
  json tc = {{"clean_up_tokenization_spaces", false}};
  EXPECT_EQ(import(gpt2, &tc).tok->pre_name(), "trillion");
  tc["clean_up_tokenization_spaces"] = true;
  EXPECT_EQ(import(gpt2, &tc).tok->pre_name(), "gpt-2");

  // Digits then ByteLevel's regex: StarCoder.
  t = tiny_byte_level();
  t["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  EXPECT_EQ(import(t).tok->pre_name(), "starcoder");

  EXPECT_EQ(
      import(
          with_splits(
              {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}))
          .tok->pre_name(),
      "qwen2");
  // DeepSeek-V3's three Splits, verbatim from its tokenizer.json.
  const json ds = with_splits(
      {R"(\p{N}{1,3})",
       "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
       R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"});
  EXPECT_EQ(import(ds).tok->pre_name(), "deepseek-v3");
}

TEST(HfImport, FlagsThatNoSpecHasAreRefused) {
  json t = tiny_byte_level();
  t["model"]["ignore_merges"] = true;  // no GPT-2-regex spec ignores merges
  expect_refused(t, {"model.ignore_merges", "gpt-2"});
  json tc = {{"clean_up_tokenization_spaces", true}};
  expect_refused(
      with_splits(
          {R"(\p{N}{1,3})",
           "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-"
           "\xE3\x83\xBF]+",
           R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}),
      {"clean_up_tokenization_spaces", "deepseek-v3"}, &tc);
}

TEST(HfImport, UnknownRegexIsQuotedAlone) {
  const std::string re =
      R"(\p{L}+|\p{N}+|[^\p{L}\p{N}]+ and some more text to make it long enough to cut)";
  GgufWriter w;
  const json t = with_splits({re});
  HfTokenizerFiles files;
  files.tokenizer = &t;
  try {
    import_hf_tokenizer(files, w, "some/folder");
    FAIL() << "imported an unknown pre-tokenizer";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(re.substr(0, 40)), std::string::npos) << msg;
    EXPECT_NE(msg.find("pre_tokenizer"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("dbrx"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("llama3"), std::string::npos) << msg;
    EXPECT_LT(msg.size(), 250u) << msg;
  }
}

TEST(HfImport, SpecialTokensFromTokenizerConfig) {
  json t = tiny_byte_level();
  t["added_tokens"].push_back({{"id", 261}, {"content", "<s>"}, {"special", true}});
  t["added_tokens"].push_back({{"id", 262}, {"content", "<pad>"}, {"special", true}});
  const json tc = {{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                   {"eos_token", "<|endoftext|>"},
                   {"pad_token", "<pad>"},
                   {"unk_token", nullptr},
                   {"add_bos_token", true},
                   {"add_eos_token", false},
                   {"chat_template", "{{ messages }}"}};
  const Imported m = import(t, &tc);
  EXPECT_EQ(m.tok->bos(), 261);
  EXPECT_EQ(m.tok->eos(), 260);
  EXPECT_EQ(m.tok->vocab().pad, 262);
  EXPECT_TRUE(m.tok->add_bos());
  EXPECT_FALSE(m.tok->add_eos());
  EXPECT_EQ(m.tok->encode("he", true, false), (std::vector<int32_t>{261, 256}));
  EXPECT_EQ(m.file->get_string("tokenizer.chat_template"), "{{ messages }}");
  EXPECT_FALSE(m.file->find("tokenizer.ggml.unknown_token_id"));
}

TEST(HfImport, SpecialTokensFromConfigAndTemplate) {
  json t = tiny_byte_level();
  t["added_tokens"].push_back({{"id", 261}, {"content", "<s>"}, {"special", true}});
  // No tokenizer_config: config.json's ids, eos as a list (the first is EOS).
  const json cfg = {{"bos_token_id", 261}, {"eos_token_id", {260, 261}}};
  Imported m = import(t, nullptr, &cfg);
  EXPECT_EQ(m.tok->bos(), 261);
  EXPECT_EQ(m.tok->eos(), 260);
  EXPECT_FALSE(m.file->find("tokenizer.ggml.add_bos_token"));

  // generation_config.json's eos when config.json has none.
  const json bos_only = {{"bos_token_id", 261}};
  const json gen = {{"eos_token_id", {260}}};
  HfTokenizerFiles files;
  files.tokenizer = &t;
  files.config = &bos_only;
  files.generation_config = &gen;
  m = import(files);
  EXPECT_EQ(m.tok->eos(), 260);

  // The post-processor's template names BOS and says it is added.
  t["post_processor"] = {{"type", "Sequence"},
                         {"processors",
                          {{{"type", "ByteLevel"}},
                           {{"type", "TemplateProcessing"},
                            {"single",
                             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}}}};
  m = import(t);
  EXPECT_EQ(m.tok->bos(), 261);
  EXPECT_TRUE(m.tok->add_bos());
  EXPECT_FALSE(m.tok->add_eos());

  // Out of range, or a text that is no token: refused, naming the field.
  const json far = {{"eos_token_id", 5000}};
  expect_refused(tiny_byte_level(), {"config.json", "eos_token_id"}, nullptr, &far);
  const json missing = {{"bos_token", "<nope>"}};
  expect_refused(tiny_byte_level(), {"tokenizer_config.json", "bos_token", "<nope>"}, &missing);
  const json add_without = {{"add_bos_token", true}};
  expect_refused(tiny_byte_level(), {"add_bos_token"}, &add_without);
}

TEST(HfImport, ChatTemplateForms) {
  const json t = tiny_byte_level();
  const json named = {{"chat_template",
                       {{{"name", "tool_use"}, {"template", "tools"}},
                        {{"name", "default"}, {"template", "plain"}}}}};
  EXPECT_EQ(import(t, &named).file->get_string("tokenizer.chat_template"), "plain");

  // chat_template.jinja serves when tokenizer_config has none.
  const std::string jinja = "from the jinja file";
  const json empty = json::object();
  HfTokenizerFiles files;
  files.tokenizer = &t;
  files.tokenizer_config = &empty;
  files.chat_template = &jinja;
  EXPECT_EQ(import(files).file->get_string("tokenizer.chat_template"), jinja);
  files.tokenizer_config = &named;
  EXPECT_EQ(import(files).file->get_string("tokenizer.chat_template"), "plain");
}

// config.json's vocab_size (the embedding's rows) pads the vocabulary with
// unused "[PAD<id>]" tokens, as llama.cpp writes them.
TEST(HfImport, GapsFilledUpToConfigVocabSize) {
  json t = tiny_byte_level();
  t["added_tokens"].push_back({{"id", 270}, {"content", "<|im_end|>"}, {"special", true}});
  const json cfg = {{"vocab_size", 300}};
  const Imported m = import(t, nullptr, &cfg);
  EXPECT_EQ(m.tok->n_vocab(), 300);
  EXPECT_EQ(m.tok->token_text(261), "[PAD261]");
  EXPECT_EQ(m.tok->token_text(299), "[PAD299]");
  EXPECT_TRUE(m.tok->vocab().has(261, kAttrUnused));
  EXPECT_EQ(m.tok->token_text(270), "<|im_end|>");
  // Without config.json the ids must run from 0 without gaps.
  expect_refused(t, {"added_tokens", "<|im_end|>", "270", "beyond the vocabulary"});
}

// ---- Refusals ----

TEST(HfImport, MissingVocabRefused) {
  json t = tiny_byte_level();
  t["model"].erase("vocab");
  expect_refused(t, {"tokenizer.json", "model.vocab"});
}

TEST(HfImport, TokenIdBeyondVocabRefused) {
  const json cfg = {{"vocab_size", 259}};
  expect_refused(tiny_byte_level(), {"model.vocab", "beyond the vocabulary", "vocab_size 259"},
                 nullptr, &cfg);
}

TEST(HfImport, DuplicateTokenTextRefused) {
  json t = tiny_byte_level();
  t["added_tokens"].push_back({{"id", 261}, {"content", "he"}, {"special", false}});
  expect_refused(t, {"\"he\"", "256", "261"});
}

TEST(HfImport, TwoTextsForOneIdRefused) {
  json t = tiny_byte_level();
  t["model"]["vocab"]["lo"] = 256;
  expect_refused(t, {"model.vocab", "256"});
  // An added token whose id model.vocab gives to another text.
  t = tiny_byte_level();
  t["added_tokens"].push_back({{"id", 258}, {"content", "<|im_start|>"}, {"special", true}});
  expect_refused(t, {"added_tokens", "<|im_start|>", "258", "\"hell\""});
}

// A merge naming a text that is no token is kept, as llama.cpp keeps it and
// colibri's BPE (bpe.cpp) follows merges through such texts.
TEST(HfImport, MergeNamingNoTokenIsKept) {
  json t = tiny_byte_level();
  t["model"]["merges"].push_back("o x");
  t["model"]["merges"].push_back("ox y");  // "ox" is no token, "oxy" neither
  const Imported m = import(t);
  EXPECT_EQ(m.file->get_string_array("tokenizer.ggml.merges")->size(), 6u);
  EXPECT_EQ(m.tok->encode("hello oxy", false, false),
            (std::vector<int32_t>{258, 'o', ' ', 'o', 'x', 'y'}));
}

TEST(HfImport, MalformedMergeRefused) {
  json t = tiny_byte_level();
  t["model"]["merges"].push_back("hello");
  expect_refused(t, {"model.merges[4]", "hello"});
  t = tiny_byte_level();
  t["model"]["merges"].push_back(json::array({"a"}));
  expect_refused(t, {"model.merges[4]"});
}

TEST(HfImport, OtherModelTypesRefused) {
  json t = tiny_byte_level();
  t["model"]["type"] = "WordPiece";
  expect_refused(t, {"model.type", "WordPiece"});
  t["model"]["type"] = "Unigram";
  expect_refused(t, {"model.type", "Unigram"});
  t["model"].erase("type");
  expect_refused(t, {"model.type"});
}

TEST(HfImport, UnrepresentablePipelinesRefused) {
  json t = tiny_byte_level();
  t["pre_tokenizer"]["add_prefix_space"] = true;
  expect_refused(t, {"pre_tokenizer.add_prefix_space"});

  t = tiny_byte_level();
  t["normalizer"] = {{"type", "Lowercase"}};
  expect_refused(t, {"normalizer", "Lowercase"});

  t = with_splits({kCl100kPattern});
  t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  expect_refused(t, {"pre_tokenizer.pretokenizers[0]", "MergedWithPrevious"});

  t = tiny_byte_level();
  t["pre_tokenizer"] = {{"type", "Whitespace"}};
  t["decoder"] = nullptr;
  expect_refused(t, {"pre_tokenizer", "Whitespace"});

  t = tiny_byte_level();
  t["model"]["dropout"] = 0.1;
  expect_refused(t, {"model.dropout"});

  t = tiny_byte_level();
  t["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", true}};
  t["decoder"] = nullptr;
  expect_refused(t, {"pre_tokenizer.split"});
}

}  // namespace
}  // namespace colibri
