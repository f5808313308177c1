#include "hf_export.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf.h"
#include "formats/safetensors_writer.h"
#include "tensor/ops.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace colibri::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Family {
  const char* gguf;
  const char* hf_class;
  bool mixtral_names;  // block_sparse_moe.{gate, experts.E.w1/w2/w3}
  bool rotate_halves;  // Hugging Face's q/k rotate halves, the GGUF's pairs
  const char* n_expert_key;
};

const Family kFamilies[] = {
    {"qwen3moe", "Qwen3MoeForCausalLM", false, false, "num_experts"},
    {"qwen2moe", "Qwen2MoeForCausalLM", false, false, "num_experts"},
    {"olmoe", "OlmoeForCausalLM", false, false, "num_experts"},
    {"llama", "MixtralForCausalLM", true, true, "num_local_experts"},
    {"glm4moe", "Glm4MoeForCausalLM", false, false, "n_routed_experts"},
    {"deepseek2", "DeepseekV3ForCausalLM", false, false, "n_routed_experts"},
    {"gpt-oss", "GptOssForCausalLM", false, false, "num_local_experts"},
};

std::string replace_first(std::string s, const std::string& what, const std::string& with) {
  const size_t at = s.find(what);
  if (at != std::string::npos) s.replace(at, what.size(), with);
  return s;
}

// "blk.3.ffn_up_exps.weight" -> Hugging Face names ({E} for each expert).
std::string hf_name(const Family& f, const std::string& gguf) {
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  // blk.<layer>.<part>.<weight|bias>
  const size_t d1 = gguf.find('.'), d2 = gguf.find('.', d1 + 1), d3 = gguf.rfind('.');
  if (gguf.rfind("blk.", 0) != 0 || d2 == std::string::npos || d3 <= d2)
    fail("export: no Hugging Face name for %s", gguf.c_str());
  const std::string m[4] = {gguf, gguf.substr(d1 + 1, d2 - d1 - 1),
                            gguf.substr(d2 + 1, d3 - d2 - 1), gguf.substr(d3 + 1)};
  const bool glm = std::string(f.gguf) == "glm4moe" || std::string(f.gguf) == "deepseek2";
  // GPT-OSS (modeling_gpt_oss.py).
  static const std::map<std::string, std::string> oss = {
      {"attn_sinks", "self_attn.sinks"},
      {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_gate_inp", "mlp.router"},
      {"attn_output", "self_attn.o_proj"}};
  if (auto it = oss.find(m[2]); std::string(f.gguf) == "gpt-oss" && it != oss.end()) {
    const std::string p = "model.layers." + m[1] + "." + it->second;
    return m[2] == "attn_sinks" ? p : p + "." + m[3];
  }
  // DeepSeek's latent attention (modeling_deepseek.py).
  static const std::map<std::string, std::string> mla = {
      {"attn_q_a", "self_attn.q_a_proj"},
      {"attn_q_a_norm", "self_attn.q_a_layernorm"},
      {"attn_q_b", "self_attn.q_b_proj"},
      {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
      {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
      {"attn_kv_b", "self_attn.kv_b_proj"}};
  const std::string pre = "model.layers." + m[1] + ".", part = m[2], kind = m[3];
  if (auto it = mla.find(part); it != mla.end()) return pre + it->second + "." + kind;
  const std::string moe = f.mixtral_names ? "block_sparse_moe." : "mlp.";
  static const std::map<std::string, std::string> attn = {
      {"attn_norm", "input_layernorm"},
      {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},
      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
      {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"}};
  // GLM-4.5: the shared experts are plural, the dense layers' FFN is the mlp itself.
  static const std::map<std::string, std::string> glm_parts = {
      {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
      {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
      {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
      {"ffn_down_shexp", "mlp.shared_experts.down_proj"}};
  if (glm && part == "exp_probs_b") return pre + "mlp.gate.e_score_correction_bias";
  // A NextN layer's own tensors (modeling_glm4_moe.py's MTP layer).
  static const std::map<std::string, std::string> nextn = {
      {"nextn.eh_proj", "eh_proj"},
      {"nextn.enorm", "enorm"},
      {"nextn.hnorm", "hnorm"},
      {"nextn.shared_head_norm", "shared_head.norm"},
      {"nextn.embed_tokens", "embed_tokens"},
      {"nextn.shared_head_head", "shared_head.head"}};
  if (auto it = nextn.find(part); it != nextn.end()) return pre + it->second + "." + kind;
  if (auto it = glm_parts.find(part); glm && it != glm_parts.end())
    return pre + it->second + "." + kind;
  if (auto it = attn.find(part); it != attn.end()) return pre + it->second + "." + kind;
  if (part == "ffn_gate_inp") return pre + moe + "gate." + kind;
  const char* w = nullptr;
  if (part == "ffn_gate_exps") w = f.mixtral_names ? "w1" : "gate_proj";
  if (part == "ffn_up_exps") w = f.mixtral_names ? "w3" : "up_proj";
  if (part == "ffn_down_exps") w = f.mixtral_names ? "w2" : "down_proj";
  if (!w) fail("export: no Hugging Face name for %s", gguf.c_str());
  return pre + moe + "experts.{E}." + w + "." + kind;
}

std::vector<uint8_t> to_bytes(const std::vector<float>& v, bool bf16) {
  if (!bf16) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  std::vector<uint8_t> b(v.size() * 2);
  quantize_weights(DType::BF16, v.data(), b.data(), static_cast<int64_t>(v.size()));
  return b;
}

uint64_t uint_or(const GgufFile& g, const std::string& key, uint64_t dflt) {
  return g.get_uint(key).value_or(dflt);
}

json config_of(const GgufFile& g, const Family& f) {
  const std::string p = std::string(f.gguf) + ".";
  json c;
  c["architectures"] = {f.hf_class};
  c["hidden_act"] = "silu";
  c["hidden_size"] = g.require_uint(p + "embedding_length");
  // NextN layers are blocks after the model's own in GGUF, extra layers in config.json.
  c["num_hidden_layers"] = g.require_uint(p + "block_count") - uint_or(g, p + "nextn_predict_layers", 0);
  c["num_attention_heads"] = g.require_uint(p + "attention.head_count");
  c["num_key_value_heads"] =
      uint_or(g, p + "attention.head_count_kv", g.require_uint(p + "attention.head_count"));
  c["max_position_embeddings"] = uint_or(g, p + "context_length", 4096);
  c["rms_norm_eps"] = g.get_float(p + "attention.layer_norm_rms_epsilon").value();
  c["rope_theta"] = g.get_float(p + "rope.freq_base").value();
  c[f.n_expert_key] = g.require_uint(p + "expert_count");
  c["num_experts_per_tok"] = g.require_uint(p + "expert_used_count");
  if (auto v = g.get_uint(p + "feed_forward_length")) c["intermediate_size"] = *v;
  if (auto v = g.get_uint(p + "expert_feed_forward_length")) c["moe_intermediate_size"] = *v;
  if (auto v = g.get_uint(p + "expert_shared_feed_forward_length"))
    c["shared_expert_intermediate_size"] = *v;
  if (auto v = g.get_uint(p + "attention.key_length")) c["head_dim"] = *v;
  if (auto v = g.get_uint(p + "vocab_size")) c["vocab_size"] = *v;
  if (std::string(f.gguf) == "glm4moe") {
    c["attention_bias"] = true;
    c["use_qk_norm"] = g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    c["n_shared_experts"] = g.require_uint(p + "expert_shared_count");
    c["first_k_dense_replace"] = uint_or(g, p + "leading_dense_block_count", 0);
    c["routed_scaling_factor"] = g.get_float(p + "expert_weights_scale").value();
    c["norm_topk_prob"] = g.get_bool(p + "expert_weights_norm").value_or(false);
    c["n_group"] = uint_or(g, p + "expert_group_count", 1);
    c["topk_group"] = uint_or(g, p + "expert_group_used_count", 1);
    c["partial_rotary_factor"] = static_cast<double>(g.require_uint(p + "rope.dimension_count")) /
                                 static_cast<double>(g.require_uint(p + "attention.key_length"));
    c["num_nextn_predict_layers"] = uint_or(g, p + "nextn_predict_layers", 0);
    c["scoring_func"] = "sigmoid";
  }
  if (std::string(f.gguf) == "deepseek2") {
    const uint64_t rope = g.require_uint(p + "rope.dimension_count");
    c["num_key_value_heads"] = c["num_attention_heads"];
    c["q_lora_rank"] = g.get_uint(p + "attention.q_lora_rank")
                           ? json(*g.get_uint(p + "attention.q_lora_rank"))
                           : json();
    c["kv_lora_rank"] = g.require_uint(p + "attention.kv_lora_rank");
    c["qk_rope_head_dim"] = rope;
    c["qk_nope_head_dim"] = g.require_uint(p + "attention.key_length_mla") - rope;
    c["v_head_dim"] = g.require_uint(p + "attention.value_length_mla");
    c.erase("head_dim");
    c["n_shared_experts"] = uint_or(g, p + "expert_shared_count", 0);
    c["first_k_dense_replace"] = uint_or(g, p + "leading_dense_block_count", 0);
    c["routed_scaling_factor"] = g.get_float(p + "expert_weights_scale").value_or(1.0);
    c["norm_topk_prob"] = g.get_bool(p + "expert_weights_norm").value_or(false);
    c["n_group"] = uint_or(g, p + "expert_group_count", 1);
    c["topk_group"] = uint_or(g, p + "expert_group_used_count", 1);
    c["scoring_func"] = uint_or(g, p + "expert_gating_func", 1) == 2 ? "sigmoid" : "softmax";
    c["topk_method"] = c["scoring_func"] == "sigmoid" ? "noaux_tc" : "greedy";
    c["num_nextn_predict_layers"] = 0;
    if (g.get_string(p + "rope.scaling.type").value_or("") == "yarn") {
      // yarn_log_multiplier is 0.1 * mscale_all_dim in DeepSeek files.
      const double m = g.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0) / 0.1;
      c["rope_scaling"] = {
          {"type", "yarn"},
          {"factor", g.get_float(p + "rope.scaling.factor").value()},
          {"original_max_position_embeddings",
           g.require_uint(p + "rope.scaling.original_context_length")},
          {"beta_fast", g.get_float(p + "rope.scaling.yarn_beta_fast").value_or(32)},
          {"beta_slow", g.get_float(p + "rope.scaling.yarn_beta_slow").value_or(1)},
          {"mscale", m},
          {"mscale_all_dim", m}};
    }
  }
  if (std::string(f.gguf) == "gpt-oss") {
    c.erase("num_experts_per_tok");
    c["experts_per_token"] = g.require_uint(p + "expert_used_count");
    c["intermediate_size"] = g.require_uint(p + "expert_feed_forward_length");
    c["sliding_window"] = g.require_uint(p + "attention.sliding_window");
    json types = json::array();
    for (uint64_t l = 0; l < g.require_uint(p + "block_count"); ++l)
      types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
    c["swiglu_limit"] = 7.0;
    c["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", g.get_float(p + "rope.scaling.factor").value()},
                         {"original_max_position_embeddings",
                          g.require_uint(p + "rope.scaling.original_context_length")},
                         {"beta_fast", 32.0},
                         {"beta_slow", 1.0},
                         {"truncate", false}};
    c["quantization_config"] = {{"quant_method", "mxfp4"}};
    c.erase("hidden_act");
  }
  if (std::string(f.gguf) == "qwen3moe") c["norm_topk_prob"] = true;
  if (std::string(f.gguf) == "qwen2moe" || std::string(f.gguf) == "olmoe")
    c["norm_topk_prob"] = false;
  if (!c.contains("rope_scaling")) c["rope_scaling"] = nullptr;
  if (!c.contains("sliding_window")) c["sliding_window"] = nullptr;
  c["tie_word_embeddings"] = g.find_tensor("output.weight") == nullptr;
  c["torch_dtype"] = "float32";
  return c;
}

// tokenizer.json as the Hugging Face tokenizers library writes one: a
// byte-level BPE with the pre-tokenizer's regexes as Split steps, or
// (SentencePiece vocabularies) a byte-fallback BPE whose merges are every
// split of a piece into two pieces, in the order of the piece's score, as
// the library's SentencePiece converter makes them.
json tokenizer_of(const Vocab& v) {
  json t;
  t["version"] = "1.0";
  json added = json::array();
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    if (!v.has(id, kAttrControl | kAttrUserDefined | kAttrUnknown)) continue;
    added.push_back({{"id", id},
                     {"content", v.text[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", !v.has(id, kAttrUserDefined)}});
  }
  t["added_tokens"] = added;
  json vocab = json::object();
  for (int32_t id = 0; id < v.n_vocab(); ++id) vocab[v.text[id]] = id;
  if (v.kind == VocabKind::kBpe) {
    json seq = json::array();
    for (std::string_view re : v.pre_spec->regexes)
      seq.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", std::string(re)}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
    seq.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", false}});
    t["normalizer"] = nullptr;
    t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", seq}};
    t["decoder"] = {{"type", "ByteLevel"},
                    {"add_prefix_space", true},
                    {"trim_offsets", true},
                    {"use_regex", true}};
    t["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", v.ignore_merges},
                  {"vocab", vocab},
                  {"merges", v.merges}};
    return t;
  }
  struct Merge {
    float score;
    int32_t left, right;
  };
  std::vector<Merge> merges;
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    if (!v.has(id, kAttrNormal)) continue;
    const std::string& s = v.text[id];
    for (size_t cut = 1; cut < s.size(); ++cut) {
      if ((static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) continue;  // inside a character
      const int32_t l = v.find(s.substr(0, cut)), r = v.find(s.substr(cut));
      if (l >= 0 && r >= 0) merges.push_back({v.score[id], l, r});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  json mj = json::array();
  for (const Merge& m : merges) mj.push_back(v.text[m.left] + " " + v.text[m.right]);
  t["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}};
  t["pre_tokenizer"] = nullptr;
  t["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", v.unk >= 0 ? json(v.text[v.unk]) : json()},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", mj}};
  return t;
}

json tokenizer_config_of(const Vocab& v) {
  json c;
  c["add_bos_token"] = v.add_bos;
  c["add_eos_token"] = v.add_eos;
  if (v.bos >= 0) c["bos_token"] = v.text[v.bos];
  if (v.eos >= 0) c["eos_token"] = v.text[v.eos];
  if (v.unk >= 0) c["unk_token"] = v.text[v.unk];
  if (v.pad >= 0) c["pad_token"] = v.text[v.pad];
  c["clean_up_tokenization_spaces"] = v.clean_spaces;
  c["tokenizer_class"] = v.kind == VocabKind::kSpm ? "LlamaTokenizer" : "PreTrainedTokenizerFast";
  return c;
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream out(p);
  out << j.dump(2);
  CLB_CHECK(out.good(), "export: cannot write %s", p.c_str());
}

using PutRaw =
    std::function<void(const std::string&, StDType, std::vector<int64_t>, std::vector<uint8_t>)>;

// GPT-OSS experts as OpenAI ships them: gate and up interleaved by row in
// gate_up_proj (even rows gate, odd rows up), MXFP4 as _blocks (element 2j
// in byte j's low nibble, 2j + 1 in its high one) and _scales (E8M0); the
// biases (experts, 2 n_ff) interleaved the same way. Written when the up
// tensor comes (gate first in the file), down on its own.
void export_oss_experts(const GgufFile& g, const GgufTensor& t, const PutRaw& put) {
  const std::string layer = t.name.substr(0, t.name.find(".ffn_"));
  const std::string pre = "model.layers." + layer.substr(4) + ".mlp.experts.";
  const bool bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
  const bool down = t.name.find("ffn_down_exps") != std::string::npos;
  if (t.name.find("ffn_gate_exps") != std::string::npos) return;  // with up
  std::vector<const GgufTensor*> parts;
  if (down) {
    parts = {&t};
  } else {
    parts = {g.find_tensor(layer + ".ffn_gate_exps" + (bias ? ".bias" : ".weight")), &t};
    CLB_CHECK(parts[0] != nullptr, "export: %s without its gate", t.name.c_str());
  }
  const std::string name = pre + (down ? "down_proj" : "gate_up_proj");
  if (bias) {
    // (n_ff, experts) F32 each -> (experts, n_ff * parts) interleaved, F32.
    const int64_t n = t.ne[0], E = t.ne[1], k = static_cast<int64_t>(parts.size());
    std::vector<float> out(static_cast<size_t>(E * n * k));
    for (int64_t p = 0; p < k; ++p) {
      const float* x = reinterpret_cast<const float*>(g.tensor_data(*parts[p]));
      for (int64_t e = 0; e < E; ++e)
        for (int64_t i = 0; i < n; ++i) out[(e * n + i) * k + p] = x[e * n + i];
    }
    std::vector<uint8_t> bytes(out.size() * 4);
    std::memcpy(bytes.data(), out.data(), bytes.size());
    put(name + "_bias", StDType::kF32, {E, n * k}, std::move(bytes));
    return;
  }
  if (t.type == DType::F32) {
    // The dequantized release (transformers' GptOssExperts): (experts, in,
    // out) matrices, gate and up interleaved by column.
    const int64_t in = t.ne[0], R = t.ne[1], E = t.ne[2], k = static_cast<int64_t>(parts.size());
    std::vector<float> out(static_cast<size_t>(E * in * R * k));
    for (int64_t p = 0; p < k; ++p) {
      const float* x = reinterpret_cast<const float*>(g.tensor_data(*parts[p]));
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < in; ++i)
            out[(e * in + i) * R * k + r * k + p] = x[(e * R + r) * in + i];
    }
    std::vector<uint8_t> bytes(out.size() * 4);
    std::memcpy(bytes.data(), out.data(), bytes.size());
    put(name, StDType::kF32, {E, in, R * k}, std::move(bytes));
    return;
  }
  CLB_CHECK(t.type == DType::MXFP4, "export: %s is %s; GPT-OSS experts are MXFP4 or F32",
            t.name.c_str(), dtype_name(t.type));
  const int64_t nb = t.ne[0] / 32, R = t.ne[1], E = t.ne[2], k = static_cast<int64_t>(parts.size());
  std::vector<uint8_t> blocks(static_cast<size_t>(E * R * k * nb * 16)),
      scales(static_cast<size_t>(E * R * k * nb));
  for (int64_t p = 0; p < k; ++p) {
    const uint8_t* x = g.tensor_data(*parts[p]);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = x + ((e * R + r) * nb + b) * 17;  // E8M0, then j low / j + 16 high
          const int64_t row = e * R * k + r * k + p;
          scales[static_cast<size_t>(row * nb + b)] = blk[0];
          auto code = [&](int i) { return i < 16 ? blk[1 + i] & 15 : blk[1 + i - 16] >> 4; };
          for (int j = 0; j < 16; ++j)
            blocks[static_cast<size_t>((row * nb + b) * 16 + j)] =
                static_cast<uint8_t>(code(2 * j) | code(2 * j + 1) << 4);
        }
  }
  put(name + "_blocks", StDType::kU8, {E, R * k, nb, 16}, std::move(blocks));
  put(name + "_scales", StDType::kU8, {E, R * k, nb}, std::move(scales));
}

}  // namespace

void export_hf_folder(const GgufFile& g, const fs::path& dir, const ExportOptions& o) {
  const std::string arch(g.require_string("general.architecture"));
  const Family* f = nullptr;
  for (const Family& k : kFamilies)
    if (arch == k.gguf) f = &k;
  CLB_CHECK(f != nullptr, "export: no Hugging Face family for %s", arch.c_str());
  fs::create_directories(dir);
  const json config = config_of(g, *f);
  write_json(dir / "config.json", config);
  const Vocab vocab = load_vocab(g);
  write_json(dir / "tokenizer.json", tokenizer_of(vocab));
  write_json(dir / "tokenizer_config.json", tokenizer_config_of(vocab));

  const int head_dim =
      static_cast<int>(g.get_uint(arch + ".attention.key_length")
                           .value_or(g.require_uint(arch + ".embedding_length") /
                                     g.require_uint(arch + ".attention.head_count")));

  // Tensors in GGUF order, dealt to the shards in turn.
  std::vector<SafetensorsWriter> shards(static_cast<size_t>(o.n_shards));
  std::vector<std::pair<std::string, std::string>> weight_map;
  auto shard_name = [&](int i) {
    return o.n_shards == 1 ? std::string("model.safetensors")
                           : strprintf("model-%05d-of-%05d.safetensors", i + 1, o.n_shards);
  };
  size_t next = 0;
  auto put_raw = [&](const std::string& name, StDType dt, std::vector<int64_t> shape,
                     std::vector<uint8_t> bytes) {
    const int s = static_cast<int>(next++ % shards.size());
    shards[s].add(name, dt, std::move(shape), std::move(bytes));
    weight_map.emplace_back(name, shard_name(s));
  };
  auto put = [&](const std::string& name, std::vector<int64_t> shape,
                 const std::vector<float>& data) {
    const bool matrix = shape.size() == 2 && shape[0] > 1;
    const bool bf16 = o.bf16 && matrix;
    const int s = static_cast<int>(next++ % shards.size());
    shards[s].add(name, bf16 ? StDType::kBF16 : StDType::kF32, std::move(shape),
                  to_bytes(data, bf16));
    weight_map.emplace_back(name, shard_name(s));
  };

  const bool oss = arch == "gpt-oss";
  for (const GgufTensor& t : g.tensors()) {
    if (o.drop_lm_head && t.name == "output.weight") continue;
    if (oss && (t.name.find("_exps.") != std::string::npos)) {
      export_oss_experts(g, t, put_raw);
      continue;
    }
    // Quantized weights are written as the F32 values they hold.
    std::vector<float> deq;
    if (t.type != DType::F32) {
      deq.resize(static_cast<size_t>(t.n_elements()));
      const size_t rb = row_bytes(t.type, t.ne[0]);
      for (int64_t r = 0; r < t.n_elements() / t.ne[0]; ++r)
        dequantize_row(t.type, g.tensor_data(t) + r * rb, deq.data() + r * t.ne[0], t.ne[0]);
    }
    const float* x = deq.empty() ? reinterpret_cast<const float*>(g.tensor_data(t)) : deq.data();
    if (t.name.find(".attn_v_b.") != std::string::npos) continue;  // merged with attn_k_b below
    if (t.name.find(".attn_k_b.") != std::string::npos) {
      // kv_b_proj: per head, nope key rows (attn_k_b transposed), then v value rows (attn_v_b).
      const std::string vname = replace_first(t.name, "attn_k_b", "attn_v_b");
      const GgufTensor* vt = g.find_tensor(vname);
      CLB_CHECK(vt != nullptr && vt->type == DType::F32, "export: %s without %s", t.name.c_str(),
                vname.c_str());
      const float* vx = reinterpret_cast<const float*>(g.tensor_data(*vt));
      const int64_t nope = t.ne[0], lora = t.ne[1], H = t.ne[2], v = vt->ne[1];
      std::vector<float> kv(static_cast<size_t>(H * (nope + v) * lora));
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < nope; ++i)
          for (int64_t j = 0; j < lora; ++j)
            kv[(h * (nope + v) + i) * lora + j] = x[(h * lora + j) * nope + i];
        for (int64_t i = 0; i < v; ++i)
          for (int64_t j = 0; j < lora; ++j)
            kv[(h * (nope + v) + nope + i) * lora + j] = vx[(h * v + i) * lora + j];
      }
      put(hf_name(*f, replace_first(t.name, "attn_k_b", "attn_kv_b")), {H * (nope + v), lora}, kv);
      continue;
    }
    const std::string name = hf_name(*f, t.name);
    const int64_t cols = t.ne[0], rows = t.ne[1];
    if (t.n_dims == 3) {
      // One (rows, cols) matrix per expert.
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        std::vector<float> m(x + e * rows * cols, x + (e + 1) * rows * cols);
        put(replace_first(name, "{E}", std::to_string(e)), {rows, cols}, m);
      }
      continue;
    }
    std::vector<float> m(x, x + t.n_elements());
    const bool qk = t.name.find(".attn_q.") != std::string::npos ||
                    t.name.find(".attn_k.") != std::string::npos;
    if (f->rotate_halves && qk) {
      // Hugging Face's head rows (first halves, then second halves) from the
      // GGUF's interleaved pairs: HF row i = GGUF row 2i, HF row d/2 + i = GGUF row 2i + 1.
      const int64_t n = t.n_dims == 1 ? cols : rows, width = t.n_dims == 1 ? 1 : cols;
      std::vector<float> hf(m.size());
      for (int64_t h = 0; h < n / head_dim; ++h)
        for (int64_t i = 0; i < head_dim / 2; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t from = h * head_dim + 2 * i + j,
                          to = h * head_dim + j * (head_dim / 2) + i;
            std::copy(m.begin() + from * width, m.begin() + (from + 1) * width,
                      hf.begin() + to * width);
          }
      m = std::move(hf);
    }
    std::vector<int64_t> shape =
        t.n_dims == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{rows, cols};
    if (t.name.find("ffn_gate_inp_shexp") != std::string::npos)
      shape = {1, cols};  // nn.Linear(hidden, 1)
    put(name, shape, m);
  }
  for (int i = 0; i < o.n_shards; ++i) shards[i].write((dir / shard_name(i)).string());
  if (o.n_shards > 1)
    write_safetensors_index((dir / "model.safetensors.index.json").string(), weight_map);
}

}  // namespace colibri::test
