// Hugging Face safetensors reader: untrusted bytes -> validated tensor table.
//
// A file is an 8-byte little-endian header length N, N bytes of a JSON object
// ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
// optionally "__metadata__": {"key": "value"}}), then the data section, which
// the tensors cover exactly, back to back. The file is memory-mapped; nothing
// is copied but the table. Every rule of the official library is checked (and
// a few it leaves out: duplicate keys, a header not starting with '{'), and a
// failure throws Error naming the file, the tensor or key, and what is wrong.
//
// Tensor data is not aligned beyond what the file gives: the official writer
// pads the header to 8 bytes, but an F16 tensor of odd length moves the next
// tensor off 4-byte alignment. Read multi-byte elements with memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mapped_file.h"

namespace colibri {

// The dtypes colibri reads. A file with another (U16, U32, U64, F8_E8M0, F4,
// C64, ...) is refused with the dtype's name.
enum class StDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2 };

// The name as the file spells it: "F32", "BF16", "F8_E4M3", ...
const char* st_dtype_name(StDType t);
// Bytes per element.
size_t st_dtype_size(StDType t);

struct SafetensorsTensor {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;  // as in the file, outermost first (row-major); [] is a scalar
  uint64_t offset = 0;         // absolute offset in the file
  uint64_t nbytes = 0;
  // The product of shape (1 for a scalar); checked not to overflow.
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  // Maps and parses a file. Throws Error("<path>: ...").
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (fuzzing, tests).
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size, std::string name);

  const std::string& name() const { return name_; }
  size_t file_size() const { return size_; }
  // The start of the data section: 8 + the header length.
  size_t data_offset() const { return data_offset_; }
  // -1 when parsed from memory.
  int fd() const { return file_ ? file_->fd() : -1; }

  // In file (offset) order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const SafetensorsTensor* find(std::string_view name) const;
  const uint8_t* data(const SafetensorsTensor& t) const { return data_ + t.offset; }
  // "__metadata__", sorted by key.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_all();

  std::string name_;
  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// A model's weights in a Hugging Face model folder: `model.safetensors`, or
// `model.safetensors.index.json` ({"metadata": {...}, "weight_map": {tensor
// name: shard file name}}) and its shards. As in transformers, a folder with
// both uses model.safetensors.
//
// The index must agree with the shards exactly: every tensor it names is in
// the shard it names, and every tensor of a shard is named by the index, for
// that shard. A shard name is a plain file name in the folder (no '/', not
// "." or ".."). Throws Error naming the folder, index or shard.
class SafetensorsSet {
 public:
  static std::unique_ptr<SafetensorsSet> open_dir(const std::string& dir);

  struct Entry {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };
  // nullptr when absent.
  const Entry* find(std::string_view name) const;
  // Every tensor name, sorted.
  const std::vector<std::string>& names() const { return names_; }
  // One per shard, in shard-name order.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  SafetensorsSet() = default;
  void add_file(std::unique_ptr<SafetensorsFile> f);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<std::string> names_;
};

}  // namespace colibri
