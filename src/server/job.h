// A request as the scheduler sees it, and the channel its output flows back
// through.
//
// An HTTP thread builds a Job (prompt already tokenized and validated),
// submits it and drains its events; the scheduler thread pushes one event per
// decode step with the new text. Either side may outlive the other: the Job
// is shared, and a consumer that goes away calls cancel() so the scheduler
// frees the sequence at its next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace colibri::server {

struct JobParams {
  std::vector<int32_t> prompt;  // tokens, BOS included where the model adds one
  SamplerParams sampling;
  int max_tokens = -1;            // < 0: until end of generation or the context is full
  std::vector<std::string> stop;  // stop strings, cut from the text
  int n_logprobs = -1;            // < 0: none; 0: the chosen token's; n: plus the top n
  bool ignore_eos = false;
};

enum class Finish { kNone, kStop, kLength, kCancelled, kError };
const char* finish_name(Finish f);  // "stop", "length", ... as OpenAI spells them

// One alternative and its log-probability (log-softmax of the raw logits).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // the most likely tokens at this step, best first
};

struct Usage {
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  int completion_tokens = 0;
};

struct JobEvent {
  std::string text;                    // new text (valid UTF-8, may be empty)
  std::vector<TokenLogprob> logprobs;  // tokens sampled since the last event
  Finish finish = Finish::kNone;       // set on the last event of a job
  std::string error;                   // with Finish::kError
  Usage usage;                         // on the last event
};

class Job {
 public:
  explicit Job(JobParams p) : params(std::move(p)) {}

  const JobParams params;

  void push(JobEvent e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_one();
  }

  // Moves pending events into `out` (appending), waiting up to `timeout` for
  // the first; false when none came.
  bool wait(std::vector<JobEvent>& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
    while (!events_.empty()) {
      out.push_back(std::move(events_.front()));
      events_.pop_front();
    }
    return true;
  }

  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace colibri::server
