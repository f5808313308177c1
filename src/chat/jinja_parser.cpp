#include "chat/jinja_parser.h"

#include <initializer_list>

#include "base/error.h"

namespace colibri::jinja {
namespace {

// A template is untrusted input: nesting (brackets, `not not ...`, blocks)
// deeper than this is an error rather than a stack overflow.
constexpr int kMaxNesting = 256;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().type != Tok::End) error("unexpected '" + cur().text + "'");
    return body;
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  Pos pos() const { return Pos{cur().line, cur().col}; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) i_++;
    return t;
  }

  // Counts one level of recursion for as long as it lives.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.error("nesting deeper than " + std::to_string(kMaxNesting));
    }
    ~Nest() { p.nesting_--; }
  };

  [[noreturn]] void error(const std::string& msg) const {
    fail("chat template line %d column %d: %s", cur().line, cur().col, msg.c_str());
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::End:
        return "end of template";
      case Tok::VarEnd:
        return "'}}'";
      case Tok::BlockEnd:
        return "'%}'";
      case Tok::String:
        return "string";
      default:
        return "'" + t.text + "'";
    }
  }

  bool at_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool at_name(const char* name) const { return cur().type == Tok::Name && cur().text == name; }
  bool accept_op(const char* op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect_name(const char* name) {
    if (!accept_name(name)) error(std::string("expected '") + name + "', got " + describe(cur()));
  }
  std::string expect_identifier() {
    if (cur().type != Tok::Name) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) error("expected '%}', got " + describe(cur()));
    next();
  }

  static ExprPtr make(Expr::Kind kind, Pos p, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = p;
    e->name = std::move(name);
    return e;
  }
  static std::unique_ptr<Node> make_node(Node::Kind kind, Pos p) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = p;
    return n;
  }

  // ---- statements ----

  // Parses until `{% <one of end_names>` (left unconsumed, positioned on the
  // name) or the end of the tokens.
  Body parse_body(std::initializer_list<const char*> end_names) {
    Body body;
    while (cur().type != Tok::End) {
      if (cur().type == Tok::Text) {
        auto n = make_node(Node::Kind::Text, pos());
        n->text = next().text;
        body.push_back(std::move(n));
      } else if (cur().type == Tok::VarBegin) {
        auto n = make_node(Node::Kind::Output, pos());
        next();
        n->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) error("expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(n));
      } else if (cur().type == Tok::BlockBegin) {
        Pos p = pos();
        const Token& kw = peek();
        for (const char* end : end_names) {
          if (kw.type == Tok::Name && kw.text == end) {
            next();
            return body;
          }
        }
        next();
        body.push_back(parse_statement(p));
      } else {
        error("unexpected " + describe(cur()));
      }
    }
    if (end_names.size() > 0) {
      std::string want;
      for (const char* e : end_names) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
      error("unexpected end of template, expected " + want);
    }
    return body;
  }

  std::unique_ptr<Node> parse_statement(Pos p) {
    Nest nest(*this);
    if (cur().type != Tok::Name) error("expected a statement name, got " + describe(cur()));
    std::string kw = next().text;
    if (kw == "if") return parse_if(p);
    if (kw == "for") return parse_for(p);
    if (kw == "set") return parse_set(p);
    if (kw == "macro") return parse_macro(p);
    if (kw == "call") return parse_call_block(p);
    if (kw == "filter") return parse_filter_block(p);
    if (kw == "generation") {
      auto n = make_node(Node::Kind::Scope, p);
      expect_block_end();
      n->body = parse_body({"endgeneration"});
      next();
      expect_block_end();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) error("'" + kw + "' outside of a loop");
      expect_block_end();
      return make_node(kw == "break" ? Node::Kind::Break : Node::Kind::Continue, p);
    }
    fail("chat template line %d column %d: unknown or unsupported statement '%s'", p.line, p.col,
         kw.c_str());
  }

  std::unique_ptr<Node> parse_if(Pos p) {
    auto n = make_node(Node::Kind::If, p);
    ExprPtr cond = parse_tuple(true);
    expect_block_end();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      std::string kw = next().text;
      if (kw == "elif") {
        cond = parse_tuple(true);
        expect_block_end();
      } else if (kw == "else") {
        expect_block_end();
        n->branches.emplace_back(nullptr, parse_body({"endif"}));
        next();
        expect_block_end();
        return n;
      } else {
        expect_block_end();
        return n;
      }
    }
  }

  std::unique_ptr<Node> parse_for(Pos p) {
    auto n = make_node(Node::Kind::For, p);
    bool paren = accept_op("(");
    do {
      n->targets.push_back(expect_identifier());
    } while (accept_op(","));
    if (paren) expect_op(")");
    expect_name("in");
    n->expr = parse_tuple(false);
    if (accept_name("if")) n->filter = parse_expression(true);
    if (at_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    loop_depth_++;
    n->body = parse_body({"else", "endfor"});
    loop_depth_--;
    if (next().text == "else") {
      expect_block_end();
      n->else_body = parse_body({"endfor"});
      next();
    }
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> parse_set(Pos p) {
    Pos tp = pos();
    std::string first = expect_identifier();
    ExprPtr target;
    if (accept_op(".")) {
      target = make(Expr::Kind::Attr, tp, expect_identifier());
      target->args.push_back(make(Expr::Kind::Name, tp, first));
    } else if (at_op(",")) {
      target = make(Expr::Kind::Tuple, tp);
      target->args.push_back(make(Expr::Kind::Name, tp, first));
      while (accept_op(","))
        target->args.push_back(make(Expr::Kind::Name, pos(), expect_identifier()));
    } else {
      target = make(Expr::Kind::Name, tp, first);
    }
    if (accept_op("=")) {
      auto n = make_node(Node::Kind::Set, p);
      n->target = std::move(target);
      n->expr = parse_tuple(true);
      expect_block_end();
      return n;
    }
    if (target->kind != Expr::Kind::Name) error("expected '='");
    auto n = make_node(Node::Kind::SetBlock, p);
    n->targets.push_back(first);
    if (at_op("|")) n->filter = parse_filters(nullptr);
    expect_block_end();
    n->body = parse_body({"endset"});
    next();
    expect_block_end();
    return n;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!at_op(")")) {
      if (!params.empty()) expect_op(",");
      if (at_op(")")) break;
      MacroParam param;
      param.name = expect_identifier();
      if (accept_op("=")) param.default_value = parse_expression(true);
      params.push_back(std::move(param));
    }
    next();
  }

  std::unique_ptr<Node> parse_macro(Pos p) {
    auto n = make_node(Node::Kind::Macro, p);
    n->text = expect_identifier();
    parse_params(n->params);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    n->body = parse_body({"endmacro"});
    loop_depth_ = saved;
    next();
    if (cur().type == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> parse_call_block(Pos p) {
    auto n = make_node(Node::Kind::CallBlock, p);
    if (at_op("(")) parse_params(n->params);
    n->expr = parse_expression(true);
    if (n->expr->kind != Expr::Kind::Call) error("expected a call after 'call'");
    expect_block_end();
    n->body = parse_body({"endcall"});
    next();
    expect_block_end();
    return n;
  }

  std::unique_ptr<Node> parse_filter_block(Pos p) {
    auto n = make_node(Node::Kind::FilterBlock, p);
    n->filter = parse_filter_chain(nullptr);
    expect_block_end();
    n->body = parse_body({"endfilter"});
    next();
    expect_block_end();
    return n;
  }

  // ---- expressions ----

  // A comma-separated list becomes a tuple (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_condexpr) {
    Pos p = pos();
    ExprPtr first = parse_expression(with_condexpr);
    if (!at_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, p);
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd || at_op(")")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    if (!with_condexpr) return parse_or();
    Pos p = pos();
    ExprPtr e = parse_or();
    while (accept_name("if")) {
      auto c = make(Expr::Kind::Cond, p);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      c->args.push_back(accept_name("else") ? parse_expression(true) : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Pos p, std::string op, ExprPtr l, ExprPtr r) {
    auto b = make(Expr::Kind::Binary, p, std::move(op));
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    Pos p = pos();
    ExprPtr e = parse_and();
    while (accept_name("or")) e = binary(p, "or", std::move(e), parse_and());
    return e;
  }

  ExprPtr parse_and() {
    Pos p = pos();
    ExprPtr e = parse_not();
    while (accept_name("and")) e = binary(p, "and", std::move(e), parse_not());
    return e;
  }

  ExprPtr parse_not() {
    Nest nest(*this);
    Pos p = pos();
    if (accept_name("not")) {
      auto u = make(Expr::Kind::Unary, p, "not");
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    Pos p = pos();
    ExprPtr e = parse_math1();
    while (true) {
      std::string op;
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = next().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (at_name("not") && peek().type == Tok::Name && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      e = binary(p, op, std::move(e), parse_math1());
    }
  }

  ExprPtr parse_math1() {
    Pos p = pos();
    ExprPtr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      e = binary(p, op, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    Pos p = pos();
    ExprPtr e = parse_math2();
    while (accept_op("~")) e = binary(p, "~", std::move(e), parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    Pos p = pos();
    ExprPtr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      e = binary(p, op, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    Pos p = pos();
    ExprPtr e = parse_unary(true);
    while (accept_op("**")) e = binary(p, "**", std::move(e), parse_unary(true));
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    Pos p = pos();
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      e = make(Expr::Kind::Unary, p, next().text);
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    return with_filter ? parse_filters(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    Pos p = pos();
    const Token& t = cur();
    if (t.type == Tok::Name) {
      next();
      if (t.text == "true" || t.text == "True") return literal(p, Value(true));
      if (t.text == "false" || t.text == "False") return literal(p, Value(false));
      if (t.text == "none" || t.text == "None") return literal(p, Value(None{}));
      return make(Expr::Kind::Name, p, t.text);
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += next().text;  // adjacent literals concatenate
      return literal(p, Value(std::move(s)));
    }
    if (t.type == Tok::Int) return literal(p, Value(next().int_value));
    if (t.type == Tok::Float) return literal(p, Value(next().float_value));
    if (accept_op("(")) {
      if (accept_op(")")) return make(Expr::Kind::Tuple, p);
      ExprPtr e = parse_tuple(true);
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto l = make(Expr::Kind::List, p);
      while (!at_op("]")) {
        if (!l->args.empty()) expect_op(",");
        if (at_op("]")) break;
        l->args.push_back(parse_expression(true));
      }
      next();
      return l;
    }
    if (accept_op("{")) {
      auto d = make(Expr::Kind::Dict, p);
      while (!at_op("}")) {
        if (!d->args.empty()) expect_op(",");
        if (at_op("}")) break;
        d->args.push_back(parse_expression(true));
        expect_op(":");
        d->args.push_back(parse_expression(true));
      }
      next();
      return d;
    }
    error("unexpected " + describe(t));
  }

  static ExprPtr literal(Pos p, Value v) {
    auto e = make(Expr::Kind::Literal, p);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      Pos p = pos();
      if (accept_op(".")) {
        if (cur().type == Tok::Int) {
          auto item = make(Expr::Kind::Item, p);
          item->args.push_back(std::move(e));
          item->args.push_back(literal(p, Value(next().int_value)));
          e = std::move(item);
        } else {
          auto attr = make(Expr::Kind::Attr, p, expect_identifier());
          attr->args.push_back(std::move(e));
          e = std::move(attr);
        }
      } else if (accept_op("[")) {
        e = parse_subscript(p, std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(Pos p, ExprPtr obj) {
    ExprPtr parts[3];
    int colons = 0;
    while (!at_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) error("too many ':' in slice");
      } else {
        if (parts[colons]) error("expected ':' or ']'");
        parts[colons] = parse_expression(true);
      }
    }
    next();
    if (colons == 0) {
      if (!parts[0]) error("empty subscript");
      auto item = make(Expr::Kind::Item, p);
      item->args.push_back(std::move(obj));
      item->args.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = make(Expr::Kind::Slice, p);
    slice->args.push_back(std::move(obj));
    for (auto& part : parts) slice->args.push_back(std::move(part));
    return slice;
  }

  // Appends `(a, b, k=v)` to e->args / e->kw.
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) error("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        e.kw.push_back(next().text);
        next();
        e.args.push_back(parse_expression(true));
      } else {
        if (!e.kw.empty()) error("positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, pos());
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  // `| name(args)` filters and `is [not] name args` tests, left to right.
  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        e = parse_filter_chain(std::move(e), true);
      } else if (at_name("is")) {
        Pos p = pos();
        next();
        auto t = make(Expr::Kind::Test, p);
        t->negated = accept_name("not");
        t->name = expect_identifier();
        t->args.push_back(std::move(e));
        if (at_op("(")) {
          parse_call_args(*t);
        } else if ((cur().type == Tok::Name || cur().type == Tok::String ||
                    cur().type == Tok::Int || cur().type == Tok::Float || at_op("[") ||
                    at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) error("cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // One `| name(args)` (the leading `|` optional for {% filter %}), or
  // several when `single` is false.
  ExprPtr parse_filter_chain(ExprPtr e, bool single = false) {
    do {
      accept_op("|");
      Pos p = pos();
      std::string name = expect_identifier();
      while (accept_op(".")) name += "." + expect_identifier();
      auto f = make(Expr::Kind::Filter, p, name);
      f->args.push_back(std::move(e));
      if (at_op("(")) parse_call_args(*f);
      e = std::move(f);
    } while (!single && at_op("|"));
    return e;
  }

  const std::vector<Token>& toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace colibri::jinja
