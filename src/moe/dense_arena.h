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
//
// The reads run in the background, in the order a forward pass needs the
// tensors, in stages: 0 the token embeddings, 1 + l layer l, n_layer + 1 the
// output norm and matrix. A first prompt starts as soon as its first stages
// are in, and its experts' reads share the disk with the rest of the load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace colibri {

class GgufFile;
struct ModelWeights;

class DenseArena {
 public:
  DenseArena();
  DenseArena(DenseArena&&) noexcept;
  DenseArena& operator=(DenseArena&&) noexcept;
  ~DenseArena();  // stops the reads still to start and waits for the rest

  size_t bytes() const;

  // Bytes the arena for w takes (the file pages covering its tensors).
  static uint64_t bytes_needed(const GgufFile& f, const ModelWeights& w);
  // Starts reading w's dense tensors from f's file; each view is re-pointed
  // once its tensor is in place, so no view of a stage may be read before
  // wait() has returned for it. w must outlive the arena. Throws Error (file
  // changed, no memory) for what it checks before the reads start.
  // o_direct: read around the page cache where the file system allows.
  static DenseArena start(const GgufFile& f, ModelWeights& w, bool o_direct = true);
  // start(), then wait for every stage.
  static DenseArena load(const GgufFile& f, ModelWeights& w, bool o_direct = true);
  // Returns once every stage <= `stage` is in place (any stage past the last:
  // all of them). Throws Error if a read failed (short read, I/O error).
  // Thread-safe.
  void wait(int stage) const;

 private:
  struct Loader;
  std::unique_ptr<Loader> loader_;
};

}  // namespace colibri
