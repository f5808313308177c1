// Running a model straight through Transformer with a chosen expert store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace colibri::test {

struct LoadedModel {
  std::unique_ptr<GgufFile> file;
  ModelConfig cfg;
  ModelWeights w;
};

inline LoadedModel load_model(const std::string& path) {
  LoadedModel m;
  m.file = GgufFile::open(path);
  m.cfg = ModelConfig::from_gguf(*m.file);
  m.w = bind_weights(*m.file, m.cfg);
  return m;
}

// A prompt of n_prompt tokens in one batch (logits for each), then n_steps
// single tokens; every logit, in order. Token ids are fixed, not sampled.
inline std::vector<float> run_logits(const ModelConfig& cfg, const ModelWeights& w,
                                     ExpertStore& store, int n_prompt, int n_steps,
                                     int n_threads = 2) {
  const int n_ctx = n_prompt + n_steps + 1;
  ThreadPool pool(n_threads);
  KVCache kv(cfg, n_ctx, 1);
  Transformer tf(cfg, w, store, pool, Precision::kNative, n_prompt, n_ctx);
  std::vector<float> logits(static_cast<size_t>(n_prompt + n_steps) * cfg.n_vocab);
  std::vector<BatchToken> batch(n_prompt);
  for (int i = 0; i < n_prompt; ++i) batch[i] = {(i * 7 + 3) % cfg.n_vocab, i, 0, true};
  tf.forward(batch, kv, logits.data());
  for (int s = 0; s < n_steps; ++s) {
    BatchToken b{(s * 13 + 5) % cfg.n_vocab, n_prompt + s, 0, true};
    tf.forward(std::span<const BatchToken>(&b, 1), kv,
               logits.data() + static_cast<size_t>(n_prompt + s) * cfg.n_vocab);
  }
  return logits;
}

}  // namespace colibri::test
