// Hugging Face model families as data: how a folder's config.json and tensor
// names map onto the GGUF family colibri runs (model/arch.h).
//
// A family is the config's "architectures" name, the GGUF architecture it
// becomes, the config keys it adds to the common ones, and a list of tensor
// rules. A rule names the Hugging Face tensor with {L} for the layer and {E}
// for the expert, the GGUF tensor with {L}, the layout change between them
// and the layers it applies to. Adding a family whose tensors follow known
// layouts is one entry here.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace colibri {

enum class HfLayout {
  kAsIs,      // the same matrix: GGUF's ne is the Hugging Face shape reversed
  kRopeRows,  // q/k projections of families whose GGUF files rotate interleaved
              // pairs while Hugging Face rotates halves: each head's rows
              // (x_0..x_{d/2-1}, x_{d/2}..x_{d-1}) become (x_0, x_{d/2}, x_1, ...)
  kExperts,   // one tensor per expert ({E}), stacked into one 3-D GGUF tensor
  kSqueeze,   // a (1, n) matrix stored as the vector (n)
  // Multi-head latent attention's kv_b_proj: per head, nope rows mapping the
  // latent to keys, then v rows mapping it to values. GGUF splits it into
  // attn_k_b (each head's key part transposed: kv_lora_rank rows of nope)
  // and attn_v_b (each head's value rows as stored).
  kLatentKeys,
  kLatentValues,
  // MXFP4 experts as OpenAI ships them (GPT-OSS): NAME_blocks (experts, rows,
  // blocks, 16 bytes: element 2j in byte j's low nibble, 2j + 1 in its high
  // one) and NAME_scales (experts, rows, blocks: E8M0), repacked into GGUF's
  // MXFP4 blocks (the scale, then element j low and j + 16 high in byte j).
  // Where a release has the experts dequantized instead (NAME alone, shaped
  // (experts, in, out)), each GGUF row is a column of it: kExpertColumns.
  kMxfp4Experts,
  kExpertColumns,
  // One of two interleaved column sets of a matrix (pick 0: even, 1: odd),
  // as GPT-OSS stores its gate and up biases in one (experts, 2 * n_ff).
  kPickCols,
};

// Which layers a rule applies to: families with leading dense layers
// (config's first_k_dense_replace) have a plain FFN there and experts after;
// a multi-token-prediction (NextN) layer kept after the model's own is a MoE
// layer with tensors of its own besides (kNextn).
enum class HfLayers { kAll, kDense, kMoe, kNextn };

struct HfTensorRule {
  const char* hf;    // Hugging Face name; {L} layer, {E} expert
  const char* gguf;  // GGUF name; {L} layer
  HfLayout layout = HfLayout::kAsIs;
  bool optional = false;  // present in some checkpoints only (biases, lm_head when tied)
  bool keep_f32 = false;  // stays F32 whatever the output type (the router)
  HfLayers layers = HfLayers::kAll;
  // kMxfp4Experts: the rows of one of two interleaved sets (gate even, up
  // odd); kPickCols: the columns. -1: all.
  int pick = -1;
};

enum class HfValue { kU32, kF32, kBool };

// A config.json key the family copies to a GGUF key (under its prefix).
struct HfConfigKey {
  const char* hf;
  const char* gguf;
  HfValue kind;
  bool required = false;
};

struct HfFamily {
  std::string_view hf_arch = {};               // config.json "architectures"[0]
  std::string_view gguf_arch = {};             // general.architecture
  std::span<const HfTensorRule> tensors = {};  // per-layer rules ({L})
  std::span<const HfConfigKey> keys = {};      // beyond the common ones
  // config.json's name for the expert count.
  const char* expert_count_key = "num_experts";
  // ... and for the experts each token uses.
  const char* used_count_key = "num_experts_per_tok";
  // The value of config.json's "norm_topk_prob" the GGUF family always uses
  // (its table entry routes that way); a config that says otherwise cannot
  // be represented. nullopt: the family states it in a key (keys above).
  std::optional<bool> norm_topk_prob = std::nullopt;
  // config.json's count of leading dense layers (first_k_dense_replace), or nullptr.
  const char* dense_lead_key = nullptr;
  // config.json's count of multi-token-prediction layers after the model's
  // own (num_nextn_predict_layers). Generation never runs them. Where
  // llama.cpp's converter keeps them (keep_nextn: GLM-4.5), they are blocks
  // after the model's own, counted in block_count and nextn_predict_layers;
  // else (DeepSeek-V3, whose converter drops them) their tensors are left out.
  const char* nextn_key = nullptr;
  bool keep_nextn = false;
  // expert_gating_func to write (2: sigmoid); 0: none (the table's softmax).
  int gating_func = 0;
  // partial_rotary_factor sets rope.dimension_count (head_dim times it).
  bool partial_rotary = false;
  // config.json's scoring_func ("softmax" 1, "sigmoid" 2) sets expert_gating_func.
  const char* gating_key = nullptr;
  // Multi-head latent attention: q_lora_rank, kv_lora_rank, qk_nope_head_dim,
  // qk_rope_head_dim and v_head_dim give the head sizes (the GGUF keys of
  // the absorbed form: a single KV head of kv_lora_rank + rope values).
  bool mla = false;
  // Sliding-window attention on alternate layers (GPT-OSS): sliding_window
  // is a key of its own and layer_types must alternate sliding and full,
  // starting with sliding, as the GGUF family's pattern has it.
  bool alternating_windows = false;
};

// The rules every family shares: embeddings, the final norm, the output.
std::span<const HfTensorRule> hf_global_rules();
// The family for config.json's architecture, or nullptr.
const HfFamily* find_hf_family(std::string_view hf_arch);
// "Qwen3MoeForCausalLM, ..." for error messages.
std::string supported_hf_families();
// The rule's name with {L} and {E} replaced.
std::string hf_rule_name(const char* pattern, int layer, int expert = -1);

}  // namespace colibri
