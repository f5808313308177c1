#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "chat/jinja_value.h"

namespace colibri::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// jinja2 turns \r\n and \r into \n and drops one trailing newline
// (keep_trailing_newline=False) before lexing.
std::string normalize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); i++) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') i++;
    } else {
      out += in[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const Options& opt) : src_(normalize(source)), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); i++)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t open = find_open(pos);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, open - pos);
      char kind = src_[open + 1];
      char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign != '-' && sign != '+') sign = '\0';
      strip_left(text, kind, sign, pos == 0 || src_[pos - 1] == '\n');
      emit_text(text, pos);
      size_t body = open + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = skip_comment(open, body);
      } else if (kind == '%' && is_raw(body)) {
        pos = lex_raw(open, body);
      } else {
        pos = lex_tag(open, body, kind == '{');
      }
    }
    out_.push_back(Token{Tok::End, "", where_line(src_.size()), where_col(src_.size())});
    return std::move(out_);
  }

 private:
  int where_line(size_t off) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    return static_cast<int>(it - line_starts_.begin());
  }
  int where_col(size_t off) const {
    return static_cast<int>(off - line_starts_[static_cast<size_t>(where_line(off) - 1)]) + 1;
  }
  [[noreturn]] void error_at(size_t off, const std::string& msg) const {
    fail("chat template line %d column %d: %s", where_line(off), where_col(off), msg.c_str());
  }

  size_t find_open(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void strip_left(std::string& text, char kind, char sign, bool line_starting) const {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) end--;
      text.resize(end);
    } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
          std::all_of(text.begin() + static_cast<long>(l_pos), text.end(), is_space))
        text.resize(l_pos);
    }
  }

  // After a closing tag: `-` eats all whitespace, trim_blocks one newline.
  size_t strip_right(size_t pos, char sign, bool is_block) const {
    if (sign == '-') {
      while (pos < src_.size() && is_space(src_[pos])) pos++;
    } else if (sign != '+' && is_block && opt_.trim_blocks && pos < src_.size() &&
               src_[pos] == '\n') {
      pos++;
    }
    return pos;
  }

  void emit_text(const std::string& text, size_t off) {
    if (!text.empty()) out_.push_back(Token{Tok::Text, text, where_line(off), where_col(off)});
  }

  size_t skip_comment(size_t open, size_t body) {
    size_t close = src_.find("#}", body);
    if (close == std::string::npos) error_at(open, "missing end of comment tag '#}'");
    char sign =
        close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
    return strip_right(close + 2, sign, true);
  }

  // `{% raw %}`: is the tag at `body` exactly "raw"?
  bool is_raw(size_t body) const {
    size_t i = body;
    while (i < src_.size() && is_space(src_[i])) i++;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && is_name_char(src_[i + 3])))
      return false;
    i += 3;
    while (i < src_.size() && is_space(src_[i])) i++;
    if (i < src_.size() && src_[i] == '-') i++;
    return src_.compare(i, 2, "%}") == 0;
  }

  size_t lex_raw(size_t open, size_t body) {
    size_t close = src_.find("%}", body);
    char sign = src_[close - 1] == '-' ? '-' : '\0';
    size_t start = strip_right(close + 2, sign, true);
    for (size_t i = src_.find("{%", start); i != std::string::npos; i = src_.find("{%", i + 2)) {
      size_t j = i + 2;
      char end_sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : '\0';
      while (j < src_.size() && is_space(src_[j])) j++;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && is_space(src_[j])) j++;
      char close_sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : '\0';
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string text = src_.substr(start, i - start);
      strip_left(text, '%', end_sign, start == 0 || src_[start - 1] == '\n');
      emit_text(text, start);
      return strip_right(j + 2, close_sign, true);
    }
    error_at(open, "missing end of raw directive");
  }

  // Tokens of one `{{ ... }}` or `{% ... %}` tag; returns the offset after it.
  size_t lex_tag(size_t open, size_t pos, bool is_var) {
    out_.push_back(
        Token{is_var ? Tok::VarBegin : Tok::BlockBegin, "", where_line(open), where_col(open)});
    const char* close = is_var ? "}}" : "%}";
    int depth = 0;  // open brackets: a `}}` inside a dict literal is not the end
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) pos++;
      if (pos >= src_.size())
        error_at(open, std::string("unexpected end of template, expected '") + close + "'");
      if (depth == 0) {
        char sign = '\0';
        size_t at = pos;
        if ((src_[pos] == '-' || (src_[pos] == '+' && !is_var)) &&
            src_.compare(pos + 1, 2, close) == 0) {
          sign = src_[pos];
          at = pos + 1;
        }
        if (src_.compare(at, 2, close) == 0) {
          out_.push_back(
              Token{is_var ? Tok::VarEnd : Tok::BlockEnd, "", where_line(pos), where_col(pos)});
          return strip_right(at + 2, sign, !is_var);
        }
      }
      Token t{Tok::Op, "", where_line(pos), where_col(pos)};
      char c = src_[pos];
      if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) end++;
        t.type = Tok::Name;
        t.text = src_.substr(pos, end - pos);
        pos = end;
      } else if (is_digit(c)) {
        pos = lex_number(pos, t);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, t);
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ".",  ",",  ":",  "|", ";"};
        const char* op = nullptr;
        for (const char* candidate : kOps) {
          if (src_.compare(pos, std::strlen(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (!op) error_at(pos, std::string("unexpected character '") + c + "'");
        t.text = op;
        pos += t.text.size();
        if (t.text == "(" || t.text == "[" || t.text == "{") depth++;
        if (t.text == ")" || t.text == "]" || t.text == "}") {
          if (depth == 0) error_at(pos - 1, "unexpected '" + t.text + "'");
          depth--;
        }
      }
      out_.push_back(std::move(t));
    }
  }

  size_t lex_number(size_t pos, Token& t) {
    std::string digits;
    auto take_digits = [&] {
      while (pos < src_.size() &&
             (is_digit(src_[pos]) ||
              (src_[pos] == '_' && pos + 1 < src_.size() && is_digit(src_[pos + 1])))) {
        if (src_[pos] != '_') digits += src_[pos];
        pos++;
      }
    };
    take_digits();
    bool is_float = false;
    if (pos + 1 < src_.size() && src_[pos] == '.' && is_digit(src_[pos + 1])) {
      is_float = true;
      digits += src_[pos++];
      take_digits();
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t e = pos + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) e++;
      if (e < src_.size() && is_digit(src_[e])) {
        is_float = true;
        digits += 'e';
        digits.append(src_, pos + 1, e - pos - 1);
        pos = e;
        take_digits();
      }
    }
    t.text = digits;
    if (is_float) {
      t.type = Tok::Float;
      // Python's overflow to inf and underflow to 0 (std::stod throws there).
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t.type = Tok::Int;
      try {
        t.int_value = std::stoll(digits);
      } catch (const std::exception&) {
        error_at(pos, "integer literal out of range: " + digits);
      }
    }
    return pos;
  }

  // Python string literal escapes (jinja2 decodes them with "unicode-escape");
  // an unknown escape keeps its backslash.
  size_t lex_string(size_t pos, Token& t) {
    char quote = src_[pos];
    size_t start = pos++;
    std::string v;
    while (true) {
      if (pos >= src_.size()) error_at(start, "unterminated string literal");
      char c = src_[pos++];
      if (c == quote) break;
      if (c != '\\') {
        v += c;
        continue;
      }
      if (pos >= src_.size()) error_at(start, "unterminated string literal");
      char e = src_[pos++];
      auto hex = [&](int n) {
        if (pos + static_cast<size_t>(n) > src_.size()) error_at(pos, "truncated \\x/\\u escape");
        char32_t cp = 0;
        for (int k = 0; k < n; k++) {
          char h = src_[pos++];
          int d = is_digit(h)              ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
          if (d < 0) error_at(pos - 1, "invalid hex digit in escape");
          cp = cp * 16 + static_cast<char32_t>(d);
        }
        utf8_append(v, cp);
      };
      switch (e) {
        case 'n':
          v += '\n';
          break;
        case 't':
          v += '\t';
          break;
        case 'r':
          v += '\r';
          break;
        case '\\':
          v += '\\';
          break;
        case '\'':
          v += '\'';
          break;
        case '"':
          v += '"';
          break;
        case 'a':
          v += '\a';
          break;
        case 'b':
          v += '\b';
          break;
        case 'f':
          v += '\f';
          break;
        case 'v':
          v += '\v';
          break;
        case '\n':
          break;
        case 'x':
          hex(2);
          break;
        case 'u':
          hex(4);
          break;
        case 'U':
          hex(8);
          break;
        default:
          if (e >= '0' && e <= '7') {
            int cp = e - '0';
            for (int k = 0; k < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; k++)
              cp = cp * 8 + (src_[pos++] - '0');
            utf8_append(v, static_cast<char32_t>(cp));
          } else {
            v += '\\';
            v += e;
          }
      }
    }
    t.type = Tok::String;
    t.text = std::move(v);
    return pos;
  }

  std::string src_;
  Options opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const Options& options) {
  return Lexer(source, options).run();
}

}  // namespace colibri::jinja
