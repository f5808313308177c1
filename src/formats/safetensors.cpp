#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"

namespace colibri {

namespace {

using Json = nlohmann::json;

// The official library's limit: larger headers are refused there too.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Real indexes are a few hundred KB (one line per tensor).
constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;
// Top-level object -> tensor object -> shape array. Anything deeper is not
// safetensors, and refusing it early bounds the work a hostile header causes.
constexpr size_t kMaxJsonDepth = 3;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

struct DTypeEntry {
  StDType type;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {StDType::kF64, "F64", 8},   {StDType::kF32, "F32", 4},        {StDType::kF16, "F16", 2},
    {StDType::kBF16, "BF16", 2}, {StDType::kI64, "I64", 8},        {StDType::kI32, "I32", 4},
    {StDType::kI16, "I16", 2},   {StDType::kI8, "I8", 1},          {StDType::kU8, "U8", 1},
    {StDType::kBool, "BOOL", 1}, {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kF8E5M2, "F8_E5M2", 1},
};

const DTypeEntry& dtype_entry(StDType t) {
  for (const DTypeEntry& e : kDTypes)
    if (e.type == t) return e;
  CLB_ASSERT(false);
  return kDTypes[0];
}

// A name or value from the file made safe for a one-line message: control
// bytes as \xNN, and cut after max bytes.
std::string printable(std::string_view s, size_t max = 120) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f)
      out += strprintf("\\x%02x", c);
    else
      out += static_cast<char>(c);
  }
  if (s.size() > max) out += strprintf("...(%zu bytes)", s.size());
  return out;
}

// A JSON value for a message: its text, cut short.
std::string show(const Json& v) {
  return printable(v.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// Builds a document from nlohmann's SAX events, as its own parser does, but
// refuses a key that appears twice in one object (nlohmann keeps the last
// silently) and nesting deeper than kMaxJsonDepth. nlohmann's callback parser
// could check both, but it rescans the parent object at the end of every
// child: 27 s for a header of 47k tensors.
class JsonBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit JsonBuilder(const std::string& what) : what_(what) {}
  Json& root() { return root_; }

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  bool string(string_t& v) override { return put(std::move(v)); }
  bool binary(binary_t& v) override { return put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (stack_.back()->contains(k)) {
      if (stack_.size() == 1)
        fail("%s: key \"%s\" appears twice", what_.c_str(), printable(k).c_str());
      fail("%s: key \"%s\" appears twice in \"%s\"", what_.c_str(), printable(k).c_str(),
           printable(names_.back()).c_str());
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // nlohmann's message starts "[json.exception.parse_error.101] ".
    const char* detail = std::strstr(e.what(), "] ");
    fail("%s: malformed JSON at byte %zu: %s", what_.c_str(), position,
         printable(detail ? detail + 2 : e.what(), 400).c_str());
  }

 private:
  Json* insert(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    Json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool put(Json v) {
    insert(std::move(v));
    return true;
  }
  bool open(Json container) {
    CLB_CHECK(stack_.size() < kMaxJsonDepth, "%s: JSON nested deeper than %zu levels",
              what_.c_str(), kMaxJsonDepth);
    // The container's name in messages: its key, or its array's name and [].
    std::string name;
    if (!stack_.empty()) name = stack_.back()->is_array() ? names_.back() + "[]" : key_;
    stack_.push_back(insert(std::move(container)));
    names_.push_back(std::move(name));
    return true;
  }
  bool close() {
    stack_.pop_back();
    names_.pop_back();
    return true;
  }

  const std::string& what_;
  Json root_;
  std::vector<Json*> stack_;        // the open containers, outermost first
  std::vector<std::string> names_;  // their names
  std::string key_;                 // the key of the next value in an object
};

// Parses [begin, end) as a JSON object; what names the text in messages
// ("x.safetensors: header").
Json parse_json_object(const char* begin, const char* end, const std::string& what) {
  // JSON has no raw NUL, but nlohmann stops at one as at the end of the
  // input, which would let anything follow it.
  if (const void* nul = std::memchr(begin, 0, static_cast<size_t>(end - begin)))
    fail("%s: malformed JSON at byte %zu: a NUL byte", what.c_str(),
         static_cast<size_t>(static_cast<const char*>(nul) - begin) + 1);
  JsonBuilder builder(what);
  try {
    Json::sax_parse(begin, end, &builder);
  } catch (const Json::exception& e) {
    fail("%s: malformed JSON: %s", what.c_str(), printable(e.what(), 400).c_str());
  }
  Json& j = builder.root();
  CLB_CHECK(j.is_object(), "%s: expected a JSON object, found %s", what.c_str(), j.type_name());
  return std::move(j);
}

// A JSON integer in [0, max], or fail naming what it is ("<where>: shape[1]").
uint64_t json_uint(const Json& v, uint64_t max, const char* where, const char* field, size_t i) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    CLB_CHECK(u <= max, "%s: %s[%zu] is %llu, more than %llu", where, field, i,
              static_cast<unsigned long long>(u), static_cast<unsigned long long>(max));
    return u;
  }
  if (v.is_number_integer()) {
    int64_t n = v.get<int64_t>();
    CLB_CHECK(n >= 0, "%s: %s[%zu] is %lld, negative", where, field, i, static_cast<long long>(n));
    return static_cast<uint64_t>(n);
  }
  fail("%s: %s[%zu] is %s, not a non-negative integer", where, field, i, show(v).c_str());
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += strprintf("%s%lld", d ? ", " : "", static_cast<long long>(shape[d]));
  return s + "]";
}

// One tensor's entry: dtype, shape, byte count and data_offsets (relative).
struct RawTensor {
  SafetensorsTensor t;
  uint64_t begin = 0, end = 0;
};

RawTensor parse_tensor(const std::string& fn, const std::string& name, const Json& v) {
  RawTensor r;
  r.t.name = name;
  std::string where = strprintf("%s: tensor %s", fn.c_str(), printable(name).c_str());
  const char* w = where.c_str();
  CLB_CHECK(v.is_object(), "%s: expected an object with dtype, shape and data_offsets, found %s", w,
            show(v).c_str());

  auto dt = v.find("dtype");
  CLB_CHECK(dt != v.end(), "%s: no \"dtype\"", w);
  CLB_CHECK(dt->is_string(), "%s: dtype is %s, not a string", w, show(*dt).c_str());
  const std::string& dname = dt->get_ref<const std::string&>();
  const DTypeEntry* entry = nullptr;
  for (const DTypeEntry& e : kDTypes)
    if (dname == e.name) entry = &e;
  CLB_CHECK(entry != nullptr, "%s: unknown dtype \"%s\"", w, printable(dname).c_str());
  r.t.dtype = entry->type;

  auto sh = v.find("shape");
  CLB_CHECK(sh != v.end(), "%s: no \"shape\"", w);
  CLB_CHECK(sh->is_array(), "%s: shape is %s, not an array", w, show(*sh).c_str());
  int64_t n = 1;
  bool overflow = false;
  for (size_t d = 0; d < sh->size(); ++d) {
    uint64_t dim = json_uint((*sh)[d], std::numeric_limits<int64_t>::max(), w, "shape", d);
    r.t.shape.push_back(static_cast<int64_t>(dim));
    // Checked at every step: a later 0 must not hide an overflow before it.
    if (!overflow && __builtin_mul_overflow(n, static_cast<int64_t>(dim), &n)) overflow = true;
  }
  CLB_CHECK(!overflow, "%s: shape %s has more elements than an int64 holds", w,
            shape_string(r.t.shape).c_str());
  uint64_t size = entry->size;
  CLB_CHECK(static_cast<uint64_t>(n) <= std::numeric_limits<uint64_t>::max() / size,
            "%s: shape %s of %s is more bytes than a uint64 holds", w,
            shape_string(r.t.shape).c_str(), entry->name);
  r.t.nbytes = static_cast<uint64_t>(n) * size;

  auto off = v.find("data_offsets");
  CLB_CHECK(off != v.end(), "%s: no \"data_offsets\"", w);
  CLB_CHECK(off->is_array() && off->size() == 2, "%s: data_offsets is %s, not [begin, end]", w,
            show(*off).c_str());
  uint64_t max = std::numeric_limits<uint64_t>::max();
  r.begin = json_uint((*off)[0], max, w, "data_offsets", 0);
  r.end = json_uint((*off)[1], max, w, "data_offsets", 1);
  return r;
}

}  // namespace

const char* st_dtype_name(StDType t) {
  return dtype_entry(t).name;
}
size_t st_dtype_size(StDType t) {
  return dtype_entry(t).size;
}

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->file_ = std::make_unique<MappedFile>(path);
  f->name_ = path;
  f->data_ = f->file_->data();
  f->size_ = f->file_->size();
  f->parse_all();
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                        std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->name_ = std::move(name);
  f->data_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse_all() {
  const char* fn = name_.c_str();
  CLB_CHECK(size_ >= 8, "%s: file is %zu bytes, too short for a safetensors header length", fn,
            size_);
  uint64_t n;
  std::memcpy(&n, data_, 8);  // little-endian, as every host colibri builds for
  CLB_CHECK(n >= 2, "%s: header length %llu is too short for a JSON object", fn,
            static_cast<unsigned long long>(n));
  CLB_CHECK(n <= kMaxHeaderBytes,
            "%s: header length %llu is over the %llu-byte limit (not safetensors, or corrupt)", fn,
            static_cast<unsigned long long>(n), static_cast<unsigned long long>(kMaxHeaderBytes));
  CLB_CHECK(n <= size_ - 8, "%s: header length %llu runs past the end of the file (%zu bytes)", fn,
            static_cast<unsigned long long>(n), size_);
  data_offset_ = 8 + n;
  const uint64_t data_size = size_ - data_offset_;
  const char* text = reinterpret_cast<const char*>(data_ + 8);
  CLB_CHECK(text[0] == '{', "%s: header does not start with '{' (byte 0x%02x): not safetensors", fn,
            static_cast<unsigned char>(text[0]));
  Json header = parse_json_object(text, text + n, name_ + ": header");

  std::vector<RawTensor> raw;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      const Json& m = it.value();
      CLB_CHECK(m.is_object(), "%s: __metadata__ is %s, not an object of strings", fn,
                show(m).c_str());
      for (auto kv = m.begin(); kv != m.end(); ++kv) {
        CLB_CHECK(kv.value().is_string(), "%s: __metadata__ key %s is %s, not a string", fn,
                  printable(kv.key()).c_str(), show(kv.value()).c_str());
        metadata_.emplace_back(kv.key(), kv.value().get<std::string>());
      }
      continue;
    }
    raw.push_back(parse_tensor(name_, it.key(), it.value()));
  }

  for (const RawTensor& r : raw) {
    std::string tn = printable(r.t.name);
    auto b = static_cast<unsigned long long>(r.begin), e = static_cast<unsigned long long>(r.end);
    CLB_CHECK(r.begin <= r.end, "%s: tensor %s: data_offsets [%llu, %llu) end before begin", fn,
              tn.c_str(), b, e);
    CLB_CHECK(r.end <= data_size,
              "%s: tensor %s: data_offsets [%llu, %llu) end past the data section (%llu bytes)", fn,
              tn.c_str(), b, e, static_cast<unsigned long long>(data_size));
    CLB_CHECK(r.end - r.begin == r.t.nbytes,
              "%s: tensor %s: data_offsets [%llu, %llu) hold %llu bytes; shape %s of %s is %llu",
              fn, tn.c_str(), b, e, e - b, shape_string(r.t.shape).c_str(),
              st_dtype_name(r.t.dtype), static_cast<unsigned long long>(r.t.nbytes));
  }

  // The tensors must tile the data section: sorted by offset, each begins
  // where the previous one ended, and the last ends at the end of the file.
  std::sort(raw.begin(), raw.end(), [](const RawTensor& a, const RawTensor& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.t.name < b.t.name;
  });
  uint64_t at = 0;
  const RawTensor* prev = nullptr;
  for (const RawTensor& r : raw) {
    std::string tn = printable(r.t.name);
    auto b = static_cast<unsigned long long>(r.begin), e = static_cast<unsigned long long>(r.end);
    if (r.begin < at)
      fail("%s: tensor %s: data_offsets [%llu, %llu) overlap tensor %s, which ends at %llu", fn,
           tn.c_str(), b, e, printable(prev->t.name).c_str(), static_cast<unsigned long long>(at));
    if (r.begin > at) {
      if (prev)
        fail(
            "%s: tensor %s: data_offsets [%llu, %llu) not contiguous: a hole of %llu bytes after "
            "tensor %s, which ends at %llu",
            fn, tn.c_str(), b, e, b - at, printable(prev->t.name).c_str(),
            static_cast<unsigned long long>(at));
      fail(
          "%s: tensor %s: data_offsets [%llu, %llu) not contiguous: the first tensor does not "
          "begin at 0",
          fn, tn.c_str(), b, e);
    }
    at = r.end;
    prev = &r;
  }
  if (at != data_size) {
    if (prev)
      fail("%s: not contiguous: %llu bytes after the last tensor %s, which ends at %llu of %llu",
           fn, static_cast<unsigned long long>(data_size - at), printable(prev->t.name).c_str(),
           static_cast<unsigned long long>(at), static_cast<unsigned long long>(data_size));
    fail("%s: not contiguous: no tensors, but the data section has %llu bytes", fn,
         static_cast<unsigned long long>(data_size));
  }

  tensors_.reserve(raw.size());
  for (RawTensor& r : raw) {
    r.t.offset = data_offset_ + r.begin;
    index_.emplace(r.t.name, tensors_.size());
    tensors_.push_back(std::move(r.t));
  }
}

// --- SafetensorsSet ---

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

const SafetensorsSet::Entry* SafetensorsSet::find(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

void SafetensorsSet::add_file(std::unique_ptr<SafetensorsFile> f) {
  for (const SafetensorsTensor& t : f->tensors()) {
    auto [it, fresh] = entries_.emplace(t.name, Entry{f.get(), &t});
    CLB_CHECK(fresh, "%s: tensor %s is also in %s", f->name().c_str(), printable(t.name).c_str(),
              it->second.file->name().c_str());
  }
  files_.push_back(std::move(f));
}

std::unique_ptr<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  std::error_code ec;
  CLB_CHECK(fs::is_directory(dir, ec), "%s: not a directory", dir.c_str());
  std::unique_ptr<SafetensorsSet> set(new SafetensorsSet());
  const fs::path single = fs::path(dir) / kSingleName;
  const fs::path index_path = fs::path(dir) / kIndexName;

  if (is_file(single)) {
    set->add_file(SafetensorsFile::open(single.string()));
  } else {
    CLB_CHECK(is_file(index_path), "%s: has no %s or %s", dir.c_str(), kSingleName, kIndexName);
    const std::string ip = index_path.string();
    const char* in = ip.c_str();
    MappedFile index(ip);
    CLB_CHECK(index.size() <= kMaxIndexBytes, "%s: %zu bytes, more than an index may have (%llu)",
              in, index.size(), static_cast<unsigned long long>(kMaxIndexBytes));
    const char* text = reinterpret_cast<const char*>(index.data());
    Json j = parse_json_object(text, text + index.size(), ip);
    auto wm = j.find("weight_map");
    CLB_CHECK(wm != j.end(), "%s: no \"weight_map\"", in);
    CLB_CHECK(wm->is_object(), "%s: weight_map is %s, not an object", in, show(*wm).c_str());

    // Open each shard once, in name order.
    std::set<std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const Json& v = it.value();
      CLB_CHECK(v.is_string(), "%s: tensor %s: shard is %s, not a file name", in,
                printable(it.key()).c_str(), show(v).c_str());
      const std::string& s = v.get_ref<const std::string&>();
      CLB_CHECK(!s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
                    s.find('\0') == std::string::npos,
                "%s: tensor %s: shard \"%s\" is not a plain file name in the folder", in,
                printable(it.key()).c_str(), printable(s).c_str());
      shards.insert(s);
    }
    for (const std::string& s : shards) {
      const fs::path p = fs::path(dir) / s;
      CLB_CHECK(is_file(p), "%s: shard %s is not in the folder", in, printable(s).c_str());
      set->add_file(SafetensorsFile::open(p.string()));
    }

    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const std::string& shard = it.value().get_ref<const std::string&>();
      const Entry* e = set->find(it.key());
      CLB_CHECK(e != nullptr, "%s: tensor %s is in no shard (the index says %s)", in,
                printable(it.key()).c_str(), printable(shard).c_str());
      CLB_CHECK(e->file->name() == (fs::path(dir) / shard).string(),
                "%s: tensor %s: the index says shard %s, but it is in %s", in,
                printable(it.key()).c_str(), printable(shard).c_str(), e->file->name().c_str());
    }
    for (const auto& [name, e] : set->entries_)
      CLB_CHECK(wm->contains(name), "%s: tensor %s is not in the index", e.file->name().c_str(),
                printable(name).c_str());
  }

  set->names_.reserve(set->entries_.size());
  for (const auto& [name, e] : set->entries_) set->names_.push_back(name);
  return set;
}

}  // namespace colibri
