// The evaluator: walks the statement tree and writes the output.
//
// Scoping follows jinja2: a for-loop iteration and a macro call open a new
// scope (so `set` inside them does not leak out, which is why templates use
// namespace()), `if` does not; a macro sees the template's top-level names,
// not its caller's.
#include <cmath>

#include "base/error.h"
#include "chat/jinja.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_parser.h"

namespace colibri::jinja {
namespace {

// An error that already names its template position; not wrapped again.
class LocatedError : public Error {
 public:
  using Error::Error;
};

// A template is untrusted input: a runaway recursion must end in an error,
// not a stack overflow, and a render that would run for minutes (nested
// loops over range(), say) in an error too (Options::max_steps).
constexpr int kMaxCallDepth = 200;

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent)
      for (auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { Normal, Break, Continue };

// Python ints do not overflow; ours report it instead of wrapping.
int64_t checked_op(char op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = op == '+'   ? __builtin_add_overflow(x, y, &r)
                  : op == '-' ? __builtin_sub_overflow(x, y, &r)
                              : __builtin_mul_overflow(x, y, &r);
  CLB_CHECK(!overflow, "integer overflow");
  return r;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail("%s", a.undefined_what().c_str());
  if (b.is_undefined()) fail("%s", b.undefined_what().c_str());
  fail("unsupported operand type(s) for %s: '%s' and '%s'", op.c_str(), a.type_name(),
       b.type_name());
}

Value repeat(const Value& seq, int64_t n) {
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.list().size();
  if (n <= 0 || unit == 0) return seq.is_string() ? Value("") : Value(List{});
  const size_t limit = seq.is_string() ? kMaxStringBytes : kMaxListItems;
  CLB_CHECK(static_cast<uint64_t>(n) <= limit / unit,
            "repeating a %s of %zu %s %lld times is over the limit of %zu", seq.type_name(), unit,
            seq.is_string() ? "bytes" : "items", static_cast<long long>(n), limit);
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) out += seq.as_string();
    return Value(out);
  }
  List out;
  for (int64_t i = 0; i < n; i++) out.insert(out.end(), seq.list().begin(), seq.list().end());
  return Value(std::move(out));
}

// Python's arithmetic operators (bool counts as int, / is always float).
Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    bool ints = !a.is_float() && !b.is_float();
    int64_t x = a.as_int(), y = b.as_int();
    double fx = a.as_number(), fy = b.as_number();
    if (op == "+") return ints ? Value(checked_op('+', x, y)) : Value(fx + fy);
    if (op == "-") return ints ? Value(checked_op('-', x, y)) : Value(fx - fy);
    if (op == "*") return ints ? Value(checked_op('*', x, y)) : Value(fx * fy);
    if (op == "/") {
      CLB_CHECK(fy != 0, "division by zero");
      return Value(fx / fy);
    }
    if (op == "//" || op == "%") {
      CLB_CHECK(fy != 0, "%s by zero", op == "//" ? "integer division" : "modulo");
      if (ints) {
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q--;
          m += y;
        }
        return Value(op == "//" ? q : m);
      }
      double q = std::floor(fx / fy);
      return Value(op == "//" ? q : fx - q * fy);
    }
    if (op == "**") {
      if (ints && y >= 0) {  // by squaring: 1 ** 10**18 takes 60 steps, not 10**18
        int64_t r2 = 1;
        for (int64_t base = x, e = y; e > 0;) {
          if (e & 1) r2 = checked_op('*', r2, base);
          e >>= 1;
          if (e > 0) base = checked_op('*', base, base);
        }
        return Value(r2);
      }
      return Value(std::pow(fx, fy));
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    check_string_bytes(a.as_string().size() + b.as_string().size(), "+");
    return Value(a.as_string() + b.as_string());
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    CLB_CHECK(a.list().size() + b.list().size() <= kMaxListItems,
              "+ would build a list of %zu items, over the limit of %zu",
              a.list().size() + b.list().size(), kMaxListItems);
    List out = a.list();
    out.insert(out.end(), b.list().begin(), b.list().end());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
    return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
    return repeat(b, a.as_int());
  unsupported(op, a, b);
}

class Renderer {
 public:
  Renderer(const Value& vars, int64_t max_steps) : max_steps_(max_steps) {
    CLB_CHECK(vars.is_dict(), "template variables must be a dict, got %s", vars.type_name());
    for (const auto& [k, v] : vars.dict_ref().entries) root_.set(k, v);
  }

  void render(const Body& body, std::string& out) { exec(body, root_, out); }

 private:
  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const auto& node : body) {
      Flow f = exec_node(*node, scope, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  // One step of the render's budget (Options::max_steps), at node n.
  void step(const Node& n) {
    if (++steps_ <= max_steps_) return;
    throw LocatedError(strprintf(
        "chat template line %d column %d: the render ran over %lld steps (statements, loop "
        "iterations and macro calls)",
        n.pos.line, n.pos.col, static_cast<long long>(max_steps_)));
  }

  // out += s at node n, within the limit on a string's size.
  static void append(const Node& n, std::string& out, const std::string& s) {
    if (out.size() + s.size() <= kMaxStringBytes) {
      out += s;
      return;
    }
    throw LocatedError(
        strprintf("chat template line %d column %d: the output would grow to %zu bytes, over the "
                  "limit of %zu",
                  n.pos.line, n.pos.col, out.size() + s.size(), kMaxStringBytes));
  }

  Flow exec_node(const Node& n, Scope& scope, std::string& out) {
    step(n);
    switch (n.kind) {
      case Node::Kind::Text:
        append(n, out, n.text);
        return Flow::Normal;
      case Node::Kind::Output:
        append(n, out, to_str(eval(*n.expr, scope)));
        return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond, scope).truthy()) return exec(body, scope, out);
        return Flow::Normal;
      case Node::Kind::For:
        return exec_for(n, scope, out);
      case Node::Kind::Set:
        assign(*n.target, eval(*n.expr, scope), scope);
        return Flow::Normal;
      case Node::Kind::SetBlock: {
        std::string captured;
        exec(n.body, scope, captured);
        scope.set(n.targets[0],
                  n.filter ? filtered(*n.filter, scope, Value(captured)) : Value(captured));
        return Flow::Normal;
      }
      case Node::Kind::Macro:
        scope.set(n.text, make_macro(n, nullptr));
        return Flow::Normal;
      case Node::Kind::CallBlock: {
        Scope* call_scope = &scope;
        Value caller = make_macro(n, call_scope);
        append(n, out, to_str(eval_call(*n.expr, scope, &caller)));
        return Flow::Normal;
      }
      case Node::Kind::FilterBlock: {
        std::string captured;
        exec(n.body, scope, captured);
        append(n, out, to_str(filtered(*n.filter, scope, Value(captured))));
        return Flow::Normal;
      }
      case Node::Kind::Scope:
        return exec(n.body, scope, out);
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  Flow exec_for(const Node& n, Scope& scope, std::string& out) {
    List all = iterate(eval(*n.expr, scope));
    List items;
    if (n.filter) {
      for (Value& item : all) {
        step(n);
        Scope probe{&scope, {}};
        bind_targets(n, item, probe);
        if (eval(*n.filter, probe).truthy()) items.push_back(std::move(item));
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) {
      Scope inner{&scope, {}};
      exec(n.else_body, inner, out);
      return Flow::Normal;
    }
    int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; i++) {
      step(n);
      Scope inner{&scope, {}};
      Value loop = Value::dict();
      Dict& d = loop.dict_ref();
      d.set("index", Value(i + 1));
      d.set("index0", Value(i));
      d.set("revindex", Value(len - i));
      d.set("revindex0", Value(len - i - 1));
      d.set("first", Value(i == 0));
      d.set("last", Value(i == len - 1));
      d.set("length", Value(len));
      d.set("depth", Value(int64_t{1}));
      d.set("depth0", Value(int64_t{0}));
      d.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                              : Value::undefined("there is no previous item"));
      d.set("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)]
                                    : Value::undefined("there is no next item"));
      d.set("cycle", Value::function("cycle", [i](Args& a) {
              CLB_CHECK(!a.positional.empty(), "no items for cycling given");
              return a.positional[static_cast<size_t>(i) % a.positional.size()];
            }));
      inner.set("loop", loop);
      bind_targets(n, items[static_cast<size_t>(i)], inner);
      if (exec(n.body, inner, out) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void bind_targets(const Node& n, const Value& item, Scope& scope) {
    if (n.targets.size() == 1) {
      scope.set(n.targets[0], item);
      return;
    }
    List parts = iterate(item);
    CLB_CHECK(parts.size() == n.targets.size(), "cannot unpack %zu values into %zu loop variables",
              parts.size(), n.targets.size());
    for (size_t k = 0; k < parts.size(); k++) scope.set(n.targets[k], parts[k]);
  }

  void assign(const Expr& target, const Value& v, Scope& scope) {
    if (target.kind == Expr::Kind::Name) {
      scope.set(target.name, v);
    } else if (target.kind == Expr::Kind::Attr) {
      Value obj = eval(*target.args[0], scope);
      if (!obj.is_namespace())
        fail("chat template line %d column %d: cannot assign attribute on non-namespace object",
             target.pos.line, target.pos.col);
      try {
        check_no_cycle(obj, v);
      } catch (const Error& e) {
        fail("chat template line %d column %d: %s", target.pos.line, target.pos.col, e.what());
      }
      obj.dict_ref().set(target.name, v);
    } else {
      List parts = iterate(v);
      CLB_CHECK(parts.size() == target.args.size(), "cannot unpack %zu values into %zu names",
                parts.size(), target.args.size());
      for (size_t k = 0; k < parts.size(); k++) scope.set(target.args[k]->name, parts[k]);
    }
  }

  // A macro (or, with `call_scope`, the caller() of a call block) as a
  // callable. Macros resolve free names in the template's top-level scope.
  Value make_macro(const Node& n, Scope* call_scope) {
    Scope* parent = call_scope ? call_scope : &root_;
    std::string name = call_scope ? "caller" : n.text;
    return Value::function(name, [this, &n, parent, name](Args& args) {
      CLB_CHECK(depth_ < kMaxCallDepth, "macro calls nested deeper than %d", kMaxCallDepth);
      step(n);
      CLB_CHECK(args.positional.size() <= n.params.size(),
                "macro '%s' takes not more than %zu argument(s)", name.c_str(), n.params.size());
      Scope scope{parent, {}};
      std::vector<bool> given(n.params.size(), false);
      for (size_t i = 0; i < args.positional.size(); i++) {
        scope.set(n.params[i].name, args.positional[i]);
        given[i] = true;
      }
      for (auto& [k, v] : args.keyword) {
        size_t i = 0;
        while (i < n.params.size() && n.params[i].name != k) i++;
        if (i == n.params.size()) {
          CLB_CHECK(k == "caller", "macro '%s' takes no keyword argument '%s'", name.c_str(),
                    k.c_str());
          scope.set(k, v);
          continue;
        }
        scope.set(k, v);
        given[i] = true;
      }
      for (size_t i = 0; i < n.params.size(); i++) {
        if (given[i]) continue;
        const auto& p = n.params[i];
        scope.set(p.name, p.default_value ? eval(*p.default_value, scope)
                                          : Value::undefined("'" + p.name + "' is undefined"));
      }
      std::string out;
      depth_++;
      try {
        exec(n.body, scope, out);
      } catch (...) {
        depth_--;
        throw;
      }
      depth_--;
      return Value(out);
    });
  }

  // Applies a filter chain whose innermost operand is the block's text.
  Value filtered(const Expr& chain, Scope& scope, const Value& input) {
    const Value* saved = block_input_;
    block_input_ = &input;
    Value v = eval(chain, scope);
    block_input_ = saved;
    return v;
  }

  Value eval(const Expr& e, Scope& scope) {
    try {
      return eval_expr(e, scope);
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& err) {
      throw LocatedError(
          strprintf("chat template line %d column %d: %s", e.pos.line, e.pos.col, err.what()));
    }
  }

  Args eval_args(const Expr& e, size_t first, Scope& scope) {
    Args args;
    size_t n_pos = e.args.size() - e.kw.size();
    for (size_t i = first; i < n_pos; i++) args.positional.push_back(eval(*e.args[i], scope));
    for (size_t k = 0; k < e.kw.size(); k++)
      args.keyword.emplace_back(e.kw[k], eval(*e.args[n_pos + k], scope));
    return args;
  }

  Value eval_call(const Expr& e, Scope& scope, const Value* caller) {
    Value callee = eval(*e.args[0], scope);
    if (callee.is_undefined()) fail("%s", callee.undefined_what().c_str());
    CLB_CHECK(callee.is_callable(), "'%s' object is not callable", callee.type_name());
    Args args = eval_args(e, 1, scope);
    if (caller) args.keyword.emplace_back("caller", *caller);
    return callee.callable().fn(args);
  }

  Value lookup(const std::string& name, Scope& scope) {
    if (Value* v = scope.find(name)) return *v;
    return builtin_global(name);
  }

  Value eval_expr(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name, scope);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value(std::move(items));
      }
      case Expr::Kind::Dict: {
        Value d = Value::dict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i], scope);
          CLB_CHECK(k.is_string(), "dict keys must be strings, got %s", k.type_name());
          d.dict_ref().set(k.as_string(), eval(*e.args[i + 1], scope));
        }
        return d;
      }
      case Expr::Kind::Attr:
        return get_attr(eval(*e.args[0], scope), e.name);
      case Expr::Kind::Item:
        return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::Slice: {
        Value parts[3];
        for (int k = 0; k < 3; k++)
          if (e.args[static_cast<size_t>(k) + 1])
            parts[k] = eval(*e.args[static_cast<size_t>(k) + 1], scope);
        return get_slice(eval(*e.args[0], scope), parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::Call:
        return eval_call(e, scope, nullptr);
      case Expr::Kind::Filter: {
        Value subject;
        if (e.args[0]) {
          subject = eval(*e.args[0], scope);
        } else {
          CLB_ASSERT(block_input_ != nullptr);
          subject = *block_input_;
        }
        Args args = eval_args(e, 1, scope);
        return apply_filter(e.name, subject, args);
      }
      case Expr::Kind::Test: {
        Value subject = eval(*e.args[0], scope);
        Args args = eval_args(e, 1, scope);
        return Value(apply_test(e.name, subject, args) != e.negated);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_undefined()) fail("%s", v.undefined_what().c_str());
        CLB_CHECK(v.is_number(), "bad operand type for unary %s: '%s'", e.name.c_str(),
                  v.type_name());
        if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
        return v.is_float() ? Value(-v.as_number()) : arithmetic("-", Value(int64_t{0}), v);
      }
      case Expr::Kind::Binary:
        return eval_binary(e, scope);
      case Expr::Kind::Cond:
        if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined("the inline if had no else");
    }
    return Value();
  }

  Value eval_binary(const Expr& e, Scope& scope) {
    const std::string& op = e.name;
    Value a = eval(*e.args[0], scope);
    if (op == "and") return a.truthy() ? eval(*e.args[1], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1], scope);
    Value b = eval(*e.args[1], scope);
    if (op == "~") {
      std::string l = to_str(a), r = to_str(b);
      check_string_bytes(l.size() + r.size(), "~");
      return Value(l + r);
    }
    if (op == "==") return Value(equals(a, b));
    if (op == "!=") return Value(!equals(a, b));
    if (op == "<") return Value(compare(a, b) < 0);
    if (op == ">") return Value(compare(a, b) > 0);
    if (op == "<=") return Value(compare(a, b) <= 0);
    if (op == ">=") return Value(compare(a, b) >= 0);
    if (op == "in") return Value(contains(b, a));
    if (op == "not in") return Value(!contains(b, a));
    return arithmetic(op, a, b);
  }

  Scope root_;
  int depth_ = 0;
  int64_t steps_ = 0;
  const int64_t max_steps_;
  const Value* block_input_ = nullptr;
};

}  // namespace

namespace {

// Runs f, with what the standard library throws made an Error: every caller
// of a template catches Error, and a template is untrusted input. The
// interpreter's own checks throw Error first (the fuzz target looks for the
// rest: each such find is fixed where it is thrown).
template <typename F>
auto as_error(const char* what, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail("chat template: out of memory while %s it", what);
  } catch (const std::exception& e) {
    fail("chat template: %s while %s it", e.what(), what);
  }
}

}  // namespace

Template::Template(std::string_view source, const Options& options)
    : body_(as_error("parsing", [&] { return parse(lex(source, options)); })),
      max_steps_(options.max_steps) {}

std::string Template::render(const Value& vars) const {
  return as_error("rendering", [&] {
    std::string out;
    Renderer(vars, max_steps_).render(body_, out);
    return out;
  });
}

}  // namespace colibri::jinja
