#include "tokenizer/tiktoken.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "base/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace colibri {

namespace {

using json = nlohmann::json;

// Vocabularies in use have up to ~260k tokens; GGUF ids and float scores are
// exact far beyond this, and it bounds what a hostile file can ask for.
constexpr size_t kMaxTokens = size_t{1} << 24;
// The longest tokens in use are ~128 bytes; merge recovery is quadratic in it.
constexpr size_t kMaxTokenBytes = 4096;

// ---------------------------------------------------------------------------
// The BPE file.

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding (Python's base64.b64decode of tiktoken files);
// false for anything else.
bool base64_decode(std::string_view s, std::string& out) {
  out.clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && s[s.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const size_t at = i + k;
      int d = 0;
      if (at >= s.size() - pad) {
        d = 0;  // padding
      } else if ((d = base64_value(s[at])) < 0) {
        return false;
      }
      v = v << 6 | static_cast<uint32_t>(d);
    }
    const size_t n = i + 4 == s.size() ? 3 - pad : 3;
    for (size_t k = 0; k < n; ++k) out.push_back(static_cast<char>(v >> (16 - 8 * k) & 0xFF));
    // Bits the padding drops must be zero (canonical encoding).
    if (i + 4 == s.size() && pad > 0 && (v & ((1u << (8 * pad)) - 1)) != 0) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Python constants.

class PyScanner {
 public:
  PyScanner(std::string_view src, size_t pos, std::string where)
      : s_(src), i_(pos), where_(std::move(where)) {}

  // expr := concat [".join(" list ")"]
  std::string expression() {
    std::string first = concat(0);
    skip(0);
    if (!s_.substr(i_).starts_with(".join")) return first;
    i_ += 5;
    skip(0);
    expect('(');
    skip(1);
    const char open = peek();
    if (open != '[' && open != '(') bad("expected a list or tuple of strings in .join(...)");
    ++i_;
    const char close = open == '[' ? ']' : ')';
    std::string joined;
    bool any = false;
    for (;;) {
      skip(2);
      if (peek() == close) break;
      if (any) joined += first;
      joined += concat(2);
      any = true;
      skip(2);
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != close) bad("expected ',' or the end of the list in .join(...)");
    }
    ++i_;
    skip(1);
    expect(')');
    return joined;
  }

  // Only spaces and a comment may follow, up to the end of the line.
  void end_of_statement() {
    skip(0);
    if (i_ < s_.size() && s_[i_] == '#')
      while (i_ < s_.size() && s_[i_] != '\n') ++i_;
    if (i_ < s_.size() && s_[i_] != '\n' && s_[i_] != '\r' && s_[i_] != ';')
      bad("the value is not only string literals (an expression colibri does not evaluate)");
  }

  std::optional<int64_t> integer() {
    skip(0);
    int64_t v = 0;
    size_t digits = 0;
    while (i_ < s_.size() && (std::isdigit(static_cast<uint8_t>(s_[i_])) || s_[i_] == '_')) {
      if (s_[i_] != '_') {
        if (v > (INT64_MAX - 9) / 10) bad("the integer is too large");
        v = v * 10 + (s_[i_] - '0');
        ++digits;
      }
      ++i_;
    }
    if (digits == 0) bad("the value is not an integer literal");
    return v;
  }

 private:
  [[noreturn]] void bad(const char* what) const {
    const size_t line = 1 + static_cast<size_t>(std::count(s_.begin(), s_.begin() + i_, '\n'));
    fail("%s line %zu: %s", where_.c_str(), line, what);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) bad(c == ')' ? "expected ')'" : c == '(' ? "expected '('" : "unexpected text");
    ++i_;
  }

  // Skips spaces, and backslash line continuations; inside brackets
  // (depth > 0) also newlines and comments.
  void skip(int depth) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\f') {
        ++i_;
      } else if (c == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;
      } else if (c == '\\' && s_.substr(i_, 3) == "\\\r\n") {
        i_ += 3;
      } else if (depth > 0 && (c == '\n' || c == '\r')) {
        ++i_;
      } else if (depth > 0 && c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  // Where a string literal starts (after its prefix), or npos.
  size_t literal_quote() const {
    size_t j = i_;
    while (j < s_.size() && j - i_ < 2 && s_[j] != '\0' && std::strchr("rRuUbBfF", s_[j])) ++j;
    return j < s_.size() && (s_[j] == '"' || s_[j] == '\'') ? j : std::string_view::npos;
  }

  // concat := (literal | "(" concat ")")+
  std::string concat(int depth) {
    std::string out;
    bool any = false;
    for (;;) {
      skip(depth);
      if (peek() == '(' && !any) {
        // A parenthesized group, unless it is a call's argument list.
        ++i_;
        out += concat(depth + 1);
        skip(depth + 1);
        expect(')');
        any = true;
        continue;
      }
      if (literal_quote() == std::string_view::npos) break;
      out += literal();
      any = true;
    }
    if (!any) bad("expected a string literal");
    return out;
  }

  std::string literal() {
    const size_t q = literal_quote();
    bool raw = false;
    for (size_t j = i_; j < q; ++j) {
      const char c = static_cast<char>(std::tolower(static_cast<uint8_t>(s_[j])));
      if (c == 'b') bad("a bytes literal, not a string");
      if (c == 'f') bad("an f-string, which colibri does not evaluate");
      raw |= c == 'r';
    }
    i_ = q;
    const char quote = s_[i_];
    const bool triple = s_.substr(i_, 3) == std::string(3, quote);
    i_ += triple ? 3 : 1;
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) bad("a string literal is not closed");
      const char c = s_[i_];
      if (c == quote && (!triple || s_.substr(i_, 3) == std::string(3, quote))) {
        i_ += triple ? 3 : 1;
        return out;
      }
      if ((c == '\n' || c == '\r') && !triple) bad("a string literal is not closed on its line");
      if (c != '\\') {
        out += c;
        ++i_;
        continue;
      }
      if (i_ + 1 >= s_.size()) bad("a string literal is not closed");
      const char e = s_[i_ + 1];
      if (raw) {  // the backslash stays; it only keeps the next quote from closing
        out += c;
        out += e;
        i_ += 2;
        continue;
      }
      i_ += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          const auto r =
              std::from_chars(s_.data() + i_, s_.data() + std::min(s_.size(), i_ + n), cp, 16);
          if (r.ec != std::errc() || r.ptr != s_.data() + i_ + n || cp > 0x10FFFF ||
              (cp >= 0xD800 && cp <= 0xDFFF))
            bad("a \\x, \\u or \\U escape is malformed");
          utf8_append(out, cp);
          i_ += n;
          break;
        }
        case 'N':
          bad("a \\N{...} escape, which colibri does not resolve");
        default:
          if (e >= '0' && e <= '7') bad("an octal escape, which colibri does not resolve");
          out += '\\';  // Python keeps unknown escapes (\p, \s, ...) as written
          out += e;
      }
    }
  }

  std::string_view s_;
  size_t i_;
  std::string where_;
};

// The position just after "name =" on the first line that assigns name.
// The positions just after "name =" on every line that assigns name, in order.
std::vector<size_t> find_assignments(std::string_view src, std::string_view name) {
  std::vector<size_t> out;
  size_t line = 0;
  while (line < src.size()) {
    size_t j = line;
    while (j < src.size() && (src[j] == ' ' || src[j] == '\t')) ++j;
    if (src.substr(j).starts_with(name)) {
      size_t k = j + name.size();
      if (k < src.size() && src[k] == ':') {  // an annotation: name: str = ...
        while (k < src.size() && src[k] != '=' && src[k] != '\n') ++k;
      }
      while (k < src.size() && (src[k] == ' ' || src[k] == '\t')) ++k;
      if (k < src.size() && src[k] == '=' && (k + 1 >= src.size() || src[k + 1] != '='))
        out.push_back(k + 1);
    }
    const size_t nl = src.find('\n', line);
    if (nl == std::string_view::npos) break;
    line = nl + 1;
  }
  return out;
}

// The first assignment of name whose value `read` accepts: a line such as
// `pat_str=self.pat_str,` (a keyword argument) is passed over. When none is
// accepted, the first one's error.
template <typename T, typename Read>
std::optional<T> first_constant(std::string_view src, std::string_view name,
                                const std::string& where, Read read) {
  std::optional<Error> first;
  for (size_t at : find_assignments(src, name)) {
    try {
      PyScanner scan(src, at, where + ": " + std::string(name));
      T value = read(scan);
      scan.end_of_statement();
      return value;
    } catch (const Error& e) {
      if (!first) first = e;
    }
  }
  if (first) throw *first;
  return std::nullopt;
}

// tokenizer_config.json's added_tokens_decoder: id -> (content, special).
std::vector<std::pair<uint64_t, std::pair<std::string, bool>>> added_tokens(
    const json* cfg, const std::string& where) {
  std::vector<std::pair<uint64_t, std::pair<std::string, bool>>> out;
  if (!cfg || !cfg->is_object() || !cfg->contains("added_tokens_decoder")) return out;
  const json& dec = (*cfg)["added_tokens_decoder"];
  if (dec.is_null()) return out;
  CLB_CHECK(dec.is_object(), "%s: tokenizer_config.json: added_tokens_decoder is not an object",
            where.c_str());
  for (const auto& [key, v] : dec.items()) {
    uint64_t id = 0;
    const auto r = std::from_chars(key.data(), key.data() + key.size(), id);
    CLB_CHECK(r.ec == std::errc() && r.ptr == key.data() + key.size() && id < kMaxTokens,
              "%s: tokenizer_config.json: added_tokens_decoder key \"%.40s\" is not a token id "
              "below %zu",
              where.c_str(), key.c_str(), kMaxTokens);
    const json* content = v.is_object() && v.contains("content") ? &v["content"] : nullptr;
    CLB_CHECK(content && content->is_string(),
              "%s: tokenizer_config.json: added_tokens_decoder[\"%s\"] has no string content",
              where.c_str(), key.c_str());
    bool special = true;
    if (v.contains("special") && !v["special"].is_null()) {
      CLB_CHECK(v["special"].is_boolean(),
                "%s: tokenizer_config.json: added_tokens_decoder[\"%s\"].special is not true or "
                "false",
                where.c_str(), key.c_str());
      special = v["special"].get<bool>();
    }
    out.push_back({id, {content->get<std::string>(), special}});
  }
  return out;
}

}  // namespace

std::vector<std::string> read_tiktoken_ranks(std::string_view text, const std::string& where) {
  std::vector<std::string> by_rank;
  std::vector<bool> seen;
  std::unordered_map<std::string, size_t> rank_of;
  std::string bytes;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    CLB_CHECK(sp != std::string_view::npos && line.find(' ', sp + 1) == std::string_view::npos,
              "%s line %zu: expected \"<base64 token> <rank>\"", where.c_str(), line_no);
    CLB_CHECK(base64_decode(line.substr(0, sp), bytes) && !bytes.empty(),
              "%s line %zu: \"%.*s\" is not a base64 token", where.c_str(), line_no,
              static_cast<int>(std::min<size_t>(sp, 40)), line.data());
    CLB_CHECK(bytes.size() <= kMaxTokenBytes, "%s line %zu: a token of %zu bytes (at most %zu)",
              where.c_str(), line_no, bytes.size(), kMaxTokenBytes);
    const std::string_view rank_text = line.substr(sp + 1);
    size_t rank = 0;
    const auto r = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    CLB_CHECK(
        r.ec == std::errc() && r.ptr == rank_text.data() + rank_text.size() && rank < kMaxTokens,
        "%s line %zu: rank \"%.*s\" is not an integer below %zu", where.c_str(), line_no,
        static_cast<int>(std::min<size_t>(rank_text.size(), 20)), rank_text.data(), kMaxTokens);
    if (rank >= by_rank.size()) {
      by_rank.resize(rank + 1);
      seen.resize(rank + 1, false);
    }
    CLB_CHECK(!seen[rank], "%s line %zu: rank %zu is given twice", where.c_str(), line_no, rank);
    const auto [it, inserted] = rank_of.emplace(bytes, rank);
    CLB_CHECK(inserted, "%s line %zu: the token of rank %zu repeats rank %zu", where.c_str(),
              line_no, rank, it->second);
    seen[rank] = true;
    by_rank[rank] = bytes;
  }
  CLB_CHECK(!by_rank.empty(), "%s: no tokens", where.c_str());
  const auto gap = std::find(seen.begin(), seen.end(), false);
  CLB_CHECK(gap == seen.end(), "%s: no token has rank %zu (ranks must run from 0 to %zu)",
            where.c_str(), static_cast<size_t>(gap - seen.begin()), by_rank.size() - 1);
  for (int b = 0; b < 256; ++b)
    CLB_CHECK(rank_of.count(std::string(1, static_cast<char>(b))),
              "%s: byte 0x%02X is no token, so byte-level BPE cannot encode every text",
              where.c_str(), b);
  return by_rank;
}

std::vector<std::pair<int32_t, int32_t>> recover_tiktoken_merges(
    const std::vector<std::string>& tokens, const std::string& where) {
  std::unordered_map<std::string_view, int32_t> rank_of;
  rank_of.reserve(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) rank_of.emplace(tokens[r], static_cast<int32_t>(r));

  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<uint32_t> start;  // the parts' first bytes, then the token's end
  for (size_t r = 0; r < tokens.size(); ++r) {
    const std::string_view t = tokens[r];
    if (t.size() < 2) continue;
    start.resize(t.size() + 1);
    for (size_t k = 0; k <= t.size(); ++k) start[k] = static_cast<uint32_t>(k);
    // tiktoken's byte_pair_merge restricted to ranks below r: merge the
    // lowest-ranked adjacent pair, leftmost on ties, until none is left.
    while (start.size() > 3) {
      int32_t best = INT32_MAX;
      size_t at = 0;
      for (size_t k = 0; k + 2 < start.size(); ++k) {
        const auto it = rank_of.find(t.substr(start[k], start[k + 2] - start[k]));
        if (it != rank_of.end() && it->second < best) best = it->second, at = k;
      }
      if (best >= static_cast<int32_t>(r)) break;
      start.erase(start.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    const auto left = rank_of.find(t.substr(0, start[1]));
    const auto right = rank_of.find(t.substr(start[1]));
    CLB_CHECK(start.size() == 3 && left != rank_of.end() && right != rank_of.end() &&
                  left->second < static_cast<int32_t>(r) && right->second < static_cast<int32_t>(r),
              "%s: the token of rank %zu (%zu bytes) is not the merge of two tokens of lower rank "
              "(byte-pair merging by rank leaves %zu parts), so this is not a BPE table",
              where.c_str(), r, t.size(), start.size() - 1);
    merges.emplace_back(left->second, right->second);
  }
  return merges;
}

std::optional<std::string> python_string_constant(std::string_view source, std::string_view name,
                                                  const std::string& where) {
  return first_constant<std::string>(source, name, where,
                                     [](PyScanner& scan) { return scan.expression(); });
}

std::optional<int64_t> python_int_constant(std::string_view source, std::string_view name,
                                           const std::string& where) {
  return first_constant<int64_t>(source, name, where,
                                 [](PyScanner& scan) { return *scan.integer(); });
}

json tiktoken_tokenizer_json(const TiktokenFiles& files, const std::string& where) {
  const std::string ranks_where = where + ": " + files.ranks_name;
  const std::string module_where = where + ": " + files.module_name;
  const std::vector<std::string> tokens = read_tiktoken_ranks(files.ranks, ranks_where);
  const auto merges = recover_tiktoken_merges(tokens, ranks_where);

  std::optional<std::string> pattern =
      python_string_constant(files.module, "pat_str", module_where);
  if (!pattern) pattern = python_string_constant(files.module, "PAT_STR", module_where);
  CLB_CHECK(pattern.has_value(),
            "%s: no pat_str or PAT_STR assignment, so the split regex of this tokenizer is "
            "unknown",
            module_where.c_str());
  const int64_t reserved =
      python_int_constant(files.module, "num_reserved_special_tokens", module_where).value_or(0);
  CLB_CHECK(reserved >= 0 && static_cast<uint64_t>(reserved) < kMaxTokens,
            "%s: num_reserved_special_tokens %lld is out of range", module_where.c_str(),
            static_cast<long long>(reserved));

  std::vector<std::string> symbols(tokens.size());
  json vocab = json::object();
  for (size_t r = 0; r < tokens.size(); ++r) {
    append_byte_symbols(tokens[r], symbols[r]);
    vocab[symbols[r]] = r;
  }
  json merge_list = json::array();
  for (const auto& [l, r] : merges) merge_list.push_back(json::array({symbols[l], symbols[r]}));

  // Added tokens: the reserved range (all special), then the named ones.
  const auto named = added_tokens(files.tokenizer_config, where);
  const size_t n_base = tokens.size();
  json added = json::array();
  for (size_t id = n_base; id < n_base + static_cast<size_t>(reserved); ++id) {
    std::string content = "<|reserved_token_" + std::to_string(id) + "|>";
    for (const auto& [nid, tok] : named)
      if (nid == id) content = tok.first;
    added.push_back({{"id", id}, {"content", content}, {"special", true}});
  }
  for (const auto& [id, tok] : named)
    if (id < n_base || id >= n_base + static_cast<size_t>(reserved))
      added.push_back({{"id", id}, {"content", tok.first}, {"special", tok.second}});

  return {
      {"model",
       {{"type", "BPE"},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merge_list)},
        {"ignore_merges", false}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", *pattern}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", std::move(added)},
  };
}

}  // namespace colibri
