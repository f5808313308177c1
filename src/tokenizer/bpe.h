// Byte-level BPE merging of one pre-tokenized word (llama.cpp's
// llm_tokenizer_bpe_session): start from the word's characters, repeatedly
// merge the adjacent pair with the lowest merge rank (leftmost on ties) until
// no pair has a rank, then look the pieces up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace colibri {

class BpeMerger {
 public:
  explicit BpeMerger(const Vocab& vocab) : vocab_(vocab) {}

  // `word` is in the byte-level alphabet (see byte_level.h). A final piece
  // that is not a token falls back to its single bytes that are tokens; the
  // rest is dropped, as in llama.cpp (it happens only in cut vocabularies).
  void encode_word(std::string_view word, std::vector<int32_t>& out);

 private:
  struct Symbol {
    int32_t prev, next;  // neighbours in the live chain, -1 at the ends
    uint32_t offset, n;  // bytes of the word; n == 0 once merged into its left neighbour
  };
  struct Bigram {
    int32_t left, right;
    int32_t rank;
    uint32_t size;  // bytes of left + right when the pair was queued
  };
  void try_add(std::string_view word, int32_t left, int32_t right);

  const Vocab& vocab_;
  // Scratch reused across words.
  std::vector<Symbol> symbols_;
  std::vector<Bigram> heap_;
  std::string key_;
};

}  // namespace colibri
