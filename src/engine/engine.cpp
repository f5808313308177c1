#include "engine/engine.h"

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "base/sys.h"

namespace colibri {

Engine::Engine(const EngineOptions& o) : opts_(o) {
  const double t0 = now_seconds();
  file_ = GgufFile::open(o.model_path);
  cfg_ = ModelConfig::from_gguf(*file_);
  weights_ = bind_weights(*file_, cfg_);

  int threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(threads, 1);
  pool_ = std::make_unique<ThreadPool>(threads);
  int n_ctx = o.n_ctx > 0 ? o.n_ctx : cfg_.n_ctx_train;
  CLB_CHECK(n_ctx <= (1 << 22), "context size %d is too large", n_ctx);
  CLB_CHECK(o.n_batch >= 1 && o.n_batch <= 4096, "batch size %d must be between 1 and 4096",
            o.n_batch);
  // Places the weights under the budget: dense ones copied into anonymous
  // memory, routed experts behind the store (streamed from disk when they do
  // not all fit). Rewrites weights_' views, so it comes before the transformer.
  // The KV cache shares its room with the expert cache: slots at an empty
  // context, given back as the context grows (the listener below).
  const uint64_t scratch = scratch_bytes_estimate(cfg_, n_ctx, o.n_batch, threads);
  KVCache::check_type(cfg_, o.kv_type);
  const uint64_t kv_full = kv_cache_bytes(cfg_, n_ctx, std::max(o.n_seq, 1), o.kv_type);
  store_ = make_expert_store(o.store, *file_, cfg_, weights_, scratch, &plan_, kv_full, o.kv_type);
  // The dense weights load in the background from here on; the vocabulary
  // is built meanwhile.
  tokenizer_ = Tokenizer::from_gguf(*file_);
  CLB_CHECK(tokenizer_->n_vocab() == cfg_.n_vocab,
            "%s: the tokenizer has %d tokens but token_embd.weight has %d rows",
            o.model_path.c_str(), tokenizer_->n_vocab(), cfg_.n_vocab);
  kv_ = std::make_unique<KVCache>(cfg_, n_ctx, std::max(o.n_seq, 1), o.kv_type);
  kv_->set_growth_listener([store = store_.get()](uint64_t bytes) { store->set_kv_bytes(bytes); });
  transformer_ = std::make_unique<Transformer>(cfg_, weights_, *store_, *pool_, o.precision,
                                               o.n_batch, n_ctx);
  logits_.resize(cfg_.n_vocab);
  batch_.resize(o.n_batch);
  stats_.load_s = now_seconds() - t0;
}

Engine::~Engine() = default;

const ModelWeights& Engine::weights() const {
  store_->wait_dense(ExpertStore::kAllDense);
  return weights_;
}

const float* Engine::eval_prompt(std::span<const int32_t> tokens, int seq, int pos0) {
  CLB_CHECK(!tokens.empty(), "nothing to evaluate: the prompt has no tokens");
  CLB_CHECK(pos0 + static_cast<int64_t>(tokens.size()) <= n_ctx(),
            "the prompt needs %lld positions but the context holds %d (use -c to enlarge it)",
            static_cast<long long>(pos0 + tokens.size()), n_ctx());
  const double t0 = now_seconds();
  const size_t B = batch_.size();
  for (size_t i = 0; i < tokens.size(); i += B) {
    const size_t n = std::min(B, tokens.size() - i);
    for (size_t j = 0; j < n; ++j)
      batch_[j] = {tokens[i + j], pos0 + static_cast<int32_t>(i + j), seq, i + j == tokens.size() - 1};
    transformer_->forward(std::span<const BatchToken>(batch_.data(), n), *kv_, logits_.data());
  }
  stats_.prompt_s += now_seconds() - t0;
  stats_.n_prompt_tokens += tokens.size();
  return logits_.data();
}

const float* Engine::eval_token(int32_t token, int seq, int pos, RoutingTrace* trace) {
  CLB_CHECK(pos < n_ctx(), "context is full: position %d of %d", pos, n_ctx());
  BatchToken b{token, pos, seq, true};
  transformer_->forward(std::span<const BatchToken>(&b, 1), *kv_, logits_.data(), trace);
  return logits_.data();
}

void Engine::add_gen_time(double s, uint64_t n_tokens) {
  stats_.gen_s += s;
  stats_.n_gen_tokens += n_tokens;
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.peak_rss = peak_rss_bytes();
  s.store = store_->stats();
  return s;
}

}  // namespace colibri
