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
//
// Under a tight budget the token embeddings (a token reads one row of them)
// may stay in the file instead: read_embedding_row() reads a row when a
// token needs it, and the arena is smaller by the whole table (175 MB on the
// Qwen3-30B-A3B shape in Q4_0). Not when the output matrix shares them.
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
  static uint64_t bytes_needed(const GgufFile& f, const ModelWeights& w, bool embeddings_on_demand = false);
  // Whether w's token embeddings can stay in the file (they are not also the
  // output matrix).
  static bool embeddings_can_stay_in_file(const ModelWeights& w);
  // Starts reading w's dense tensors from f's file; each view is re-pointed
  // once its tensor is in place, so no view of a stage may be read before
  // wait() has returned for it. w must outlive the arena. Throws Error (file
  // changed, no memory) for what it checks before the reads start.
  // o_direct: read around the page cache where the file system allows.
  // embeddings_on_demand: leave the token embeddings in the file (when
  // embeddings_can_stay_in_file(w)); w.token_embd then keeps pointing into
  // the mapping, which must not be read: rows come from read_embedding_row().
  static DenseArena start(const GgufFile& f, ModelWeights& w, bool o_direct = true,
                          bool embeddings_on_demand = false);
  // start(), then wait for every stage.
  static DenseArena load(const GgufFile& f, ModelWeights& w, bool o_direct = true,
                         bool embeddings_on_demand = false);
  // Returns once every stage <= `stage` is in place (any stage past the last:
  // all of them). Throws Error if a read failed (short read, I/O error).
  // Thread-safe.
  void wait(int stage) const;
  // Whether every stage is in place (wait() would return at once); never
  // blocks. Thread-safe.
  bool placed() const;
  // Bytes read so far and in all, for a progress display; both 0 for an
  // empty arena. Thread-safe.
  void progress(uint64_t* done, uint64_t* total) const;

  bool embeddings_on_demand() const;
  // Copies row `row` of the token embeddings (row_stride bytes, the file's
  // layout) from the file to dst: O_DIRECT where the arena reads so, else a
  // buffered read dropped from the page cache at once. Thread-safe. Throws
  // Error on a short read or an I/O error.
  void read_embedding_row(int64_t row, uint8_t* dst) const;

 private:
  struct Loader;
  std::unique_ptr<Loader> loader_;
};

}  // namespace colibri
