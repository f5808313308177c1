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
// Skewed routing (router_skew S > 0): trained routers prefer some experts. A
// random model gets the same through a constant channel: coordinate 0 of every
// token embedding holds c = 3 (the rest of its quant sub-block 0), and no layer
// writes to it (row 0 of
// every residual projection is zero), so after each RMSNorm it is a nearly
// constant input. Only the routers read it: column 0 of every other matrix
// that reads the normed residual (q, k, v, gate, up, output) is zero, since a
// constant input there would reach the residual stream as a common vector
// (attention averages it out of the noise) and bias routing by itself.
// Router column 0 turns it into a per-expert bias
// b = -S * ln(rank + 1) / sqrt(2 ln n_expert), rank being the expert's place in
// a seeded per-layer order, with the rest of the router giving noise of
// standard deviation ~1. The noise's maxima behave like Gumbel variables of
// scale ~1/sqrt(2 ln n_expert), so the top choice follows roughly
// P(rank r) ~ (r + 1)^-S: Zipf-like with exponent ~S. S = 0 routes uniformly.
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

namespace colibri {

// A real model's hyperparameters, as its Hugging Face config.json gives them.
struct SynthShape {
  const char* name;  // "olmoe-1b-7b"
  const char* arch;  // general.architecture
  int n_layer, n_embd, n_head, n_head_kv, head_dim;
  int n_vocab, n_ctx_train;
  int n_ff;  // feed_forward_length as the converter writes it
  int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
  float rms_eps, rope_base;
  bool write_n_ff_exp;  // the family writes expert_feed_forward_length
};

// nullptr for an unknown name.
const SynthShape* find_synth_shape(std::string_view name);
// "olmoe-1b-7b, qwen3-30b-a3b, ..." for help and errors.
std::string synth_shape_names();

// The file types llama-quantize names (general.file_type).
enum class SynthType { kF32, kF16, kQ8_0, kQ4_0, kQ4_K_M };
std::optional<SynthType> parse_synth_type(std::string_view name);
const char* synth_type_name(SynthType t);

struct SynthOptions {
  SynthShape shape{};
  SynthType type = SynthType::kQ4_0;
  uint64_t seed = 1;
  float router_skew = 0;   // Zipf-like exponent of expert popularity; 0: uniform
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
