// Attribute and item access, the methods of str/list/dict, iteration and the
// global functions.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "chat/jinja_builtins.h"

namespace colibri::jinja {
namespace {

bool is_ascii_space(char32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

// Python's str.strip(chars): whitespace when chars is None/undefined.
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set = chars.is_string() ? utf8_decode(chars.as_string()) : U"";
  auto strip_it = [&](char32_t c) {
    return chars.is_string() ? set.find(c) != std::u32string::npos : is_ascii_space(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) b++;
  if (right)
    while (e > b && strip_it(u[e - 1])) e--;
  return utf8_encode(u.substr(b, e - b));
}

List split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (!sep.is_string()) {  // runs of whitespace, no empty strings
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_ascii_space(static_cast<unsigned char>(s[i]))) i++;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_ascii_space(static_cast<unsigned char>(s[e - 1]))) e--;
        out.emplace_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ascii_space(static_cast<unsigned char>(s[j]))) j++;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.as_string();
  CLB_CHECK(!d.empty(), "empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    std::u32string u = utf8_decode(s);
    for (size_t i = 0; i <= u.size(); i++) {
      if (count < 0 || static_cast<int64_t>(i) < count) {
        check_string_bytes(out.size() + to.size() + 4, "replace");
        out += to;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; n++) {
    size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    check_string_bytes(out.size() + (at - start) + to.size(), "replace");
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(s, start);
  return out;
}

// Python's str.title(): a letter after a non-letter is upper-cased.
std::string title_case(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    bool letter = std::isalpha(static_cast<unsigned char>(c));
    if (letter) c = static_cast<char>(prev_letter ? std::tolower(c) : std::toupper(c));
    prev_letter = letter;
  }
  return out;
}

std::string ascii_map(std::string s, int (*fn)(int)) {
  for (char& c : s) c = static_cast<char>(fn(static_cast<unsigned char>(c)));
  return s;
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start) {
  auto test = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return start ? s.compare(0, a.size(), a) == 0
                 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.list())
      if (a.is_string() && test(a.as_string())) return true;
    return false;
  }
  CLB_CHECK(affix.is_string(), "%s arg must be str or a tuple of str, not %s",
            start ? "startswith" : "endswith", affix.type_name());
  return test(affix.as_string());
}

int64_t opt_int(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  CLB_CHECK(v.is_int() || v.is_bool(), "expected an integer, got %s", v.type_name());
  return v.as_int();
}

// Python's str.find on code points.
int64_t find(const std::string& s, const std::string& sub, bool reverse) {
  size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(utf8_decode(s.substr(0, at)).size());
}

Value string_method(const std::string& s, const std::string& name, Args& args) {
  if (name == "startswith" || name == "endswith") {
    auto a = bind_args(name.c_str(), args, {"prefix"}, 1);
    return Value(starts_or_ends(s, a[0], name == "startswith"));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = bind_args(name.c_str(), args, {"chars"});
    return Value(strip(s, a[0], name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto a = bind_args(name.c_str(), args, {"sep", "maxsplit"});
    int64_t maxsplit = opt_int(a[1], -1);
    if (name == "rsplit" && maxsplit >= 0 && a[0].is_string()) {
      List parts = split(s, a[0], -1);
      if (static_cast<int64_t>(parts.size()) <= maxsplit + 1) return Value(std::move(parts));
      size_t keep = parts.size() - static_cast<size_t>(maxsplit);
      std::string head;
      for (size_t i = 0; i < keep; i++) head += (i ? a[0].as_string() : "") + parts[i].as_string();
      List out{Value(head)};
      out.insert(out.end(), parts.begin() + static_cast<long>(keep), parts.end());
      return Value(std::move(out));
    }
    return Value(split(s, a[0], maxsplit));
  }
  if (name == "splitlines") {
    List out;
    size_t start = 0;
    while (start < s.size()) {
      size_t nl = s.find('\n', start);
      if (nl == std::string::npos) nl = s.size();
      out.emplace_back(s.substr(start, nl - start));
      start = nl + 1;
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    auto a = bind_args("replace", args, {"old", "new", "count"}, 2);
    return Value(replace(s, to_str(a[0]), to_str(a[1]), opt_int(a[2], -1)));
  }
  if (name == "upper") return Value(ascii_map(s, ::toupper));
  if (name == "lower") return Value(ascii_map(s, ::tolower));
  if (name == "title") return Value(title_case(s));
  if (name == "capitalize") {
    std::string out = ascii_map(s, ::tolower);
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return Value(out);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    auto a = bind_args(name.c_str(), args, {"sub"}, 1);
    CLB_CHECK(a[0].is_string(), "%s: must be str, not %s", name.c_str(), a[0].type_name());
    const std::string& sub = a[0].as_string();
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_decode(s).size() + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) n++;
      return Value(n);
    }
    int64_t at = find(s, sub, name == "rfind");
    CLB_CHECK(name != "index" || at >= 0, "substring not found");
    return Value(at);
  }
  if (name == "join") {
    auto a = bind_args("join", args, {"iterable"}, 1);
    std::string out;
    bool first = true;
    for (const Value& v : iterate(a[0])) {
      CLB_CHECK(v.is_string(), "join: expected str instance, %s found", v.type_name());
      check_string_bytes(out.size() + (first ? 0 : s.size()) + v.as_string().size(), "join");
      out += (first ? "" : s) + v.as_string();
      first = false;
    }
    return Value(out);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    bind_args(name.c_str(), args, {});
    if (s.empty()) return Value(false);
    int (*pred)(int) = name == "isdigit"   ? ::isdigit
                       : name == "isalpha" ? ::isalpha
                       : name == "isalnum" ? ::isalnum
                       : name == "isspace" ? ::isspace
                       : name == "isupper" ? ::isupper
                                           : ::islower;
    if (name == "isupper" || name == "islower") {
      bool any = false;
      for (unsigned char c : s) {
        if (std::isalpha(c)) {
          any = true;
          if (!pred(c)) return Value(false);
        }
      }
      return Value(any);
    }
    return Value(std::all_of(s.begin(), s.end(),
                             [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; }));
  }
  if (name == "format") {
    // "{}" and "{0}" placeholders only, which is what templates use.
    std::string out;
    size_t next_auto = 0;
    for (size_t i = 0; i < s.size(); i++) {
      if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
        out += '{';
        i++;
      } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
        out += '}';
        i++;
      } else if (s[i] == '{') {
        size_t close = s.find('}', i);
        CLB_CHECK(close != std::string::npos, "format: single '{' encountered");
        std::string field = s.substr(i + 1, close - i - 1);
        Value v;
        if (field.empty()) {
          CLB_CHECK(next_auto < args.positional.size(), "format: index out of range");
          v = args.positional[next_auto++];
        } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
          size_t k = std::stoul(field);
          CLB_CHECK(k < args.positional.size(), "format: index out of range");
          v = args.positional[k];
        } else {
          for (auto& [key, kv] : args.keyword)
            if (key == field) v = kv;
          CLB_CHECK(!v.is_undefined(), "format: no argument named '%s'", field.c_str());
        }
        out += to_str(v);
        i = close;
      } else {
        out += s[i];
      }
    }
    return Value(out);
  }
  fail("'str' object has no attribute '%s'", name.c_str());
}

Value list_method(const Value& self, const std::string& name, Args& args) {
  List& l = self.list();
  if (name == "append") {
    auto a = bind_args("append", args, {"object"}, 1);
    check_no_cycle(self, a[0]);
    l.push_back(a[0]);
    return Value(None{});
  }
  if (name == "extend") {
    auto a = bind_args("extend", args, {"iterable"}, 1);
    List items = iterate(a[0]);
    for (const Value& v : items) check_no_cycle(self, v);
    for (Value& v : items) l.push_back(std::move(v));
    return Value(None{});
  }
  if (name == "insert") {
    auto a = bind_args("insert", args, {"index", "object"}, 2);
    int64_t n = static_cast<int64_t>(l.size()), i = opt_int(a[0], 0);
    if (i < 0) i = std::max<int64_t>(0, i + n);
    check_no_cycle(self, a[1]);
    l.insert(l.begin() + std::min(i, n), a[1]);
    return Value(None{});
  }
  if (name == "pop") {
    auto a = bind_args("pop", args, {"index"});
    int64_t n = static_cast<int64_t>(l.size()), i = opt_int(a[0], -1);
    if (i < 0) i += n;
    CLB_CHECK(i >= 0 && i < n, "pop index out of range");
    Value v = l[static_cast<size_t>(i)];
    l.erase(l.begin() + i);
    return v;
  }
  if (name == "index" || name == "count") {
    auto a = bind_args(name.c_str(), args, {"value"}, 1);
    int64_t n = 0;
    for (size_t i = 0; i < l.size(); i++) {
      if (equals(l[i], a[0])) {
        if (name == "index") return Value(static_cast<int64_t>(i));
        n++;
      }
    }
    CLB_CHECK(name == "count", "%s is not in list", repr(a[0]).c_str());
    return Value(n);
  }
  if (name == "copy") return Value(List(l));
  fail("'list' object has no attribute '%s'", name.c_str());
}

Value dict_method(const Value& self, const std::string& name, Args& args) {
  Dict& d = self.dict_ref();
  if (name == "get") {
    auto a = bind_args("get", args, {"key", "default"}, 1);
    const Value* v = a[0].is_string() ? d.find(a[0].as_string()) : nullptr;
    return v ? *v : a[1].is_undefined() ? Value(None{}) : a[1];
  }
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(name.c_str(), args, {});
    List out;
    for (const auto& [k, v] : d.entries) {
      if (name == "items")
        out.emplace_back(List{Value(k), v});
      else if (name == "keys")
        out.emplace_back(k);
      else
        out.push_back(v);
    }
    return Value(std::move(out));
  }
  if (name == "pop") {
    auto a = bind_args("pop", args, {"key", "default"}, 1);
    const Value* v = a[0].is_string() ? d.find(a[0].as_string()) : nullptr;
    if (!v) {
      CLB_CHECK(!a[1].is_undefined(), "KeyError: %s", repr(a[0]).c_str());
      return a[1];
    }
    Value out = *v;
    d.erase(a[0].as_string());
    return out;
  }
  if (name == "update") {
    auto a = bind_args("update", args, {"other"});
    if (a[0].is_dict())
      for (const auto& [k, v] : a[0].dict_ref().entries) check_no_cycle(self, v);
    for (const auto& [k, v] : args.keyword) check_no_cycle(self, v);
    if (a[0].is_dict() && &a[0].dict_ref() != &d)
      for (const auto& [k, v] : a[0].dict_ref().entries) d.set(k, v);
    for (const auto& [k, v] : args.keyword) d.set(k, v);
    return Value(None{});
  }
  if (name == "copy") {
    Value out = Value::dict();
    out.dict_ref().entries = d.entries;
    return out;
  }
  fail("'dict' object has no attribute '%s'", name.c_str());
}

bool is_method(Value::Kind kind, const std::string& name) {
  static const char* const kStr[] = {"startswith", "endswith", "strip",      "lstrip",  "rstrip",
                                     "split",      "rsplit",   "splitlines", "replace", "upper",
                                     "lower",      "title",    "capitalize", "find",    "rfind",
                                     "index",      "count",    "join",       "isdigit", "isalpha",
                                     "isalnum",    "isspace",  "isupper",    "islower", "format"};
  static const char* const kList[] = {"append", "extend", "insert", "pop",
                                      "index",  "count",  "copy"};
  static const char* const kDict[] = {"get", "items", "keys", "values", "pop", "update", "copy"};
  auto in = [&](auto& table) {
    return std::any_of(std::begin(table), std::end(table),
                       [&](const char* m) { return name == m; });
  };
  switch (kind) {
    case Value::Kind::String:
      return in(kStr);
    case Value::Kind::List:
      return in(kList);
    case Value::Kind::Dict:
      return in(kDict);
    default:
      return false;
  }
}

// Python's slice.indices(): clamps start/stop for a sequence of length n.
void slice_indices(int64_t n, const Value& start, const Value& stop, int64_t step, int64_t& b,
                   int64_t& e) {
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    CLB_CHECK(v.is_int() || v.is_bool(), "slice indices must be integers or None");
    int64_t i = v.as_int();
    if (i < 0)
      i = std::max<int64_t>(i + n, step < 0 ? -1 : 0);
    else
      i = std::min<int64_t>(i, step < 0 ? n - 1 : n);
    return i;
  };
  b = clamp(start, step < 0 ? n - 1 : 0);
  e = clamp(stop, step < 0 ? -1 : n);
}

}  // namespace

std::vector<Value> bind_args(const char* fn, Args& args, std::initializer_list<const char*> names,
                             size_t n_required) {
  std::vector<Value> out(names.size());
  CLB_CHECK(args.positional.size() <= names.size(), "%s() takes at most %zu arguments (%zu given)",
            fn, names.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); i++) out[i] = args.positional[i];
  for (auto& [k, v] : args.keyword) {
    size_t i = 0;
    for (const char* n : names) {
      if (k == n) break;
      i++;
    }
    CLB_CHECK(i < names.size(), "%s() got an unexpected keyword argument '%s'", fn, k.c_str());
    out[i] = v;
  }
  for (size_t i = 0; i < n_required; i++)
    CLB_CHECK(!out[i].is_undefined(), "%s() missing required argument '%s'", fn, names.begin()[i]);
  return out;
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) {
    fail("%s", obj.undefined_what().empty()
                   ? ("'undefined' has no attribute '" + name + "'").c_str()
                   : obj.undefined_what().c_str());
  }
  if (obj.is_namespace()) {
    const Value* v = obj.dict_ref().find(name);
    return v ? *v : Value::undefined("'Namespace' object has no attribute '" + name + "'");
  }
  if (is_method(obj.kind(), name)) {
    if (obj.is_string()) {
      std::string s = obj.as_string();
      return Value::function(name, [s, name](Args& a) { return string_method(s, name, a); });
    }
    if (obj.is_list())
      return Value::function(name, [obj, name](Args& a) { return list_method(obj, name, a); });
    return Value::function(name, [obj, name](Args& a) { return dict_method(obj, name, a); });
  }
  if (obj.is_dict()) {
    const Value* v = obj.dict_ref().find(name);
    if (v) return *v;
  }
  return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute '" +
                          name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) {
    fail("%s", obj.undefined_what().empty() ? "'undefined' is not subscriptable"
                                            : obj.undefined_what().c_str());
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict_ref().find(key.as_string())) return *v;
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.list()[static_cast<size_t>(i)];
    } else {
      std::u32string u = utf8_decode(obj.as_string());
      int64_t n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(utf8_encode(u.substr(static_cast<size_t>(i), 1)));
    }
  }
  // jinja2 falls back to getattr for string keys (so d['items'] is a method).
  if (key.is_string() && !obj.is_dict()) return get_attr(obj, key.as_string());
  if (key.is_string() && is_method(obj.kind(), key.as_string()))
    return get_attr(obj, key.as_string());
  return Value::undefined("'" + std::string(obj.type_name()) + " object' has no element " +
                          repr(key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  int64_t step = opt_int(step_v, 1);
  CLB_CHECK(step != 0, "slice step cannot be zero");
  if (obj.is_undefined()) fail("%s", obj.undefined_what().c_str());
  int64_t b, e;
  if (obj.is_list()) {
    const List& l = obj.list();
    slice_indices(static_cast<int64_t>(l.size()), start, stop, step, b, e);
    List out;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step)
      out.push_back(l[static_cast<size_t>(i)]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string u = utf8_decode(obj.as_string());
    slice_indices(static_cast<int64_t>(u.size()), start, stop, step, b, e);
    std::u32string out;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out += u[static_cast<size_t>(i)];
    return Value(utf8_encode(out));
  }
  return Value::undefined("'" + std::string(obj.type_name()) + "' object is not subscriptable");
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.list();
    case Value::Kind::String: {
      List out;
      for (char32_t c : utf8_decode(v.as_string()))
        out.emplace_back(utf8_encode(std::u32string(1, c)));
      return out;
    }
    case Value::Kind::Dict:
      if (!v.is_namespace()) {
        List out;
        for (const auto& [k, _] : v.dict_ref().entries) out.emplace_back(k);
        return out;
      }
      [[fallthrough]];
    default:
      fail("'%s' object is not iterable", v.type_name());
  }
}

bool contains(const Value& haystack, const Value& needle) {
  if (haystack.is_string()) {
    CLB_CHECK(needle.is_string(), "'in <string>' requires string as left operand, not %s",
              needle.type_name());
    return haystack.as_string().find(needle.as_string()) != std::string::npos;
  }
  if (haystack.is_dict()) return needle.is_string() && haystack.dict_ref().find(needle.as_string());
  if (haystack.is_list()) {
    for (const Value& v : haystack.list())
      if (equals(v, needle)) return true;
    return false;
  }
  if (haystack.is_undefined()) return false;
  fail("argument of type '%s' is not iterable", haystack.type_name());
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::String:
      return static_cast<int64_t>(utf8_decode(v.as_string()).size());
    case Value::Kind::List:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::Dict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.dict_ref().entries.size());
      [[fallthrough]];
    default:
      fail("object of type '%s' has no len()", v.type_name());
  }
}

Value builtin_global(const std::string& name) {
  if (name == "range") {
    return Value::function("range", [](Args& args) {
      auto a = bind_args("range", args, {"start", "stop", "step"}, 1);
      int64_t start = 0, stop = opt_int(a[0], 0), step = 1;
      if (!a[1].is_undefined()) {
        start = stop;
        stop = opt_int(a[1], 0);
      }
      if (!a[2].is_undefined()) step = opt_int(a[2], 1);
      CLB_CHECK(step != 0, "range() arg 3 must not be zero");
      // A template is untrusted input: bound what one call may allocate
      // (counted in 128 bits: the bounds may be any int64).
      const __int128 lo = start, hi = stop, st = step;
      const __int128 n = st > 0 ? (hi - lo + st - 1) / st : (lo - hi - st - 1) / -st;
      CLB_CHECK(n <= static_cast<__int128>(kMaxListItems),
                "range() of %lld items is over the limit of %zu",
                static_cast<long long>(n > INT64_MAX ? INT64_MAX : static_cast<int64_t>(n)),
                kMaxListItems);
      List out;
      for (int64_t k = 0; k < static_cast<int64_t>(n); k++)
        out.emplace_back(static_cast<int64_t>(lo + k * st));
      return Value(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool ns = name == "namespace";
    return Value::function(name, [ns](Args& args) {
      Value d = Value::dict();
      d.dict_ref().is_namespace = ns;
      CLB_CHECK(args.positional.size() <= 1, "%s() takes at most one positional argument",
                ns ? "namespace" : "dict");
      if (!args.positional.empty()) {
        const Value& init = args.positional[0];
        CLB_CHECK(init.is_dict(), "%s(): positional argument must be a dict",
                  ns ? "namespace" : "dict");
        d.dict_ref().entries = init.dict_ref().entries;
      }
      for (auto& [k, v] : args.keyword) d.dict_ref().set(k, v);
      return d;
    });
  }
  return Value::undefined("'" + name + "' is undefined");
}

void check_string_bytes(size_t bytes, const char* what) {
  CLB_CHECK(bytes <= kMaxStringBytes, "%s would build a string of %zu bytes, over the limit of %zu",
            what, bytes, kMaxStringBytes);
}

}  // namespace colibri::jinja
