#include "moe/dense_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/sys.h"
#include "formats/gguf.h"
#include "model/weights.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

constexpr size_t kPage = 4096;  // O_DIRECT alignment
// Reads are at most this long: several in flight keep the disk busy, and with
// buffered reads each chunk leaves the page cache at once, so a large
// embedding table never sits there whole.
constexpr size_t kChunk = 8u << 20;
constexpr int kMaxReaders = 4;

uint64_t page_down(uint64_t x) { return x / kPage * kPage; }
uint64_t page_up(uint64_t x) { return (x + kPage - 1) / kPage * kPage; }

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

// The file pages covering one range, read as one piece into the arena at
// `at` (so a page-aligned O_DIRECT read is possible). The tensor then sits at
// at + (offset - file_begin), only as aligned as the file's 32 bytes, and is
// moved down to a 64-byte boundary (kernels read whole cache lines).
struct Span {
  uint64_t file_begin = 0, file_end = 0;
  size_t at = 0;
  size_t range = 0;  // index in the ranges
};

constexpr size_t kAlign = 64;

std::vector<Span> layout(const std::vector<Range>& ranges, size_t* total) {
  std::vector<Span> spans;
  *total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const uint64_t b = page_down(ranges[i].offset), e = page_up(ranges[i].offset + ranges[i].bytes);
    spans.push_back({b, e, *total, i});
    *total += e - b;
  }
  return spans;
}

}  // namespace

DenseArena::~DenseArena() {
  if (data_) munmap(data_, bytes_);
}

uint64_t DenseArena::bytes_needed(const GgufFile& f, const ModelWeights& w) {
  size_t total = 0;
  layout(dense_ranges(f, const_cast<ModelWeights&>(w)), &total);
  return total;
}

DenseArena DenseArena::load(const GgufFile& f, ModelWeights& w, bool o_direct) {
  std::vector<Range> ranges = dense_ranges(f, w);
  size_t total = 0;
  const std::vector<Span> spans = layout(ranges, &total);
  DenseArena a;
  if (total == 0) return a;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CLB_CHECK(p != MAP_FAILED, "cannot allocate %zu bytes for the dense weights: %s", total,
            std::strerror(errno));
  a.data_ = static_cast<uint8_t*>(p);
  a.bytes_ = total;

  const std::string& path = f.name();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CLB_CHECK(fd >= 0, "%s: %s", path.c_str(), std::strerror(errno));
  // Around the page cache where the file system allows: no copy, nothing to
  // drop, and the budget never sees a second copy.
  int direct_fd = o_direct ? open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
  if (direct_fd >= 0 && !direct_reads_work(direct_fd)) {
    close(direct_fd);
    direct_fd = -1;
  }
  struct Closer {
    int fd, direct_fd;
    ~Closer() {
      close(fd);
      if (direct_fd >= 0) close(direct_fd);
    }
  } closer{fd, direct_fd};
  const off_t size = lseek(fd, 0, SEEK_END);
  CLB_CHECK(size == static_cast<off_t>(f.file_size()),
            "%s: the file is %lld bytes, not the %zu it had when opened: it changed underneath",
            path.c_str(), static_cast<long long>(size), f.file_size());
  if (direct_fd < 0) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

  // The reads, cut in chunks and shared by a few threads: while one waits on
  // the disk another faults in its pages (first touch of fresh memory costs
  // CPU) and packs the matrices whose bytes are all in.
  struct Chunk {
    uint64_t offset;
    size_t length, at;
    size_t span;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < spans.size(); ++i)
    for (uint64_t o = spans[i].file_begin; o < spans[i].file_end; o += kChunk)
      chunks.push_back({o, static_cast<size_t>(std::min<uint64_t>(kChunk, spans[i].file_end - o)),
                        spans[i].at + (o - spans[i].file_begin), i});
  std::vector<std::atomic<size_t>> left(spans.size());  // chunks of each span not read yet
  for (const Chunk& c : chunks) left[c.span].fetch_add(1, std::memory_order_relaxed);
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::string error;
  auto place = [&](const Span& sp) {
    Range& r = ranges[sp.range];
    const uint8_t* src = a.data_ + sp.at + (r.offset - sp.file_begin);
    uint8_t* dst = a.data_ + sp.at + (r.offset - sp.file_begin) / kAlign * kAlign;
    // Matrices the kernels read packed (tensor/ops.h packs) are packed now,
    // once, on the way down to the aligned place.
    const TensorView& v0 = *r.views.front();
    const bool pack = v0.ne[1] > 1 && packs(v0.type, v0.n_rows());
    if (pack)
      pack_rows(v0.type, src, dst, v0.n_rows(), v0.ne[0]);
    else if (dst != src)
      std::memmove(dst, src, r.bytes);
    for (TensorView* v : r.views) {
      v->data = dst;
      v->packed = pack;
    }
  };
  auto reader = [&] {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!error.empty()) return;
      }
      const size_t k = next.fetch_add(1);
      if (k >= chunks.size()) return;
      const Chunk& c = chunks[k];
      // The file's last page may be partial: only the bytes up to its end must come.
      const uint64_t need = std::min<uint64_t>(c.offset + c.length, f.file_size()) - c.offset;
      uint64_t done = 0;
      while (done < need) {
        const ssize_t n = pread(direct_fd >= 0 ? direct_fd : fd, a.data_ + c.at + done, c.length - done,
                                static_cast<off_t>(c.offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          std::lock_guard<std::mutex> lock(mu);
          if (error.empty())
            error = strprintf("%s: reading %zu bytes at offset %llu: %s", path.c_str(), c.length,
                              static_cast<unsigned long long>(c.offset + done),
                              n < 0 ? std::strerror(errno) : "the file ended early (truncated?)");
          return;
        }
        done += static_cast<uint64_t>(n);
      }
      if (direct_fd < 0) drop_file_cache(fd, c.offset, c.length);
      if (left[c.span].fetch_sub(1) == 1) place(spans[c.span]);
    }
  };
  const int n_threads = static_cast<int>(
      std::clamp<size_t>(std::min<size_t>(chunks.size(), std::thread::hardware_concurrency()), 1,
                         kMaxReaders));
  std::vector<std::thread> helpers;
  for (int t = 1; t < n_threads; ++t) helpers.emplace_back(reader);
  reader();
  for (std::thread& t : helpers) t.join();
  CLB_CHECK(error.empty(), "%s", error.c_str());
  // Whatever read-ahead brought in goes too (also the mapping's, from parsing
  // the header).
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  return a;
}

}  // namespace colibri
