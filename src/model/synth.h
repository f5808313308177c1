// Random-weight models of real models' exact shapes, for benchmarking without
// downloading weights.
//
// A synthetic file carries the metadata keys, tensor names, shapes and
// per-tensor quant types that llama.cpp's converter and llama-quantize would
// write for the real model, a real tokenizer copied from a vocab GGUF, and
// seeded random weights. The same options give a byte-identical file.
//
// Weights: each matrix row is N(0, 1/fan_in)-like. Quantized tensors are
// written as random quant blocks directly (random quants, scales chosen so the
// dequantized values have variance 1/fan_in), which is as fast as writing the
// file; the values are not those of quantizing a Gaussian, but a kernel reads
// the same bytes either way. Residual projections (attn_output, ffn_down*) are
// scaled by 1/sqrt(2 n_layer), as GPT-2 initialises them, so the residual
// stream keeps its scale through every layer. Norms are 1, routers F32.
//
// Routing (SynthRouting):
// - natural (the default): routers and biases as drawn (routers N(0, 1/fan_in),
//   biases N(0, 0.5^2), exp_probs_b N(0, 0.1^2), as the plain writer
//   ../shared/tools/synth_gguf.py draws them), and coordinate 0 of every token
//   embedding a "massive activation" of 0.25 times the norm of the rest, which
//   every matrix reads as drawn, as trained models' hidden states carry a few
//   in fixed coordinates. Each router turns it into per-expert biases of
//   standard deviation ~0.25 against noise of ~1: routing is uneven, the most
//   used quarter of the experts taking ~40% of the routings in a random
//   network (tiny-olmoe with 16 experts, 6 and 16 layers; uniform: 31%), as
//   ../shared/tools/synth_gguf.py measured with its shared embedding
//   direction of 0.2 (41% at layer 0, 59-72% deeper, with llama-imatrix on
//   text). Without it a random network routes as uniformly as the next mode.
// - uniform: the worst case for an expert cache, every expert about as
//   popular as every other. No component of the residual stream is common to
//   all tokens: the constant channel below is read by no matrix, router
//   biases and exp_probs_b are 0, and biases leave channel 0 alone.
// - zipf (router_skew S > 0): trained routers prefer some experts; a constant
//   channel gives each router a per-expert bias of a chosen strength. Coordinate
//   0 of every token embedding holds c = 3 (the rest of its quant sub-block 0),
//   and no layer writes to it (row 0 of every residual projection and element
//   0 of every bias added to the residual are zero), so after each RMSNorm it
//   is a nearly constant input. Only the routers read it: column 0 of every
//   other matrix that reads the normed residual (q, k, v, the MLA
//   down-projections, gate, up, output) is zero, since a constant input there
//   would reach the residual stream as a common vector (attention averages it
//   out of the noise) and bias routing by itself. Router column 0 turns it
//   into a per-expert bias b = -S * ln(rank + 1) / sqrt(2 ln n_expert), rank
//   being the expert's place in a seeded per-layer order, with the rest of
//   the router giving noise of standard deviation ~1. The noise's maxima
//   behave like Gumbel variables of scale ~1/sqrt(2 ln n_expert), so the top
//   choice follows roughly P(rank r) ~ (r + 1)^-S: Zipf-like with exponent ~S.
//
// Slices (n_layers): the first N layers of a model too large to write whole,
// with block_count N and every other key as the real model's, and each
// tensor's type chosen as for the whole model, so that the slice's layers are
// byte for byte the size of the real model's first N and its size
// extrapolates. NextN layers are not part of a slice.
//
// No data (no_data): the metadata and tensor table are written and the data
// is left a hole of the full size (a sparse file): the file has the real
// model's size and layout for `colibri inspect` and the loader, in no time
// and no disk.
//
// Vocabulary: the tokenizer.* keys of the vocab file are copied. When the
// vocab has more tokens than the shape, it is cut: the first tokens are kept,
// special ids beyond the cut are moved to the last ids, and BPE merges whose
// parts or result were cut are dropped. When it has fewer, it is padded with
// unused tokens "[PAD<id>]" (token type 5), as llama.cpp's converter pads
// Qwen's vocabulary to the embedding size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/quant_mix.h"

namespace colibri {

// A real model's hyperparameters, as its Hugging Face config.json gives them,
// and which optional keys its family's converter writes.
struct SynthShape {
  const char* name = "";  // "olmoe-1b-7b"
  const char* arch = "";  // general.architecture
  int n_layer = 0;        // the model's own layers (NextN layers come on top)
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_vocab = 0, n_ctx_train = 0;
  int n_ff = 0;  // feed_forward_length as the converter writes it (the dense FFN's width)
  int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  int n_ff_shexp = 0;          // qwen2moe: the shared expert's width (expert_shared_feed_forward_length)
  int n_expert_shared = 0;     // deepseek, glm4moe: shared experts of n_ff_exp each (expert_shared_count)
  int n_layer_dense_lead = 0;  // leading layers with a dense FFN (leading_dense_block_count)
  float rms_eps = 1e-6f, rope_base = 1e4f;
  int n_rot = 0;  // rotated dims per head (partial RoPE; MLA: qk_rope_head_dim); 0: head_dim
  bool write_n_ff_exp = false;   // the family writes expert_feed_forward_length
  bool write_head_dims = true;   // attention.key_length / value_length (deepseek v1 has none)
  bool write_n_rot = true;       // rope.dimension_count (gpt-oss has none)
  // Multi-head latent attention (deepseek2); q_lora_rank 0: plain attn_q.
  int q_lora_rank = 0, kv_lora_rank = 0, qk_nope = 0, v_head_dim = 0;
  // Routing keys, written where set: expert_gating_func (1 softmax, 2
  // sigmoid), expert_weights_scale, expert_weights_norm (only when true, as
  // the converters write it), expert_group_count / _used_count.
  int gating_func = 0;
  float expert_weights_scale = 0;
  bool expert_weights_norm = false;
  int n_expert_group = 0, n_expert_group_used = 0;
  bool exp_probs_b = false;  // the selection bias tensor (sigmoid routing)
  // RoPE scaling keys: type ("yarn", "none"; nullptr: none written), factor,
  // original context, YaRN betas and deepseek2's yarn_log_multiplier
  // (0.1 * mscale_all_dim), each written where nonzero.
  const char* rope_scaling = nullptr;
  float rope_factor = 0;
  int rope_orig_ctx = 0;
  float yarn_beta_fast = 0, yarn_beta_slow = 0, yarn_log_mul = 0;
  bool attn_bias = false;         // q/k/v biases where the family has them optionally (glm4moe)
  bool optional_qk_norm = false;  // q/k norms where the family has them optionally (glm4moe)
  int n_swa = 0;    // attention.sliding_window (gpt-oss)
  int n_nextn = 0;  // NextN (multi-token prediction) layers the converter appends (glm4moe)
};

// nullptr for an unknown name.
const SynthShape* find_synth_shape(std::string_view name);
// "olmoe-1b-7b, qwen3-30b-a3b, ..." for help and errors.
std::string synth_shape_names();
// Every shape, in the order of synth_shape_names().
std::vector<const SynthShape*> synth_shapes();

// The file types llama-quantize names (general.file_type). MXFP4_MOE: the
// routed experts in MXFP4, every other matrix in Q8_0 (GPT-OSS's release).
// IQ4_NL, IQ4_XS: the mixes llama-quantize writes without an importance matrix.
enum class SynthType {
  kF32,
  kF16,
  kQ8_0,
  kQ4_0,
  kQ2_K,
  kQ3_K_M,
  kQ4_K_M,
  kQ5_K_M,
  kQ6_K,
  kMXFP4_MOE,
  kIQ4_NL,
  kIQ4_XS,
  kIQ1_S,
  kIQ1_M,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ2_M,
  kIQ3_XXS
};
std::optional<SynthType> parse_synth_type(std::string_view name);
const char* synth_type_name(SynthType t);
// The llama-quantize file type a quantized SynthType writes; nullopt for F32, F16.
std::optional<QuantMix> synth_quant_mix(SynthType t);

enum class SynthRouting { kNatural, kUniform, kZipf };
std::optional<SynthRouting> parse_synth_routing(std::string_view name);
const char* synth_routing_name(SynthRouting r);

struct SynthOptions {
  SynthShape shape{};
  SynthType type = SynthType::kQ4_0;
  uint64_t seed = 1;
  SynthRouting routing = SynthRouting::kNatural;
  float router_skew = 1;   // kZipf: Zipf-like exponent of expert popularity
  int n_layers = 0;        // write only the first n_layers layers; 0: all
  bool no_data = false;    // tensor data left a hole (a sparse file)
  std::string vocab_path;  // vocab GGUF whose tokenizer.* keys are copied
  int n_threads = 0;       // 0: all cores
  // Called as the tensor data is written (bytes so far, total bytes).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct SynthSummary {
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;
  int n_tensors = 0;
  std::string vocab_note;  // "kept", "cut from N", "padded from N"
  std::vector<std::pair<std::string, uint64_t>> params_by_type;  // ("q4_0", n), ...
};

// Writes the model to path (atomically). Throws Error.
SynthSummary write_synth_model(const SynthOptions& o, const std::string& path);

}  // namespace colibri
