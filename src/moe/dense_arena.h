// The dense weights, copied out of the model file into anonymous memory.
//
// Every view of ModelWeights but the expert stacks is read into one arena and
// re-pointed there. The file pages covering each tensor are read in chunks
// shared by a few threads, with O_DIRECT where the file system allows,
// otherwise with buffered reads dropped from the page cache chunk by chunk;
// the tensor, at its offset within the page (GGUF aligns to 32 bytes), is then
// moved down to a 64-byte boundary. After this nothing dense is read through
// the mapping, so the page cache holds no second copy the budget does not
// count. Matrices of a type the kernels read packed (tensor/ops.h packs) are
// packed in place once their bytes are in.
#pragma once

#include <cstddef>
#include <cstdint>

namespace colibri {

class GgufFile;
struct ModelWeights;

class DenseArena {
 public:
  DenseArena() = default;
  DenseArena(DenseArena&& o) noexcept { swap(o); }
  DenseArena& operator=(DenseArena&& o) noexcept {
    swap(o);
    return *this;
  }
  DenseArena(const DenseArena&) = delete;
  DenseArena& operator=(const DenseArena&) = delete;
  ~DenseArena();

  size_t bytes() const { return bytes_; }

  // Bytes the arena for w takes (the file pages covering its tensors).
  static uint64_t bytes_needed(const GgufFile& f, const ModelWeights& w);
  // Reads w's dense tensors from f's file and re-points w's views. Throws
  // Error (file changed, short read).
  // o_direct: read around the page cache where the file system allows.
  static DenseArena load(const GgufFile& f, ModelWeights& w, bool o_direct = true);

 private:
  void swap(DenseArena& o) noexcept {
    uint8_t* d = data_;
    size_t b = bytes_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.data_ = d;
    o.bytes_ = b;
  }
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace colibri
