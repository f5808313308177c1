// tiktoken tokenizers: models that ship a tiktoken BPE file (tiktoken.model,
// *.tiktoken) and a Python tokenizer class (Kimi-K2's TikTokenTokenizer in
// tokenization_kimi.py) instead of tokenizer.json. They become the
// tokenizer.json Hugging Face's own tiktoken conversion builds, which
// import_hf_tokenizer (hf_tokenizer.h) then writes as GGUF keys:
//
//  - the vocabulary is the BPE file's tokens, id = rank, in GPT-2's byte-level
//    alphabet (byte_level.h);
//  - the merges are recovered from the ranks: a token's merge is the two
//    parts tiktoken's BPE leaves when it runs on the token's bytes with only
//    lower ranks (as llama.cpp's converter does for Kimi-K2). Every token must
//    recover to two parts; then merging by rank rebuilds any piece that is a
//    token, which tiktoken looks up whole, so the two agree;
//  - the pre-tokenizer is the module's split regex (pat_str or PAT_STR), read
//    from its source without running it: string literals, adjacent ones
//    joined, or "sep".join([...]) of them;
//  - ids from the file's size up to size + num_reserved_special_tokens (the
//    module's class constant, 0 when absent) are special tokens, named by
//    tokenizer_config.json's added_tokens_decoder or "<|reserved_token_<id>|>"
//    as tokenization_kimi.py names them; other added_tokens_decoder entries
//    are added tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colibri {

struct TiktokenFiles {
  std::string_view ranks;   // the BPE file: "<base64 token> <rank>" per line
  std::string ranks_name;   // its file name, for errors
  std::string_view module;  // the tokenizer module's Python source
  std::string module_name;  // its file name, for errors
  const nlohmann::json* tokenizer_config = nullptr;  // added_tokens_decoder (optional)
};

// The tokenizer.json import_hf_tokenizer reads for these files. Throws Error,
// prefixed with `where` and the file, for a malformed BPE file, a token no
// merge of lower ranks makes, a module without a readable split regex, or a
// malformed added_tokens_decoder.
nlohmann::json tiktoken_tokenizer_json(const TiktokenFiles& files, const std::string& where);

// The BPE file's tokens (raw bytes) by rank. Ranks must be 0..n-1, each once,
// tokens distinct, every single byte a token. `where` names the file.
std::vector<std::string> read_tiktoken_ranks(std::string_view text, const std::string& where);

// For each token of two bytes or more, in rank order: the ranks of the two
// tokens whose merge makes it.
std::vector<std::pair<int32_t, int32_t>> recover_tiktoken_merges(
    const std::vector<std::string>& tokens, const std::string& where);

// The value a Python source assigns to `name` (`name = ...` at the start of a
// line, any indentation, optionally annotated): string literals (r/u
// prefixes, single or triple quotes), adjacent ones concatenated, in
// parentheses or not, or "sep".join([...]) / "sep".join((...)) of such. The
// first such assignment counts (a keyword argument `name=self.name,` is
// passed over). nullopt when no line assigns name; Error (naming `where` and
// the line of the first) when no assignment's value is of that form.
std::optional<std::string> python_string_constant(std::string_view source, std::string_view name,
                                                  const std::string& where);

// The integer literal a Python source assigns to `name`, as above.
std::optional<int64_t> python_int_constant(std::string_view source, std::string_view name,
                                           const std::string& where);

}  // namespace colibri
