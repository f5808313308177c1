// The parsed template: expression and statement trees.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace colibri::jinja {

struct Pos {
  int line = 0;
  int col = 0;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // args: elements
    Tuple,    // args: elements
    Dict,     // args: key0, value0, key1, value1, ...
    Attr,     // args[0].name
    Item,     // args[0][args[1]]
    Slice,    // args[0][args[1]:args[2]:args[3]], missing parts null
    Call,     // args[0](args[1..]); the last kw.size() arguments are keyword
    Filter,   // args[0] | name(args[1..]); args[0] null inside {% filter %}
    Test,     // args[0] is [not] name(args[1..])
    Unary,    // name(args[0]): "not", "-", "+"
    Binary,   // args[0] name args[1]: arithmetic, comparison, "and", "or", "in", "not in", "~"
    Cond,     // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  Pos pos;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::string> kw;  // names of the trailing keyword arguments
  bool negated = false;         // Test: `is not`
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: no default
};

struct Node {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (condition, body); a null condition is the else
    For,          // for targets in expr [if filter] body [else else_body]
    Set,          // set target = expr; target is a Name, Tuple of Names or Attr
    SetBlock,     // set targets[0] [| filter] body endset
    Macro,        // macro name(params) body
    CallBlock,    // call[(params)] expr body: body is the caller()
    FilterBlock,  // filter expr body
    Scope,        // body rendered as is ({% generation %} of transformers)
    Break,
    Continue,
  };
  Kind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr filter;  // For: the `if` condition; SetBlock: the filter chain
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<MacroParam> params;
  Body body;
  Body else_body;
};

}  // namespace colibri::jinja
