// The scheduler: one thread that owns the Engine and decodes every active
// request together.
//
// Each step it
//   1. drops cancelled requests and admits waiting ones into free slots
//      (slot i decodes KV sequence i), reusing cached KV of a shared prompt
//      prefix;
//   2. builds one batch: the next token of every decoding slot, then prompt
//      chunks of prefilling slots (oldest first) up to the transformer's
//      max batch, so a long prompt is spread over steps instead of stalling
//      the streams;
//   3. runs Transformer::forward once; in MoE layers an expert fetched for one
//      stream serves every token routed to it;
//   4. samples per slot and pushes the new text to each Job.
// A request submitted while others decode joins at the next step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/job.h"
#include "server/text_stream.h"

namespace colibri::server {

struct SchedulerOptions {
  int max_queue = 64;  // requests waiting for a slot; more are refused (429)
};

// A snapshot for /metrics, published by the scheduler thread after each step.
struct SchedulerStats {
  int n_slots = 0;
  int slots_busy = 0;
  int queue_depth = 0;
  uint64_t jobs_done = 0;
  uint64_t jobs_cancelled = 0;
  uint64_t prompt_tokens = 0;   // prompt tokens evaluated
  uint64_t cached_tokens = 0;   // prompt tokens served from the prefix cache
  uint64_t gen_tokens = 0;      // tokens sampled
  uint64_t steps = 0;           // forward passes
  uint64_t batch_tokens = 0;    // tokens over all forward passes
  double busy_s = 0;            // time spent in forward passes
  double usage_copy_s = 0;      // of which copying the expert usage counts for the stats feed
  double gen_tokens_per_s = 0;  // over the last few seconds
  ExpertStoreStats store;
};

class Scheduler {
 public:
  // The number of slots is the engine's KV sequence count (EngineOptions.n_seq).
  Scheduler(Engine& engine, const SchedulerOptions& o);
  ~Scheduler();  // finishes running jobs as cancelled and joins the thread

  // nullptr when the queue is full. The prompt must be non-empty and shorter
  // than the context (checked: throws Error).
  std::shared_ptr<Job> submit(JobParams p);

  SchedulerStats stats() const;
  // Routed tokens per (layer, expert) as of the last step
  // (Transformer::expert_usage, copied by the scheduler thread).
  void expert_usage(std::vector<uint64_t>& out) const;
  int n_slots() const { return static_cast<int>(slots_.size()); }
  int n_ctx() const { return engine_.n_ctx(); }

 private:
  struct Slot {
    int seq = 0;
    std::shared_ptr<Job> job;
    std::vector<int32_t> tokens;  // tokens whose KV is in this sequence, by position
    size_t n_prompt_done = 0;     // prompt tokens with KV
    int32_t next_token = -1;      // sampled, not yet decoded
    int logits_row = -1;          // row of this step's logits
    uint64_t admitted = 0;        // admission order (prefill goes oldest first)
    uint64_t last_used = 0;       // for choosing which cached prefix to give up
    Usage usage;
    TextStream text;
    Sampler sampler;
    JobEvent pending;  // output gathered during this step
    Slot(int seq_, int n_vocab) : seq(seq_), sampler(n_vocab, SamplerParams{}) {}
  };

  void loop();
  void admit_locked();
  void start(Slot& s, std::shared_ptr<Job> job);
  bool build_batch();
  void after_forward();
  void on_logits(Slot& s, const float* logits);
  void finish(Slot& s, Finish why, const std::string& error = {});
  void fail_all(const std::string& error);
  void publish(double step_s, size_t n_tokens);

  Engine& engine_;
  SchedulerOptions opts_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<BatchToken> batch_;  // (n_batch)
  std::vector<float> logits_;      // (n_slots, n_vocab)
  std::vector<TokenLogprob> top_;  // scratch for top_logprobs
  std::vector<TokenProb> top_scratch_;
  uint64_t clock_ = 0;
  uint64_t step_gen_tokens_ = 0;  // tokens sampled in this step

  mutable std::mutex mu_;  // guards queue_, stop_, stats_, usage_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  SchedulerStats stats_;
  std::vector<uint64_t> usage_;  // (n_layer, n_expert), copied after each step
  double window_start_ = 0;  // for gen_tokens_per_s
  uint64_t window_tokens_ = 0;
  std::thread thread_;
};

}  // namespace colibri::server
