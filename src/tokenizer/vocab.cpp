#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>
#include <optional>

#include "base/error.h"
#include "formats/gguf.h"
#include "tokenizer/pretokenizer.h"

namespace colibri {

namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kPreKey = "tokenizer.ggml.pre";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";

// Token texts llama.cpp recognises whatever the file says (llama-vocab.cpp):
// they end generation, and are treated as control tokens.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["};

// Fill-in-the-middle markers, also made control tokens; the pad, repo and
// file-separator ones end generation.
constexpr std::string_view kFimOtherTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                             "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// gpt-oss's harmony markers are always rendered and always split out.
constexpr std::string_view kHarmonyTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                              "<|constrain|>"};

template <size_t N>
bool in(std::string_view s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

uint16_t attr_of_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, else -1.
int parse_byte_token(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  const int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void read_tokens(const GgufFile& f, Vocab& v) {
  const auto* tokens = f.get_string_array(kTokensKey);
  CLB_CHECK(tokens, "%s: key %s is missing", f.name().c_str(), kTokensKey);
  CLB_CHECK(!tokens->empty() && tokens->size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
            "%s: key %s: expected 1 to 2^31-2 tokens, file has %zu", f.name().c_str(), kTokensKey,
            tokens->size());
  const size_t n = tokens->size();

  v.score.assign(n, 0.0f);
  if (const GgufValue* sv = f.find(kScoresKey)) {
    if (sv->type == GgufType::kArray && sv->elem_type == GgufType::kFloat32) {
      v.score = *f.get_f32_array(kScoresKey);
    } else {
      const auto iv = f.get_int_array(kScoresKey);  // throws naming the key if not integers
      v.score.assign(iv->begin(), iv->end());
    }
    CLB_CHECK(v.score.size() == n, "%s: key %s has %zu entries, %s has %zu", f.name().c_str(),
              kScoresKey, v.score.size(), kTokensKey, n);
  }

  v.attr.assign(n, kAttrNormal);
  if (const auto types = f.get_int_array(kTypesKey)) {
    CLB_CHECK(types->size() == n, "%s: key %s has %zu entries, %s has %zu", f.name().c_str(),
              kTypesKey, types->size(), kTokensKey, n);
    for (size_t i = 0; i < n; ++i) v.attr[i] = attr_of_type((*types)[i]);
  }

  v.text.resize(n);
  v.byte_value.assign(n, -1);
  v.id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string word((*tokens)[i]);
    // llama.cpp renames empty tokens rather than refusing the file.
    if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";
    const auto [it, inserted] = v.id_of.emplace(word, static_cast<int32_t>(i));
    CLB_CHECK(inserted, "%s: key %s: token %zu \"%s\" repeats token %d", f.name().c_str(),
              kTokensKey, i, word.c_str(), it->second);
    if (v.attr[i] & kAttrByte) {
      v.byte_value[i] = static_cast<int16_t>(parse_byte_token(word));
      CLB_CHECK(v.byte_value[i] >= 0 || v.kind == VocabKind::kBpe,
                "%s: key %s: token %zu \"%s\" has the byte type but is not <0xHH>",
                f.name().c_str(), kTypesKey, i, word.c_str());
    }
    v.text[i] = std::move(word);
  }
}

void read_merges(const GgufFile& f, Vocab& v) {
  const auto* merges = f.get_string_array(kMergesKey);
  if (!merges) {
    // Kimi-K2 files carry no merges (llama.cpp accepts them so).
    CLB_CHECK(v.pre == "kimi-k2", "%s: key %s is missing (needed by tokenizer.ggml.model gpt2)",
              f.name().c_str(), kMergesKey);
    return;
  }
  v.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string_view m = (*merges)[i];
    // "left right", split at the first space after the first byte.
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    CLB_CHECK(sp != std::string_view::npos, "%s: key %s: merge %zu \"%.*s\" has no space",
              f.name().c_str(), kMergesKey, i, static_cast<int>(m.size()), m.data());
    v.merges.emplace_back(m);
  }
}

// A special token id from `key`: absent keeps the default (dropped if the
// default is out of range, as llama.cpp does); present must be in range.
void read_id(const GgufFile& f, const char* key, int32_t& id, int32_t n) {
  if (id >= n) id = -1;
  const auto u = f.get_uint(key);
  if (!u) return;
  CLB_CHECK(*u < static_cast<uint64_t>(n), "%s: key %s: token id %llu is out of range (n_vocab %d)",
            f.name().c_str(), key, static_cast<unsigned long long>(*u), n);
  id = static_cast<int32_t>(*u);
}

// llama.cpp's text-driven fixes: end-of-generation and FIM tokens become
// control tokens, gpt-oss's markers user-defined; the end-of-generation set is
// the named ids plus the known texts.
void find_end_of_generation(const GgufFile& f, Vocab& v) {
  const int32_t n = v.n_vocab();
  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
  read_id(f, "tokenizer.ggml.fim_pad_token_id", fim_pad, n);
  read_id(f, "tokenizer.ggml.fim_rep_token_id", fim_rep, n);
  read_id(f, "tokenizer.ggml.fim_sep_token_id", fim_sep, n);

  std::vector<bool> eog(n, false);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = v.text[id];
    if (t.size() > 32 || t.size() < 3) continue;  // every listed text is 3..27 bytes
    if (in(t, kEogTexts)) {
      eog[id] = true;
      v.attr[id] |= kAttrControl;
    }
    if (in(t, kFimOtherTexts)) v.attr[id] |= kAttrControl;
    // Where several texts match, the lowest id wins (llama.cpp takes the
    // first its hash map yields).
    if (in(t, kFimPadTexts)) { v.attr[id] |= kAttrControl; if (fim_pad < 0) fim_pad = id; }
    if (in(t, kFimRepTexts)) { v.attr[id] |= kAttrControl; if (fim_rep < 0) fim_rep = id; }
    if (in(t, kFimSepTexts)) { v.attr[id] |= kAttrControl; if (fim_sep < 0) fim_sep = id; }
    if (in(t, kHarmonyTexts)) v.attr[id] = kAttrUserDefined;
  }
  for (int32_t id : {fim_pad, fim_rep, fim_sep, v.eos, v.eot, v.eom})
    if (id >= 0) eog[id] = true;

  // o200k-harmony (and solar-open) end a message with <|end|> but a turn with
  // <|return|> or <|call|>: there <|end|> is not the end of generation.
  const int32_t end = v.find("<|end|>");
  if (end >= 0 && eog[end]) {
    auto eog_text = [&](std::string_view s) { const int32_t i = v.find(s); return i >= 0 && eog[i]; };
    if ((eog_text("<|return|>") && eog_text("<|call|>")) ||
        (eog_text("<|calls|>") && eog_text("<|flush|>"))) {
      eog[end] = false;
      v.attr[end] = kAttrUserDefined;
    }
  }
  // Gemma 4 uses </s> as text, not as an end.
  const int32_t s_end = v.find("</s>");
  const int32_t tool = v.find("<|tool_response>");
  if (s_end >= 0 && tool >= 0 && eog[s_end] && eog[tool]) {
    eog[s_end] = false;
    v.attr[s_end] = kAttrNormal;
  }
  for (int32_t id = 0; id < n; ++id)
    if (eog[id]) v.eog.push_back(id);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Vocab load_vocab(const GgufFile& f) {
  Vocab v;
  const auto model = f.get_string(kModelKey);
  CLB_CHECK(model, "%s: key %s is missing", f.name().c_str(), kModelKey);
  v.model = std::string(*model);
  v.pre = std::string(f.get_string(kPreKey).value_or(""));

  // Defaults of each vocabulary type, overridden by the file below.
  if (v.model == "gpt2") {
    v.kind = VocabKind::kBpe;
    v.pre_spec = find_pre_tokenizer(v.pre);
    if (!v.pre_spec) {
      std::string names;
      for (std::string_view s : known_pre_tokenizers()) (names += names.empty() ? "" : ", ") += s;
      fail("%s: key %s: pre-tokenizer \"%s\" is not supported (known: %s)", f.name().c_str(),
           kPreKey, v.pre.c_str(), names.c_str());
    }
    // llama.cpp's BPE defaults are Falcon's ids.
    v.bos = v.pre_spec->no_bos ? -1 : 11;
    v.eos = 11;
    v.add_bos = v.pre_spec->add_bos;
    v.ignore_merges = v.pre_spec->ignore_merges;
    v.clean_spaces = v.pre_spec->clean_spaces;
  } else if (v.model == "llama") {
    v.kind = VocabKind::kSpm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    const char* what = v.model == "bert"   ? " (WordPiece)"
                       : v.model == "t5"   ? " (Unigram)"
                       : v.model == "rwkv" ? " (RWKV)"
                                           : "";
    fail("%s: key %s: vocabulary type \"%s\"%s is not supported (supported: gpt2 = byte-level "
         "BPE, llama = SentencePiece)",
         f.name().c_str(), kModelKey, v.model.c_str(), what);
  }

  read_tokens(f, v);
  if (v.kind == VocabKind::kBpe) read_merges(f, v);

  const int32_t n = v.n_vocab();
  read_id(f, "tokenizer.ggml.bos_token_id", v.bos, n);
  read_id(f, "tokenizer.ggml.eos_token_id", v.eos, n);
  read_id(f, "tokenizer.ggml.eot_token_id", v.eot, n);
  read_id(f, "tokenizer.ggml.eom_token_id", v.eom, n);
  read_id(f, "tokenizer.ggml.unknown_token_id", v.unk, n);
  read_id(f, "tokenizer.ggml.seperator_token_id", v.sep, n);
  read_id(f, "tokenizer.ggml.padding_token_id", v.pad, n);
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;
  CLB_CHECK(!v.add_bos || v.bos >= 0,
            "%s: key tokenizer.ggml.add_bos_token is true, but the vocabulary has no BOS token "
            "(tokenizer.ggml.bos_token_id)", f.name().c_str());
  CLB_CHECK(!v.add_eos || v.eos >= 0,
            "%s: key tokenizer.ggml.add_eos_token is true, but the vocabulary has no EOS token "
            "(tokenizer.ggml.eos_token_id)", f.name().c_str());

  find_end_of_generation(f, v);

  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    const char c = static_cast<char>(b);
    int32_t id = v.find(hex);
    if (id < 0) id = v.find(std::string_view(&c, 1));
    v.byte_token[b] = id >= 0 ? id : v.unk;
  }

  for (int32_t id = 0; id < n; ++id)
    if (v.has(id, kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_by_length.push_back(id);
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(),
                   [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });

  // Phi-3's special tokens swallow the whitespace after them (llama.cpp keys
  // this on the model name).
  const std::string name = lower(f.get_string("general.name").value_or(""));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_by_length) v.attr[id] |= kAttrRstrip;
    if (int32_t id = v.find("</s>"); id >= 0) v.attr[id] |= kAttrRstrip;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (int32_t id = v.find(t); id >= 0) v.attr[id] &= static_cast<uint16_t>(~kAttrRstrip);
  }
  return v;
}

}  // namespace colibri
