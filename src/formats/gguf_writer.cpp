#include "formats/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/atomic_file.h"
#include "base/error.h"

namespace colibri {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr size_t kDefaultAlignment = 32;
// ggml keeps tensor names in a char[64] (GGML_MAX_NAME), NUL included.
constexpr size_t kMaxTensorName = 63;
// Filled tensors are produced this many bytes at a time (whole rows), so a
// multi-GB expert stack never sits in memory at once.
constexpr size_t kFillChunkBytes = size_t{16} << 20;

// resize + memcpy rather than insert: GCC 12 reports a false
// -Wstringop-overflow on vector::insert of a few bytes.
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

size_t pad_to(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

template <typename T>
std::vector<uint8_t> scalar_bytes(T v) {
  std::vector<uint8_t> out;
  put<T>(out, v);
  return out;
}

}  // namespace

void GgufWriter::set_u8(const std::string& key, uint8_t v) { set_kv(key, GgufType::kUint8, scalar_bytes(v)); }
void GgufWriter::set_i8(const std::string& key, int8_t v) { set_kv(key, GgufType::kInt8, scalar_bytes(v)); }
void GgufWriter::set_u16(const std::string& key, uint16_t v) { set_kv(key, GgufType::kUint16, scalar_bytes(v)); }
void GgufWriter::set_i16(const std::string& key, int16_t v) { set_kv(key, GgufType::kInt16, scalar_bytes(v)); }
void GgufWriter::set_u32(const std::string& key, uint32_t v) { set_kv(key, GgufType::kUint32, scalar_bytes(v)); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set_kv(key, GgufType::kInt32, scalar_bytes(v)); }
void GgufWriter::set_u64(const std::string& key, uint64_t v) { set_kv(key, GgufType::kUint64, scalar_bytes(v)); }
void GgufWriter::set_i64(const std::string& key, int64_t v) { set_kv(key, GgufType::kInt64, scalar_bytes(v)); }
void GgufWriter::set_f32(const std::string& key, float v) { set_kv(key, GgufType::kFloat32, scalar_bytes(v)); }
void GgufWriter::set_f64(const std::string& key, double v) { set_kv(key, GgufType::kFloat64, scalar_bytes(v)); }
void GgufWriter::set_bool(const std::string& key, bool v) {
  set_kv(key, GgufType::kBool, scalar_bytes<uint8_t>(v ? 1 : 0));
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> b;
  put_string(b, v);
  set_kv(key, GgufType::kString, std::move(b));
}

void GgufWriter::set_array(const std::string& key, GgufType elem_type, const void* elems,
                           uint64_t count) {
  size_t es = gguf_scalar_size(elem_type);
  CLB_CHECK(es != 0, "gguf writer: key %s: set_array takes a scalar element type, not %s",
            key.c_str(), gguf_type_name(elem_type));
  const uint8_t* p = static_cast<const uint8_t*>(elems);
  if (elem_type == GgufType::kBool)
    for (uint64_t i = 0; i < count; ++i)
      CLB_CHECK(p[i] <= 1, "gguf writer: key %s: bool element %llu is %u, not 0 or 1",
                key.c_str(), static_cast<unsigned long long>(i), p[i]);
  std::vector<uint8_t> b;
  b.reserve(12 + count * es);
  put<uint32_t>(b, static_cast<uint32_t>(elem_type));
  put<uint64_t>(b, count);
  put_bytes(b, p, count * es);
  set_kv(key, GgufType::kArray, std::move(b));
}

void GgufWriter::set_array_str(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(GgufType::kString));
  put<uint64_t>(b, v.size());
  for (const std::string& s : v) put_string(b, s);
  set_kv(key, GgufType::kArray, std::move(b));
}

void GgufWriter::set_array_f32(const std::string& key, const std::vector<float>& v) {
  set_array(key, GgufType::kFloat32, v.data(), v.size());
}

void GgufWriter::set_array_i32(const std::string& key, const std::vector<int32_t>& v) {
  set_array(key, GgufType::kInt32, v.data(), v.size());
}

void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8: return set_u8(key, static_cast<uint8_t>(v.u));
    case GgufType::kInt8: return set_i8(key, static_cast<int8_t>(v.i));
    case GgufType::kUint16: return set_u16(key, static_cast<uint16_t>(v.u));
    case GgufType::kInt16: return set_i16(key, static_cast<int16_t>(v.i));
    case GgufType::kUint32: return set_u32(key, static_cast<uint32_t>(v.u));
    case GgufType::kInt32: return set_i32(key, static_cast<int32_t>(v.i));
    case GgufType::kUint64: return set_u64(key, v.u);
    case GgufType::kInt64: return set_i64(key, v.i);
    case GgufType::kFloat32: return set_f32(key, static_cast<float>(v.f));
    case GgufType::kFloat64: return set_f64(key, v.f);
    case GgufType::kBool: return set_bool(key, v.u != 0);
    case GgufType::kString: return set_string(key, std::string(v.str));
    case GgufType::kArray:
      if (v.elem_type == GgufType::kString) {
        std::vector<std::string> strs(v.strs.begin(), v.strs.end());
        return set_array_str(key, strs);
      }
      return set_array(key, v.elem_type, v.elems, v.count);
  }
  fail("gguf writer: key %s: unknown value type %u", key.c_str(), static_cast<uint32_t>(v.type));
}

void GgufWriter::set_alignment(size_t alignment) {
  CLB_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0 && alignment <= UINT32_MAX,
            "gguf writer: alignment %zu is not a power of two", alignment);
  set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::set_kv(const std::string& key, GgufType type, std::vector<uint8_t> value) {
  if (key == "general.alignment") {
    // Readers take the data layout from this key, so it must agree with ours.
    uint64_t al = 0;
    CLB_CHECK(type == GgufType::kUint32 && value.size() == 4,
              "gguf writer: key general.alignment must be uint32, not %s", gguf_type_name(type));
    uint32_t a32;
    std::memcpy(&a32, value.data(), 4);
    al = a32;
    CLB_CHECK(al > 0 && (al & (al - 1)) == 0,
              "gguf writer: key general.alignment: %llu is not a power of two",
              static_cast<unsigned long long>(al));
    alignment_ = al;
  }
  auto it = kv_index_.find(key);
  if (it != kv_index_.end()) {
    kvs_[it->second].type = type;
    kvs_[it->second].value = std::move(value);
    return;
  }
  kv_index_.emplace(key, kvs_.size());
  kvs_.push_back(Kv{key, type, std::move(value)});
}

GgufWriter::Tensor& GgufWriter::new_tensor(const std::string& name, DType type,
                                           const std::vector<int64_t>& ne) {
  const char* n = name.c_str();
  CLB_CHECK(!name.empty() && name.size() <= kMaxTensorName,
            "gguf writer: tensor name '%s' is %zu bytes; expected 1 to %zu", n, name.size(),
            kMaxTensorName);
  CLB_CHECK(!tensor_index_.count(name), "gguf writer: tensor %s added twice", n);
  CLB_CHECK(ne.size() >= 1 && ne.size() <= 4, "gguf writer: tensor %s: expected 1 to 4 dims, got %zu",
            n, ne.size());
  const DTypeInfo& info = dtype_info(type);
  uint64_t n_rows = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    CLB_CHECK(ne[d] >= 1 && ne[d] <= (int64_t{1} << 40), "gguf writer: tensor %s: dimension %zu is %lld",
              n, d, static_cast<long long>(ne[d]));
    if (d > 0) {
      CLB_CHECK(n_rows <= (uint64_t{1} << 50) / static_cast<uint64_t>(ne[d]),
                "gguf writer: tensor %s: element count overflows", n);
      n_rows *= static_cast<uint64_t>(ne[d]);
    }
  }
  CLB_CHECK(ne[0] % info.block_size == 0,
            "gguf writer: tensor %s: row length %lld is not a multiple of the %s block size %lld", n,
            static_cast<long long>(ne[0]), info.name, static_cast<long long>(info.block_size));
  tensor_index_.emplace(name, tensors_.size());
  Tensor& t = tensors_.emplace_back();
  t.name = name;
  t.type = type;
  t.ne = ne;
  t.nbytes = row_bytes(type, ne[0]) * n_rows;
  return t;
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                            std::vector<uint8_t> data) {
  Tensor& t = new_tensor(name, type, ne);
  if (data.size() != t.nbytes) {
    size_t expected = t.nbytes;
    tensors_.pop_back();
    tensor_index_.erase(name);
    fail("gguf writer: tensor %s: expected %zu bytes of %s, got %zu", name.c_str(), expected,
         dtype_name(type), data.size());
  }
  t.data = std::move(data);
}

void GgufWriter::add_tensor_info(const std::string& name, DType type,
                                 const std::vector<int64_t>& ne, RowFiller fill) {
  CLB_CHECK(fill != nullptr, "gguf writer: tensor %s: no fill function", name.c_str());
  new_tensor(name, type, ne).fill = std::move(fill);
}

std::vector<uint8_t> GgufWriter::header_bytes(GgufLayout* layout) const {
  std::vector<uint8_t> b;
  put<uint32_t>(b, kMagic);
  put<uint32_t>(b, kVersion);
  put<uint64_t>(b, tensors_.size());
  put<uint64_t>(b, kvs_.size());
  for (const Kv& kv : kvs_) {
    GgufLayout::Kv l;
    l.key = b.size();
    put_string(b, kv.key);
    l.type = b.size();
    put<uint32_t>(b, static_cast<uint32_t>(kv.type));
    l.value = b.size();
    put_bytes(b, kv.value.data(), kv.value.size());
    l.end = b.size();
    if (layout) layout->kvs.push_back(l);
  }
  size_t offset = 0;  // relative to the data section
  for (const Tensor& t : tensors_) {
    GgufLayout::Tensor l;
    l.name = b.size();
    put_string(b, t.name);
    l.n_dims = b.size();
    put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
    l.ne = b.size();
    for (int64_t n : t.ne) put<uint64_t>(b, static_cast<uint64_t>(n));
    l.type = b.size();
    put<uint32_t>(b, static_cast<uint32_t>(t.type));
    l.offset = b.size();
    put<uint64_t>(b, offset);
    l.data = offset;  // made absolute below
    l.nbytes = t.nbytes;
    offset += pad_to(t.nbytes, alignment_);
    if (layout) layout->tensors.push_back(l);
  }
  b.resize(pad_to(b.size(), alignment_), 0);
  if (layout) {
    layout->data_offset = b.size();
    for (GgufLayout::Tensor& l : layout->tensors) l.data += b.size();
    layout->file_size = b.size() + offset;
  }
  return b;
}

GgufLayout GgufWriter::layout() const {
  GgufLayout l;
  header_bytes(&l);
  return l;
}

void GgufWriter::emit(const Sink& sink) const {
  std::vector<uint8_t> header = header_bytes(nullptr);
  sink(header.data(), header.size());
  std::vector<uint8_t> chunk;  // reused by every filled tensor
  static const uint8_t kZeros[256] = {};
  for (const Tensor& t : tensors_) {
    if (t.fill) {
      size_t rb = row_bytes(t.type, t.ne[0]);
      int64_t n_rows = static_cast<int64_t>(t.nbytes / rb);
      int64_t rows_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kFillChunkBytes / rb));
      for (int64_t r = 0; r < n_rows; r += rows_per_chunk) {
        int64_t n = std::min(rows_per_chunk, n_rows - r);
        chunk.assign(static_cast<size_t>(n) * rb, 0);
        t.fill(r, n, chunk.data());
        sink(chunk.data(), chunk.size());
      }
    } else {
      sink(t.data.data(), t.data.size());
    }
    for (size_t pad = pad_to(t.nbytes, alignment_) - t.nbytes; pad > 0;) {
      size_t n = std::min(pad, sizeof(kZeros));
      sink(kZeros, n);
      pad -= n;
    }
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(layout().file_size);
  emit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void GgufWriter::write(const std::string& path) const {
  write_file_atomically(path, [&](const ByteSink& sink) { emit(sink); });
}

}  // namespace colibri
