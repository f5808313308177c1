// Jinja parser: tokens -> statement tree, following jinja2's grammar and
// operator precedence (filters and tests bind tighter than arithmetic).
#pragma once

#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace colibri::jinja {

// Throws colibri::Error naming the line and column of a syntax error.
Body parse(const std::vector<Token>& tokens);

}  // namespace colibri::jinja
