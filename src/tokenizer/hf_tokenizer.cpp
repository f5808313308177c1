#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "formats/gguf_writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"

namespace colibri {

namespace {

using json = nlohmann::json;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

constexpr const char* kTokenizerJson = "tokenizer.json";
constexpr const char* kTokenizerConfig = "tokenizer_config.json";
constexpr const char* kConfig = "config.json";
constexpr const char* kGenerationConfig = "generation_config.json";

// GGUF token types, numbered as llama.cpp's gguf.TokenType.
enum : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

// Scores are floats, exact for integers below 2^24: merge ranks and vocabulary
// sizes are checked against it (the largest vocabularies in use have ~260k
// tokens). It also bounds the "[PAD<id>]" fill a config.json vocab_size asks for.
constexpr size_t kMaxCount = size_t{1} << 24;

// Hugging Face ByteLevel's own regex, used when its use_regex is true.
constexpr std::string_view kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Split regexes as tokenizer.json files write them where the pre-tokenizer
// table (pretokenizer.cpp) keeps llama.cpp's rewrite: (?i:'s|'t|...) becomes
// (?:'[sS]|'[tT]|...), which avoids Unicode case folding, and DeepSeek-V3's
// CJK class is spelled with \x{...} escapes. Each maps to the regex at
// `index` of pre-tokenizer `spec`; all other patterns must equal a spec's
// regex as written.
struct ModelPattern {
  std::string_view pattern;  // as in tokenizer.json, after JSON decoding
  std::string_view spec;
  size_t index;
};
constexpr ModelPattern kModelPatterns[] = {
    // Llama-3, DBRX, OLMoE-0125 (dolma2): cl100k's pattern.
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama3", 0},
    // Qwen2, Qwen2.5, Qwen3.
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2", 0},
    // Qwen3.5.
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen35", 0},
    // Kimi-K2 (tokenization_kimi.py's pat_str): o200k's words with Han runs
    // apart, the exclusion written as a class intersection.
    {R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "kimi-k2", 0},
    // DeepSeek-V3's second Split: [一-龥぀-ゟ゠-ヿ]+ as literal code points.
    {"[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
     "deepseek-v3", 1},
};

// s for an error message: control bytes escaped, cut after about max bytes.
std::string excerpt(std::string_view s, size_t max = 64) {
  size_t n = std::min(s.size(), max);
  while (n < s.size() && n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;
  std::string out = "\"";
  for (char c : s.substr(0, n)) {
    const auto u = static_cast<uint8_t>(c);
    if (u < 0x20 || u == 0x7F)
      out += strprintf("\\x%02X", u);
    else
      out += c;
  }
  return out + (n < s.size() ? "\"..." : "\"");
}

// obj[key]; nullptr when obj is no object or the key is absent or null.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// An integer >= 0 (JSON text parses as unsigned; a json built in code may
// hold a signed one).
bool is_index(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

std::string type_of(const json& obj) {
  const json* t = member(obj, "type");
  return t && t->is_string() ? t->get<std::string>() : "";
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

// What the normalizer and pre-tokenizer steps do, as far as colibri can
// represent it.
struct Pipeline {
  std::vector<std::string> regexes;  // Split, Digits and ByteLevel(use_regex), in order
  bool byte_level = false;           // a ByteLevel pre-tokenizer step (the last one)
  bool byte_level_decoder = false;
  bool metaspace = false;      // a Metaspace pre-tokenizer: ' ' -> U+2581
  bool replace_space = false;  // a Replace(' ', U+2581) normalizer
  bool prepend_space = false;  // U+2581 before the text (Prepend normalizer or Metaspace)
};

class Importer {
 public:
  Importer(const HfTokenizerFiles& files, const std::string& where)
      : files_(files), where_(where), tok_(*files.tokenizer) {}

  void run(GgufWriter& out);

 private:
  [[noreturn]] void refuse(const char* file, const char* fmt, ...) const
      __attribute__((format(printf, 3, 4)));

  void check_model();
  void read_normalizer(const json& n, const std::string& path);
  void read_pre_tokenizer(const json& p, const std::string& path);
  void read_tokens();
  void read_merges();
  std::optional<bool> flag(const json* obj, const char* file, const char* key) const;
  // obj[key] of a tokenizer.json object at `path`: def when absent or null.
  std::string str_field(const json& obj, const std::string& path, const char* key,
                        const char* def) const;
  bool bool_field(const json& obj, const std::string& path, const char* key, bool def) const;
  int32_t find(std::string_view text) const {
    const auto it = id_of_.find(std::string(text));
    return it == id_of_.end() ? -1 : it->second;
  }
  int32_t config_token(const char* key) const;
  int32_t config_id(const json* cfg, const char* file, const char* key) const;
  void read_special_tokens();
  const PreTokenizerSpec& choose_pre_tokenizer() const;
  std::vector<float> spm_scores() const;
  std::optional<std::string> chat_template() const;

  const HfTokenizerFiles& files_;
  const std::string& where_;
  const json& tok_;
  const json* model_ = nullptr;
  Pipeline pipe_;
  bool spm_ = false;  // SentencePiece-style, else byte-level

  std::vector<std::string> text_;  // (n_vocab)
  std::vector<int32_t> type_;      // (n_vocab)
  std::unordered_map<std::string, int32_t> id_of_;
  std::vector<std::pair<std::string, std::string>> merges_;  // by rank

  int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
  std::optional<bool> add_bos_, add_eos_;
};

void Importer::refuse(const char* file, const char* fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  const std::string msg = vstrprintf(fmt, ap);
  va_end(ap);
  if (file == kTokenizerJson) file = files_.tokenizer_name.c_str();
  fail("%s: %s: %s", where_.c_str(), file, msg.c_str());
}

std::optional<bool> Importer::flag(const json* obj, const char* file, const char* key) const {
  const json* v = obj ? member(*obj, key) : nullptr;
  if (!v) return std::nullopt;
  if (!v->is_boolean()) refuse(file, "%s is %s, expected true or false", key, v->dump().c_str());
  return v->get<bool>();
}

std::string Importer::str_field(const json& obj, const std::string& path, const char* key,
                                const char* def) const {
  const json* v = member(obj, key);
  if (!v) return def;
  if (!v->is_string())
    refuse(kTokenizerJson, "%s.%s is %s, expected a string", path.c_str(), key, v->dump().c_str());
  return v->get<std::string>();
}

bool Importer::bool_field(const json& obj, const std::string& path, const char* key,
                          bool def) const {
  const json* v = member(obj, key);
  if (!v) return def;
  if (!v->is_boolean())
    refuse(kTokenizerJson, "%s.%s is %s, expected true or false", path.c_str(), key,
           v->dump().c_str());
  return v->get<bool>();
}

void Importer::check_model() {
  model_ = member(tok_, "model");
  if (!model_ || !model_->is_object()) refuse(kTokenizerJson, "model is missing");
  const std::string type = type_of(*model_);
  if (type.empty()) refuse(kTokenizerJson, "model.type is missing");
  if (type != "BPE") {
    const char* what = type == "WordPiece"   ? " (BERT's)"
                       : type == "Unigram"   ? " (SentencePiece Unigram, T5's)"
                       : type == "WordLevel" ? " (whole words)"
                                             : "";
    refuse(kTokenizerJson, "model.type \"%s\"%s is not supported (colibri imports BPE only)",
           type.c_str(), what);
  }
  // Dropout makes encoding random; prefixes and suffixes mark subwords in a
  // way llama.cpp's BPE does not.
  if (const json* d = member(*model_, "dropout"); d && !(d->is_number() && d->get<double>() == 0))
    refuse(kTokenizerJson, "model.dropout %s is not supported", d->dump().c_str());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* s = member(*model_, key);
        s && !(s->is_string() && s->get<std::string>().empty()))
      refuse(kTokenizerJson, "model.%s %s is not supported", key, s->dump().c_str());
}

// NFC is accepted and, as in llama.cpp, not applied: it changes only text
// that is not already in NFC. U+2581 prepending and space replacement are
// SentencePiece's and become the "llama" vocabulary's own behaviour.
void Importer::read_normalizer(const json& n, const std::string& path) {
  const std::string type = type_of(n);
  if (type == "Sequence") {
    const json* list = member(n, "normalizers");
    if (!list || !list->is_array())
      refuse(kTokenizerJson, "%s.normalizers is missing", path.c_str());
    for (size_t i = 0; i < list->size(); ++i)
      read_normalizer((*list)[i], path + ".normalizers[" + std::to_string(i) + "]");
  } else if (type == "NFC") {
  } else if (type == "Prepend" && str_field(n, path, "prepend", "") == kSpmSpace) {
    pipe_.prepend_space = true;
  } else if (type == "Replace" && member(n, "pattern") &&
             str_field(n["pattern"], path + ".pattern", "String", "") == " " &&
             str_field(n, path, "content", "") == kSpmSpace) {
    pipe_.replace_space = true;
  } else {
    refuse(kTokenizerJson,
           "%s %s is not supported (colibri, as llama.cpp, applies no normalizer; accepted: NFC, "
           "and SentencePiece's Prepend/Replace of U+2581)",
           path.c_str(), excerpt(n.dump()).c_str());
  }
}

void Importer::read_pre_tokenizer(const json& p, const std::string& path) {
  const std::string type = type_of(p);
  if (type == "Sequence") {
    const json* list = member(p, "pretokenizers");
    if (!list || !list->is_array())
      refuse(kTokenizerJson, "%s.pretokenizers is missing", path.c_str());
    for (size_t i = 0; i < list->size(); ++i)
      read_pre_tokenizer((*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]");
    return;
  }
  // The byte-level mapping must come last: regexes after it would see the
  // mapped alphabet, which colibri's pre-tokenizer never does.
  if (pipe_.byte_level)
    refuse(kTokenizerJson, "%s (%s) comes after the ByteLevel step, which colibri cannot represent",
           path.c_str(), type.c_str());
  if (type == "Split") {
    const json* pattern = member(p, "pattern");
    const json* regex = pattern ? member(*pattern, "Regex") : nullptr;
    if (!regex || !regex->is_string())
      refuse(kTokenizerJson, "%s.pattern %s is not supported (only {\"Regex\": ...})", path.c_str(),
             excerpt(pattern ? pattern->dump() : "null").c_str());
    // Isolated keeps the matches and the text between them, as colibri's
    // pre-tokenizer does. Removed with invert keeps the matches and drops the
    // text between them: the same for the patterns this can match, which
    // match every character (tiktoken conversions such as dolma2 write it).
    const std::string behavior = str_field(p, path, "behavior", "");
    const bool invert = bool_field(p, path, "invert", false);
    if (!((behavior == "Isolated" && !invert) || (behavior == "Removed" && invert)))
      refuse(kTokenizerJson, "%s: behavior %s with invert %s is not supported", path.c_str(),
             behavior.c_str(), invert ? "true" : "false");
    pipe_.regexes.push_back(regex->get<std::string>());
  } else if (type == "Digits") {
    pipe_.regexes.emplace_back(bool_field(p, path, "individual_digits", false) ? R"(\p{N})"
                                                                               : R"(\p{N}+)");
  } else if (type == "ByteLevel") {
    if (bool_field(p, path, "add_prefix_space", false))
      refuse(kTokenizerJson,
             "%s.add_prefix_space is true (a space before the text), which llama.cpp's BPE does "
             "not do",
             path.c_str());
    if (bool_field(p, path, "use_regex", true)) pipe_.regexes.emplace_back(kByteLevelRegex);
    pipe_.byte_level = true;
  } else if (type == "Metaspace") {
    if (str_field(p, path, "replacement", "") != kSpmSpace)
      refuse(kTokenizerJson, "%s.replacement is not U+2581", path.c_str());
    // split cuts the text into words at each U+2581, so that no merge crosses
    // them; llama.cpp's SentencePiece merges across the whole text.
    if (bool_field(p, path, "split", true))
      refuse(kTokenizerJson,
             "%s.split is true (words cut at each U+2581), which llama.cpp's "
             "SentencePiece does not do",
             path.c_str());
    const std::string scheme = str_field(p, path, "prepend_scheme", "");
    pipe_.prepend_space =
        scheme.empty() ? bool_field(p, path, "add_prefix_space", true) : scheme != "never";
    pipe_.metaspace = true;
  } else {
    refuse(kTokenizerJson, "%s type \"%s\" is not supported", path.c_str(), type.c_str());
  }
}

void Importer::read_tokens() {
  const json* vocab = member(*model_, "vocab");
  if (!vocab) refuse(kTokenizerJson, "model.vocab is missing");
  if (!vocab->is_object()) refuse(kTokenizerJson, "model.vocab is not an object of token -> id");

  struct Entry {
    uint64_t id;
    std::string text;
    int32_t type;
    bool added;
  };
  std::vector<Entry> entries;
  entries.reserve(vocab->size());
  for (const auto& [text, id] : vocab->items()) {
    if (!is_index(id))
      refuse(kTokenizerJson, "model.vocab: token %s has id %s, expected an integer >= 0",
             excerpt(text).c_str(), id.dump().c_str());
    entries.push_back({id.get<uint64_t>(), text, kNormal, false});
  }
  if (const json* added = member(tok_, "added_tokens")) {
    if (!added->is_array()) refuse(kTokenizerJson, "added_tokens is not an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const json* id = member(a, "id");
      const json* content = member(a, "content");
      if (!id || !is_index(*id) || !content || !content->is_string())
        refuse(kTokenizerJson, "added_tokens[%zu] has no integer id >= 0 and string content", i);
      const bool special =
          bool_field(a, "added_tokens[" + std::to_string(i) + "]", "special", false);
      entries.push_back({id->get<uint64_t>(), content->get<std::string>(),
                         special ? kControl : kUserDefined, true});
    }
  }

  // The vocabulary size: config.json's vocab_size (the embedding's rows),
  // else exactly the ids given, which must then run from 0 without gaps.
  std::vector<uint64_t> ids;
  for (const Entry& e : entries) ids.push_back(e.id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  size_t n = ids.size();
  std::string bound = strprintf("%zu distinct ids and no config.json vocab_size", n);
  if (const json* vs = files_.config ? member(*files_.config, "vocab_size") : nullptr) {
    if (!is_index(*vs) || vs->get<uint64_t>() == 0)
      refuse(kConfig, "vocab_size %s is not a positive integer", vs->dump().c_str());
    n = vs->get<uint64_t>();
    bound = strprintf("config.json vocab_size %zu", n);
  }
  if (n == 0) refuse(kTokenizerJson, "model.vocab is empty");
  if (n > kMaxCount || ids.size() > kMaxCount)
    refuse(kTokenizerJson, "%zu tokens, more than colibri's limit of %zu", std::max(n, ids.size()),
           kMaxCount);
  for (const Entry& e : entries)
    if (e.id >= n)
      refuse(kTokenizerJson, "%s: token %s has id %llu, beyond the vocabulary (%s)",
             e.added ? "added_tokens" : "model.vocab", excerpt(e.text).c_str(),
             static_cast<unsigned long long>(e.id), bound.c_str());

  text_.assign(n, std::string());
  type_.assign(n, kUnused);
  std::vector<uint8_t> from(n, 0);  // 0 nothing, 1 model.vocab, 2 added_tokens
  std::string symbols;
  for (const Entry& e : entries) {
    const size_t id = e.id;
    if (from[id] != 0) {
      // An added token repeats its model.vocab entry, in the byte-level
      // alphabet or not; two different texts for one id cannot be written.
      symbols.clear();
      if (!spm_) append_byte_symbols(e.text, symbols);
      const bool same = text_[id] == e.text || (!spm_ && from[id] == 1 && text_[id] == symbols);
      if (!same)
        refuse(kTokenizerJson, "%s: token %s has id %zu, which %s gives to %s",
               e.added ? "added_tokens" : "model.vocab", excerpt(e.text).c_str(), id,
               from[id] == 1 ? "model.vocab" : "added_tokens", excerpt(text_[id]).c_str());
    }
    text_[id] = e.text;
    type_[id] = e.type;
    from[id] = e.added ? 2 : 1;
  }

  const std::string unk_text = member(*model_, "unk_token") && (*model_)["unk_token"].is_string()
                                   ? (*model_)["unk_token"].get<std::string>()
                                   : std::string();
  for (size_t id = 0; id < n; ++id) {
    std::string& t = text_[id];
    if (from[id] == 0) {
      t = "[PAD" + std::to_string(id) + "]";
    } else if (type_[id] == kUserDefined) {
      // llama.cpp matches user-defined tokens in the raw text, before
      // SentencePiece's U+2581 replaces spaces (convert_hf_to_gguf.py).
      t = replace_all(std::move(t), kSpmSpace, " ");
    } else if (spm_ && type_[id] == kNormal && t.size() == 6 && t.starts_with("<0x") &&
               t.back() == '>' && std::isxdigit(static_cast<uint8_t>(t[3])) &&
               std::isxdigit(static_cast<uint8_t>(t[4]))) {
      type_[id] = kByte;
    }
    if (spm_ && !unk_text.empty() && t == unk_text) type_[id] = kUnknown;
  }

  id_of_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    if (text_[id].empty()) continue;  // llama.cpp renames empty tokens [EMPTY_<id>]
    const auto [it, inserted] = id_of_.emplace(text_[id], static_cast<int32_t>(id));
    if (!inserted)
      refuse(kTokenizerJson, "token %s has two ids, %d and %zu (model.vocab and added_tokens)",
             excerpt(text_[id]).c_str(), it->second, id);
  }
}

// "left right" strings, or [left, right] pairs (tokenizers >= 0.20, which
// allows spaces inside a part). A merge may name a text that is no token:
// llama.cpp keeps such merges and colibri's BPE (bpe.cpp) follows them through
// intermediate texts, so they are written as given.
void Importer::read_merges() {
  const json* merges = member(*model_, "merges");
  if (!merges || !merges->is_array()) refuse(kTokenizerJson, "model.merges is missing");
  merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == 0 || sp == std::string::npos || sp + 1 == s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        refuse(kTokenizerJson, "model.merges[%zu] %s is not \"left right\"", i, excerpt(s).c_str());
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
      if (left.empty() || right.empty())
        refuse(kTokenizerJson, "model.merges[%zu] has an empty part", i);
    } else {
      refuse(kTokenizerJson, "model.merges[%zu] %s is neither \"left right\" nor [left, right]", i,
             excerpt(m.dump()).c_str());
    }
    merges_.emplace_back(std::move(left), std::move(right));
  }
}

// A special token tokenizer_config.json names by text (a string, or an
// object with "content"); -1 when it names none.
int32_t Importer::config_token(const char* key) const {
  const json* v = files_.tokenizer_config ? member(*files_.tokenizer_config, key) : nullptr;
  if (!v) return -1;
  const json* content = v->is_object() ? member(*v, "content") : v;
  if (!content || !content->is_string())
    refuse(kTokenizerConfig, "%s %s is neither a string nor {\"content\": ...}", key,
           excerpt(v->dump()).c_str());
  const int32_t id = find(content->get<std::string>());
  if (id < 0)
    refuse(kTokenizerConfig, "%s %s is not a token of tokenizer.json", key,
           excerpt(content->get<std::string>()).c_str());
  return id;
}

// A token id from config.json or generation_config.json (at the top or in
// text_config, as llama.cpp reads it): an integer, or a list whose first is
// taken; -1 when absent.
int32_t Importer::config_id(const json* cfg, const char* file, const char* key) const {
  if (!cfg) return -1;
  const json* v = member(*cfg, key);
  if (const json* text = member(*cfg, "text_config"); !v && text) v = member(*text, key);
  if (!v) return -1;
  const json* first = v->is_array() && !v->empty() ? &(*v)[0] : v;
  if (!is_index(*first) || first->get<uint64_t>() >= text_.size())
    refuse(file, "%s %s is not a token id below %zu", key, excerpt(v->dump()).c_str(),
           text_.size());
  return static_cast<int32_t>(first->get<uint64_t>());
}

void Importer::read_special_tokens() {
  const json* tc = files_.tokenizer_config;
  add_bos_ = flag(tc, kTokenizerConfig, "add_bos_token");
  add_eos_ = flag(tc, kTokenizerConfig, "add_eos_token");
  bos_ = config_token("bos_token");
  eos_ = config_token("eos_token");
  unk_ = config_token("unk_token");
  pad_ = config_token("pad_token");

  // The post-processor's template: a special token first adds BOS, last EOS
  // (Llama-3 and Mixtral write <|begin_of_text|> / <s> there).
  const json* post = member(tok_, "post_processor");
  const json* list = post ? member(*post, "processors") : nullptr;
  const size_t n_proc = list && list->is_array() ? list->size() : post ? 1 : 0;
  for (size_t i = 0; i < n_proc; ++i) {
    const json& proc = list && list->is_array() ? (*list)[i] : *post;
    if (type_of(proc) != "TemplateProcessing") continue;
    const json* single = member(proc, "single");
    if (!single || !single->is_array() || single->size() < 2) continue;
    auto special = [&](const json& item) -> int32_t {
      const json* s = member(item, "SpecialToken");
      const json* id = s ? member(*s, "id") : nullptr;
      if (!id || !id->is_string()) return -1;
      const int32_t tok = find(id->get<std::string>());
      if (tok < 0)
        refuse(kTokenizerJson, "post_processor: template token %s is not a token",
               excerpt(id->get<std::string>()).c_str());
      return tok;
    };
    const int32_t first = special(single->front()), last = special(single->back());
    if (bos_ < 0) bos_ = first;
    if (eos_ < 0) eos_ = last;
    if (first >= 0 && first != bos_)
      refuse(kTokenizerJson,
             "post_processor: the template starts with %s, which is not bos_token %s",
             excerpt(text_[first]).c_str(), excerpt(text_[bos_]).c_str());
    if (last >= 0 && last != eos_)
      refuse(kTokenizerJson, "post_processor: the template ends with %s, which is not eos_token %s",
             excerpt(text_[last]).c_str(), excerpt(text_[eos_]).c_str());
    if (!add_bos_) add_bos_ = first >= 0;
    if (!add_eos_) add_eos_ = last >= 0;
  }

  if (bos_ < 0) bos_ = config_id(files_.config, kConfig, "bos_token_id");
  if (bos_ < 0) bos_ = config_id(files_.generation_config, kGenerationConfig, "bos_token_id");
  if (eos_ < 0) eos_ = config_id(files_.config, kConfig, "eos_token_id");
  if (eos_ < 0) eos_ = config_id(files_.generation_config, kGenerationConfig, "eos_token_id");
  if (pad_ < 0) pad_ = config_id(files_.config, kConfig, "pad_token_id");
  if (pad_ < 0) pad_ = config_id(files_.generation_config, kGenerationConfig, "pad_token_id");
  if (const json* u = member(*model_, "unk_token"); unk_ < 0 && u) {
    unk_ = u->is_string() ? find(u->get<std::string>()) : -1;
    if (unk_ < 0)
      refuse(kTokenizerJson, "model.unk_token %s is not a token", excerpt(u->dump()).c_str());
  }
  if (add_bos_.value_or(false) && bos_ < 0)
    refuse(kTokenizerConfig, "add_bos_token is true, but no bos_token is named");
  if (add_eos_.value_or(false) && eos_ < 0)
    refuse(kTokenizerConfig, "add_eos_token is true, but no eos_token is named");
}

// The known pre-tokenizer whose regex list is the file's (after
// kModelPatterns) and whose flags agree with the file's: ignore_merges and
// clean_spaces have no GGUF key of their own, so they must; add_bos is
// written as a key, so it only breaks ties.
const PreTokenizerSpec& Importer::choose_pre_tokenizer() const {
  std::vector<std::string_view> want;
  for (const std::string& r : pipe_.regexes) {
    std::string_view re = r;
    for (const ModelPattern& m : kModelPatterns)
      if (r == m.pattern) re = find_pre_tokenizer(m.spec)->regexes.at(m.index);
    want.push_back(re);
  }
  if (want.empty())
    refuse(kTokenizerJson,
           "pre_tokenizer splits nothing (no Split and ByteLevel use_regex "
           "false), which no pre-tokenizer colibri knows does");

  std::vector<const PreTokenizerSpec*> specs;
  for (std::string_view name : known_pre_tokenizers()) {
    const PreTokenizerSpec* s = find_pre_tokenizer(name);
    if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(s);
  }
  std::vector<const PreTokenizerSpec*> match;
  for (const PreTokenizerSpec* s : specs)
    if (s->regexes == want) match.push_back(s);
  if (match.empty()) {
    // Quote the first regex no known pre-tokenizer uses, else the first.
    std::string_view unknown = want.front();
    for (std::string_view re : want) {
      const bool known = std::any_of(specs.begin(), specs.end(), [&](const PreTokenizerSpec* s) {
        return std::find(s->regexes.begin(), s->regexes.end(), re) != s->regexes.end();
      });
      if (!known) {
        unknown = re;
        break;
      }
    }
    refuse(kTokenizerJson,
           "pre_tokenizer: regex %s (%zu in all) matches no pre-tokenizer colibri "
           "knows",
           excerpt(unknown, 80).c_str(), want.size());
  }

  const bool ignore_merges = bool_field(*model_, "model", "ignore_merges", false);
  const std::optional<bool> clean =
      flag(files_.tokenizer_config, kTokenizerConfig, "clean_up_tokenization_spaces");
  std::vector<const PreTokenizerSpec*> agree;
  for (const PreTokenizerSpec* s : match)
    if (s->ignore_merges == ignore_merges) agree.push_back(s);
  if (agree.empty())
    refuse(kTokenizerJson,
           "model.ignore_merges is %s, but pre-tokenizer %.*s, whose regexes these "
           "are, %s",
           ignore_merges ? "true" : "false", static_cast<int>(match[0]->name.size()),
           match[0]->name.data(), ignore_merges ? "always merges" : "ignores merges");
  if (clean) {
    std::erase_if(agree, [&](const PreTokenizerSpec* s) { return s->clean_spaces != *clean; });
    if (agree.empty())
      refuse(kTokenizerConfig,
             "clean_up_tokenization_spaces is %s, but pre-tokenizer %.*s, whose "
             "regexes these are, does %s",
             *clean ? "true" : "false", static_cast<int>(match[0]->name.size()),
             match[0]->name.data(), *clean ? "not clean spaces" : "clean spaces");
  }
  for (const PreTokenizerSpec* s : agree)
    if (!add_bos_ || s->add_bos == *add_bos_) return *s;
  return *agree.front();
}

// llama.cpp's SentencePiece merges the adjacent pair whose merged token
// scores highest (leftmost on ties); Hugging Face merges the pair of lowest
// merge rank. A token scores -(rank of the first merge that makes it), so the
// two pick the same token; tokens no merge makes (characters, bytes, special
// tokens) score below every merge, since Hugging Face never merges into them.
// SentencePiece conversions list every split of a token into two tokens, the
// splits of one token at consecutive ranks, and rank tokens as
// SentencePiece's scores do: where two splits of one token compete (a|aa
// against aa|a), llama.cpp and SentencePiece take the leftmost.
std::vector<float> Importer::spm_scores() const {
  if (merges_.size() >= kMaxCount)
    refuse(kTokenizerJson, "model.merges: %zu merges, more than scores hold exactly (%zu)",
           merges_.size(), kMaxCount);
  std::vector<float> score(text_.size(), -static_cast<float>(merges_.size()));
  std::vector<bool> made(text_.size(), false);
  std::string joined;
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    joined.assign(merges_[rank].first).append(merges_[rank].second);
    const int32_t id = find(joined);
    if (id < 0 || made[id]) continue;
    made[id] = true;
    score[id] = 0.0f - static_cast<float>(rank);
  }
  return score;
}

std::optional<std::string> Importer::chat_template() const {
  const json* t =
      files_.tokenizer_config ? member(*files_.tokenizer_config, "chat_template") : nullptr;
  if (!t) {
    if (files_.chat_template) return *files_.chat_template;
    return std::nullopt;
  }
  if (t->is_string()) return t->get<std::string>();
  if (t->is_array()) {
    for (const json& named : *t) {
      const json* name = member(named, "name");
      const json* text = member(named, "template");
      if (name && *name == "default" && text && text->is_string()) return text->get<std::string>();
    }
    return std::nullopt;
  }
  refuse(kTokenizerConfig, "chat_template is neither a string nor a list of {name, template}");
}

void Importer::run(GgufWriter& out) {
  check_model();
  if (const json* n = member(tok_, "normalizer")) read_normalizer(*n, "normalizer");
  if (const json* p = member(tok_, "pre_tokenizer")) read_pre_tokenizer(*p, "pre_tokenizer");
  if (const json* d = member(tok_, "decoder")) {
    pipe_.byte_level_decoder = type_of(*d) == "ByteLevel";
    if (const json* list = member(*d, "decoders"); list && list->is_array())
      for (const json& step : *list) pipe_.byte_level_decoder |= type_of(step) == "ByteLevel";
  }

  const bool byte_fallback = bool_field(*model_, "model", "byte_fallback", false);
  if (pipe_.byte_level) {
    if (pipe_.metaspace || pipe_.prepend_space || pipe_.replace_space)
      refuse(kTokenizerJson, "both ByteLevel and SentencePiece's U+2581 spaces: not supported");
  } else if (pipe_.byte_level_decoder) {
    refuse(kTokenizerJson, "decoder is ByteLevel, but pre_tokenizer has no ByteLevel step");
  } else if (pipe_.metaspace || pipe_.prepend_space || pipe_.replace_space || byte_fallback) {
    spm_ = true;
    if (!pipe_.regexes.empty())
      refuse(kTokenizerJson,
             "pre_tokenizer: a Split or Digits step in a SentencePiece-style "
             "tokenizer is not supported");
    if (!pipe_.metaspace && !pipe_.replace_space)
      refuse(kTokenizerJson,
             "model.byte_fallback is set, but nothing turns spaces into U+2581 "
             "(a Metaspace pre-tokenizer or a Replace normalizer)");
  } else {
    refuse(kTokenizerJson,
           "model.type BPE without a ByteLevel pre-tokenizer or SentencePiece's "
           "U+2581 spaces is not supported");
  }

  read_tokens();
  read_merges();
  read_special_tokens();

  if (spm_) {
    out.set_string("tokenizer.ggml.model", "llama");
    out.set_string("tokenizer.ggml.pre", "default");
    out.set_array_str("tokenizer.ggml.tokens", text_);
    out.set_array_f32("tokenizer.ggml.scores", spm_scores());
    out.set_array_i32("tokenizer.ggml.token_type", type_);
  } else {
    const PreTokenizerSpec& spec = choose_pre_tokenizer();
    out.set_string("tokenizer.ggml.model", "gpt2");
    out.set_string("tokenizer.ggml.pre", std::string(spec.name));
    out.set_array_str("tokenizer.ggml.tokens", text_);
    out.set_array_i32("tokenizer.ggml.token_type", type_);
    // A raw space cannot occur in byte-level text (it is U+0120 there), so,
    // as llama.cpp's gguf-py, one inside a [left, right] part is written so.
    std::vector<std::string> merges;
    merges.reserve(merges_.size());
    for (const auto& [l, r] : merges_)
      merges.push_back(replace_all(l, " ", "\xC4\xA0") + " " + replace_all(r, " ", "\xC4\xA0"));
    out.set_array_str("tokenizer.ggml.merges", merges);
  }
  auto set_id = [&](const char* key, int32_t id) {
    if (id >= 0) out.set_u32(key, static_cast<uint32_t>(id));
  };
  set_id("tokenizer.ggml.bos_token_id", bos_);
  set_id("tokenizer.ggml.eos_token_id", eos_);
  set_id("tokenizer.ggml.unknown_token_id", unk_);
  set_id("tokenizer.ggml.padding_token_id", pad_);
  if (add_bos_) out.set_bool("tokenizer.ggml.add_bos_token", *add_bos_);
  if (add_eos_) out.set_bool("tokenizer.ggml.add_eos_token", *add_eos_);
  if (spm_) out.set_bool("tokenizer.ggml.add_space_prefix", pipe_.prepend_space);
  if (const auto t = chat_template()) out.set_string("tokenizer.chat_template", *t);
}

}  // namespace

void import_hf_tokenizer(const HfTokenizerFiles& files, GgufWriter& out, const std::string& where) {
  CLB_CHECK(files.tokenizer, "%s: tokenizer.json is missing", where.c_str());
  Importer(files, where).run(out);
}

}  // namespace colibri
