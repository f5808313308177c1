#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace colibri {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

Sampler::Sampler(int n_vocab, const SamplerParams& p)
    : n_vocab_(n_vocab), p_(p), rng_(p.seed), cand_(n_vocab), counts_(n_vocab, 0) {}

void Sampler::reset(const SamplerParams& p) {
  p_ = p;
  rng_ = Rng(p.seed);
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history) {
  const bool penalties = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f ||
                         p_.frequency_penalty != 0.0f;
  if (p_.temperature <= 0 && !penalties) return argmax(logits, n_vocab_);

  int n = n_vocab_;
  for (int i = 0; i < n; ++i) cand_[i] = {i, logits[i]};
  if (penalties) {
    size_t first = history.size() > static_cast<size_t>(p_.repeat_last_n) && p_.repeat_last_n >= 0
                       ? history.size() - p_.repeat_last_n
                       : 0;
    for (size_t i = first; i < history.size(); ++i)
      if (history[i] >= 0 && history[i] < n) ++counts_[history[i]];
    for (size_t i = first; i < history.size(); ++i) {
      int32_t id = history[i];
      if (id < 0 || id >= n || counts_[id] == 0) continue;
      float& l = cand_[id].logit;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
      l -= p_.presence_penalty + p_.frequency_penalty * counts_[id];
      counts_[id] = 0;  // apply once per distinct token
    }
  }
  if (p_.temperature <= 0) {
    int32_t best = 0;
    for (int i = 1; i < n; ++i)
      if (cand_[i].logit > cand_[best].logit) best = i;
    return best;
  }

  auto by_logit = [](const TokenProb& a, const TokenProb& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  // top-k: the k best first, sorted.
  int k = p_.top_k > 0 ? std::min(p_.top_k, n) : n;
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.begin() + n, by_logit);
  n = k;
  // Softmax over the survivors (temperature applied after the filters, as
  // llama.cpp's default chain does, so filters see the raw distribution).
  const float max = cand_[0].logit;
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(cand_[i].logit - max));
  // top-p: smallest prefix whose probability reaches top_p.
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (int i = 0; i < n; ++i) {
      cum += std::exp(static_cast<double>(cand_[i].logit - max)) / sum;
      if (cum >= p_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  // min-p: drop tokens below min_p times the best token's probability.
  if (p_.min_p > 0.0f) {
    const float cut = max + std::log(p_.min_p);
    int m = 1;
    while (m < n && cand_[m].logit >= cut) ++m;
    n = m;
  }
  // Temperature and the draw.
  double total = 0;
  for (int i = 0; i < n; ++i) total += std::exp(static_cast<double>(cand_[i].logit - max) / p_.temperature);
  double r = rng_.uniform() * total;
  for (int i = 0; i < n; ++i) {
    r -= std::exp(static_cast<double>(cand_[i].logit - max) / p_.temperature);
    if (r <= 0) return cand_[i].id;
  }
  return cand_[n - 1].id;
}

void Sampler::top_logprobs(const float* logits, int n_vocab, int n, std::vector<TokenProb>* out) {
  float max = logits[0];
  for (int i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const float lse = max + static_cast<float>(std::log(sum));
  out->clear();
  n = std::min(n, n_vocab);
  for (int i = 0; i < n_vocab; ++i) {
    TokenProb tp{i, logits[i] - lse};
    if (static_cast<int>(out->size()) < n) {
      out->push_back(tp);
      std::push_heap(out->begin(), out->end(),
                     [](const TokenProb& a, const TokenProb& b) { return a.logit > b.logit; });
    } else if (n > 0 && tp.logit > out->front().logit) {
      std::pop_heap(out->begin(), out->end(),
                    [](const TokenProb& a, const TokenProb& b) { return a.logit > b.logit; });
      out->back() = tp;
      std::push_heap(out->begin(), out->end(),
                     [](const TokenProb& a, const TokenProb& b) { return a.logit > b.logit; });
    }
  }
  std::sort(out->begin(), out->end(), [](const TokenProb& a, const TokenProb& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
}

}  // namespace colibri
