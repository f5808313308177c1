// Jinja lexer: template source -> text chunks and tag tokens.
//
// Whitespace control happens here, as in jinja2's lexer: `{%-`/`-%}` strip
// all whitespace on that side, trim_blocks drops the first newline after a
// block or comment tag, lstrip_blocks drops spaces and tabs between the start
// of a line and a block or comment tag, and `+` opts a tag out of both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace colibri::jinja {

struct Options {
  bool trim_blocks = false;    // jinja2's default; Hugging Face renders with true
  bool lstrip_blocks = false;  // jinja2's default; Hugging Face renders with true
  // A render's budget of steps (statements run, loop iterations, macro
  // calls), past which it ends in an error: a template is untrusted input,
  // and chat templates take a few hundred steps a message.
  int64_t max_steps = 4000000;
};

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // Text: the data; Name; String: the unescaped value; Op: the operator
  int line = 0;      // 1-based, in the template source
  int col = 0;       // 1-based
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws colibri::Error naming the line and column of a malformed tag.
std::vector<Token> lex(std::string_view source, const Options& options);

}  // namespace colibri::jinja
