// Where a decode step's time goes (`colibri bench --profile`): the pool's job
// trace summed by job name, and the same jobs replayed with loads only.
#include <algorithm>
#include <map>
#include <string>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "engine/bench.h"
#include "tensor/ops.h"

namespace colibri {

namespace {

// A replayed job's chunks: multiples of 16 KiB, about the 16-row grain of
// the weight products (18 KiB of q4_0 rows of 2048).
constexpr size_t kReplayBlock = 4096;
constexpr int64_t kReplayGrain = 4;
// Under this many bytes a product runs on one thread (model/linear.h).
constexpr uint64_t kOneThreadBytes = 64u << 10;

void spin_until(double t) {
  while (now_seconds() < t) {
  }
}

}  // namespace

DecodeProfile summarize_trace(const JobTrace& trace, int n_tokens, double wall_s, int n_threads) {
  CLB_CHECK(n_tokens >= 1 && trace.n >= 1, "profile: no jobs were traced");
  DecodeProfile p;
  p.n_tokens = n_tokens;
  p.n_threads = n_threads;
  p.step_s = wall_s / n_tokens;
  p.jobs_per_token = static_cast<double>(trace.n) / n_tokens;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < trace.n; ++i) {
    const JobTrace::Job& j = trace.jobs[i];
    const std::string what = j.what ? j.what : "other";
    auto [it, added] = index.try_emplace(what, p.kinds.size());
    if (added) p.kinds.push_back(JobKind{what});
    JobKind& k = p.kinds[it->second];
    const double dur = j.end - j.begin;
    k.jobs += 1;
    k.seconds += dur;
    k.bytes += static_cast<double>(j.bytes);
    k.macs += static_cast<double>(j.macs);
    // The first thread to run out of chunks idles until the job ends.
    double first_done = j.end;
    for (int t = 0; t < std::min(n_threads, JobTrace::kMaxThreads); ++t)
      first_done = std::min(first_done, j.thread_end[t] > 0 ? j.thread_end[t] : j.begin);
    k.idle_s += j.end - first_done;
    if (i > 0) {
      const double gap = j.begin - trace.jobs[i - 1].end;
      k.gap_before_s += gap;
      p.gaps_s += gap;
    }
    p.in_jobs_s += dur;
  }
  p.in_jobs_s /= n_tokens;
  p.gaps_s /= n_tokens;
  std::sort(p.kinds.begin(), p.kinds.end(),
            [](const JobKind& a, const JobKind& b) { return a.seconds > b.seconds; });
  return p;
}

void replay_loads_only(const JobTrace& trace, size_t first, size_t count, int n_threads,
                       DecodeProfile& p) {
  CLB_CHECK(first + count <= trace.n && count > 0, "profile: replay range outside the trace");
  uint64_t total = 0;
  for (size_t i = first; i < first + count; ++i) total += trace.jobs[i].bytes;
  // As much fresh memory as the jobs read, up to 1 GiB (reused in turn),
  // written first so no page faults are timed: far above the last-level
  // cache either way.
  const size_t cap = size_t{1} << 30;
  const size_t size = std::max<size_t>(
      std::min<size_t>((total + kReplayBlock - 1) / kReplayBlock * kReplayBlock, cap),
      size_t{64} << 20);
  AlignedBuffer<uint8_t> buf(size);
  ThreadPool pool(n_threads);
  pool.parallel_for(static_cast<int64_t>(size / kReplayBlock), 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      std::fill(buf.data() + i * kReplayBlock, buf.data() + (i + 1) * kReplayBlock,
                static_cast<uint8_t>(i));
  });
  std::vector<uint64_t> sums(n_threads);
  std::map<std::string, std::pair<double, double>> by_kind;  // seconds, bytes
  // One pass over the jobs: each reads as many bytes as its original, split
  // the same way, from the next stretch of the buffer; with_gaps: the caller
  // first spends the recorded serial time before it.
  auto pass = [&](bool with_gaps, bool record) {
    size_t at = 0;
    const double t0 = now_seconds();
    for (size_t i = first; i < first + count; ++i) {
      const JobTrace::Job& j = trace.jobs[i];
      if (with_gaps && i > first) spin_until(now_seconds() + (j.begin - trace.jobs[i - 1].end));
      if (j.bytes == 0) continue;
      const size_t bytes =
          std::min<size_t>((j.bytes + kReplayBlock - 1) / kReplayBlock * kReplayBlock, size);
      if (at + bytes > size) at = 0;
      const uint8_t* base = buf.data() + at;
      at += bytes;
      const int64_t blocks = static_cast<int64_t>(bytes / kReplayBlock);
      const double s0 = now_seconds();
      pool.parallel_for(blocks, j.bytes < kOneThreadBytes ? blocks : kReplayGrain,
                        [&](int64_t b, int64_t e, int th) {
                          sums[th] += read_sum(base + b * kReplayBlock,
                                               static_cast<size_t>(e - b) * kReplayBlock);
                        });
      if (record) {
        auto& k = by_kind[j.what ? j.what : "other"];
        k.first += now_seconds() - s0;
        k.second += static_cast<double>(j.bytes);
      }
    }
    return now_seconds() - t0;
  };
  pass(false, false);  // warm-up: the pool's threads, the buffer's TLB entries
  double jobs_s = 1e30, step_s = 1e30;
  for (int r = 0; r < 3; ++r) {
    jobs_s = std::min(jobs_s, pass(false, r == 0));
    step_s = std::min(step_s, pass(true, false));
  }
  const double tokens = static_cast<double>(count) / p.jobs_per_token;
  p.replay_tokens = tokens;
  p.replay_bytes_per_token = static_cast<double>(total) / tokens;
  p.replay_jobs_s = jobs_s / tokens;
  p.replay_step_s = step_s / tokens;
  for (JobKind& k : p.kinds) {
    auto it = by_kind.find(k.what);
    if (it != by_kind.end() && it->second.first > 0)
      k.loads_only_gb_s = it->second.second / it->second.first / 1e9;
  }
  // Keeps the sums, so the reads are not optimised away.
  uint64_t s = 0;
  for (uint64_t x : sums) s += x;
  p.replay_checksum = s;
}

}  // namespace colibri
