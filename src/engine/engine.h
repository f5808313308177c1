// The engine: a loaded model ready to run. Owns the file, the weights, the
// expert store, the tokenizer, the KV cache and the thread pool.
//
// The guided tour of a token: Engine::eval -> Transformer::forward
// (model/transformer.cpp) -> ExpertStore::acquire (moe/) -> matvec_rows /
// matmul_rows (tensor/ops.h) -> kernels; then Sampler::sample
// (engine/sampler.h); generate.h strings these together.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "moe/expert_store.h"
#include "moe/placement.h"
#include "tensor/ops.h"
#include "tokenizer/tokenizer.h"

namespace colibri {

struct EngineOptions {
  std::string model_path;
  int n_ctx = 4096;      // per sequence; 0: the model's training context
  int n_threads = 0;     // 0: all cores
  int n_batch = 512;     // tokens per forward step in prefill (each streamed expert is read once per step)
  int n_seq = 1;         // sequences decoded together (server slots)
  Precision precision = Precision::kNative;
  DType kv_type = DType::F16;  // KV cache storage: F16 (llama.cpp's default) or F32
  ExpertStoreOptions store;  // memory budget and expert streaming
};

struct EngineStats {
  uint64_t n_prompt_tokens = 0;
  uint64_t n_gen_tokens = 0;
  double prompt_s = 0;
  double gen_s = 0;
  double load_s = 0;
  uint64_t peak_rss = 0;
  ExpertStoreStats store;
};

class Engine {
 public:
  explicit Engine(const EngineOptions& o);  // throws Error
  ~Engine();

  const ModelConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  // Waits until every dense tensor is in place (they load in the background
  // after construction). Where the plan left the token embeddings in the
  // file (Plan::embeddings_in_file), their view still points into the
  // mapping: its shape is right, its bytes are not to be read.
  const ModelWeights& weights() const;
  const EngineOptions& options() const { return opts_; }
  int n_ctx() const { return kv_->n_ctx(); }
  int n_vocab() const { return cfg_.n_vocab; }
  KVCache& kv() { return *kv_; }
  Transformer& transformer() { return *transformer_; }
  ExpertStore& store() { return *store_; }
  // Where the weights live under the memory budget.
  const Plan& plan() const { return plan_; }

  // Feeds tokens of sequence `seq` at positions pos0.. in batches of n_batch
  // and returns the last token's logits (n_vocab, valid until the next call).
  // Counts as prompt time in the stats.
  const float* eval_prompt(std::span<const int32_t> tokens, int seq, int pos0);
  // One generated token; counts as generation time.
  const float* eval_token(int32_t token, int seq, int pos, RoutingTrace* trace = nullptr);

  EngineStats stats() const;
  void add_gen_time(double s, uint64_t n_tokens);

 private:
  EngineOptions opts_;
  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ExpertStore> store_;  // owns the resident dense weights too
  Plan plan_;
  std::unique_ptr<KVCache> kv_;
  std::unique_ptr<Transformer> transformer_;
  std::vector<float> logits_;           // (n_vocab)
  std::vector<BatchToken> batch_;       // (n_batch)
  EngineStats stats_;
};

}  // namespace colibri
