// What templates can call: filters, tests, attribute and item access with
// the methods of str, list and dict, and the global functions.
//
// These throw colibri::Error without a location; the evaluator adds the
// line and column of the expression that called them.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace colibri::jinja {

// A template is untrusted input: it comes with the model file. Besides
// runaway recursion (the evaluator's call depth), what a render may build is
// bounded, far above what chat templates build (a prompt that fills a
// context of a million tokens is about 4 MiB of text): a string, the output
// included, of at most kMaxStringBytes; a list built by + or * of at most
// kMaxListItems items (range() has the same limit).
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;
inline constexpr size_t kMaxListItems = 1000000;
// Throws unless a string of `bytes` may be built (`what` names the operation).
void check_string_bytes(size_t bytes, const char* what);

// Binds Python-style arguments to parameter names, in order: returns one
// value per name (undefined where not given). Throws on an unknown keyword,
// a missing required one (the first `n_required`), or too many positionals.
std::vector<Value> bind_args(const char* fn, Args& args, std::initializer_list<const char*> names,
                             size_t n_required = 0);

// `value | name(args)`. Throws "no filter named ..." for an unknown name.
Value apply_filter(const std::string& name, const Value& value, Args& args);
// `value is name(args)`. Throws "no test named ..." for an unknown name.
bool apply_test(const std::string& name, const Value& value, Args& args);

// `obj.name`: a method of str/list/dict bound to obj, else obj[name]; an
// undefined value when neither exists (as jinja2's getattr).
Value get_attr(const Value& obj, const std::string& name);
// `obj[key]`: negative indexes count from the end; missing -> undefined.
Value get_item(const Value& obj, const Value& key);
// `obj[start:stop:step]` on a list or str; missing parts are undefined.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Iteration as Python does it: a dict yields its keys, a str its characters,
// undefined nothing. Throws for values that are not iterable.
List iterate(const Value& v);
// `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);
// len(v), throwing for values without a length.
int64_t length(const Value& v);

// Globals every template sees: range, namespace, dict, joiner-free subset.
// Returns undefined for other names.
Value builtin_global(const std::string& name);

}  // namespace colibri::jinja
