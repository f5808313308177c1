// Sampling: logits -> the next token.
//
// Order, as llama.cpp applies it: repetition/presence/frequency penalties,
// top-k, top-p, min-p, temperature, then a draw. temperature <= 0 is greedy
// (ties to the lower id). The candidate buffer is sized once for the
// vocabulary; sample() does not allocate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace colibri {

struct SamplerParams {
  float temperature = 0.8f;
  int top_k = 40;          // 0: all
  float top_p = 0.95f;     // 1: off
  float min_p = 0.05f;     // 0: off
  float repeat_penalty = 1.0f;    // 1: off; divides positive logits of recent tokens
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;  // OpenAI semantics
  float frequency_penalty = 0.0f;
  uint64_t seed = 0xC011B121;
};

// xoshiro256** seeded by splitmix64: the same seed gives the same stream on
// every platform (std:: distributions do not promise that).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

struct TokenProb {
  int32_t id;
  float logit;
};

class Sampler {
 public:
  Sampler(int n_vocab, const SamplerParams& p);

  // `history`: tokens so far (prompt and generated) for the penalties.
  int32_t sample(const float* logits, std::span<const int32_t> history);
  void reset(const SamplerParams& p);
  const SamplerParams& params() const { return p_; }

  // log-softmax of the raw logits for the top n tokens (for logprobs).
  static void top_logprobs(const float* logits, int n_vocab, int n, std::vector<TokenProb>* out);

 private:
  int n_vocab_;
  SamplerParams p_;
  Rng rng_;
  std::vector<TokenProb> cand_;   // (n_vocab)
  std::vector<uint32_t> counts_;  // (n_vocab) occurrences for the penalties
};

int32_t argmax(const float* logits, int n);

}  // namespace colibri
