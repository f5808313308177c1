// Text <-> token ids for the vocabularies GGUF files carry, matching
// llama.cpp's llama_tokenize / llama_detokenize id for id.
//
//   encode:  text -> split out special-token texts -> per text fragment:
//              BPE: repair UTF-8 -> pre-tokenizer regexes -> byte-level
//                   alphabet -> merges by rank          (pretokenizer.h, bpe.h)
//              SPM: space prefix, ' ' -> U+2581 -> merges by score (spm.h)
//   decode:  ids -> pieces (the bytes each token stands for) -> concatenation,
//            with llama.cpp's two adjustments (see decode()).
//
// The vocabulary is read from tokenizer.ggml.* (vocab.h). Supported types:
// "gpt2" (byte-level BPE, with the pre-tokenizers in pretokenizer.cpp) and
// "llama" (SentencePiece); "bert", "t5" and others are refused at load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace colibri {

class GgufFile;
class PreTokenizer;
class BpeModel;

class Tokenizer {
 public:
  // Reads and validates the vocabulary; the file may be closed afterwards.
  // Throws Error naming the offending key.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);
  ~Tokenizer();

  // add_special: BOS (and EOS) where the vocabulary adds them
  // (tokenizer.ggml.add_bos_token / add_eos_token). parse_special: texts of
  // control tokens such as <|im_start|> in `text` become those tokens.
  // User-defined tokens are always split out, as in llama.cpp.
  // Invalid UTF-8 never fails: BPE sees each bad byte as U+FFFD (as llama.cpp
  // does); SPM passes the bytes to its <0xXX> byte fallback.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The raw bytes a token stands for (SPM: U+2581 -> space, <0xAB> -> byte
  // 0xAB; BPE: byte-level alphabet -> bytes). Control and unknown tokens give
  // their text when render_special, else "". Throws Error for an id out of range.
  std::string token_to_piece(int32_t id, bool render_special = true) const;

  // The pieces of `ids` concatenated, as llama_detokenize(remove_special =
  // false) gives them:
  //  - where the vocabulary adds a space prefix (SPM), one leading space is
  //    dropped from the first token's piece, so decode(encode(s)) == s;
  //    a BOS first (rendered or not) stops this, as in llama.cpp;
  //  - with clean_spaces, vocabularies that ask for it (most BPE
  //    pre-tokenizers, not qwen2/deepseek/command-r/gpt-4o) lose the space
  //    before . , ! ? and before 's 'm 're 've, and " ' " becomes "'"; this
  //    is Hugging Face's clean_up_tokenization_spaces and does not round-trip.
  // The result may end inside a UTF-8 sequence or hold invalid bytes (see
  // utf8_sanitize). Throws Error for an id out of range.
  std::string decode(std::span<const int32_t> ids, bool render_special = true,
                     bool clean_spaces = true) const;

  // Streaming output: appends token `id`'s piece to `pending` and moves
  // everything but an unfinished UTF-8 sequence at its end into `out`, with
  // ill-formed bytes replaced by U+FFFD. No space is dropped here.
  void append_piece(int32_t id, std::string& pending, std::string& out,
                    bool render_special = true) const;
  // At the end of a stream: whatever is left in `pending`, sanitized, to `out`.
  static void flush_pending(std::string& pending, std::string& out);

  int32_t n_vocab() const { return vocab_.n_vocab(); }
  int32_t bos() const { return vocab_.bos; }  // -1 if none
  int32_t eos() const { return vocab_.eos; }  // -1 if none
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  // End of generation: EOS, EOT, EOM, and the texts llama.cpp treats as such
  // (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return vocab_.eog; }
  bool is_control(int32_t id) const;

  std::optional<int32_t> find_token(std::string_view text) const;
  // The token's text as stored in the vocabulary. Throws Error when out of range.
  std::string_view token_text(int32_t id) const;

  VocabKind kind() const { return vocab_.kind; }
  const std::string& model_name() const { return vocab_.model; }  // tokenizer.ggml.model
  const std::string& pre_name() const { return vocab_.pre; }      // tokenizer.ggml.pre
  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab);
  void check_id(int32_t id, const char* what) const;

  Vocab vocab_;
  std::unique_ptr<PreTokenizer> pre_;  // BPE only
  std::unique_ptr<BpeModel> bpe_;      // BPE only
  std::vector<std::string> pieces_;    // (n_vocab) token_to_piece(id, true)
};

}  // namespace colibri
