// A tokenizer vocabulary as a GGUF file describes it (tokenizer.ggml.*), read
// and validated the way llama.cpp's llama_vocab::impl::load reads it, so that
// ids, token types and special tokens agree with llama.cpp's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace colibri {

class GgufFile;
struct PreTokenizerSpec;

enum class VocabKind {
  kBpe,  // tokenizer.ggml.model "gpt2": byte-level BPE with merges
  kSpm,  // tokenizer.ggml.model "llama": SentencePiece BPE driven by scores
};

// Token attributes, bit flags. The first six come from tokenizer.ggml.token_type
// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte, else
// undefined); llama.cpp then adjusts a few by token text (end-of-generation
// and fill-in-the-middle tokens become control, for example).
enum TokenAttr : uint16_t {
  kAttrNormal = 1 << 0,
  kAttrUnknown = 1 << 1,
  kAttrControl = 1 << 2,
  kAttrUserDefined = 1 << 3,
  kAttrUnused = 1 << 4,
  kAttrByte = 1 << 5,
  kAttrUndefined = 1 << 6,
  kAttrLstrip = 1 << 7,  // a matched special token eats the whitespace on its left
  kAttrRstrip = 1 << 8,  // ... and on its right
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  VocabKind kind = VocabKind::kBpe;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre, "" when absent
  const PreTokenizerSpec* pre_spec = nullptr;  // BPE only

  std::vector<std::string> text;   // (n_vocab) token text as stored
  std::vector<float> score;        // (n_vocab) SPM merge priority
  std::vector<uint16_t> attr;      // (n_vocab) TokenAttr bits
  std::vector<int16_t> byte_value; // (n_vocab) byte of a <0xXX> byte token, else -1
  StringToId id_of;                // text -> id
  std::vector<std::string> merges; // BPE: "left right", by rank

  int32_t bos = -1, eos = -1, unk = -1, pad = -1, sep = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: a space before the text and after each special token
  bool ignore_merges = false;
  bool clean_spaces = false;

  // SPM byte fallback: <0xXX>, else the one-byte text, else unknown (-1 if
  // none; llama.cpp fails there).
  std::array<int32_t, 256> byte_token{};

  std::vector<int32_t> eog;               // end-of-generation ids, ascending
  std::vector<int32_t> special_by_length; // control, user-defined and unknown ids, longest text first

  int32_t n_vocab() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const {
    auto it = id_of.find(s);
    return it == id_of.end() ? -1 : it->second;
  }
  bool has(int32_t id, uint16_t a) const { return (attr[id] & a) != 0; }
};

// Reads tokenizer.ggml.* from f. Throws Error naming the key for a vocabulary
// type this build does not tokenize (bert, t5, ...), an unknown pre-tokenizer,
// arrays of unequal length, ids out of range and duplicate tokens.
Vocab load_vocab(const GgufFile& f);

}  // namespace colibri
