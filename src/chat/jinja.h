// A small Jinja2 interpreter: the subset chat templates use.
//
//   jinja::Template t("{% for m in messages %}{{ m.role }}{% endfor %}",
//                     {.trim_blocks = true, .lstrip_blocks = true});
//   std::string out = t.render(vars);   // vars: a dict Value
//
// Supported: {{ }}, {% %}, {# #}, whitespace control, if/elif/else, for
// (loop.*, `if` filter, else, break/continue), set (incl. namespace
// attributes and {% set %}...{% endset %}), macro, call, filter blocks,
// jinja2's operators, filters and tests, and the str/list/dict methods
// templates call. Not supported: include/import/extends/block (a chat
// template is one string), recursive loops, *args/**kwargs. Errors, syntax or
// at run time, throw colibri::Error naming the template line and column.
#pragma once

#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

namespace colibri::jinja {

class Template {
 public:
  explicit Template(std::string_view source, const Options& options = {});

  // `vars` is a dict of the names the template sees, besides the globals
  // (range, namespace, dict). Callables among them act as global functions.
  std::string render(const Value& vars) const;

 private:
  Body body_;
  int64_t max_steps_;
};

}  // namespace colibri::jinja
