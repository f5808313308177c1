#include "server/scheduler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/sys.h"

namespace colibri::server {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::kStop:
      return "stop";
    case Finish::kLength:
      return "length";
    case Finish::kCancelled:
      return "cancelled";
    case Finish::kError:
      return "error";
    case Finish::kNone:
      break;
  }
  return "";
}

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// log softmax(logits)[id] = logits[id] - log(sum_j exp(logits[j]))
float log_softmax_at(const float* logits, int n_vocab, int32_t id) {
  float max = logits[0];
  for (int i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  return logits[id] - max - static_cast<float>(std::log(sum));
}

JobEvent cancelled_event() {
  JobEvent e;
  e.finish = Finish::kCancelled;
  return e;
}

}  // namespace

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& o) : engine_(engine), opts_(o) {
  const int n_slots = engine.kv().n_seq();
  const int n_batch = engine.transformer().max_batch();
  CLB_CHECK(n_batch >= n_slots,
            "the batch size (%d) must be at least the number of parallel sequences (%d): every "
            "decoding sequence adds one token to each step",
            n_batch, n_slots);
  CLB_CHECK(o.max_queue >= 0, "queue limit %d must not be negative", o.max_queue);
  for (int i = 0; i < n_slots; ++i) slots_.push_back(std::make_unique<Slot>(i, engine.n_vocab()));
  batch_.reserve(n_batch);
  logits_.resize(static_cast<size_t>(n_slots) * engine.n_vocab());
  stats_.n_slots = n_slots;
  usage_ = engine.transformer().expert_usage();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Job> Scheduler::submit(JobParams p) {
  CLB_CHECK(!p.prompt.empty(), "the prompt has no tokens");
  CLB_CHECK(static_cast<int64_t>(p.prompt.size()) < engine_.n_ctx(),
            "the prompt is %zu tokens but the context holds %d", p.prompt.size(), engine_.n_ctx());
  for (int32_t id : p.prompt)
    CLB_CHECK(id >= 0 && id < engine_.n_vocab(), "prompt token %d is outside the vocabulary (%d)",
              id, engine_.n_vocab());
  auto job = std::make_shared<Job>(std::move(p));
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t free_slots = slots_.size() - stats_.slots_busy;
    if (queue_.size() >= free_slots + opts_.max_queue) return nullptr;
    queue_.push_back(job);
    stats_.queue_depth = static_cast<int>(queue_.size());
  }
  cv_.notify_one();
  return job;
}

void Scheduler::expert_usage(std::vector<uint64_t>& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.assign(usage_.begin(), usage_.end());
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s = stats_;
  if (now_seconds() - window_start_ > 5) s.gen_tokens_per_s = 0;  // idle
  return s;
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || stats_.slots_busy > 0; });
      if (stop_) break;
      admit_locked();
    }
    for (auto& s : slots_)
      if (s->job && s->job->cancelled()) finish(*s, Finish::kCancelled);
    if (!build_batch()) continue;
    const double t0 = now_seconds();
    try {
      engine_.transformer().forward(batch_, engine_.kv(), logits_.data());
    } catch (const std::exception& e) {
      fail_all(e.what());
      continue;
    }
    const double dt = now_seconds() - t0;
    const size_t n_tokens = batch_.size();
    after_forward();
    publish(dt, n_tokens);
  }
  for (auto& s : slots_)
    if (s->job) finish(*s, Finish::kCancelled);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& j : queue_) j->push(cancelled_event());
  queue_.clear();
}

void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = queue_.front();
    if (job->cancelled()) {
      queue_.pop_front();
      job->push(cancelled_event());
      ++stats_.jobs_cancelled;
      continue;
    }
    // The free slot whose cached tokens share the longest prefix with the
    // prompt, else the one unused longest (its cache is the least likely to
    // be asked for again).
    Slot* best = nullptr;
    size_t best_len = 0;
    for (auto& s : slots_) {
      if (s->job) continue;
      size_t n = common_prefix(s->tokens, job->params.prompt);
      if (!best || n > best_len || (n == best_len && s->last_used < best->last_used)) {
        best = s.get();
        best_len = n;
      }
    }
    if (!best) break;
    queue_.pop_front();
    ++stats_.slots_busy;
    start(*best, std::move(job));
  }
  stats_.queue_depth = static_cast<int>(queue_.size());
}

void Scheduler::start(Slot& s, std::shared_ptr<Job> job) {
  const std::vector<int32_t>& prompt = job->params.prompt;
  // At least the last prompt token is evaluated: its logits start generation.
  const size_t limit = prompt.size() - 1;
  size_t n_keep = std::min(common_prefix(s.tokens, prompt), limit);
  // Another slot, busy or not, may hold a longer prefix: copy its KV. Its
  // positions below its token count are final, whatever it decodes next.
  const Slot* donor = nullptr;
  for (auto& o : slots_) {
    if (o.get() == &s) continue;
    size_t n = std::min(common_prefix(o->tokens, prompt), limit);
    if (n > n_keep) {
      n_keep = n;
      donor = o.get();
    }
  }
  if (donor) {
    engine_.kv().copy_prefix(donor->seq, s.seq, static_cast<int>(n_keep));
    s.tokens.assign(prompt.begin(), prompt.begin() + n_keep);
  } else {
    s.tokens.resize(n_keep);
  }
  s.n_prompt_done = n_keep;
  s.next_token = -1;
  s.logits_row = -1;
  s.admitted = ++clock_;
  s.usage = Usage{static_cast<int>(prompt.size()), static_cast<int>(n_keep), 0};
  s.sampler.reset(job->params.sampling);
  s.text.reset(&job->params.stop);
  s.pending = JobEvent{};
  stats_.cached_tokens += n_keep;
  s.job = std::move(job);
}

bool Scheduler::build_batch() {
  batch_.clear();
  int rows = 0;
  const int n_batch = engine_.transformer().max_batch();
  // Decoding slots first: one token each.
  for (auto& sp : slots_) {
    Slot& s = *sp;
    s.logits_row = -1;
    if (!s.job || s.next_token < 0) continue;
    batch_.push_back({s.next_token, static_cast<int32_t>(s.tokens.size()), s.seq, true});
    s.tokens.push_back(s.next_token);
    s.next_token = -1;
    s.logits_row = rows++;
  }
  // Then prompt chunks, oldest request first, in what is left of the batch.
  int budget = n_batch - static_cast<int>(batch_.size());
  uint64_t prompt_tokens = 0;
  while (budget > 0) {
    Slot* oldest = nullptr;
    for (auto& sp : slots_) {
      Slot& s = *sp;
      if (s.job && s.logits_row < 0 && s.n_prompt_done < s.job->params.prompt.size() &&
          (!oldest || s.admitted < oldest->admitted))
        oldest = &s;
    }
    if (!oldest) break;
    const std::vector<int32_t>& prompt = oldest->job->params.prompt;
    const size_t n = std::min(static_cast<size_t>(budget), prompt.size() - oldest->n_prompt_done);
    for (size_t i = 0; i < n; ++i) {
      const size_t at = oldest->n_prompt_done + i;
      batch_.push_back({prompt[at], static_cast<int32_t>(oldest->tokens.size()), oldest->seq,
                        at + 1 == prompt.size()});
      oldest->tokens.push_back(prompt[at]);
    }
    oldest->n_prompt_done += n;
    budget -= static_cast<int>(n);
    prompt_tokens += n;
    // A slot gets a logits row only when its prompt is complete; one still
    // prefilling is marked with row -2 so it is not picked twice this step.
    oldest->logits_row = oldest->n_prompt_done == prompt.size() ? rows++ : -2;
  }
  if (prompt_tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens += prompt_tokens;
  }
  return !batch_.empty();
}

void Scheduler::after_forward() {
  const size_t n_vocab = engine_.n_vocab();
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.job && s.logits_row >= 0) on_logits(s, logits_.data() + s.logits_row * n_vocab);
  }
}

void Scheduler::on_logits(Slot& s, const float* logits) {
  const JobParams& p = s.job->params;
  const Tokenizer& tok = engine_.tokenizer();
  const int32_t id = s.sampler.sample(logits, s.tokens);
  if (!p.ignore_eos && tok.is_eog(id)) {
    finish(s, Finish::kStop);
    return;
  }
  if (p.n_logprobs >= 0) {
    TokenLogprob lp{id, log_softmax_at(logits, engine_.n_vocab(), id), {}};
    if (p.n_logprobs > 0) {
      Sampler::top_logprobs(logits, engine_.n_vocab(), p.n_logprobs, &top_scratch_);
      for (const TokenProb& t : top_scratch_) lp.top.push_back({t.id, t.logit, {}});
    }
    s.pending.logprobs.push_back(std::move(lp));
  }
  ++s.usage.completion_tokens;
  ++step_gen_tokens_;
  s.text.add(tok.token_to_piece(id, false), s.pending.text);
  if (s.text.stopped()) return finish(s, Finish::kStop);
  if (p.max_tokens >= 0 && s.usage.completion_tokens >= p.max_tokens)
    return finish(s, Finish::kLength);
  if (static_cast<int>(s.tokens.size()) >= engine_.n_ctx()) return finish(s, Finish::kLength);
  s.next_token = id;
  if (!s.pending.text.empty() || !s.pending.logprobs.empty()) {
    s.job->push(std::move(s.pending));
    s.pending = JobEvent{};
  }
}

void Scheduler::finish(Slot& s, Finish why, const std::string& error) {
  if (why == Finish::kStop || why == Finish::kLength) s.text.flush(s.pending.text);
  s.pending.finish = why;
  s.pending.error = error;
  s.pending.usage = s.usage;
  std::shared_ptr<Job> job = std::move(s.job);
  s.next_token = -1;
  s.logits_row = -1;
  s.last_used = ++clock_;
  {
    // Counted before the job hears of it, so a client that reads /metrics
    // after its answer sees the answer counted.
    std::lock_guard<std::mutex> lock(mu_);
    --stats_.slots_busy;
    if (why == Finish::kCancelled)
      ++stats_.jobs_cancelled;
    else
      ++stats_.jobs_done;
    stats_.gen_tokens += step_gen_tokens_;
    window_tokens_ += step_gen_tokens_;
    step_gen_tokens_ = 0;
  }
  job->push(std::move(s.pending));
  s.pending = JobEvent{};
}

void Scheduler::fail_all(const std::string& error) {
  // The KV of every sequence is in doubt after a failed step: forget it.
  for (auto& s : slots_) {
    if (s->job) finish(*s, Finish::kError, error);
    s->tokens.clear();
  }
}

void Scheduler::publish(double step_s, size_t n_tokens) {
  const ExpertStoreStats store = engine_.store().stats();
  const double now = now_seconds();
  const std::vector<uint64_t>& usage = engine_.transformer().expert_usage();
  std::lock_guard<std::mutex> lock(mu_);
  // Same size every step: a copy into the buffer sized at construction.
  const double c0 = now_seconds();
  std::copy(usage.begin(), usage.end(), usage_.begin());
  stats_.usage_copy_s += now_seconds() - c0;
  ++stats_.steps;
  stats_.batch_tokens += n_tokens;
  stats_.busy_s += step_s;
  stats_.store = store;
  stats_.gen_tokens += step_gen_tokens_;
  window_tokens_ += step_gen_tokens_;
  step_gen_tokens_ = 0;
  if (window_start_ == 0) window_start_ = now;
  if (now - window_start_ >= 2) {
    stats_.gen_tokens_per_s = window_tokens_ / (now - window_start_);
    window_start_ = now;
    window_tokens_ = 0;
  }
}

}  // namespace colibri::server
