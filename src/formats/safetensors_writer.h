// Hugging Face safetensors writer: tensors -> the bytes the official library
// writes for them.
//
// Layout as the official serializer produces it: the 8-byte little-endian
// header length, the header as compact JSON ("__metadata__" first when there
// is any, then the tensors, each {"dtype", "shape", "data_offsets"}), spaces
// to a multiple of 8 bytes, then the tensors' data back to back. The official
// library orders tensors by dtype and name; this writer keeps insertion order
// (readers sort by offset), so a file whose tensors were added in its data
// order is reproduced byte for byte.
//
// Tests and the model-conversion tests use it to write Hugging Face folders;
// tensors are held in memory until written.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/safetensors.h"

namespace colibri {

class SafetensorsWriter {
 public:
  // An entry of "__metadata__". Setting a key again replaces its value in
  // place (order is kept).
  void set_metadata(const std::string& key, const std::string& value);
  // shape is outermost first; bytes holds exactly product(shape) elements of
  // dtype. Throws Error on a duplicate name, a negative dimension or a size
  // mismatch.
  void add(const std::string& name, StDType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);

  size_t n_tensors() const { return tensors_.size(); }
  // The length, the JSON and its padding: everything before the data.
  std::vector<uint8_t> header() const;
  std::vector<uint8_t> to_bytes() const;
  // Writes path atomically (a temporary beside it, then rename). Throws Error.
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Writes model.safetensors.index.json as transformers does: {"metadata": {},
// "weight_map": {tensor name: shard file name}}, keys sorted, indent 2. The
// names are written as given (tests write bad ones on purpose); a tensor named
// twice throws Error. Atomic, as SafetensorsWriter::write.
void write_safetensors_index(const std::string& path,
                             const std::vector<std::pair<std::string, std::string>>& weight_map);

}  // namespace colibri
