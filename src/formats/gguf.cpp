#include "formats/gguf.h"

#include <sys/stat.h>

#include <cstring>
#include <unordered_set>

#include "base/error.h"

namespace colibri {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
// Keys and tensor names longer than this are not from a real model; refusing
// them early bounds memory for hostile files.
constexpr uint64_t kMaxNameLen = 1 << 16;
constexpr int kMaxArrayDepth = 1;  // GGUF has no nested arrays in practice

// llama.cpp's gguf-split keys: each file's number (from 0) and the count of
// files, and in the first the count of tensors in all.
constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";

// The end of a split model's file names: "-00002-of-00005.gguf" for no 1 of 5.
std::string split_suffix(uint64_t no, uint64_t n) {
  return strprintf("-%05llu-of-%05llu.gguf", static_cast<unsigned long long>(no + 1),
                   static_cast<unsigned long long>(n));
}

size_t gguf_scalar_size_impl(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) {
    if (n > remaining())
      fail("%s: truncated at byte %zu reading %s: need %llu bytes, %zu left", name_.c_str(),
           pos_, what, static_cast<unsigned long long>(n), remaining());
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }
  const uint8_t* skip(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

void read_scalar(Cursor& c, GgufType t, GgufValue& v, const char* what) {
  switch (t) {
    case GgufType::kUint8: v.u = c.read<uint8_t>(what); break;
    case GgufType::kInt8: v.i = c.read<int8_t>(what); break;
    case GgufType::kUint16: v.u = c.read<uint16_t>(what); break;
    case GgufType::kInt16: v.i = c.read<int16_t>(what); break;
    case GgufType::kUint32: v.u = c.read<uint32_t>(what); break;
    case GgufType::kInt32: v.i = c.read<int32_t>(what); break;
    case GgufType::kUint64: v.u = c.read<uint64_t>(what); break;
    case GgufType::kInt64: v.i = c.read<int64_t>(what); break;
    case GgufType::kFloat32: v.f = c.read<float>(what); break;
    case GgufType::kFloat64: v.f = c.read<double>(what); break;
    case GgufType::kBool: {
      uint8_t b = c.read<uint8_t>(what);
      CLB_CHECK(b <= 1, "%s: bool value %u is neither 0 nor 1", what, b);
      v.u = b;
      break;
    }
    default: CLB_ASSERT(false);
  }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

// One array element of scalar type t at p, decoded into a value.
GgufValue decode_element(GgufType t, const uint8_t* p) {
  GgufValue e;
  e.type = t;
  auto get = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case GgufType::kUint8: case GgufType::kBool: e.u = p[0]; break;
    case GgufType::kInt8: e.i = static_cast<int8_t>(p[0]); break;
    case GgufType::kUint16: e.u = get(uint16_t{}); break;
    case GgufType::kInt16: e.i = get(int16_t{}); break;
    case GgufType::kUint32: e.u = get(uint32_t{}); break;
    case GgufType::kInt32: e.i = get(int32_t{}); break;
    case GgufType::kUint64: e.u = get(uint64_t{}); break;
    case GgufType::kInt64: e.i = get(int64_t{}); break;
    case GgufType::kFloat32: e.f = get(float{}); break;
    case GgufType::kFloat64: e.f = get(double{}); break;
    default: CLB_ASSERT(false);
  }
  return e;
}

// Names of ggml tensor types the dtype table does not carry, so that a file
// using one is refused by name ("tq1_0") rather than by number alone.
const char* ggml_type_name(uint32_t id) {
  if (const DTypeInfo* info = dtype_info(id)) return info->name;
  switch (id) {
    case 4: return "q4_2 (removed from ggml)";
    case 5: return "q4_3 (removed from ggml)";
    case 24: return "i8";
    case 25: return "i16";
    case 26: return "i32";
    case 27: return "i64";
    case 28: return "f64";
    case 31: return "q4_0_4_4 (removed from ggml)";
    case 32: return "q4_0_4_8 (removed from ggml)";
    case 33: return "q4_0_8_8 (removed from ggml)";
    case 34: return "tq1_0";
    case 35: return "tq2_0";
    case 36: return "iq4_nl_4_4 (removed from ggml)";
    case 37: return "iq4_nl_4_8 (removed from ggml)";
    case 38: return "iq4_nl_8_8 (removed from ggml)";
    case 40: return "nvfp4";
    case 41: return "q1_0";
    default: return "unknown";
  }
}

}  // namespace

size_t gguf_scalar_size(GgufType t) { return gguf_scalar_size_impl(t); }

const char* gguf_type_name(GgufType t) {
  static const char* kNames[] = {"uint8", "int8",  "uint16", "int16", "uint32", "int32", "float32",
                                 "bool",  "string", "array", "uint64", "int64", "float64"};
  uint32_t i = static_cast<uint32_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufType::kFloat32 || type == GgufType::kFloat64;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    struct stat cfg;
    const bool hf = ::stat((path + "/config.json").c_str(), &cfg) == 0;
    fail("%s: is a folder, not a GGUF file%s", path.c_str(),
         hf ? " (a Hugging Face model folder: `colibri convert FOLDER -o model.gguf` makes one)" : "");
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->file_ = std::make_unique<MappedFile>(path);
  f->name_ = path;
  f->data_ = f->file_->data();
  f->size_ = f->file_->size();
  f->parse_all();
  const std::optional<uint64_t> n_split = f->get_uint(kSplitCount);
  if (!n_split || *n_split <= 1) return f;
  const char* fn = path.c_str();
  CLB_CHECK(*n_split <= 65535, "%s: key %s is %llu, more files than a split model has", fn,
            kSplitCount, static_cast<unsigned long long>(*n_split));
  const std::optional<uint64_t> no = f->get_uint(kSplitNo);
  CLB_CHECK(no.has_value(), "%s: key %s is missing (each file of a split model has it)", fn,
            kSplitNo);
  CLB_CHECK(*no < *n_split, "%s: key %s is %llu, but the model is split in %llu files", fn,
            kSplitNo, static_cast<unsigned long long>(*no),
            static_cast<unsigned long long>(*n_split));
  // The others are found by name, as llama.cpp finds them.
  const std::string suffix = split_suffix(*no, *n_split);
  CLB_CHECK(path.size() > suffix.size() && path.ends_with(suffix),
            "%s: file %llu of a model split in %llu files, but not named PREFIX%s, so the "
            "others cannot be found",
            fn, static_cast<unsigned long long>(*no + 1), static_cast<unsigned long long>(*n_split),
            suffix.c_str());
  const std::string prefix = path.substr(0, path.size() - suffix.size());
  CLB_CHECK(*no == 0, "%s: file %llu of a model split in %llu files; open the first, %s%s", fn,
            static_cast<unsigned long long>(*no + 1), static_cast<unsigned long long>(*n_split),
            prefix.c_str(), split_suffix(0, *n_split).c_str());
  f.reset();
  return open_split(prefix, *n_split);
}

std::unique_ptr<GgufFile> GgufFile::open_split(const std::string& prefix, uint64_t n_split) {
  std::vector<std::string> paths;
  for (uint64_t i = 0; i < n_split; ++i) paths.push_back(prefix + split_suffix(i, n_split));
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->file_ = std::make_unique<MappedFile>(paths);
  g->name_ = paths.front();
  g->data_ = g->file_->data();
  g->size_ = g->file_->size();
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_split; ++i) {
    const MappedFile::Part& part = g->file_->parts()[i];
    const char* fn = part.path.c_str();
    std::unique_ptr<GgufFile> s = parse(g->data_ + part.begin, part.size, part.path);
    const std::optional<uint64_t> no = s->get_uint(kSplitNo);
    CLB_CHECK(no == i, "%s: key %s is %s, but the file's name makes it file %llu of %llu (from 0)",
              fn, kSplitNo, no ? std::to_string(*no).c_str() : "missing",
              static_cast<unsigned long long>(i), static_cast<unsigned long long>(n_split));
    const std::optional<uint64_t> count = s->get_uint(kSplitCount);
    CLB_CHECK(!count || *count == n_split,
              "%s: key %s is %llu, but the first file's is %llu (a file of another split?)", fn,
              kSplitCount, static_cast<unsigned long long>(count.value_or(0)),
              static_cast<unsigned long long>(n_split));
    for (GgufTensor& t : s->tensors_) {
      CLB_CHECK(names.insert(t.name).second,
                "%s: tensor %s is also in an earlier file of the split", fn, t.name.c_str());
      t.offset += part.begin;
      g->tensors_.push_back(std::move(t));
    }
    if (i == 0) {
      g->version_ = s->version_;
      g->alignment_ = s->alignment_;
      g->data_offset_ = s->data_offset_;
      g->kvs_ = std::move(s->kvs_);
    }
  }
  const char* fn = g->name_.c_str();
  const std::optional<uint64_t> n_tensors = g->get_uint(kSplitTensors);
  CLB_CHECK(n_tensors.has_value(), "%s: key %s is missing (the first file of a split model has it)",
            fn, kSplitTensors);
  CLB_CHECK(*n_tensors == g->tensors_.size(),
            "%s: key %s is %llu, but the %llu files hold %zu tensors", fn, kSplitTensors,
            static_cast<unsigned long long>(*n_tensors), static_cast<unsigned long long>(n_split),
            g->tensors_.size());
  return g;
}

uint64_t GgufFile::bytes_on_disk() const {
  if (!file_) return size_;
  uint64_t total = 0;
  for (const MappedFile::Part& p : file_->parts()) total += p.size;
  return total;
}

const std::vector<MappedFile::Part>& GgufFile::parts() const {
  static const std::vector<MappedFile::Part> none;
  return file_ ? file_->parts() : none;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = std::move(name);
  f->data_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

void GgufFile::parse_all() {
  const char* fn = name_.c_str();
  Cursor c(data_, size_, name_);
  CLB_CHECK(size_ >= 4, "%s: file is %zu bytes, too short to be GGUF", fn, size_);
  uint32_t magic = c.read<uint32_t>("magic");
  CLB_CHECK(magic == kMagic, "%s: not a GGUF file: magic is 0x%08x, expected 0x%08x (\"GGUF\")",
            fn, magic, kMagic);
  version_ = c.read<uint32_t>("version");
  CLB_CHECK(version_ == 2 || version_ == 3, "%s: GGUF version %u is not supported (2 or 3)", fn,
            version_);
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each key-value pair takes at least 12 bytes and each tensor info at least
  // 24, so larger counts cannot fit in the file.
  CLB_CHECK(n_kv <= c.remaining() / 12, "%s: metadata count %llu cannot fit in %zu bytes (truncated or corrupt)", fn,
            static_cast<unsigned long long>(n_kv), size_);
  CLB_CHECK(n_tensors <= c.remaining() / 24, "%s: tensor count %llu cannot fit in %zu bytes (truncated or corrupt)", fn,
            static_cast<unsigned long long>(n_tensors), size_);

  kvs_.reserve(n_kv);
  std::unordered_set<std::string_view> seen_keys;
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string what = strprintf("%s: metadata #%llu key", fn, static_cast<unsigned long long>(k));
    std::string_view key = c.read_string(what.c_str());
    CLB_CHECK(key.size() <= kMaxNameLen, "%s: %zu bytes long", what.c_str(), key.size());
    GgufKV kv;
    kv.key = std::string(key);
    std::string wk = strprintf("%s: key %s", fn, kv.key.c_str());
    CLB_CHECK(seen_keys.insert(key).second, "%s: appears twice", wk.c_str());
    uint32_t t = c.read<uint32_t>(wk.c_str());
    CLB_CHECK(valid_type(t), "%s: unknown value type %u", wk.c_str(), t);
    GgufValue& v = kv.value;
    v.type = static_cast<GgufType>(t);
    if (v.type == GgufType::kString) {
      v.str = c.read_string(wk.c_str());
    } else if (v.type == GgufType::kArray) {
      uint32_t et = c.read<uint32_t>(wk.c_str());
      CLB_CHECK(valid_type(et), "%s: array of unknown type %u", wk.c_str(), et);
      v.elem_type = static_cast<GgufType>(et);
      CLB_CHECK(v.elem_type != GgufType::kArray, "%s: nested arrays are not supported (depth > %d)",
                wk.c_str(), kMaxArrayDepth);
      v.count = c.read<uint64_t>(wk.c_str());
      if (v.elem_type == GgufType::kString) {
        CLB_CHECK(v.count <= c.remaining() / 8, "%s: %llu strings cannot fit in the file",
                  wk.c_str(), static_cast<unsigned long long>(v.count));
        v.strs.reserve(v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(c.read_string(wk.c_str()));
      } else {
        size_t es = gguf_scalar_size(v.elem_type);
        CLB_CHECK(v.count <= c.remaining() / es, "%s: %llu elements of %s cannot fit in the file",
                  wk.c_str(), static_cast<unsigned long long>(v.count),
                  gguf_type_name(v.elem_type));
        v.elems = c.skip(v.count * es, wk.c_str());
        if (v.elem_type == GgufType::kBool)
          for (uint64_t i = 0; i < v.count; ++i)
            CLB_CHECK(v.elems[i] <= 1, "%s: bool element %llu is %u", wk.c_str(),
                      static_cast<unsigned long long>(i), v.elems[i]);
      }
    } else {
      read_scalar(c, v.type, v, wk.c_str());
    }
    kvs_.push_back(std::move(kv));
  }

  if (const GgufValue* a = find("general.alignment")) {
    CLB_CHECK(a->is_integer(), "%s: key general.alignment: expected an integer, file has %s", fn,
              gguf_type_name(a->type));
    uint64_t al = a->type == GgufType::kInt32 || a->type == GgufType::kInt64 ||
                          a->type == GgufType::kInt16 || a->type == GgufType::kInt8
                      ? static_cast<uint64_t>(a->i)
                      : a->u;
    CLB_CHECK(al > 0 && al <= (1u << 20) && (al & (al - 1)) == 0,
              "%s: key general.alignment: expected a power of two up to 1 MiB, file has %llu", fn,
              static_cast<unsigned long long>(al));
    alignment_ = al;
  }

  tensors_.reserve(n_tensors);
  std::unordered_set<std::string_view> seen_names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    std::string what =
        strprintf("%s: tensor #%llu name", fn, static_cast<unsigned long long>(k));
    std::string_view name = c.read_string(what.c_str());
    CLB_CHECK(name.size() <= kMaxNameLen, "%s: %zu bytes long", what.c_str(), name.size());
    GgufTensor t;
    t.name = std::string(name);
    std::string wt = strprintf("%s: tensor %s", fn, t.name.c_str());
    CLB_CHECK(seen_names.insert(name).second, "%s: appears twice", wt.c_str());
    uint32_t nd = c.read<uint32_t>(wt.c_str());
    CLB_CHECK(nd >= 1 && nd <= kMaxDims, "%s: expected 1 to %d dims, file has %u", wt.c_str(),
              kMaxDims, nd);
    t.n_dims = static_cast<int>(nd);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t ne = c.read<uint64_t>(wt.c_str());
      CLB_CHECK(ne >= 1 && ne <= (uint64_t{1} << 40), "%s: dimension %u is %llu", wt.c_str(), d,
                static_cast<unsigned long long>(ne));
      CLB_CHECK(n_el <= (uint64_t{1} << 50) / ne, "%s: element count overflows", wt.c_str());
      n_el *= ne;
      t.ne[d] = static_cast<int64_t>(ne);
    }
    uint32_t ty = c.read<uint32_t>(wt.c_str());
    const DTypeInfo* info = dtype_info(ty);
    CLB_CHECK(info != nullptr && info->weight,
              "%s: tensor type %u (%s) is not supported (supported: f32 f16 bf16 q8_0 q4_0 q4_1 "
              "q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs mxfp4)",
              wt.c_str(), ty, ggml_type_name(ty));
    t.type = info->type;
    CLB_CHECK(t.ne[0] % info->block_size == 0,
              "%s: row length %lld is not a multiple of the %s block size %lld", wt.c_str(),
              static_cast<long long>(t.ne[0]), info->name,
              static_cast<long long>(info->block_size));
    t.nbytes = n_el / info->block_size * info->block_bytes;
    t.offset = c.read<uint64_t>(wt.c_str());
    CLB_CHECK(t.offset % alignment_ == 0, "%s: data offset %llu is not a multiple of alignment %zu",
              wt.c_str(), static_cast<unsigned long long>(t.offset), alignment_);
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty())
    CLB_CHECK(data_offset_ <= size_, "%s: truncated: tensor data would start at byte %zu, file has %zu",
              fn, data_offset_, size_);
  for (GgufTensor& t : tensors_) {
    uint64_t start = data_offset_ + t.offset;
    CLB_CHECK(t.offset <= size_ && start <= size_ && t.nbytes <= size_ - start,
              "%s: tensor %s: data [%llu, %llu) lies outside the file (%zu bytes); truncated?", fn,
              t.name.c_str(), static_cast<unsigned long long>(start),
              static_cast<unsigned long long>(start + t.nbytes), size_);
    t.offset = start;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKV& kv : kvs_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  CLB_CHECK(v->is_integer() || v->type == GgufType::kBool,
            "%s: key %.*s: expected an integer, file has %s", name_.c_str(),
            static_cast<int>(key.size()), key.data(), gguf_type_name(v->type));
  if (v->type == GgufType::kInt8 || v->type == GgufType::kInt16 || v->type == GgufType::kInt32 ||
      v->type == GgufType::kInt64) {
    CLB_CHECK(v->i >= 0, "%s: key %.*s: expected a non-negative value, file has %lld",
              name_.c_str(), static_cast<int>(key.size()), key.data(),
              static_cast<long long>(v->i));
    return static_cast<uint64_t>(v->i);
  }
  return v->u;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (v->type == GgufType::kInt8 || v->type == GgufType::kInt16 || v->type == GgufType::kInt32 ||
      v->type == GgufType::kInt64)
    return static_cast<double>(v->i);
  if (v->is_integer()) return static_cast<double>(v->u);
  fail("%s: key %.*s: expected a number, file has %s", name_.c_str(),
       static_cast<int>(key.size()), key.data(), gguf_type_name(v->type));
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  CLB_CHECK(v->type == GgufType::kBool, "%s: key %.*s: expected bool, file has %s", name_.c_str(),
            static_cast<int>(key.size()), key.data(), gguf_type_name(v->type));
  return v->u != 0;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  CLB_CHECK(v->type == GgufType::kString, "%s: key %.*s: expected string, file has %s",
            name_.c_str(), static_cast<int>(key.size()), key.data(), gguf_type_name(v->type));
  return v->str;
}

const std::vector<std::string_view>* GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  CLB_CHECK(v->type == GgufType::kArray && v->elem_type == GgufType::kString,
            "%s: key %.*s: expected an array of strings, file has %s of %s", name_.c_str(),
            static_cast<int>(key.size()), key.data(), gguf_type_name(v->type),
            gguf_type_name(v->elem_type));
  return &v->strs;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  CLB_CHECK(v->type == GgufType::kArray && v->elem_type == GgufType::kFloat32,
            "%s: key %.*s: expected an array of float32, file has %s of %s", name_.c_str(),
            static_cast<int>(key.size()), key.data(), gguf_type_name(v->type),
            gguf_type_name(v->elem_type));
  std::vector<float> out(v->count);
  if (v->count) std::memcpy(out.data(), v->elems, v->count * sizeof(float));
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  CLB_CHECK(v->type == GgufType::kArray && gguf_scalar_size(v->elem_type) != 0 &&
                v->elem_type != GgufType::kFloat32 && v->elem_type != GgufType::kFloat64,
            "%s: key %.*s: expected an array of integers, file has %s of %s", name_.c_str(),
            static_cast<int>(key.size()), key.data(), gguf_type_name(v->type),
            gguf_type_name(v->elem_type));
  std::vector<int64_t> out(v->count);
  size_t es = gguf_scalar_size(v->elem_type);
  for (uint64_t i = 0; i < v->count; ++i) {
    GgufValue e = decode_element(v->elem_type, v->elems + i * es);
    out[i] = e.type == GgufType::kInt8 || e.type == GgufType::kInt16 ||
                     e.type == GgufType::kInt32 || e.type == GgufType::kInt64
                 ? e.i
                 : static_cast<int64_t>(e.u);
  }
  return out;
}

uint64_t GgufFile::require_uint(std::string_view key) const {
  auto v = get_uint(key);
  CLB_CHECK(v.has_value(), "%s: required key %.*s is missing", name_.c_str(),
            static_cast<int>(key.size()), key.data());
  return *v;
}

std::string_view GgufFile::require_string(std::string_view key) const {
  auto v = get_string(key);
  CLB_CHECK(v.has_value(), "%s: required key %.*s is missing", name_.c_str(),
            static_cast<int>(key.size()), key.data());
  return *v;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

TensorView GgufFile::view(const GgufTensor& t) const {
  TensorView v;
  v.data = tensor_data(t);
  v.type = t.type;
  for (int d = 0; d < 4; ++d) v.ne[d] = t.ne[d];
  return v;
}

std::string gguf_value_to_string(const GgufValue& v, size_t max_elems) {
  auto scalar = [](const GgufValue& s) -> std::string {
    if (s.type == GgufType::kBool) return s.u ? "true" : "false";
    if (s.is_float()) return strprintf("%g", s.f);
    if (s.type == GgufType::kInt8 || s.type == GgufType::kInt16 || s.type == GgufType::kInt32 ||
        s.type == GgufType::kInt64)
      return strprintf("%lld", static_cast<long long>(s.i));
    return strprintf("%llu", static_cast<unsigned long long>(s.u));
  };
  if (v.type == GgufType::kString) {
    std::string s(v.str.substr(0, 120));
    for (char& ch : s)
      if (ch == '\n') ch = ' ';
    return "\"" + s + (v.str.size() > 120 ? "...\"" : "\"");
  }
  if (v.type != GgufType::kArray) return scalar(v);
  std::string out = strprintf("[%s x %llu] ", gguf_type_name(v.elem_type),
                              static_cast<unsigned long long>(v.count));
  size_t es = gguf_scalar_size(v.elem_type);
  for (uint64_t i = 0; i < v.count && i < max_elems; ++i) {
    if (i) out += ", ";
    if (v.elem_type == GgufType::kString) {
      out += "\"" + std::string(v.strs[i].substr(0, 24)) + "\"";
    } else {
      GgufValue e = decode_element(v.elem_type, v.elems + i * es);
      out += scalar(e);
    }
  }
  if (v.count > max_elems) out += ", ...";
  return out;
}

}  // namespace colibri
