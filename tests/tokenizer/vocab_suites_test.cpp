// llama.cpp's tokenizer suites (../shared/data/vocab): each string tokenized
// without BOS and without parsing special tokens must give exactly the ids
// llama.cpp's test-tokenizer-0 expects (generated from the models' Hugging
// Face tokenizers), and decode must give the string back.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "base/error.h"
#include "formats/gguf.h"
#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using test::escaped;

const std::vector<std::string> kSupportedSuites = {
    "deepseek-coder", "deepseek-llm", "falcon", "gpt-2",   "llama-bpe", "llama-spm",
    "mpt",            "phi-3",        "qwen2",  "refact", "starcoder"};
// Vocabulary types this build refuses at load (bert-bge is WordPiece).
const std::vector<std::string> kRefusedSuites = {"bert-bge"};

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "]";
}

class VocabSuite : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    base_ = test::vocab_dir() / ("ggml-vocab-" + GetParam() + ".gguf");
    if (!fs::exists(base_) || !fs::exists(base_.string() + ".inp"))
      GTEST_SKIP() << "test data absent: " << base_;
    file_ = GgufFile::open(base_.string());
    tok_ = Tokenizer::from_gguf(*file_);
    inputs_ = test::read_suite_inputs(base_.string() + ".inp");
    outputs_ = test::read_suite_outputs(base_.string() + ".out");
    ASSERT_EQ(inputs_.size(), outputs_.size()) << "suite files disagree: " << base_;
  }

  fs::path base_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<std::string> inputs_;
  std::vector<std::vector<int32_t>> outputs_;
};

TEST_P(VocabSuite, EncodesLikeLlamaCpp) {
  int failures = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<int32_t> got = tok_->encode(inputs_[i], false, false);
    if (got != outputs_[i]) {
      ++failures;
      ADD_FAILURE() << GetParam() << " case " << i << " \"" << escaped(inputs_[i]) << "\"\n  want "
                    << ids_str(outputs_[i]) << "\n  got  " << ids_str(got);
    }
  }
  EXPECT_EQ(failures, 0) << "of " << inputs_.size() << " cases";
}

TEST_P(VocabSuite, DecodeRoundTrips) {
  // Every suite vocabulary can represent every suite string: BPE has all 256
  // byte symbols, SPM falls back to <0xXX>. The SPM space prefix added by
  // encode is dropped again by decode.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::vector<int32_t> ids = tok_->encode(inputs_[i], false, false);
    EXPECT_EQ(escaped(tok_->decode(ids, true, /*clean_spaces=*/false)), escaped(inputs_[i]))
        << GetParam() << " case " << i;
  }
}

TEST_P(VocabSuite, ExpectedIdsDecodeToInput) {
  // The reference ids, decoded by us, give the input back: checks the piece of
  // every token the suite uses independently of our encoder.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    EXPECT_EQ(escaped(tok_->decode(outputs_[i], true, false)), escaped(inputs_[i]))
        << GetParam() << " case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocab, VocabSuite, ::testing::ValuesIn(kSupportedSuites),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(VocabSuites, EverySuiteWithAVocabularyIsCovered) {
  if (!fs::exists(test::vocab_dir())) GTEST_SKIP() << "test data absent: " << test::vocab_dir();
  std::set<std::string> known(kSupportedSuites.begin(), kSupportedSuites.end());
  known.insert(kRefusedSuites.begin(), kRefusedSuites.end());
  for (const auto& e : fs::directory_iterator(test::vocab_dir())) {
    const std::string fn = e.path().filename().string();
    if (fn.rfind("ggml-vocab-", 0) != 0 || e.path().extension() != ".inp") continue;
    const std::string gguf = e.path().parent_path() / e.path().stem();  // drop ".inp"
    if (!fs::exists(gguf)) continue;  // large vocabularies ship without their .gguf
    const std::string name = fn.substr(11, fn.size() - 11 - std::string(".gguf.inp").size());
    EXPECT_TRUE(known.count(name)) << "suite " << name << " has a vocabulary but no test";
  }
}

TEST(VocabSuites, WordPieceIsRefusedNamingTheKey) {
  const fs::path p = test::vocab_dir() / "ggml-vocab-bert-bge.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << "test data absent: " << p;
  auto f = GgufFile::open(p.string());
  try {
    Tokenizer::from_gguf(*f);
    FAIL() << "bert vocabulary accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tokenizer.ggml.model"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"bert\""), std::string::npos) << msg;
  }
}

// Vocabularies without a suite still load and round-trip a mixed text.
TEST(VocabSuites, OtherVocabulariesLoadAndRoundTrip) {
  const std::string text = "Hello world! 3.14159 \xE4\xBD\xA0\xE5\xA5\xBD, \xC3\xA9t\xC3\xA9\n\tend";
  for (const char* name : {"baichuan", "gpt-neox"}) {
    const fs::path p = test::vocab_dir() / (std::string("ggml-vocab-") + name + ".gguf");
    if (!fs::exists(p)) GTEST_SKIP() << "test data absent: " << p;
    auto f = GgufFile::open(p.string());
    auto tok = Tokenizer::from_gguf(*f);
    const auto ids = tok->encode(text, false, false);
    EXPECT_FALSE(ids.empty()) << name;
    EXPECT_EQ(escaped(tok->decode(ids, true, false)), escaped(text)) << name;
  }
}

}  // namespace
}  // namespace colibri
