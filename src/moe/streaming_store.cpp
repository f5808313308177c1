#include "moe/streaming_store.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/sys.h"
#include "moe/history.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The three stacks of a layer with their file offsets.
struct Part {
  const TensorView* stack;
  uint64_t offset;
};
void layer_parts(const ExpertTensors& t, Part out[3]) {
  out[0] = {&t.gate_exps, t.gate_offset};
  out[1] = {&t.up_exps, t.up_offset};
  out[2] = {&t.down_exps, t.down_offset};
}

}  // namespace

size_t StreamingExpertStore::slot_bytes(const std::vector<ExpertTensors>& layers, bool o_direct,
                                        size_t align) {
  if (align == 0) align = page_size();
  size_t most = 0;
  for (const ExpertTensors& t : layers) {
    if (!t.gate_exps.data) continue;
    Part parts[3];
    layer_parts(t, parts);
    size_t bytes = 0;
    // A covering aligned range is at most one page longer than the part rounded up.
    for (const Part& p : parts) bytes += round_up(p.stack->slab_bytes(), align) + (o_direct ? align : 0);
    most = std::max(most, bytes);
  }
  return most;
}

namespace {
std::vector<MappedFile::Part> one_file(const std::string& path, uint64_t size) {
  MappedFile::Part p;
  p.path = path;
  p.size = size;
  return {p};
}
}  // namespace

StreamingExpertStore::StreamingExpertStore(const std::string& path, uint64_t file_size,
                                           std::vector<ExpertTensors> layers, int n_expert,
                                           const StreamingOptions& o)
    : StreamingExpertStore(one_file(path, file_size), std::move(layers), n_expert, o) {}

StreamingExpertStore::StreamingExpertStore(const std::vector<MappedFile::Part>& files,
                                           std::vector<ExpertTensors> layers, int n_expert,
                                           const StreamingOptions& o)
    : path_(files.empty() ? std::string() : files.front().path),
      layers_(std::move(layers)),
      n_layer_(static_cast<int>(layers_.size())),
      n_expert_(n_expert),
      predict_(o.predict),
      predict_top_(o.predict_top),
      history_path_(o.history_path) {
  CLB_CHECK(n_expert_ >= 1, "%s: a streaming store needs a MoE model", path_.c_str());
  CLB_CHECK(o.n_slots >= 1, "the expert cache needs at least one slot, got %d", o.n_slots);
  files_ = std::make_unique<FileSet>(files, o.o_direct, &notes_);
  // Slabs are read whole and exactly once per load: read-ahead would only
  // fill the page cache with the neighbours we do not want.
  files_->advise(POSIX_FADV_RANDOM);
  for (const ExpertTensors& t : layers_) {
    if (!t.gate_exps.data) continue;
    Part parts[3];
    layer_parts(t, parts);
    for (const Part& p : parts) {
      CLB_CHECK(p.stack->ne[2] == n_expert_, "%s: an expert stack has %lld experts, expected %d",
                path_.c_str(), static_cast<long long>(p.stack->ne[2]), n_expert_);
      const uint64_t end = p.offset + p.stack->slab_bytes() * n_expert_;
      const auto in = std::find_if(
          files_->files().begin(), files_->files().end(),
          [&](const FileSet::File& f) { return p.offset >= f.begin && end <= f.begin + f.size; });
      CLB_CHECK(in != files_->files().end(),
                "%s: an expert stack at byte %llu runs past the end of the file", path_.c_str(),
                static_cast<unsigned long long>(p.offset));
    }
  }

  const size_t n_keys = static_cast<size_t>(n_layer_) * n_expert_;
  for (int32_t key : o.pinned)
    CLB_CHECK(key >= 0 && static_cast<size_t>(key) < n_keys &&
                  layers_[key / n_expert_].gate_exps.data,
              "pinned expert key %d is not a routed expert of this model", key);
  n_pinned_ = static_cast<int>(o.pinned.size());
  n_cache_ = active_ = o.n_slots;
  room_ = o.room;
  const int n_total = n_pinned_ + n_cache_;
  align_ = o.io_align != 0 ? o.io_align : page_size();
  warm_chunk_ = round_up(o.warm_chunk != 0 ? o.warm_chunk : kWarmChunk, align_);
  CLB_CHECK(align_ % page_size() == 0 && (align_ & (align_ - 1)) == 0,
            "I/O alignment %zu must be a power of two multiple of the page size %zu", align_, page_size());
  // A split model's files start on MappedFile::kPartAlign boundaries, so an
  // aligned range around a slab stays in its file.
  CLB_CHECK(files.size() == 1 || align_ <= MappedFile::kPartAlign,
            "I/O alignment %zu is larger than a split model's file alignment %llu", align_,
            static_cast<unsigned long long>(MappedFile::kPartAlign));
  slot_bytes_ = slot_bytes(layers_, files_->direct(), align_);
  CLB_CHECK(slot_bytes_ > 0, "%s: the model has no routed experts to stream", path_.c_str());
  pool_bytes_ = slot_bytes_ * n_total;
  // Anonymous and untouched until a slot is first filled, in 2 MiB pages:
  // first touch of 4 KiB pages (a fault each, a VM's exit each) capped the
  // reads into fresh slots at 0.8 GB/s on the Qwen3-30B-A3B shape at 8 GiB,
  // where every load of a 128-token run lands in a slot never used before.
  void* p = map_anonymous(pool_bytes_, true);
  CLB_CHECK(p != nullptr, "cannot reserve %zu bytes for %d expert slots: %s", pool_bytes_,
            n_total, std::strerror(errno));
  pool_ = static_cast<uint8_t*>(p);
  populate_end_ = pool_bytes_;
  n_region_ = (pool_bytes_ + kHugePageBytes - 1) / kHugePageBytes;
  region_ = std::make_unique<std::atomic<uint8_t>[]>(n_region_);
  for (size_t r = 0; r < n_region_; ++r) region_[r].store(kUntouched, std::memory_order_relaxed);
  populate_ = std::jthread([this, when = o.populate_when](std::stop_token stop) {
    while (when && !when() && !stop.stop_requested()) usleep(1000);
    // On idle CPU only, ahead of the loads (see populate_); where
    // SCHED_IDLE is refused, at nice 10 and never past kPopulateLead.
    sched_param idle{};
    size_t ahead = pool_bytes_;
    if (sched_setscheduler(0, SCHED_IDLE, &idle) != 0) {  // this thread only (Linux)
      setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
      ahead = kPopulateLead;
    }
    // A region (one 2 MiB page) per step: faulting holds the address
    // space's lock, and every mmap (a new thread's stack, a buffer) waits
    // for the step in progress.
    for (;;) {
      size_t r;
      {
        // From the first load on (before it, the engine is still mapping its
        // buffers and starting threads, and each mmap would wait for this
        // thread's faults), no further ahead than `ahead`, and only in
        // active slots.
        std::unique_lock<std::mutex> lock(populate_mu_);
        // While the forward pass waits on a load the cores are idle: then
        // as far ahead as `ahead`; otherwise only kPopulateLead ahead, so
        // that a 2 MiB page's fault (about 1.5 ms of kernel time here, not
        // preempted) does not delay a compute thread's wake-up at a barrier.
        auto lead = [&] { return io_waiters_ > 0 ? ahead : std::min(ahead, kPopulateLead); };
        if (!populate_cv_.wait(lock, stop, [&] {
              while (populate_next_ < n_region_ &&
                     region_[populate_next_].load(std::memory_order_acquire) != kUntouched)
                ++populate_next_;  // readers got there first
              const size_t at = populate_next_ * kHugePageBytes;
              return populate_next_ < n_region_ && frontier_ > 0 &&
                     frontier_ * slot_bytes_ + lead() > at && at < populate_end_;
            }))
          return;
        // Claimed under populate_mu_, so a retirement that lowers
        // populate_end_ sees the claim and waits for it.
        r = populate_next_++;
        uint8_t want = kUntouched;
        if (!region_[r].compare_exchange_strong(want, kPopulating)) continue;
      }
      populate_pages(pool_ + r * kHugePageBytes, region_end(r) - r * kHugePageBytes);
      uint8_t want = kPopulating;
      region_[r].compare_exchange_strong(want, kResident);  // fails where a reader took over
      region_[r].notify_all();
    }
  });
  slots_.resize(n_total);
  ops_.resize(static_cast<size_t>(n_total) * kParts);
  where_.assign(n_keys, -1);
  per_expert_.assign(n_keys, ExpertCounters{});
  counts_ = o.history.size() == n_keys ? o.history : std::vector<uint64_t>(n_keys, 0);
  pred_mark_.assign(n_keys, 0);
  layer_pred_.assign(n_layer_, 0);
  policy_ = make_cache_policy(o.policy, n_cache_, static_cast<int>(n_keys), 0, o.history);
  std::string io_note;
  io_ = make_io_engine(o.io, o.io_depth, static_cast<int>(ops_.size()),
                       &StreamingExpertStore::on_read, &StreamingExpertStore::before_read, this,
                       &io_note);
  if (!io_note.empty()) notes_ += (notes_.empty() ? "" : "; ") + io_note;

  // The hot set: all loads in flight at once, then wait for them.
  std::unique_lock<std::mutex> lock(mu_);
  for (int i = 0; i < n_pinned_; ++i) {
    slots_[i].pinned = true;
    if (where_[o.pinned[i]] < 0) start_load(i, o.pinned[i], false, false);
  }
  cv_.wait(lock, [&] { return loading_ == 0; });
  for (int i = 0; i < n_pinned_; ++i)
    CLB_CHECK(slots_[i].state != State::kFailed, "%s: loading pinned expert %d: %s", path_.c_str(),
              slots_[i].key, slots_[i].error);
  warm_over_ = !o.warm_when;
  lock.unlock();
  if (o.warm_when)
    warm_ = std::jthread([this, when = o.warm_when](std::stop_token stop) { warm(stop, when); });
}

void StreamingExpertStore::warm(std::stop_token stop, const std::function<bool()>& when) {
  const double t0 = now_seconds();
  std::unique_lock<std::mutex> lock(mu_);
  struct Over {  // however the warm-up ends, waiters go on
    StreamingExpertStore* s;
    ~Over() {
      s->warm_over_ = true;
      s->cv_.notify_all();
    }
  } over{this};
  // Polled, so that a store destroyed before the gate opens (a short run)
  // does not wait for it.
  while (!warm_stop_ && !stop.stop_requested()) {
    lock.unlock();
    const bool open = when();
    lock.lock();
    if (open) break;
    warm_cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return warm_stop_; });
  }
  // Only on a disk the forward pass leaves idle: one chunk in flight at a
  // time (kick_warm starts each), each started while none of the forward
  // pass's loads is in flight, since a miss (whose reads jump the engine's
  // queue) still waits behind reads the disk has taken. With eight slabs in
  // flight whatever the forward pass did, OLMoE-1B-7B Q4_0 at a 4G limit on a
  // disk capped at 1.3 GB/s took 1.2-2.1 s to its first token (0.9-1.0 s
  // with one slab at a time); a slab's three parts at once still held each
  // miss behind 3.5 MB (chunks of 512 KiB: decode 27-30 -> 30-31 tok/s,
  // bench/RESULTS.md). And only after kWarmQuiet without one (disk_quiet).
  int next = n_pinned_;  // slots fill in order; the warm-up never evicts
  for (int l = 0; l < n_layer_ && next < n_pinned_ + active_; ++l) {
    if (!layers_[l].gate_exps.data) continue;
    for (int e = 0; e < n_expert_ && !warm_stop_; ++e) {
      while (!warm_stop_ && !disk_quiet(0)) warm_cv_.wait_for(lock, kWarmPoll);
      if (warm_stop_) break;
      const int32_t key = l * n_expert_ + e;
      if (where_[key] >= 0) continue;
      while (next < n_pinned_ + active_ && slots_[next].state != State::kEmpty) ++next;
      if (next >= n_pinned_ + active_) break;  // no empty slot left
      // Into memory the populate thread has faulted in, at idle priority:
      // first touch costs as much CPU as the read (a VM backs each page on
      // its first write), and the I/O threads that would fault it run at
      // the forward pass's priority on its cores. A warm-up that faulted
      // its own slots cost the OLMoE-1B-7B Q4_0 shape a quarter of its
      // decode speed at a 4G limit, where the whole file fits.
      if (!slot_resident(next)) {
        want_populated(next);
        warm_cv_.wait_for(lock, kWarmPoll, [&] { return warm_stop_; });
        --e;  // look again: the slot, the expert or the room may have changed
        continue;
      }
      Slot& s = slots_[next];
      start_load(next, key, false, false, true);  // reads nothing: its chunks go below
      ++stats_.warm_loads;
      for (int p = 0; p < kParts; ++p) warm_whole_[p] = ops_[static_cast<size_t>(next) * kParts + p];
      warm_slot_ = next;
      warm_part_ = 0;
      warm_at_ = 0;
      warm_failed_ = false;
      // A chunk that found the disk busy starts when it is quiet again.
      auto slab_over = [&] {
        return !warm_busy_ && (warm_stop_ || warm_failed_ || warm_part_ == kParts);
      };
      kick_warm(lock);
      while (!warm_cv_.wait_for(lock, kWarmPoll, slab_over)) kick_warm(lock);
      for (int p = 0; p < kParts; ++p) ops_[static_cast<size_t>(next) * kParts + p] = warm_whole_[p];
      warm_slot_ = -1;
      // The slab is whole (or failed, or the warm-up stops): ready for its
      // first acquire, which packs it.
      const bool done = warm_part_ == kParts || warm_failed_;
      s.state = !done ? State::kEmpty : warm_failed_ ? State::kFailed : State::kReady;
      s.warming = false;
      s.unpacked = s.state == State::kReady;
      s.pending = 0;
      if (warm_failed_) {
        s.failed = true;
        std::snprintf(s.error, sizeof s.error, "%s", warm_error_);
      }
      if (!done) {
        where_[key] = -1;
        s.key = -1;
      }
      --loading_;
      cv_.notify_all();
    }
  }
  cv_.wait(lock, [&] { return warm_stop_ || loading_ == 0; });
  if (!warm_stop_) stats_.warm_done_s = now_seconds() - t0;
}

StreamingExpertStore::~StreamingExpertStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    warm_stop_ = true;
  }
  cv_.notify_all();
  warm_cv_.notify_all();
  if (warm_.joinable()) warm_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return loading_ == 0; });
  }
  io_.reset();
  populate_.request_stop();
  if (populate_.joinable()) populate_.join();
  if (pool_) munmap(pool_, pool_bytes_);
  if (!history_path_.empty()) {
    try {
      save_history(history_path_, n_layer_, n_expert_, counts_);
    } catch (const Error& e) {
      std::fprintf(stderr, "colibri: warning: %s\n", e.what());
    }
  }
}

void StreamingExpertStore::before_read(void* ctx, ReadOp& op) {
  auto* self = static_cast<StreamingExpertStore*>(ctx);
  const size_t at = static_cast<size_t>(op.dst - self->pool_);
  if (const size_t faulted = self->fault_in(at, at + op.length))
    self->read_faulted_.fetch_add(faulted, std::memory_order_relaxed);
}

size_t StreamingExpertStore::fault_in(size_t begin, size_t end) {
  end = std::min(end, pool_bytes_);
  size_t faulted = 0;
  for (size_t r = begin / kHugePageBytes; r * kHugePageBytes < end; ++r) {
    std::atomic<uint8_t>& st = region_[r];
    double waited_since = 0;
    for (;;) {
      uint8_t s = st.load(std::memory_order_acquire);
      if (s == kResident) break;
      if (s == kFaulting) {  // another reader: done within a fault's time
        st.wait(s, std::memory_order_acquire);
        continue;
      }
      if (s == kPopulating) {
        const double t = now_seconds();
        if (waited_since == 0) waited_since = t;
        if (t - waited_since < kPopulateWait) {
          usleep(100);
          continue;
        }
      }
      if (!st.compare_exchange_strong(s, kFaulting, std::memory_order_acq_rel)) continue;
      populate_pages(pool_ + r * kHugePageBytes, region_end(r) - r * kHugePageBytes);
      faulted += region_end(r) - r * kHugePageBytes;
      st.store(kResident, std::memory_order_release);
      st.notify_all();
      break;
    }
  }
  return faulted;
}

bool StreamingExpertStore::slot_resident(int slot) const {
  const size_t begin = static_cast<size_t>(slot) * slot_bytes_;
  const size_t end = std::min(pool_bytes_, begin + slot_bytes_);
  for (size_t r = begin / kHugePageBytes; r * kHugePageBytes < end; ++r)
    if (region_[r].load(std::memory_order_acquire) != kResident) return false;
  return true;
}

void StreamingExpertStore::want_populated(int slot) {
  std::lock_guard<std::mutex> lock(populate_mu_);
  if (static_cast<size_t>(slot) >= frontier_) {
    frontier_ = static_cast<size_t>(slot) + 1;
    populate_cv_.notify_one();
  }
}

void StreamingExpertStore::pack_part(const TensorView& v) {
  if (v.packed) pack_rows(v.type, const_cast<uint8_t*>(v.data), v.n_rows(), v.ne[0]);
}

void StreamingExpertStore::on_read(void* ctx, ReadOp& op, const char* error) {
  auto* self = static_cast<StreamingExpertStore*>(ctx);
  if (!error) {
    // Pack the part for the kernels here, on the I/O thread, outside the
    // lock: its view was set before the read was submitted and stays until
    // the slot is ready. The warm-up's slabs wait for their first acquire:
    // many are never used in a short run, and packing them here took the
    // compute threads' cores (see pack_late).
    const size_t i = static_cast<size_t>(&op - self->ops_.data());
    const Slot& slot = self->slots_[op.tag];
    if (!slot.warming) pack_part(i % kParts == 0 ? slot.w.gate : i % kParts == 1 ? slot.w.up : slot.w.down);
  }
  std::unique_lock<std::mutex> lock(self->mu_);
  Slot& s = self->slots_[op.tag];
  if (s.warming) {  // one chunk of the warm-up's: the next starts here
    if (error && !self->warm_failed_) {
      self->warm_failed_ = true;
      std::snprintf(self->warm_error_, sizeof self->warm_error_, "%s", error);
    }
    self->warm_busy_ = false;
    self->kick_warm(lock);
    return;
  }
  if (error && !s.failed) {
    s.failed = true;
    std::snprintf(s.error, sizeof s.error, "%s", error);
  }
  if (--s.pending > 0) return;
  s.state = s.failed ? State::kFailed : State::kReady;
  --self->loading_;
  self->forward_load_at_ = now_seconds();
  self->cv_.notify_all();
  self->kick_warm(lock);
}

bool StreamingExpertStore::disk_quiet(int own) const {
  return loading_ == own && now_seconds() - forward_load_at_ >= kWarmQuiet;
}

void StreamingExpertStore::kick_warm(std::unique_lock<std::mutex>& lock) {
  if (warm_slot_ < 0) {  // the warm-up thread waits for an idle disk to start a slab
    if (loading_ == 0) warm_cv_.notify_one();
    return;
  }
  if (warm_busy_) return;
  ReadOp* chunk = nullptr;
  for (; !warm_failed_ && warm_part_ < kParts; ++warm_part_, warm_at_ = 0) {
    const ReadOp& whole = warm_whole_[warm_part_];
    if (warm_at_ >= whole.length || warm_at_ >= whole.expected) continue;
    // Only while none of the forward pass's loads is in flight (the slab's
    // own is the one load then), nor was for kWarmQuiet; the last of them to
    // finish calls this again, or the warm-up thread when it looks again.
    if (warm_stop_) break;
    if (!disk_quiet(1)) return;
    chunk = &ops_[static_cast<size_t>(warm_slot_) * kParts + warm_part_];
    chunk->offset = whole.offset + warm_at_;
    chunk->dst = whole.dst + warm_at_;
    chunk->length = std::min(warm_chunk_, whole.length - warm_at_);
    chunk->expected = std::min(chunk->length, whole.expected - warm_at_);
    warm_at_ += chunk->length;
    break;
  }
  if (!chunk) {  // the slab is whole, or failed, or the warm-up stops
    warm_cv_.notify_one();
    return;
  }
  warm_busy_ = true;
  lock.unlock();
  io_->submit(chunk, false);
  lock.lock();
}

void StreamingExpertStore::enter_layer(int layer) {
  if (active_layer_ >= 0 && active_layer_ != layer) layer_pred_[active_layer_] = 0;
  active_layer_ = layer;
  ++visit_;
}

int StreamingExpertStore::pick_victim(bool for_prefetch) const {
  int best = -1, fallback = -1;
  double best_score = 0, fallback_score = 0;
  for (int i = n_pinned_; i < n_pinned_ + active_; ++i) {
    const Slot& s = slots_[i];
    if (s.state == State::kEmpty || s.state == State::kFailed) return i;
    if (s.users > 0 || s.state == State::kLoading) continue;
    const double sc = policy_->score(i - n_pinned_, now_);
    // Slabs touched in this layer visit are about to be used (a prefetch of
    // this layer named them): evict them only for a demand miss, and last.
    if (s.visit < visit_) {
      if (best < 0 || sc < best_score) best = i, best_score = sc;
    } else if (!for_prefetch && (fallback < 0 || sc < fallback_score)) {
      fallback = i, fallback_score = sc;
    }
  }
  return best >= 0 ? best : fallback;
}

void StreamingExpertStore::io_waiting(int delta) {
  std::lock_guard<std::mutex> lock(populate_mu_);
  io_waiters_ += delta;
  if (io_waiters_ > 0) populate_cv_.notify_one();
}

void StreamingExpertStore::start_load(int slot, int32_t key, bool by_prefetch, bool urgent,
                                      bool warming) {
  const int layer = key / n_expert_, expert = key % n_expert_;
  Part parts[3];
  layer_parts(layers_[layer], parts);
  // The file each part is in (one of a split model's), which must not have
  // changed since it was opened: checked before anything changes, once per
  // load but where a split falls between the parts.
  const FileSet::File* file_of[kParts];
  for (int p = 0; p < kParts; ++p) {
    file_of[p] =
        &files_->at(parts[p].offset + static_cast<uint64_t>(expert) * parts[p].stack->slab_bytes());
    if (p == 0 || file_of[p] != file_of[p - 1]) files_->check_unchanged(*file_of[p]);
  }
  want_populated(slot);
  Slot& s = slots_[slot];
  if (s.key >= 0) {
    where_[s.key] = -1;
    if (s.state == State::kReady) ++stats_.evictions;
  }
  TensorView* views[3] = {&s.w.gate, &s.w.up, &s.w.down};
  uint8_t* base = pool_ + static_cast<size_t>(slot) * slot_bytes_;
  size_t at = 0;
  for (int p = 0; p < kParts; ++p) {
    const size_t len = parts[p].stack->slab_bytes();
    const uint64_t off = parts[p].offset + static_cast<uint64_t>(expert) * len;
    ReadOp& op = ops_[static_cast<size_t>(slot) * kParts + p];
    op.tag = slot;
    op.dst = base + at;
    *views[p] = parts[p].stack->slab(expert);
    views[p]->packed = packs(views[p]->type, views[p]->n_rows());
    const FileSet::File& file = *file_of[p];
    if (files_->direct()) {
      const uint64_t a0 = off / align_ * align_, a1 = round_up(off + len, align_);
      op.fd = file.direct_fd;
      op.offset = a0 - file.begin;
      op.length = a1 - a0;
      op.expected = std::min<uint64_t>(a1, file.begin + file.size) - a0;
      op.drop_cache = false;
      views[p]->data = op.dst + (off - a0);
    } else {
      op.fd = file.fd;
      op.offset = off - file.begin;
      op.length = op.expected = len;
      op.drop_cache = true;
      views[p]->data = op.dst;
    }
    at += round_up(op.length, align_);
  }
  CLB_ASSERT(at <= slot_bytes_);
  for (int p = 0; p < kParts; ++p)
    per_expert_[key].bytes_read += ops_[static_cast<size_t>(slot) * kParts + p].length;
  s.key = key;
  s.state = State::kLoading;
  s.failed = false;
  s.guessed = by_prefetch && !urgent;
  if (s.guessed) ++stats_.pred_loads;
  s.pending = kParts;
  s.warming = warming;  // before the reads start: on_read reads it
  s.unpacked = false;
  s.visit = visit_;
  s.error[0] = 0;
  where_[key] = slot;
  ++loading_;
  ++stats_.loads;
  if (by_prefetch) ++stats_.prefetch_loads;
  if (!s.pinned) policy_->on_insert(slot - n_pinned_, key, now_);
  if (warming) return;  // the warm-up submits the parts in chunks
  forward_load_at_ = now_seconds();
  for (int p = 0; p < kParts; ++p) io_->submit(&ops_[static_cast<size_t>(slot) * kParts + p], urgent);
}

ExpertWeights StreamingExpertStore::acquire(int layer, int expert) {
  CLB_ASSERT(layer >= 0 && layer < n_layer_ && expert >= 0 && expert < n_expert_);
  CLB_ASSERT(layers_[layer].gate_exps.data != nullptr);
  const int32_t key = layer * n_expert_ + expert;
  std::unique_lock<std::mutex> lock(mu_);
  if (layer != active_layer_) enter_layer(layer);
  ++now_;
  ++stats_.requests;
  ++counts_[key];
  if (layer_pred_[layer] != 0) {
    ++stats_.pred_acquires;
    if (pred_mark_[key] == layer_pred_[layer]) ++stats_.pred_hits;
  }
  bool first_look = true;
  for (;;) {
    int slot = where_[key];
    if (slot < 0) {
      slot = pick_victim(false);
      if (slot < 0) {
        // Every slot is in use or loading: a load will finish.
        CLB_CHECK(loading_ > 0, "the expert cache's %d slots are all in use; it needs more",
                  n_cache_);
        const double t0 = now_seconds();
        io_waiting(+1);
        cv_.wait(lock);
        io_waiting(-1);
        stats_.io_wait_s += now_seconds() - t0;
        first_look = false;
        continue;
      }
      start_load(slot, key, false, true);
    }
    Slot& s = slots_[slot];
    if (s.state == State::kReady && s.unpacked) pack_late(lock, s);
    if (s.state == State::kReady) {
      if (s.guessed) ++stats_.pred_loads_used;
      s.guessed = false;
      if (first_look) ++stats_.hits;
      ++(first_look ? per_expert_[key].hits : per_expert_[key].misses);
      ++s.users;
      s.visit = visit_;
      if (!s.pinned) policy_->on_access(slot - n_pinned_, key, now_);
      return s.w;
    }
    if (s.state == State::kFailed) {
      const std::string msg = s.error;
      where_[key] = -1;
      s.key = -1;
      s.state = State::kEmpty;
      fail("%s: reading layer %d expert %d: %s", path_.c_str(), layer, expert, msg.c_str());
    }
    first_look = false;
    const double t0 = now_seconds();
    io_waiting(+1);
    cv_.wait(lock, [&] { return s.state != State::kLoading; });
    io_waiting(-1);
    stats_.io_wait_s += now_seconds() - t0;
  }
}

void StreamingExpertStore::pack_late(std::unique_lock<std::mutex>& lock, Slot& s) {
  // Loading while it packs: no one evicts it, acquirers of it wait, and the
  // warm-up starts no read meanwhile.
  s.unpacked = false;
  s.state = State::kLoading;
  ++loading_;
  lock.unlock();
  for (const TensorView* v : {&s.w.gate, &s.w.up, &s.w.down}) pack_part(*v);
  lock.lock();
  s.state = State::kReady;
  --loading_;
  cv_.notify_all();
  kick_warm(lock);
}

bool StreamingExpertStore::ready(int layer, int expert) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int slot = where_[layer * n_expert_ + expert];
  return slot >= 0 && slots_[slot].state == State::kReady;
}

void StreamingExpertStore::release(int layer, int expert) {
  std::lock_guard<std::mutex> lock(mu_);
  const int slot = where_[layer * n_expert_ + expert];
  CLB_ASSERT(slot >= 0 && slots_[slot].users > 0);
  --slots_[slot].users;
}

void StreamingExpertStore::prefetch_locked(int layer, std::span<const int> experts,
                                           uint64_t visit, bool urgent) {
  for (int e : experts) {
    CLB_ASSERT(e >= 0 && e < n_expert_);
    const int32_t key = layer * n_expert_ + e;
    if (where_[key] >= 0) {
      Slot& s = slots_[where_[key]];
      s.visit = std::max(s.visit, visit);
      continue;
    }
    const int slot = pick_victim(true);
    if (slot < 0) return;  // the cache is full of slabs this step needs
    start_load(slot, key, true, urgent);
    slots_[slot].visit = visit;
  }
}

void StreamingExpertStore::prefetch(int layer, std::span<const int> experts) {
  CLB_ASSERT(layer >= 0 && layer < n_layer_ && layers_[layer].gate_exps.data != nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  // The exact experts of the layer about to run: a new visit of it.
  enter_layer(layer);
  prefetch_locked(layer, experts, visit_, true);
}

void StreamingExpertStore::prefetch_predicted(int layer, std::span<const int> experts) {
  CLB_ASSERT(layer >= 0 && layer < n_layer_ && layers_[layer].gate_exps.data != nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  layer_pred_[layer] = ++pred_gen_;
  for (int e : experts) pred_mark_[layer * n_expert_ + e] = pred_gen_;
  stats_.pred_experts += experts.size();
  // Guesses are made before the current layer's own visit starts; they count
  // as touched in that visit, so the current layer's loads do not evict them
  // before the next layer has had its chance to use them.
  if (predict_) prefetch_locked(layer, experts, visit_ + 1, false);
}

int StreamingExpertStore::max_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

void StreamingExpertStore::wait_warm() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return warm_over_; });
}

void StreamingExpertStore::set_kv_bytes(uint64_t bytes) {
  if (room_ == 0) return;
  uint64_t n = std::min<uint64_t>(room_ > bytes ? (room_ - bytes) / slot_bytes_ : 0,
                                  static_cast<uint64_t>(n_cache_));
  // Below a full pool, the slots in use end inside a 2 MiB page that stays
  // resident (see set_cache_slots): that sliver counts too.
  while (n > 0 && n < static_cast<uint64_t>(n_cache_) &&
         n * slot_bytes_ + retired_sliver(static_cast<int>(n)) + bytes > room_)
    --n;
  set_cache_slots(static_cast<int>(n));
}

void StreamingExpertStore::move_slab(int from, int to) {
  Slot& f = slots_[from];
  Slot& t = slots_[to];
  CLB_ASSERT(f.state == State::kReady && f.users == 0 && t.users == 0 && t.state != State::kLoading);
  if (t.key >= 0) {
    if (where_[t.key] == to) where_[t.key] = -1;
    if (t.state == State::kReady) ++stats_.evictions;
  }
  fault_in(static_cast<size_t>(to) * slot_bytes_, static_cast<size_t>(to + 1) * slot_bytes_);
  std::memcpy(pool_ + static_cast<size_t>(to) * slot_bytes_, pool_ + static_cast<size_t>(from) * slot_bytes_,
              slot_bytes_);
  const ptrdiff_t d = (static_cast<ptrdiff_t>(to) - from) * static_cast<ptrdiff_t>(slot_bytes_);
  t.key = f.key;
  t.state = State::kReady;
  t.failed = false;
  t.guessed = f.guessed;
  t.unpacked = f.unpacked;
  t.pending = 0;
  t.visit = f.visit;
  t.w = f.w;
  for (TensorView* v : {&t.w.gate, &t.w.up, &t.w.down}) v->data += d;
  where_[t.key] = to;
  policy_->on_move(from - n_pinned_, to - n_pinned_);
  f.key = -1;
  f.state = State::kEmpty;
}

void StreamingExpertStore::set_cache_slots(int n) {
  n = std::clamp(n, 1, n_cache_);
  std::unique_lock<std::mutex> lock(mu_);
  const int old = active_;
  if (n == old) return;
  if (n > old) {
    active_ = n;
    std::lock_guard<std::mutex> pl(populate_mu_);
    populate_end_ = static_cast<size_t>(n_pinned_ + n) * slot_bytes_;
    populate_cv_.notify_all();
    return;
  }
  // Loads into retiring slots finish first (no new ones start: loads come
  // from the caller's thread).
  for (int i = n_pinned_ + n; i < n_pinned_ + old; ++i)
    cv_.wait(lock, [&] { return slots_[i].state != State::kLoading; });
  for (int i = n_pinned_ + old - 1; i >= n_pinned_ + n; --i) {
    Slot& s = slots_[i];
    CLB_ASSERT(s.users == 0);
    active_ = i - n_pinned_;  // the victim comes from the slots below i
    if (s.state == State::kReady) {
      int v = pick_victim(true);
      if (v < 0) v = pick_victim(false);
      const bool keep = v >= 0 && (slots_[v].state == State::kEmpty || slots_[v].state == State::kFailed ||
                                   policy_->score(v - n_pinned_, now_) < policy_->score(i - n_pinned_, now_));
      if (keep) {
        move_slab(i, v);
        continue;
      }
      ++stats_.evictions;
    }
    if (s.key >= 0 && where_[s.key] == i) where_[s.key] = -1;
    s.key = -1;
    s.state = State::kEmpty;
  }
  active_ = n;
  stats_.slots_given_back += static_cast<uint64_t>(old - n);
  // From the first 2 MiB boundary at or above the retired slots to the end
  // of the pool (huge_page_sliver: a context-filling run under a 40 MiB
  // budget peaked 3-12 MiB over it when retired slots split huge pages).
  // The sliver below the boundary stays resident (under 2 MiB); a later
  // retirement that passes the boundary drops it.
  const size_t from = static_cast<size_t>(n_pinned_ + n) * slot_bytes_ + retired_sliver(n);
  const size_t end = (pool_bytes_ + page_size() - 1) / page_size() * page_size();
  const size_t r0 = from / kHugePageBytes;  // from is a region boundary (or the pool's end)
  {
    // The populate thread claims no region past the active slots from now
    // on, and will start again from the first dropped one.
    std::lock_guard<std::mutex> pl(populate_mu_);
    populate_end_ = static_cast<size_t>(n_pinned_ + n) * slot_bytes_;
    populate_next_ = std::min(populate_next_, r0);
  }
  if (from >= end) return;
  // A region it claimed before finishes first (no reader touches retired
  // slots: their loads are done).
  for (size_t r = r0; r < n_region_; ++r)
    for (uint8_t s;
         (s = region_[r].load(std::memory_order_acquire)) == kPopulating || s == kFaulting;)
      region_[r].wait(s, std::memory_order_acquire);
  madvise(pool_ + from, end - from, MADV_DONTNEED);
  for (size_t r = r0; r < n_region_; ++r) region_[r].store(kUntouched, std::memory_order_release);
}

size_t StreamingExpertStore::retired_sliver(int n) const {
  const size_t end = (pool_bytes_ + page_size() - 1) / page_size() * page_size();  // the mapping's
  return huge_page_sliver(static_cast<size_t>(n_pinned_ + n) * slot_bytes_, end);
}

ExpertStoreStats StreamingExpertStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ExpertStoreStats s = stats_;
  s.cache_slots = active_;
  s.cache_slots_start = n_cache_;
  const IoEngineStats io = io_->stats();
  s.bytes_read = io.bytes;
  s.read_busy_s = io.busy_s;
  s.read_faulted = read_faulted_.load(std::memory_order_relaxed);
  return s;
}

bool StreamingExpertStore::expert_counters(std::span<ExpertCounters> out) const {
  CLB_CHECK(out.size() == per_expert_.size(), "expert_counters: %zu entries for %zu experts", out.size(),
            per_expert_.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t key = 0; key < out.size(); ++key) {
    out[key] = per_expert_[key];
    const int slot = where_[key];
    const Slot* s = slot >= 0 ? &slots_[static_cast<size_t>(slot)] : nullptr;
    out[key].where = !s                           ? Residency::kOnDisk
                     : s->pinned                  ? Residency::kPinned
                     : s->state == State::kReady  ? Residency::kCached
                     : s->state == State::kLoading ? Residency::kLoading
                                                  : Residency::kOnDisk;
  }
  return true;
}

std::vector<uint64_t> StreamingExpertStore::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace colibri
