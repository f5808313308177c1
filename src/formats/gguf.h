// GGUF v2/v3 reader: untrusted bytes -> validated metadata and tensor table.
//
// The file is memory-mapped; nothing is copied but the small tables. Every
// length, count, offset and shape is checked against the file before use, and
// a failure throws Error naming the key or tensor, what was expected and what
// the file has.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace colibri {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* gguf_type_name(GgufType t);
// Bytes of one scalar of type t; 0 for strings and arrays.
size_t gguf_scalar_size(GgufType t);

// One metadata value. Scalars are decoded; arrays keep a pointer to their
// elements in the mapping (strings are indexed once).
struct GgufValue {
  GgufType type = GgufType::kUint8;
  GgufType elem_type = GgufType::kUint8;  // arrays only
  uint64_t count = 0;                     // arrays only
  uint64_t u = 0;                         // unsigned integers and bool
  int64_t i = 0;                          // signed integers
  double f = 0;                           // floats
  std::string_view str;                   // kString
  const uint8_t* elems = nullptr;         // arrays of scalars
  std::vector<std::string_view> strs;     // arrays of strings

  bool is_integer() const;
  bool is_float() const;
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;  // absolute offset in the file
  uint64_t nbytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps and parses a file. Throws Error("<path>: ...").
  //
  // A model split by llama.cpp's gguf-split (split.count > 1) is opened by
  // its first file, PREFIX-00001-of-0000N.gguf: the others are found by name
  // and mapped after it (MappedFile's parts), their tensors join the table
  // with offsets into that one range, and the metadata is the first file's.
  // Each file must say which shard it is (split.no), and the first how many
  // tensors there are in all (split.tensors.count), as llama.cpp checks.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (fuzzing, tests).
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, std::string name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  // The end of the bytes tensor offsets address (for a split model, the last
  // shard's end in the range they are mapped to).
  size_t file_size() const { return size_; }
  // The files' bytes: file_size(), less the gaps between a split model's shards.
  uint64_t bytes_on_disk() const;
  // The files read: one, or a split model's shards; empty when parsed from
  // memory. A tensor at offset o is in the part with begin <= o < begin + size.
  const std::vector<MappedFile::Part>& parts() const;

  const std::vector<GgufKV>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters. A missing key gives nullopt; a present key of the wrong
  // type throws ("key llama.block_count: expected an integer, file has string").
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  // Array getters: nullptr when missing; throw on a wrong element type.
  const std::vector<std::string_view>* get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_f32_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  uint64_t require_uint(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const GgufTensor& t) const { return data_ + t.offset; }
  TensorView view(const GgufTensor& t) const;

 private:
  GgufFile() = default;
  void parse_all();
  static std::unique_ptr<GgufFile> open_split(const std::string& prefix, uint64_t n_split);

  std::string name_;
  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<GgufKV> kvs_;
  std::vector<GgufTensor> tensors_;
};

// Renders a value for display (inspect): scalars in full, arrays abbreviated.
std::string gguf_value_to_string(const GgufValue& v, size_t max_elems = 8);

}  // namespace colibri
