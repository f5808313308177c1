#include "moe/dense_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/sys.h"
#include "formats/gguf.h"
#include "model/weights.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

constexpr size_t kAlign = 64;
// Read in chunks and drop each from the page cache at once, so a large
// embedding table never sits in the page cache whole.
constexpr size_t kChunk = 8u << 20;

// One dense tensor: its bytes in the file and every view that shows it (a
// tied output shares the embedding).
struct Range {
  uint64_t offset = 0;
  size_t bytes = 0;
  std::vector<TensorView*> views;
};

std::vector<Range> dense_ranges(const GgufFile& f, ModelWeights& w) {
  std::vector<TensorView*> views = {&w.token_embd, &w.output_norm, &w.output};
  for (LayerWeights& L : w.layers)
    for (TensorView* v : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.q_norm,
                          &L.k_norm, &L.ffn_norm, &L.ffn_gate, &L.ffn_up, &L.ffn_down, &L.router,
                          &L.shexp_gate, &L.shexp_up, &L.shexp_down, &L.shexp_gate_inp})
      views.push_back(v);
  CLB_CHECK(!f.tensors().empty(), "%s: the file has no tensors", f.name().c_str());
  const GgufTensor& t0 = f.tensors().front();
  const uint8_t* base = f.tensor_data(t0) - t0.offset;  // byte 0 of the mapping
  std::vector<Range> out;
  for (TensorView* v : views) {
    if (!v->data) continue;
    const uint64_t off = static_cast<uint64_t>(v->data - base);
    auto it = std::find_if(out.begin(), out.end(), [&](const Range& r) { return r.offset == off; });
    if (it != out.end()) {
      it->views.push_back(v);
      continue;
    }
    const size_t bytes = static_cast<size_t>(v->n_rows()) * v->row_stride();
    CLB_ASSERT(off + bytes <= f.file_size());
    out.push_back({off, bytes, {v}});
  }
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.offset < b.offset; });
  return out;
}

}  // namespace

DenseArena::~DenseArena() {
  if (data_) munmap(data_, bytes_);
}

uint64_t DenseArena::bytes_needed(const GgufFile& f, const ModelWeights& w) {
  uint64_t total = 0;
  for (const Range& r : dense_ranges(f, const_cast<ModelWeights&>(w)))
    total += (r.bytes + kAlign - 1) / kAlign * kAlign;
  return total;
}

DenseArena DenseArena::load(const GgufFile& f, ModelWeights& w) {
  std::vector<Range> ranges = dense_ranges(f, w);
  size_t total = 0;
  for (const Range& r : ranges) total += (r.bytes + kAlign - 1) / kAlign * kAlign;
  DenseArena a;
  if (total == 0) return a;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CLB_CHECK(p != MAP_FAILED, "cannot allocate %zu bytes for the dense weights: %s", total,
            std::strerror(errno));
  a.data_ = static_cast<uint8_t*>(p);
  a.bytes_ = total;

  const int fd = open(f.name().c_str(), O_RDONLY | O_CLOEXEC);
  CLB_CHECK(fd >= 0, "%s: %s", f.name().c_str(), std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  const off_t size = lseek(fd, 0, SEEK_END);
  CLB_CHECK(size == static_cast<off_t>(f.file_size()),
            "%s: the file is %lld bytes, not the %zu it had when opened: it changed underneath",
            f.name().c_str(), static_cast<long long>(size), f.file_size());
  posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  size_t at = 0;
  for (Range& r : ranges) {
    uint8_t* dst = a.data_ + at;
    for (size_t done = 0; done < r.bytes;) {
      const size_t want = std::min(kChunk, r.bytes - done);
      ssize_t n = pread(fd, dst + done, want, static_cast<off_t>(r.offset + done));
      if (n < 0 && errno == EINTR) continue;
      CLB_CHECK(n > 0, "%s: reading %zu bytes at offset %llu: %s", f.name().c_str(), want,
                static_cast<unsigned long long>(r.offset + done),
                n < 0 ? std::strerror(errno) : "the file ended early (truncated?)");
      drop_file_cache(fd, r.offset + done, static_cast<uint64_t>(n));
      done += static_cast<size_t>(n);
    }
    // Matrices the kernels read packed are packed now, once (tensor/ops.h).
    const TensorView& v0 = *r.views.front();
    const bool pack = v0.ne[1] > 1 && packs(v0.type, v0.n_rows());
    if (pack) pack_rows(v0.type, dst, v0.n_rows(), v0.ne[0]);
    for (TensorView* v : r.views) {
      v->data = dst;
      v->packed = pack;
    }
    at += (r.bytes + kAlign - 1) / kAlign * kAlign;
  }
  // Whatever read-ahead brought in past the last range goes too.
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  return a;
}

}  // namespace colibri
