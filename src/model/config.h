// Hyperparameters, read from GGUF metadata ("<arch>.block_count", ...).
#pragma once

#include <cstdint>
#include <string>

#include "model/arch.h"

namespace colibri {

class GgufFile;

// The forward pass's attention takes a batch's tokens this many at a time
// per head (each cached key and value row is read once for all of them), and
// each thread keeps scores for that many queries over the whole context.
constexpr int kAttentionQueryBlock = 8;

struct ModelConfig {
  const ArchInfo* arch = nullptr;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;        // per head, for q and k (attention.key_length)
  int head_dim_v = 0;      // per head, for v (attention.value_length)
  int n_rot = 0;           // rotated dims per head (rope.dimension_count)
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_ff = 0;            // dense FFN width (dense layers)
  int n_expert = 0;        // 0 for a dense model
  int n_expert_used = 0;
  int n_ff_exp = 0;        // width of one routed expert
  int n_ff_shexp = 0;      // width of the shared expert, 0 if none
  float rms_eps = 1e-6f;
  float rope_base = 1e4f;

  int n_embd_q() const { return n_head * head_dim; }
  int n_embd_k() const { return n_head_kv * head_dim; }
  int n_embd_v() const { return n_head_kv * head_dim_v; }
  bool is_moe() const { return n_expert > 0; }

  // Reads and validates; throws Error naming the key. n_vocab comes from the
  // token embedding's shape when the key is absent.
  static ModelConfig from_gguf(const GgufFile& f);
  std::string describe() const;
};

}  // namespace colibri
