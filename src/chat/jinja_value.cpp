#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "chat/jinja_builtins.h"

namespace colibri::jinja {

Value* Dict::find(const std::string& key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  if (Value* slot = find(key)) {
    *slot = std::move(v);
    return;
  }
  entries.emplace_back(key, std::move(v));
}

bool Dict::erase(const std::string& key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

namespace {

// Values whose lists and dicts are being freed, while FlatDelete runs on
// this thread (null otherwise).
thread_local std::vector<Value>* t_freeing = nullptr;

// Frees what `take` moved into the work list, one value at a time: a nested
// list or dict freed meanwhile only moves its own items into the list.
template <typename Take>
void free_flat(Take&& take) {
  if (t_freeing) {
    take(*t_freeing);
    return;
  }
  std::vector<Value> pending;
  t_freeing = &pending;
  take(pending);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
  }  // v's last handle goes here, into this loop's list
  t_freeing = nullptr;
}

// One more level of a walk over nested lists and dicts; throws past
// kMaxNesting. The count is this thread's, and each level gives it back.
class Nest {
 public:
  Nest() {
    if (++t_depth_ > kMaxNesting) {
      --t_depth_;
      fail("lists and dicts nested deeper than %d levels", kMaxNesting);
    }
  }
  ~Nest() { --t_depth_; }
  Nest(const Nest&) = delete;
  Nest& operator=(const Nest&) = delete;

 private:
  static thread_local int t_depth_;
};
thread_local int Nest::t_depth_ = 0;

// Whether `target` (a list or dict) is v or inside it.
bool reaches(const Value& v, const void* target) {
  if (v.is_list()) {
    if (&v.list() == target) return true;
    Nest nest;
    for (const Value& e : v.list())
      if (reaches(e, target)) return true;
  } else if (v.kind() == Value::Kind::Dict) {
    if (&v.dict_ref() == target) return true;
    Nest nest;
    for (const auto& [k, e] : v.dict_ref().entries)
      if (reaches(e, target)) return true;
  }
  return false;
}

}  // namespace

void FlatDelete::operator()(List* l) const noexcept {
  free_flat([l](std::vector<Value>& pending) {
    for (Value& v : *l) pending.push_back(std::move(v));
    delete l;
  });
}

void FlatDelete::operator()(Dict* d) const noexcept {
  free_flat([d](std::vector<Value>& pending) {
    for (auto& [k, v] : d->entries) pending.push_back(std::move(v));
    delete d;
  });
}

void check_no_cycle(const Value& into, const Value& item) {
  const void* target = into.is_list() ? static_cast<const void*>(&into.list())
                                      : static_cast<const void*>(&into.dict_ref());
  CLB_CHECK(!reaches(item, target), "a %s cannot hold itself", into.type_name());
}

Value Value::function(std::string name, std::function<Value(Args&)> fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  if (is_float()) {
    // Python's int(x): NaN and the infinities refuse, and so does a float
    // past int64 here (Python's ints have no end; casting it is undefined).
    const double d = std::get<double>(v_);
    CLB_CHECK(std::isfinite(d), "cannot convert float %s to integer",
              std::isnan(d) ? "NaN" : "infinity");
    CLB_CHECK(d >= -9223372036854775808.0 && d < 9223372036854775808.0,
              "the float %g is out of the integer range", d);
    return static_cast<int64_t>(d);
  }
  CLB_CHECK(kind() == Kind::Int, "'%s' object cannot be interpreted as an integer", type_name());
  return std::get<int64_t>(v_);
}

double Value::as_number() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return as_bool();
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_number() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !list().empty();
    case Kind::Dict:
      return is_namespace() || !dict_ref().entries.empty();
    case Kind::Callable:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return is_namespace() ? "Namespace" : "dict";
    case Kind::Callable:
      return "function";
  }
  return "?";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form ("-1.2345e+02"), then laid
  // out the way Python's repr does: positional for 1e-4 <= |d| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp10 = std::stoi(sci.substr(e + 1));
  std::string out = neg ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + ebuf;
  }
  if (exp10 < 0) return out + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  size_t int_len = static_cast<size_t>(exp10) + 1;
  if (digits.size() <= int_len)
    return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String:
      return repr_string(v.as_string());
    case Value::Kind::List: {
      Nest nest;
      std::string out = "[";
      for (size_t i = 0; i < v.list().size(); i++) out += (i ? ", " : "") + repr(v.list()[i]);
      return out + "]";
    }
    case Value::Kind::Dict: {
      Nest nest;
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, item] : v.dict_ref().entries) {
        out += (first ? "" : ", ") + repr_string(k) + ": " + repr(item);
        first = false;
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return format_float(v.as_number());
    case Value::Kind::String:
      return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict:
      return repr(v);
    case Value::Kind::Callable:
      return "<function " + v.callable().name + ">";
  }
  return "";
}

// json.dumps string escaping: '"', '\\' and control characters, and with
// ensure_ascii every non-ASCII code point as \uXXXX (a UTF-16 surrogate pair
// above U+FFFF); without it the UTF-8 bytes are copied as they are.
static void dump_json_char(std::string& out, char32_t c, bool ensure_ascii) {
  char buf[16];
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    default:
      break;
  }
  if (c < 0x20 || (ensure_ascii && c >= 0x80 && c < 0x10000)) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    out += buf;
  } else if (ensure_ascii && c >= 0x10000) {
    char32_t v = c - 0x10000;
    std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                  static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
    out += buf;
  } else {
    out += static_cast<char>(c);
  }
}

static void dump_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (ensure_ascii) {
    for (char32_t c : utf8_decode(s)) dump_json_char(out, c, true);
  } else {
    for (unsigned char c : s) dump_json_char(out, c, false);
  }
  out += '"';
}

static void dump_json_rec(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  Nest nest;
  std::string item_sep = !st.item_sep.empty() ? st.item_sep : (st.indent >= 0 ? "," : ", ");
  std::string key_sep = !st.key_sep.empty() ? st.key_sep : ": ";
  auto newline = [&](int d) {
    if (st.indent < 0) return;
    check_string_bytes(out.size() + 1 + static_cast<size_t>(st.indent) * static_cast<size_t>(d),
                       "tojson");
    out += '\n';
    out.append(static_cast<size_t>(st.indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      double d = v.as_number();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                             : format_float(d);
      return;
    }
    case Value::Kind::String:
      dump_json_string(out, v.as_string(), st.ensure_ascii);
      return;
    case Value::Kind::List: {
      if (v.list().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list().size(); i++) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump_json_rec(out, v.list()[i], st, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      CLB_CHECK(!v.is_namespace(), "Object of type Namespace is not JSON serializable");
      auto entries = v.dict_ref().entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (st.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); i++) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump_json_string(out, entries[i].first, st.ensure_ascii);
        out += key_sep;
        dump_json_rec(out, entries[i].second, st, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::Undefined:
    case Value::Kind::Callable:
      fail("Object of type %s is not JSON serializable", v.type_name());
  }
}

std::string dump_json(const Value& v, const JsonStyle& style) {
  std::string out;
  dump_json_rec(out, v, style, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  Nest nest;  // a request's JSON nests as deep as its client likes
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value(None{});
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, e] : j.items()) d.dict_ref().set(k, from_json(e));
      return d;
    }
    default:
      return Value(None{});
  }
}

nlohmann::ordered_json to_json(const Value& v) {
  Nest nest;
  switch (v.kind()) {
    case Value::Kind::None:
      return nullptr;
    case Value::Kind::Bool:
      return v.as_bool();
    case Value::Kind::Int:
      return v.as_int();
    case Value::Kind::Float:
      return v.as_number();
    case Value::Kind::String:
      return v.as_string();
    case Value::Kind::List: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& e : v.list()) a.push_back(to_json(e));
      return a;
    }
    case Value::Kind::Dict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, e] : v.dict_ref().entries) o[k] = to_json(e);
      return o;
    }
    default:
      fail("Object of type %s is not JSON serializable", v.type_name());
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      Nest nest;
      const List &x = a.list(), &y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); i++)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict_ref() == &b.dict_ref();
      Nest nest;
      const Dict &x = a.dict_ref(), &y = b.dict_ref();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Callable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_number(), y = b.as_number();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  // UTF-8 byte order is code point order, which is how Python compares str.
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    Nest nest;
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); i++)
      if (int c = compare(x[i], y[i])) return c;
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'<' not supported between instances of '%s' and '%s'", a.type_name(), b.type_name());
}

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    if (i + static_cast<size_t>(len) > s.size()) len = 1;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; k++) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out += cp;
    i += static_cast<size_t>(len);
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

}  // namespace colibri::jinja
