// A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) as GGUF
// tokenizer metadata: the tokenizer.ggml.* keys (and tokenizer.chat_template)
// llama.cpp's convert_hf_to_gguf.py writes, chosen so that Tokenizer::from_gguf
// tokenizes as the model's own tokenizer does. Two kinds of model.type "BPE"
// are imported:
//
//  - byte-level BPE (a ByteLevel pre-tokenizer: GPT-2, Llama-3, Qwen, OLMoE,
//    DeepSeek-V3, ...): tokenizer.ggml.model "gpt2" with the merges, and as
//    tokenizer.ggml.pre the known pre-tokenizer (pretokenizer.h) whose regex
//    list is the file's Split/Digits/ByteLevel steps and whose flags agree
//    with model.ignore_merges and clean_up_tokenization_spaces;
//  - SentencePiece-style BPE (Llama-2, Mistral, Mixtral: a Metaspace
//    pre-tokenizer or a Prepend/Replace "▁" normalizer, <0xXX> byte tokens):
//    tokenizer.ggml.model "llama" with scores. llama.cpp's SPM merges the
//    adjacent pair whose merged token scores highest, Hugging Face the pair of
//    lowest merge rank, so a token made by a merge scores -(rank of the first
//    merge that makes it) and every other token scores below all of those.
//
// What cannot be represented is refused with an Error naming the file and the
// field: other model types (WordPiece, Unigram, WordLevel), normalizers other
// than NFC (which, as in llama.cpp, is not applied), pre-tokenizers with no
// known equivalent, ByteLevel add_prefix_space, Metaspace split, BPE dropout
// and subword prefixes/suffixes, ids out of range or given twice.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace colibri {

class GgufWriter;

struct HfTokenizerFiles {
  const nlohmann::json* tokenizer = nullptr;         // tokenizer.json (required)
  const nlohmann::json* tokenizer_config = nullptr;  // tokenizer_config.json (optional)
  const nlohmann::json* config =
      nullptr;  // config.json: vocab_size, bos/eos/pad_token_id fallbacks
  const nlohmann::json* generation_config =
      nullptr;  // generation_config.json: eos_token_id fallback
  // chat_template.jinja, when the folder has one: used when tokenizer_config
  // has no chat_template (as llama.cpp does).
  const std::string* chat_template = nullptr;
  // What errors call the tokenizer: "tokenizer.json", or the files it was
  // built from (tiktoken.h).
  std::string tokenizer_name = "tokenizer.json";
};

// Writes tokenizer.ggml.model, .pre, .tokens, .token_type, .merges (gpt2) or
// .scores (llama), .bos/.eos/.unknown/.padding_token_id where known,
// .add_bos_token/.add_eos_token where stated (tokenizer_config, else the
// post_processor's template), .add_space_prefix (llama) and
// tokenizer.chat_template (a string, or the "default" of a list of
// {name, template}). Tokens are model.vocab plus added_tokens by id, up to
// config.json's vocab_size when given; ids nothing names become "[PAD<id>]"
// (unused), as llama.cpp writes them. Throws Error, prefixed with `where`
// (e.g. the model folder), for what it cannot represent.
void import_hf_tokenizer(const HfTokenizerFiles& files, GgufWriter& out, const std::string& where);

}  // namespace colibri
