#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "formats/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace colibri {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A piece of the prompt: raw text (token < 0) or a special token found in it.
struct Fragment {
  int32_t token;
  size_t offset, length;
};

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// llama.cpp's tokenizer_st_partition: each special token, longest first, cuts
// every raw fragment at each of its occurrences. Control and unknown tokens
// take part only with parse_special; user-defined ones always do.
std::vector<Fragment> split_special(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags, next;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  for (int32_t id : v.special_by_length) {
    if (!parse_special && v.has(id, kAttrControl | kAttrUnknown)) continue;
    const std::string& tok = v.text[id];
    next.clear();
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = f.offset;
      while (pos < end) {
        const size_t m = window.find(tok, pos);
        if (m == std::string_view::npos) break;
        found = true;
        size_t left_end = m;
        if (v.has(id, kAttrLstrip))
          while (left_end > pos && is_space(text[left_end - 1])) --left_end;
        if (left_end > pos) next.push_back({-1, pos, left_end - pos});
        next.push_back({id, m, tok.size()});
        pos = m + tok.size();
        if (v.has(id, kAttrRstrip))
          while (pos < end && is_space(text[pos])) ++pos;
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    if (found) frags.swap(next);
  }
  return frags;
}

// Byte-level BPE piece of a normal token: each code point of the text back to
// the byte it stands for. A code point outside the alphabet is rendered as
// llama.cpp renders it.
std::string bpe_piece(std::string_view text) {
  std::string out;
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t n = utf8_decode(text, pos, &cp);
    if (n == 0) {
      cp = kReplacementChar;
      n = 1;
    }
    const int b = symbol_to_byte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      std::string utf8;
      utf8_append(utf8, cp);
      out += "[UNK_BYTE_0x";
      for (char c : utf8) out += strprintf("%02x", static_cast<uint8_t>(c));
      out += text;
      out += "]";
    }
    pos += n;
  }
  return out;
}

std::string spm_piece(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos, 3) == kSpmSpace) {
      out += ' ';
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// llama.cpp's clean_spaces passes over detokenized text, in place and in the
// same order (the second pass's skipped space is visible to the next step).
void clean_up_spaces(std::string& s) {
  char* t = s.data();
  int64_t total = static_cast<int64_t>(s.size());
  // " ?", " !", " .", " ," lose the space.
  int64_t n = total;
  total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  // " ' " becomes "'".
  n = total;
  total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  // " 's", " 'm", " 're", " 've" lose the space (not " 't", " 'd", " 'll").
  n = total;
  total = n ? 1 : 0;
  for (int64_t i = 1; i < n; ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  }
  s.resize(static_cast<size_t>(total));
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(load_vocab(f)));
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  if (vocab_.kind == VocabKind::kBpe) {
    pre_ = std::make_unique<PreTokenizer>(*vocab_.pre_spec);
    bpe_ = std::make_unique<BpeModel>(vocab_);
  }
  const int32_t n = vocab_.n_vocab();
  pieces_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab_.text[id];
    if (vocab_.has(id, kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      pieces_[id] = text;
    } else if (vocab_.has(id, kAttrByte) && vocab_.byte_value[id] >= 0) {
      pieces_[id] = std::string(1, static_cast<char>(vocab_.byte_value[id]));
    } else if (vocab_.has(id, kAttrNormal) || vocab_.has(id, kAttrByte)) {
      pieces_[id] = vocab_.kind == VocabKind::kSpm ? spm_piece(text) : bpe_piece(text);
    }
    // Unused and undefined tokens stand for nothing, as in llama.cpp.
  }
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::check_id(int32_t id, const char* what) const {
  CLB_CHECK(id >= 0 && id < vocab_.n_vocab(), "%s: token id %d is out of range (n_vocab %d)", what,
            id, vocab_.n_vocab());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  const std::vector<Fragment> frags = split_special(vocab_, text, parse_special);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);

  if (vocab_.kind == VocabKind::kSpm) {
    SpmMerger merger(vocab_);
    std::string buf;
    bool prev_special = true;  // the text start counts as after a special token
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (vocab_.add_space_prefix && prev_special) buf += kSpmSpace;
      for (char c : text.substr(f.offset, f.length)) {
        if (c == ' ')
          buf += kSpmSpace;
        else
          buf += c;
      }
      merger.encode(buf, out);
      prev_special = false;
    }
  } else {
    BpeModel::Scratch scratch;
    std::vector<std::pair<size_t, size_t>> words;
    std::string repaired;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        continue;
      }
      std::string_view frag = text.substr(f.offset, f.length);
      if (!utf8_is_valid(frag)) {
        repaired = utf8_sanitize(frag);
        frag = repaired;
      }
      words.clear();
      pre_->split(frag, words);
      for (const auto& [off, len] : words) bpe_->encode_word(frag.substr(off, len), scratch, out);
    }
  }

  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id, "token_to_piece");
  if (!render_special && vocab_.has(id, kAttrControl | kAttrUnknown)) return {};
  return pieces_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special,
                              bool clean_spaces) const {
  std::string out;
  bool strip_space = vocab_.add_space_prefix;
  for (int32_t id : ids) {
    check_id(id, "decode");
    if (render_special || !vocab_.has(id, kAttrControl | kAttrUnknown)) {
      const std::string& p = pieces_[id];
      out.append(p, strip_space && !p.empty() && p[0] == ' ' ? 1 : 0);
    }
    strip_space = false;
  }
  if (clean_spaces && vocab_.clean_spaces) clean_up_spaces(out);
  return out;
}

void Tokenizer::append_piece(int32_t id, std::string& pending, std::string& out,
                             bool render_special) const {
  pending += token_to_piece(id, render_special);
  const size_t n = utf8_complete_prefix(pending);
  out += utf8_sanitize(std::string_view(pending).substr(0, n));
  pending.erase(0, n);
}

void Tokenizer::flush_pending(std::string& pending, std::string& out) {
  out += utf8_sanitize(pending);
  pending.clear();
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), id);
}

bool Tokenizer::is_control(int32_t id) const {
  check_id(id, "is_control");
  return vocab_.has(id, kAttrControl);
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = vocab_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  check_id(id, "token_text");
  return vocab_.text[id];
}

}  // namespace colibri
