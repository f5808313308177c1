// GGUF v3 writer: metadata and tensors -> a file llama.cpp and GgufFile load.
//
// The layout is the one ggml's own writer produces, so that re-writing a file
// read with GgufFile gives the same bytes: header, key-value pairs in insertion
// order, tensor infos in insertion order, zero padding to the alignment, then
// each tensor's data padded to the alignment. Tensor offsets are relative to
// the start of the data section.
//
// Tensor data is given in its stored type (the caller quantizes). Small tensors
// are passed as bytes; tensors of real-size synthetic models are filled by a
// callback, a chunk of rows at a time, while the file is written.
//
// Tests that craft hostile files write a valid file and patch it: layout()
// reports the byte offset of every field the writer emits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/gguf.h"
#include "tensor/dtype.h"

namespace colibri {

// Byte offsets of every field in the writer's output (absolute, from byte 0).
struct GgufLayout {
  static constexpr size_t kVersion = 4;       // u32
  static constexpr size_t kTensorCount = 8;   // u64
  static constexpr size_t kMetadataCount = 16;  // u64
  struct Kv {
    size_t key;    // u64 length, then the key's bytes
    size_t type;   // u32 value type
    size_t value;  // the value; for arrays: u32 element type, u64 count, elements
    size_t end;    // one past the value
  };
  struct Tensor {
    size_t name;    // u64 length, then the name's bytes
    size_t n_dims;  // u32
    size_t ne;      // n_dims x u64
    size_t type;    // u32 dtype id
    size_t offset;  // u64, relative to data_offset
    size_t data;    // absolute offset of the tensor's bytes
    size_t nbytes;
  };
  std::vector<Kv> kvs;
  std::vector<Tensor> tensors;
  size_t data_offset = 0;  // start of the (aligned) data section
  size_t file_size = 0;
};

class GgufWriter {
 public:
  // Fills rows [row0, row0 + n_rows) of a tensor (rows of ne[0] elements, in
  // its stored type) into dst, which holds n_rows * row_bytes bytes.
  using RowFiller = std::function<void(int64_t row0, int64_t n_rows, uint8_t* dst)>;

  // Scalars. Setting a key again replaces its value in place (order is kept).
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);

  // Arrays. set_array takes count elements of a scalar type, packed
  // little-endian as GGUF stores them (bool as one byte, 0 or 1).
  void set_array(const std::string& key, GgufType elem_type, const void* elems, uint64_t count);
  void set_array_str(const std::string& key, const std::vector<std::string>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);

  // Copies a value read by GgufFile (re-writing or editing a model).
  void set_value(const std::string& key, const GgufValue& v);

  // Stored as the u32 key general.alignment (a power of two); without it the
  // file uses GGUF's default of 32 and the key is not written.
  void set_alignment(size_t alignment);
  size_t alignment() const { return alignment_; }

  // ne has 1 to 4 dims, ne[0] first (the contiguous one); data holds exactly
  // row_bytes(type, ne[0]) * (ne[1] * ne[2] * ne[3]) bytes.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                  std::vector<uint8_t> data);
  // The same, with the bytes produced by fill while the file is written.
  void add_tensor_info(const std::string& name, DType type, const std::vector<int64_t>& ne,
                       RowFiller fill);

  size_t n_kv() const { return kvs_.size(); }
  size_t n_tensors() const { return tensors_.size(); }
  GgufLayout layout() const;
  // The bytes before the data section (header, metadata, tensor infos,
  // padding): layout().data_offset of them.
  std::vector<uint8_t> header() const { return header_bytes(nullptr); }

  // Writes path atomically (a temporary beside it, then rename). Throws Error.
  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Kv {
    std::string key;
    GgufType type;
    std::vector<uint8_t> value;  // encoded as in the file, after the type id
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    size_t nbytes = 0;
    std::vector<uint8_t> data;  // empty when fill is set
    RowFiller fill;
  };
  using Sink = std::function<void(const uint8_t* p, size_t n)>;

  void set_kv(const std::string& key, GgufType type, std::vector<uint8_t> value);
  Tensor& new_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne);
  // Header, metadata, tensor infos and padding; fills *layout when given.
  std::vector<uint8_t> header_bytes(GgufLayout* layout) const;
  void emit(const Sink& sink) const;

  std::vector<Kv> kvs_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  size_t alignment_ = 32;
};

}  // namespace colibri
