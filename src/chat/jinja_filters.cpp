// jinja2's built-in filters and tests, as of jinja2 3.1, with tojson as
// Hugging Face defines it (json.dumps with ensure_ascii=False).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "chat/jinja_builtins.h"

namespace colibri::jinja {
namespace {

bool arg_true(const Value& v) {
  return !v.is_undefined() && v.truthy();
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Attribute lookup of the map/sort/selectattr filters: "a.b" walks, "0" indexes.
Value attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    int64_t index = 0;
    // An index past int64 is past any list: no such item, as jinja2's IndexError.
    const bool in_range =
        numeric && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc();
    v = numeric && v.is_list()
            ? (in_range ? get_item(v, Value(index)) : Value::undefined("no item " + part))
            : get_item(v, Value(part));
    if (v.is_undefined() || dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

// The key sort/unique/dictsort compare by: strings fold case unless asked not to.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(lower_ascii(v.as_string())) : v;
}

Args rest_args(Args& args, size_t skip) {
  Args out;
  out.positional.assign(
      args.positional.begin() + static_cast<long>(std::min(skip, args.positional.size())),
      args.positional.end());
  out.keyword = args.keyword;
  return out;
}

// select/reject/selectattr/rejectattr.
Value select(const Value& value, Args& args, bool by_attr, bool keep) {
  CLB_CHECK(!by_attr || !args.positional.empty(), "selectattr: missing attribute name");
  std::string attr = by_attr ? to_str(args.positional[0]) : "";
  size_t first_test = by_attr ? 1 : 0;
  std::string test = args.positional.size() > first_test ? to_str(args.positional[first_test]) : "";
  Args test_args = rest_args(args, first_test + 1);
  List out;
  for (const Value& item : iterate(value)) {
    Value subject = by_attr ? attribute_of(item, attr) : item;
    bool ok = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (ok == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

double round_half_even(double x) {
  return std::nearbyint(x);
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  // A width of n spaces (none below 1, as Python's " " * n), or the string.
  const int64_t spaces = width.is_string() ? 0 : width.is_undefined() ? 4 : width.as_int();
  check_string_bytes(static_cast<size_t>(std::max<int64_t>(spaces, 0)), "indent");
  std::string pad = width.is_string()
                        ? width.as_string()
                        : std::string(static_cast<size_t>(std::max<int64_t>(spaces, 0)), ' ');
  // jinja2 appends a newline before splitlines(), so a trailing newline
  // yields a last empty line that is not indented.
  std::string text = s + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); i++) {
    if (i) out += '\n';
    bool indent_it = i == 0 ? first : (blank || !lines[i].empty());
    check_string_bytes(out.size() + pad.size() + lines[i].size() + 1, "indent");
    out += (indent_it ? pad : "") + lines[i];
  }
  return out;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& value, Args& args) {
  const char* fn = name.c_str();
  if (name == "safe" || name == "string" || name == "e" || name == "escape") {
    bind_args(fn, args, {});
    if (name == "safe") return value;
    if (name == "string") return value.is_string() ? value : Value(to_str(value));
    std::string out;
    for (char c : to_str(value)) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += c;
      }
    }
    return Value(out);
  }
  if (name == "tojson") {
    auto a = bind_args(fn, args, {"indent", "separators", "sort_keys", "ensure_ascii"});
    JsonStyle st;
    if (!a[0].is_undefined() && !a[0].is_none())  // past 16 Mi spaces, the size check refuses it
      st.indent = static_cast<int>(std::min<int64_t>(a[0].as_int(), int64_t{1} << 24));
    if (a[1].is_list() && a[1].list().size() == 2) {
      st.item_sep = to_str(a[1].list()[0]);
      st.key_sep = to_str(a[1].list()[1]);
    }
    st.sort_keys = arg_true(a[2]);
    st.ensure_ascii = arg_true(a[3]);
    return Value(dump_json(value, st));
  }
  if (name == "from_json") {
    bind_args(fn, args, {});
    CLB_CHECK(value.is_string(), "from_json: expected a string, got %s", value.type_name());
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(value.as_string(), nullptr, false);
    CLB_CHECK(!j.is_discarded(), "from_json: invalid JSON");
    return from_json(j);
  }
  if (name == "length" || name == "count") {
    bind_args(fn, args, {});
    return Value(length(value));
  }
  if (name == "trim") {
    auto a = bind_args(fn, args, {"chars"});
    Args strip_args;
    if (!a[0].is_undefined()) strip_args.positional.push_back(a[0]);
    return get_attr(Value(to_str(value)), "strip").callable().fn(strip_args);
  }
  if (name == "lower" || name == "upper" || name == "title" || name == "capitalize") {
    bind_args(fn, args, {});
    Args none;
    if (name == "title") {  // jinja2's title: words start after space, '-', or an open bracket
      std::string s = to_str(value);
      bool start = true;
      for (char& c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
        start = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      }
      return Value(s);
    }
    return get_attr(Value(to_str(value)), name).callable().fn(none);
  }
  if (name == "replace") {
    auto a = bind_args(fn, args, {"old", "new", "count"}, 2);
    Args r;
    r.positional = {Value(to_str(a[0])), Value(to_str(a[1]))};
    if (!a[2].is_undefined() && !a[2].is_none()) r.positional.push_back(a[2]);
    return get_attr(Value(to_str(value)), "replace").callable().fn(r);
  }
  if (name == "join") {
    auto a = bind_args(fn, args, {"d", "attribute"});
    std::string sep = a[0].is_undefined() ? "" : to_str(a[0]), out;
    bool first = true;
    for (const Value& item : iterate(value)) {
      const std::string part =
          to_str(a[1].is_undefined() ? item : attribute_of(item, to_str(a[1])));
      check_string_bytes(out.size() + (first ? 0 : sep.size()) + part.size(), "join");
      out += (first ? "" : sep) + part;
      first = false;
    }
    return Value(out);
  }
  if (name == "first" || name == "last") {
    bind_args(fn, args, {});
    List items = iterate(value);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    auto a = bind_args(fn, args, {"default_value", "boolean"});
    bool use_default = value.is_undefined() || (arg_true(a[1]) && !value.truthy());
    return use_default ? (a[0].is_undefined() ? Value("") : a[0]) : value;
  }
  if (name == "items") {
    bind_args(fn, args, {});
    if (value.is_undefined()) return Value(List{});
    CLB_CHECK(value.is_dict(), "Can only get item pairs from a mapping.");
    Args none;
    return get_attr(value, "items").callable().fn(none);
  }
  if (name == "list") {
    bind_args(fn, args, {});
    return Value(iterate(value));
  }
  if (name == "reverse") {
    bind_args(fn, args, {});
    if (value.is_string()) {
      std::u32string u = utf8_decode(value.as_string());
      std::reverse(u.begin(), u.end());
      return Value(utf8_encode(u));
    }
    List items = iterate(value);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "select") return select(value, args, false, true);
  if (name == "reject") return select(value, args, false, false);
  if (name == "selectattr") return select(value, args, true, true);
  if (name == "rejectattr") return select(value, args, true, false);
  if (name == "map") {
    List out;
    const Value* attribute = nullptr;
    const Value* dflt = nullptr;
    for (auto& [k, v] : args.keyword) {
      if (k == "attribute")
        attribute = &v;
      else if (k == "default")
        dflt = &v;
    }
    if (attribute) {
      for (const Value& item : iterate(value)) {
        Value v = attribute_of(item, to_str(*attribute));
        out.push_back(v.is_undefined() && dflt ? *dflt : v);
      }
      return Value(std::move(out));
    }
    CLB_CHECK(!args.positional.empty(), "map: expected a filter name or attribute=");
    std::string filter = to_str(args.positional[0]);
    Args filter_args = rest_args(args, 1);
    for (const Value& item : iterate(value)) out.push_back(apply_filter(filter, item, filter_args));
    return Value(std::move(out));
  }
  if (name == "unique") {
    auto a = bind_args(fn, args, {"case_sensitive", "attribute"});
    List out, seen;
    for (const Value& item : iterate(value)) {
      Value key =
          sort_key(a[1].is_undefined() ? item : attribute_of(item, to_str(a[1])), arg_true(a[0]));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value(std::move(out));
  }
  if (name == "sort") {
    auto a = bind_args(fn, args, {"reverse", "case_sensitive", "attribute"});
    List items = iterate(value);
    bool cs = arg_true(a[1]);
    auto key = [&](const Value& v) {
      return sort_key(a[2].is_undefined() ? v : attribute_of(v, to_str(a[2])), cs);
    };
    // Python's sort(reverse=True) keeps equal items in their original order.
    bool reverse = arg_true(a[0]);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
    });
    return Value(std::move(items));
  }
  if (name == "dictsort") {
    auto a = bind_args(fn, args, {"case_sensitive", "by", "reverse"});
    CLB_CHECK(value.is_dict(), "dictsort: expected a dict, got %s", value.type_name());
    int pos = a[1].is_string() && a[1].as_string() == "value" ? 1 : 0;
    List items;
    for (const auto& [k, v] : value.dict_ref().entries) items.emplace_back(List{Value(k), v});
    bool cs = arg_true(a[0]), reverse = arg_true(a[2]);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value &kx = x.list()[pos], &ky = y.list()[pos];
      return reverse ? compare(sort_key(ky, cs), sort_key(kx, cs)) < 0
                     : compare(sort_key(kx, cs), sort_key(ky, cs)) < 0;
    });
    return Value(std::move(items));
  }
  if (name == "int" || name == "float") {
    auto a = bind_args(fn, args, {"default", "base"});
    Value dflt = a[0].is_undefined() ? (name == "int" ? Value(int64_t{0}) : Value(0.0)) : a[0];
    double d = 0;
    if (value.is_number()) {
      d = value.as_number();
      if (name == "int" && !value.is_float()) return Value(value.as_int());
    } else if (value.is_string()) {
      std::string s = value.as_string();
      char* end = nullptr;
      errno = 0;
      if (name == "int") {
        long long i = std::strtoll(s.c_str(), &end,
                                   a[1].is_undefined() ? 10 : static_cast<int>(a[1].as_int()));
        if (end != s.c_str() && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
      }
      d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() || *end != '\0') return dflt;
    } else {
      return dflt;
    }
    return name == "int" ? Value(static_cast<int64_t>(d)) : Value(d);
  }
  if (name == "abs") {
    bind_args(fn, args, {});
    CLB_CHECK(value.is_number(), "bad operand type for abs(): '%s'", value.type_name());
    return value.is_float() ? Value(std::fabs(value.as_number()))
                            : Value(static_cast<int64_t>(std::llabs(value.as_int())));
  }
  if (name == "round") {
    auto a = bind_args(fn, args, {"precision", "method"});
    CLB_CHECK(value.is_number(), "round: expected a number, got %s", value.type_name());
    int64_t precision = a[0].is_undefined() ? 0 : a[0].as_int();
    std::string method = a[1].is_undefined() ? "common" : to_str(a[1]);
    if (value.is_int() && method == "common" && precision >= 0) return value;
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = value.as_number() * scale;
    double r = method == "ceil"    ? std::ceil(x)
               : method == "floor" ? std::floor(x)
                                   : round_half_even(x);
    CLB_CHECK(method == "common" || method == "ceil" || method == "floor",
              "round: method must be 'common', 'ceil' or 'floor'");
    return Value(r / scale);
  }
  if (name == "indent") {
    auto a = bind_args(fn, args, {"width", "first", "blank"});
    return Value(indent(to_str(value), a[0], arg_true(a[1]), arg_true(a[2])));
  }
  if (name == "center") {
    auto a = bind_args(fn, args, {"width"});
    int64_t width = a[0].is_undefined() ? 80 : a[0].as_int();
    std::string s = to_str(value);
    int64_t n = static_cast<int64_t>(utf8_decode(s).size());
    if (n >= width) return Value(s);
    check_string_bytes(s.size() + static_cast<size_t>(width - n), "center");
    // Python's str.center puts the extra space on the right unless width is odd.
    int64_t total = width - n, left = total / 2 + (total & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "wordcount") {
    bind_args(fn, args, {});
    int64_t n = 0;
    bool in_word = false;
    for (unsigned char c : to_str(value)) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) n++;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "sum") {
    auto a = bind_args(fn, args, {"attribute", "start"});
    Value total = a[1].is_undefined() ? Value(int64_t{0}) : a[1];
    for (const Value& item : iterate(value)) {
      Value v = a[0].is_undefined() ? item : attribute_of(item, to_str(a[0]));
      CLB_CHECK(v.is_number() && total.is_number(), "sum: unsupported operand type '%s'",
                v.type_name());
      total = v.is_float() || total.is_float() ? Value(total.as_number() + v.as_number())
                                               : Value(total.as_int() + v.as_int());
    }
    return total;
  }
  if (name == "min" || name == "max") {
    auto a = bind_args(fn, args, {"case_sensitive", "attribute"});
    List items = iterate(value);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    auto key = [&](const Value& v) {
      return sort_key(a[1].is_undefined() ? v : attribute_of(v, to_str(a[1])), arg_true(a[0]));
    };
    Value best = items[0];
    for (const Value& item : items) {
      int c = compare(key(item), key(best));
      if (name == "min" ? c < 0 : c > 0) best = item;
    }
    return best;
  }
  if (name == "attr") {
    auto a = bind_args(fn, args, {"name"}, 1);
    return get_attr(value, to_str(a[0]));
  }
  fail("no filter named '%s'", fn);
}

bool apply_test(const std::string& name, const Value& v, Args& args) {
  const char* fn = name.c_str();
  auto no_args = [&] { bind_args(fn, args, {}); };
  if (name == "defined") return no_args(), !v.is_undefined();
  if (name == "undefined") return no_args(), v.is_undefined();
  if (name == "none") return no_args(), v.is_none();
  if (name == "string") return no_args(), v.is_string();
  if (name == "number") return no_args(), v.is_number();
  if (name == "integer") return no_args(), v.is_int();
  if (name == "float") return no_args(), v.is_float();
  if (name == "boolean") return no_args(), v.is_bool();
  if (name == "true") return no_args(), v.is_bool() && v.as_bool();
  if (name == "false") return no_args(), v.is_bool() && !v.as_bool();
  if (name == "mapping") return no_args(), v.is_dict();
  if (name == "callable") return no_args(), v.is_callable();
  // Undefined defines __iter__ and __len__ in jinja2, so it passes both.
  if (name == "iterable")
    return no_args(), v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence")
    return no_args(), v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "lower" || name == "upper") {
    no_args();
    if (!v.is_string()) return false;
    Args none;
    return get_attr(v, name == "lower" ? "islower" : "isupper").callable().fn(none).truthy();
  }
  if (name == "odd" || name == "even") {
    no_args();
    CLB_CHECK(v.is_int() || v.is_bool(), "%s test: expected an integer, got %s", fn, v.type_name());
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    auto a = bind_args(fn, args, {"num"}, 1);
    CLB_CHECK(v.is_number() && a[0].is_number(), "divisibleby: expected numbers");
    CLB_CHECK(a[0].as_number() != 0, "divisibleby: division by zero");
    if (v.is_float() || a[0].is_float()) return std::fmod(v.as_number(), a[0].as_number()) == 0;
    return v.as_int() % a[0].as_int() == 0;
  }
  auto other = [&] { return bind_args(fn, args, {"other"}, 1)[0]; };
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
    return equals(v, other());
  if (name == "ne" || name == "!=") return !equals(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, other()) < 0;
  if (name == "le" || name == "<=") return compare(v, other()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, other()) > 0;
  if (name == "ge" || name == ">=") return compare(v, other()) >= 0;
  if (name == "in") return contains(bind_args(fn, args, {"seq"}, 1)[0], v);
  fail("no test named '%s'", fn);
}

}  // namespace colibri::jinja
