// Byte-level BPE pre-tokenizers: tokenizer.ggml.pre names -> the regexes that
// cut text into words before merging, and the flags that come with each name.
//
// A pre-tokenizer is a list of regexes applied in order, as Hugging Face's
// Sequence of Split(behavior=Isolated) and llama.cpp's unicode_regex_split do:
// each regex cuts every piece left by the previous one into its matches and
// the gaps between them, and both are kept. The regexes run in PCRE2 with
// Unicode properties (UTF + UCP), so \p{L}, \p{N}, \s mean what the model's
// tokenizer.json means; llama.cpp's hand-written splitters for the gpt-2 and
// llama3 patterns and its std::regex category folding are not needed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colibri {

struct PreTokenizerSpec {
  std::string_view name;  // the canonical tokenizer.ggml.pre value
  std::vector<std::string_view> regexes;
  // A word that is itself a token is not merged (llama3-style vocabularies,
  // whose merges cannot rebuild every token).
  bool ignore_merges = false;
  // Detokenizing removes the space before , . ! ? and some contractions, as
  // llama.cpp's clean_spaces (and Hugging Face's clean_up_tokenization_spaces).
  bool clean_spaces = true;
  bool add_bos = false;  // default for tokenizer.ggml.add_bos_token
  bool no_bos = false;   // the vocabulary has no BOS unless the file names one
};

// The spec for a tokenizer.ggml.pre value ("" means llama.cpp's "default"), or
// nullptr for a name this build does not know.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view pre);

// Every name find_pre_tokenizer accepts, for error messages and tests.
std::vector<std::string_view> known_pre_tokenizers();

class PreTokenizer {
 public:
  // Compiles the spec's regexes; throws Error naming the regex on failure.
  explicit PreTokenizer(const PreTokenizerSpec& spec);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Cuts valid UTF-8 `text` into words, appended to `words` as
  // (byte offset, byte length) in text order; together they cover the text.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& words) const;

  const PreTokenizerSpec& spec() const { return spec_; }

 private:
  struct Compiled;
  const PreTokenizerSpec& spec_;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace colibri
