// SentencePiece BPE as llama.cpp runs it (llm_tokenizer_spm_session): start
// from UTF-8 characters, repeatedly merge the adjacent pair whose union is the
// vocabulary token with the highest score (leftmost on ties), then emit each
// piece as its token, or byte by byte as <0xXX> tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace colibri {

class SpmMerger {
 public:
  explicit SpmMerger(const Vocab& vocab) : vocab_(vocab) {}

  // `text` already has spaces replaced by U+2581. Characters are cut by their
  // lead byte alone, so ill-formed UTF-8 reaches the byte fallback instead of
  // failing.
  void encode(std::string_view text, std::vector<int32_t>& out);

 private:
  struct Symbol {
    int32_t prev, next;
    uint32_t offset, n;  // n == 0 once merged into its left neighbour
  };
  struct Bigram {
    int32_t left, right;
    float score;
    uint32_t size;
  };
  void try_add(std::string_view text, int32_t left, int32_t right);

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::vector<Bigram> heap_;
};

}  // namespace colibri
