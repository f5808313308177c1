// Values of the Jinja interpreter, with Python's semantics.
//
// Chat templates are Python code in disguise: they rely on str(), repr(),
// json.dumps(), truthiness, and on lists being shared by reference (a list
// stored in a namespace and appended to through it). So lists, dicts and
// callables are shared handles here, and dicts keep insertion order the way
// Python dicts do (tool schemas are printed in the order the client sent them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace colibri::jinja {

class Value;
using List = std::vector<Value>;
struct Dict;

// How deeply lists and dicts may nest where the interpreter walks them
// (printing, JSON, comparisons, a request's JSON): each level is a call.
inline constexpr int kMaxNesting = 512;

// Frees a list or dict without recursing into what it holds: a template can
// build a value nested a hundred thousand levels deep, which a recursive
// destructor would overflow the stack on.
struct FlatDelete {
  void operator()(List* l) const noexcept;
  void operator()(Dict* d) const noexcept;
};

// Arguments of a call: positional first, then keyword (name, value) pairs.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Callable {
  std::string name;
  std::function<Value(Args&)> fn;
};

// An ordered str -> Value map. Templates hold a handful of keys per dict, so
// a linear scan beats hashing here and keeps Python's insertion order.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // jinja2's namespace(): attributes only, not a mapping

  Value* find(const std::string& key);
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
  bool erase(const std::string& key);
};

// The "undefined" of jinja2's default Undefined: prints as "", is falsy,
// iterates as empty, and raises on attribute access or arithmetic. `what`
// names the missing thing for that error message.
struct Undefined {
  std::string what;
};
struct None {};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double f) : v_(f) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List items) : v_(std::shared_ptr<List>(new List(std::move(items)), FlatDelete{})) {}
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Callable> c) : v_(std::move(c)) {}

  static Value undefined(std::string what) { return Value(Undefined{std::move(what)}); }
  static Value dict() { return Value(std::shared_ptr<Dict>(new Dict(), FlatDelete{})); }
  static Value function(std::string name, std::function<Value(Args&)> fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  // Python's numbers.Number, which includes bool.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict && !std::get<7>(v_)->is_namespace; }
  bool is_namespace() const { return kind() == Kind::Dict && std::get<7>(v_)->is_namespace; }
  bool is_callable() const { return kind() == Kind::Callable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;    // int or bool
  double as_number() const;  // int, float or bool
  const std::string& as_string() const { return std::get<std::string>(v_); }
  List& list() const { return *std::get<6>(v_); }
  Dict& dict_ref() const { return *std::get<7>(v_); }
  Callable& callable() const { return *std::get<8>(v_); }
  const std::string& undefined_what() const { return std::get<Undefined>(v_).what; }

  bool truthy() const;
  // Python's type name, for error messages ("NoneType", "str", "dict").
  const char* type_name() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<Callable>>
      v_;
};

// str(v) as jinja2 prints it into the output: undefined -> "", None -> "None".
std::string to_str(const Value& v);
// Python's repr(): strings quoted, as inside str() of a list or dict.
std::string repr(const Value& v);
// Python's repr() of a float: shortest round-trip digits, "1.0", "1e+16".
std::string format_float(double d);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...).
// indent < 0 means None (one line, separators ", " and ": ").
struct JsonStyle {
  int indent = -1;
  std::string item_sep;  // empty: Python's default for the indent
  std::string key_sep;
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX (json.dumps' default)
};
std::string dump_json(const Value& v, const JsonStyle& style = {});

Value from_json(const nlohmann::ordered_json& j);
nlohmann::ordered_json to_json(const Value& v);

// Python ==, and the ordering of <, <= (throws colibri::Error where Python
// raises TypeError).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// Throws unless storing `item` in the list or dict `into` (append, insert,
// a namespace's attribute, update) leaves no cycle: a value that holds
// itself would never be freed and prints without end.
void check_no_cycle(const Value& into, const Value& item);

// Strings are UTF-8; Python indexes them by code point.
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);
void utf8_append(std::string& out, char32_t c);

}  // namespace colibri::jinja
