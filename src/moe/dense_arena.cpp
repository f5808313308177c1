#include "moe/dense_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/file_set.h"
#include "base/sys.h"
#include "formats/gguf.h"
#include "model/weights.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

// Reads are at most this long: several in flight keep the disk busy, and with
// buffered reads each chunk leaves the page cache at once, so a large
// embedding table never sits there whole.
constexpr size_t kChunk = 8u << 20;
constexpr int kMaxReaders = 4;
constexpr size_t kFaultStep = 1u << 20;

// O_DIRECT alignment: the page size (4, 16 or 64 KiB on ARM64).
uint64_t page_down(uint64_t x) { return x / page_size() * page_size(); }
uint64_t page_up(uint64_t x) { return (x + page_size() - 1) / page_size() * page_size(); }

// One dense tensor: its bytes in the file, every view that shows it (a tied
// output shares the embedding) and the stage that first needs it.
struct Range {
  uint64_t offset = 0;
  size_t bytes = 0;
  int stage = 0;
  std::vector<TensorView*> views;
};

bool embeddings_separate(const ModelWeights& w) {
  return w.token_embd.data && w.token_embd.data != w.output.data;
}

std::vector<Range> dense_ranges(const GgufFile& f, ModelWeights& w, bool embeddings_on_demand) {
  const int n_layer = static_cast<int>(w.layers.size());
  std::vector<std::pair<TensorView*, int>> views = {{&w.output_norm, n_layer + 1}, {&w.output, n_layer + 1}};
  if (!(embeddings_on_demand && embeddings_separate(w))) views.emplace_back(&w.token_embd, 0);
  for (int l = 0; l < n_layer; ++l) {
    w.layers[l].for_each([&](TensorView& v) { views.emplace_back(&v, 1 + l); });
  }
  CLB_CHECK(!f.tensors().empty(), "%s: the file has no tensors", f.name().c_str());
  const GgufTensor& t0 = f.tensors().front();
  const uint8_t* base = f.tensor_data(t0) - t0.offset;  // byte 0 of the mapping
  std::vector<Range> out;
  for (auto [v, stage] : views) {
    // Absent tensors, and tensors derived at load (ModelWeights::derived),
    // which are resident already.
    const auto at = reinterpret_cast<uintptr_t>(v->data), b0 = reinterpret_cast<uintptr_t>(base);
    if (!v->data || at < b0 || at >= b0 + f.file_size()) continue;
    const uint64_t off = static_cast<uint64_t>(v->data - base);
    auto it = std::find_if(out.begin(), out.end(), [&](const Range& r) { return r.offset == off; });
    if (it != out.end()) {
      it->views.push_back(v);
      it->stage = std::min(it->stage, stage);
      continue;
    }
    const size_t bytes = static_cast<size_t>(v->n_rows()) * v->row_stride();
    CLB_ASSERT(off + bytes <= f.file_size());
    out.push_back({off, bytes, stage, {v}});
  }
  // The order of the reads: by stage, then through the file.
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) {
    return a.stage != b.stage ? a.stage < b.stage : a.offset < b.offset;
  });
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

// One read: at most kChunk bytes of one span.
struct Chunk {
  uint64_t offset;
  size_t length, at;
  size_t span;
};

}  // namespace

// The reads in flight and what they have placed. Readers take chunks in
// order from `next`; the last chunk of a span places its tensor, the last
// tensor of a stage advances `ready`.
struct DenseArena::Loader {
  std::unique_ptr<FileSet> files;  // the model's file, or a split model's
  uint8_t* data = nullptr;
  size_t bytes = 0;
  std::vector<Range> ranges;
  std::vector<Span> spans;
  std::vector<Chunk> chunks;
  std::unique_ptr<std::atomic<size_t>[]> left;  // per span: chunks not read yet
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  uint64_t total_read = 0;            // bytes the chunks cover
  std::atomic<uint64_t> read_done{0};  // of those, read (for progress displays)
  int n_stages = 0;
  std::atomic<int> ready_fast{-1};  // `ready`, read without the lock

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<int> stage_left;  // per stage: tensors not placed yet
  int ready = -1;               // every stage <= ready is in place
  std::string error;
  std::vector<std::thread> threads;

  // Token embeddings left in the file (embd_row_bytes > 0): where they are,
  // and a page-aligned buffer for O_DIRECT reads of a row's pages.
  uint64_t embd_offset = 0;
  size_t embd_row_bytes = 0;
  int64_t embd_rows = 0;
  mutable std::mutex embd_mu;
  mutable uint8_t* bounce = nullptr;
  size_t bounce_bytes = 0;

  ~Loader() {
    stop.store(true);
    for (std::thread& t : threads) t.join();
    if (data) munmap(data, bytes);
    if (bounce) munmap(bounce, bounce_bytes);
  }

  void fail(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = std::move(e);
    cv.notify_all();
  }

  void place(const Span& sp) {
    Range& r = ranges[sp.range];
    const uint8_t* src = data + sp.at + (r.offset - sp.file_begin);
    uint8_t* dst = data + sp.at + (r.offset - sp.file_begin) / kAlign * kAlign;
    // Matrices the kernels read packed (tensor/ops.h packs) are packed now,
    // once, on the way down to the aligned place.
    const TensorView& v0 = *r.views.front();
    // A 3-D tensor (per-head MLA matrices) packs only when each of its
    // matrices is whole groups, so a slab view stays a packed matrix.
    const bool pack = v0.ne[1] > 1 && packs(v0.type, v0.ne[1]) && packs(v0.type, v0.n_rows());
    if (pack)
      pack_rows(v0.type, src, dst, v0.n_rows(), v0.ne[0]);
    else if (dst != src)
      std::memmove(dst, src, r.bytes);
    for (TensorView* v : r.views) {
      v->data = dst;
      v->packed = pack;
    }
    std::lock_guard<std::mutex> lock(mu);
    --stage_left[r.stage];
    const int before = ready;
    while (ready + 1 < n_stages && stage_left[ready + 1] == 0) ++ready;
    // The last tensor: whatever read-ahead brought in goes too (also the
    // mapping's, from parsing the header), before anyone hears it is done.
    if (ready == n_stages - 1 && before != ready) files->advise(POSIX_FADV_DONTNEED);
    if (ready != before) {
      ready_fast.store(ready, std::memory_order_release);
      cv.notify_all();
    }
  }

  void reader() {
    for (;;) {
      const size_t k = stop.load() ? chunks.size() : next.fetch_add(1);
      if (k >= chunks.size()) break;
      const Chunk& c = chunks[k];
      // A chunk is in one file (a tensor's pages; a split model's files
      // start a page or more apart), read at its offset there. The file's
      // last page may be partial: only the bytes up to its end must come.
      const FileSet::File& file = files->at(c.offset);
      const uint64_t at = c.offset - file.begin;
      const uint64_t need =
          std::min<uint64_t>(c.offset + c.length, file.begin + file.size) - c.offset;
      const bool direct = files->direct();
      // The destination's fresh pages, faulted in 1 MiB steps before the
      // read: a read faulting them itself holds the address space's lock
      // for the whole chunk, and every mmap meanwhile waits.
      for (size_t o = 0; o < c.length; o += kFaultStep)
        populate_pages(data + c.at + o, std::min(kFaultStep, c.length - o));
      // Buffered: the chunk's whole range is asked for at once (the file is
      // read without read-ahead, which would run past the chunk and could
      // still be in flight when the last drop below has run).
      if (!direct)
        posix_fadvise(file.fd, static_cast<off_t>(at), static_cast<off_t>(need),
                      POSIX_FADV_WILLNEED);
      uint64_t done = 0;
      while (done < need) {
        const ssize_t n = pread(direct ? file.direct_fd : file.fd, data + c.at + done,
                                c.length - done, static_cast<off_t>(at + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          fail(strprintf("%s: reading %zu bytes at offset %llu: %s", file.path.c_str(), c.length,
                         static_cast<unsigned long long>(at + done),
                         n < 0 ? std::strerror(errno) : "the file ended early (truncated?)"));
          stop.store(true);
          break;
        }
        done += static_cast<uint64_t>(n);
      }
      if (done < need) break;
      read_done.fetch_add(c.length, std::memory_order_relaxed);
      if (!direct) drop_file_cache(file.fd, at, c.length);
      if (left[c.span].fetch_sub(1) == 1) place(spans[c.span]);
    }
  }
};

DenseArena::DenseArena() = default;
DenseArena::DenseArena(DenseArena&&) noexcept = default;
DenseArena& DenseArena::operator=(DenseArena&&) noexcept = default;
DenseArena::~DenseArena() = default;

size_t DenseArena::bytes() const { return loader_ ? loader_->bytes : 0; }

uint64_t DenseArena::bytes_needed(const GgufFile& f, const ModelWeights& w, bool embeddings_on_demand) {
  size_t total = 0;
  layout(dense_ranges(f, const_cast<ModelWeights&>(w), embeddings_on_demand), &total);
  return total;
}

bool DenseArena::embeddings_can_stay_in_file(const ModelWeights& w) { return embeddings_separate(w); }

DenseArena DenseArena::start(const GgufFile& f, ModelWeights& w, bool o_direct, bool embeddings_on_demand) {
  auto L = std::make_unique<Loader>();
  L->ranges = dense_ranges(f, w, embeddings_on_demand);
  L->n_stages = static_cast<int>(w.layers.size()) + 2;
  L->stage_left.assign(static_cast<size_t>(L->n_stages), 0);
  for (const Range& r : L->ranges) ++L->stage_left[r.stage];
  while (L->ready + 1 < L->n_stages && L->stage_left[L->ready + 1] == 0) ++L->ready;
  L->ready_fast.store(L->ready);
  size_t total = 0;
  L->spans = layout(L->ranges, &total);
  DenseArena a;
  const bool embd_in_file = embeddings_on_demand && embeddings_separate(w);
  if (total == 0 && !embd_in_file) {
    a.loader_ = std::move(L);
    return a;
  }
  CLB_CHECK(!f.parts().empty(), "%s: the dense weights are read from a file", f.name().c_str());
  // Around the page cache where the file system allows: no copy, nothing to
  // drop, and the budget never sees a second copy.
  L->files = std::make_unique<FileSet>(f.parts(), o_direct, nullptr);
  // Buffered reads bring in what they ask for and no more: read-ahead would
  // leave pages around each embedding row, and past a chunk's end it can still
  // be in flight after the last drop.
  if (!L->files->direct()) L->files->advise(POSIX_FADV_RANDOM);
  if (embd_in_file) {
    const GgufTensor& t0 = f.tensors().front();
    const uint8_t* base = f.tensor_data(t0) - t0.offset;
    L->embd_offset = static_cast<uint64_t>(w.token_embd.data - base);
    L->embd_row_bytes = w.token_embd.row_stride();
    L->embd_rows = w.token_embd.n_rows();
    CLB_ASSERT(L->embd_offset + L->embd_row_bytes * static_cast<uint64_t>(L->embd_rows) <= f.file_size());
    if (L->files->direct()) {
      L->bounce_bytes = page_up(L->embd_row_bytes) + page_size();  // a row's pages, however it straddles them
      void* b = mmap(nullptr, L->bounce_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      CLB_CHECK(b != MAP_FAILED, "cannot allocate %zu bytes for embedding reads: %s", L->bounce_bytes,
                std::strerror(errno));
      L->bounce = static_cast<uint8_t*>(b);
    }
  }
  if (total == 0) {
    a.loader_ = std::move(L);
    return a;
  }
  // In 2 MiB pages: first touch of fresh memory costs a fault (a VM exit)
  // per page, and the readers fault every page of the arena in.
  void* p = map_anonymous(total, true);
  CLB_CHECK(p != nullptr, "cannot allocate %zu bytes for the dense weights: %s", total,
            std::strerror(errno));
  L->data = static_cast<uint8_t*>(p);
  L->bytes = total;

  // The reads, cut in chunks and shared by a few threads: while one waits on
  // the disk another faults in its pages (first touch of fresh memory costs
  // CPU) and packs the matrices whose bytes are all in.
  for (size_t i = 0; i < L->spans.size(); ++i) {
    const Span& sp = L->spans[i];
    for (uint64_t o = sp.file_begin; o < sp.file_end; o += kChunk)
      L->chunks.push_back({o, static_cast<size_t>(std::min<uint64_t>(kChunk, sp.file_end - o)),
                           sp.at + (o - sp.file_begin), i});
  }
  L->left = std::make_unique<std::atomic<size_t>[]>(L->spans.size());
  for (size_t i = 0; i < L->spans.size(); ++i) L->left[i].store(0, std::memory_order_relaxed);
  for (const Chunk& c : L->chunks) {
    L->left[c.span].fetch_add(1, std::memory_order_relaxed);
    L->total_read += c.length;
  }
  const int n_threads = static_cast<int>(
      std::clamp<size_t>(std::min<size_t>(L->chunks.size(), std::thread::hardware_concurrency()), 1,
                         kMaxReaders));
  Loader* raw = L.get();
  for (int t = 0; t < n_threads; ++t) L->threads.emplace_back([raw] { raw->reader(); });
  a.loader_ = std::move(L);
  return a;
}

DenseArena DenseArena::load(const GgufFile& f, ModelWeights& w, bool o_direct, bool embeddings_on_demand) {
  DenseArena a = start(f, w, o_direct, embeddings_on_demand);
  a.wait(std::numeric_limits<int>::max());
  return a;
}

void DenseArena::wait(int stage) const {
  const Loader* L = loader_.get();
  if (!L) return;
  stage = std::min(stage, L->n_stages - 1);
  if (L->ready_fast.load(std::memory_order_acquire) >= stage) return;
  std::unique_lock<std::mutex> lock(L->mu);
  L->cv.wait(lock, [&] { return L->ready >= stage || !L->error.empty(); });
  CLB_CHECK(L->error.empty(), "%s", L->error.c_str());
}

bool DenseArena::placed() const {
  const Loader* L = loader_.get();
  return !L || L->ready_fast.load(std::memory_order_acquire) >= L->n_stages - 1;
}

void DenseArena::progress(uint64_t* done, uint64_t* total) const {
  const Loader* L = loader_.get();
  *total = L ? L->total_read : 0;
  *done = L ? L->read_done.load(std::memory_order_relaxed) : 0;
}

bool DenseArena::embeddings_on_demand() const { return loader_ && loader_->embd_row_bytes > 0; }

void DenseArena::read_embedding_row(int64_t row, uint8_t* dst) const {
  const Loader* L = loader_.get();
  CLB_ASSERT(L && L->embd_row_bytes > 0 && row >= 0 && row < L->embd_rows);
  const uint64_t off = L->embd_offset + static_cast<uint64_t>(row) * L->embd_row_bytes;
  const bool direct = L->files->direct();
  const FileSet::File& file = L->files->at(off);
  // O_DIRECT: the row's whole pages into the bounce buffer (the file's last
  // page may be partial); buffered: the row itself.
  const uint64_t begin = direct ? page_down(off) : off;
  const uint64_t want = direct ? page_up(off + L->embd_row_bytes) - begin : L->embd_row_bytes;
  const uint64_t need = std::min<uint64_t>(begin + want, file.begin + file.size) - begin;
  std::lock_guard<std::mutex> lock(L->embd_mu);
  uint8_t* buf = direct ? L->bounce : dst;
  uint64_t done = 0;
  while (done < need) {
    const ssize_t n = pread(direct ? file.direct_fd : file.fd, buf + done, want - done,
                            static_cast<off_t>(begin - file.begin + done));
    if (n < 0 && errno == EINTR) continue;
    CLB_CHECK(n > 0, "%s: reading embedding row %lld (%zu bytes at offset %llu): %s",
              file.path.c_str(), static_cast<long long>(row), L->embd_row_bytes,
              static_cast<unsigned long long>(off - file.begin),
              n < 0 ? std::strerror(errno) : "the file ended early (truncated?)");
    done += static_cast<uint64_t>(n);
  }
  if (direct)
    std::memcpy(dst, L->bounce + (off - begin), L->embd_row_bytes);
  else
    drop_file_cache(file.fd, off - file.begin, L->embd_row_bytes);
}

}  // namespace colibri
