// colibri synth for the DeepSeek (MLA and v1), GPT-OSS and GLM-4.5 families:
// tiny models of each load and generate; their keys, tensor names, ranks and
// (MXFP4_MOE) types are those of the golden files llama.cpp made and ran;
// every real shape's full-size layout loads (written without data, a sparse
// file) with the sizes hand arithmetic gives; slices (--layers) are the whole
// model's first layers byte for byte; natural routing is uneven, uniform is not.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../process_tmp_dir.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/synth.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kShared = fs::path(COLIBRI_SHARED_DIR);
const fs::path kVocab = kShared / "data/vocab";

#define REQUIRE_FILE(p) \
  if (!fs::exists(p)) GTEST_SKIP() << (p).string() << " is absent (test data from ../shared)"

fs::path tmp_dir() {
  static const ProcessTmpDir dir("colibri-synth-fam-");
  return dir.path;
}

std::string vocab_for(const std::string& arch) {
  if (arch == "gpt-oss") return "ggml-vocab-gpt-oss.gguf";
  if (arch == "glm4moe") return "ggml-vocab-glm45-cl100k-4096.gguf";
  if (arch == "deepseek") return "ggml-vocab-deepseek-llm.gguf";
  return "ggml-vocab-qwen2.gguf";
}

SynthOptions options(const SynthShape& s, SynthType t) {
  SynthOptions o;
  o.shape = s;
  o.type = t;
  o.seed = 5;
  o.vocab_path = (kVocab / vocab_for(s.arch)).string();
  o.n_threads = 2;
  return o;
}

fs::path write(const SynthOptions& o, const std::string& tag = "") {
  fs::path p = tmp_dir() / (std::string(o.shape.name) + "-" + synth_type_name(o.type) + "-" +
                            std::to_string(o.n_layers) + (o.no_data ? "-nodata" : "") + tag + ".gguf");
  write_synth_model(o, p.string());
  return p;
}

const char* kTinyNew[] = {"tiny-deepseek-v3", "tiny-deepseek-v2-lite", "tiny-deepseek-moe", "tiny-gpt-oss",
                          "tiny-glm4moe"};

// The config the engine reads back is the shape's.
void expect_config(const ModelConfig& c, const SynthShape& s, int n_layers) {
  EXPECT_EQ(c.arch->name, s.arch);
  EXPECT_EQ(c.n_layer, n_layers);
  EXPECT_EQ(c.n_embd, s.n_embd);
  EXPECT_EQ(c.n_head, s.n_head);
  EXPECT_EQ(c.n_vocab, s.n_vocab);
  EXPECT_EQ(c.n_ctx_train, s.n_ctx_train);
  EXPECT_EQ(c.n_expert, s.n_expert);
  EXPECT_EQ(c.n_expert_used, s.n_expert_used);
  EXPECT_EQ(c.n_ff_exp, s.n_ff_exp);
  EXPECT_EQ(c.n_ff, s.n_ff);
  EXPECT_EQ(c.n_ff_shexp, s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_expert_shared * s.n_ff_exp);
  EXPECT_EQ(c.n_layer_dense_lead, s.n_layer_dense_lead);
  EXPECT_EQ(c.n_rot, s.n_rot > 0 ? s.n_rot : s.head_dim);
  EXPECT_FLOAT_EQ(c.rms_eps, s.rms_eps);
  EXPECT_FLOAT_EQ(c.rope_base, s.rope_base);
  if (s.kv_lora_rank > 0) {
    EXPECT_EQ(c.q_lora_rank, s.q_lora_rank);
    EXPECT_EQ(c.kv_lora_rank, s.kv_lora_rank);
    EXPECT_EQ(c.mla_nope, s.qk_nope);
    EXPECT_EQ(c.mla_v, s.v_head_dim);
    EXPECT_FALSE(c.mla_legacy_kv_b);
  } else {
    EXPECT_EQ(c.n_head_kv, s.n_head_kv);
    EXPECT_EQ(c.head_dim, s.head_dim);
  }
  if (c.arch->routing_from_file) {
    EXPECT_EQ(c.gating, s.gating_func == 1 ? Gating::kSoftmax : Gating::kSigmoid);
    EXPECT_EQ(c.expert_weights_norm, s.expert_weights_norm);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, s.expert_weights_scale);
    EXPECT_EQ(c.n_expert_group, std::max(1, s.n_expert_group));
    EXPECT_EQ(c.n_expert_group_used, std::max(1, s.n_expert_group_used));
  }
  EXPECT_EQ(c.n_swa, s.n_swa);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, s.rope_factor > 0 && s.rope_scaling && std::string(s.rope_scaling) == "yarn"
                                         ? 1.0f / s.rope_factor
                                         : 1.0f);
}

// Greedy tokens after a fixed prompt.
std::vector<int32_t> generate(const fs::path& p, int vocab) {
  EngineOptions eo;
  eo.model_path = p.string();
  eo.n_ctx = 64;
  eo.n_threads = 2;
  Engine e(eo);
  std::vector<int32_t> prompt = {1, 17, 300, 2000, 4000, 5, 99, 1234};
  const float* logits = e.eval_prompt(prompt, 0, 0);
  std::vector<int32_t> out;
  for (int i = 0; i < 6; ++i) {
    double sum2 = 0;
    for (int v = 0; v < vocab; ++v) {
      EXPECT_TRUE(std::isfinite(logits[v])) << "token " << i << " logit " << v;
      sum2 += double(logits[v]) * logits[v];
    }
    const double sd = std::sqrt(sum2 / vocab);  // output.weight makes it ~4
    EXPECT_GT(sd, 1.0);
    EXPECT_LT(sd, 16.0);
    out.push_back(static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits));
    logits = e.eval_token(out.back(), 0, static_cast<int>(prompt.size()) + i);
  }
  return out;
}

TEST(SynthFamilies, TinyShapesLoadAndGenerateDeterministically) {
  REQUIRE_FILE(kVocab / "ggml-vocab-gpt-oss.gguf");
  for (const char* name : kTinyNew) {
    const SynthShape& s = *find_synth_shape(name);
    std::vector<SynthType> types = {SynthType::kQ8_0, SynthType::kQ4_K_M, SynthType::kF32};
    if (std::string(s.arch) == "gpt-oss") types.push_back(SynthType::kMXFP4_MOE);
    for (SynthType t : types) {
      SCOPED_TRACE(std::string(name) + " " + synth_type_name(t));
      fs::path p = write(options(s, t));
      {
        auto f = GgufFile::open(p.string());
        ModelConfig c = ModelConfig::from_gguf(*f);
        ModelWeights w = bind_weights(*f, c);
        expect_config(c, s, s.n_layer);
        EXPECT_EQ(f->get_uint(std::string(s.arch) + ".block_count"), uint64_t(s.n_layer + s.n_nextn));
        int moe_layers = 0;
        for (const LayerWeights& L : w.layers) moe_layers += L.moe;
        EXPECT_EQ(moe_layers, s.n_layer - s.n_layer_dense_lead);
      }
      std::vector<int32_t> a = generate(p, s.n_vocab), b = generate(p, s.n_vocab);
      EXPECT_EQ(a, b);
      fs::remove(p);
    }
  }
}

// A 40-token prompt in one batch, then four tokens one step each, with the
// KV cache stored as `kv`: every token's logits and routing (sorted per
// layer), in position order.
struct CachedRun {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int32_t>> routes;
};
CachedRun cached_run(const fs::path& p, DType kv) {
  EngineOptions eo;
  eo.model_path = p.string();
  eo.n_ctx = 64;
  eo.n_batch = 64;
  eo.n_threads = 2;
  eo.kv_type = kv;
  eo.store.no_history = true;
  Engine e(eo);
  const ModelConfig& cfg = e.config();
  const int V = e.n_vocab(), k = std::max(cfg.n_expert_used, 1);
  CachedRun r;
  int pos = 0;
  for (int step = 0; step < 5; ++step) {
    const int n = step == 0 ? 40 : 1;
    std::vector<BatchToken> batch(n);
    for (int i = 0; i < n; ++i, ++pos) batch[i] = {(pos * 977 + 13) % V, pos, 0, true};
    std::vector<float> logits(static_cast<size_t>(n) * V);
    RoutingTrace trace;
    trace.resize(n, cfg.n_layer, k);
    e.transformer().forward(batch, e.kv(), logits.data(), &trace);
    for (int i = 0; i < n; ++i) {
      r.logits.emplace_back(logits.begin() + static_cast<size_t>(i) * V, logits.begin() + static_cast<size_t>(i + 1) * V);
      std::vector<int32_t> ids(trace.experts(i, 0), trace.experts(i, 0) + cfg.n_layer * k);
      for (size_t g = 0; g < ids.size(); g += k) std::sort(ids.begin() + g, ids.begin() + g + k);
      r.routes.push_back(ids);
    }
  }
  return r;
}

// A q8_0 or q4_0 KV cache on every new family, multi-head latent attention
// (its one latent row a token, values inside the keys) and sinks and windows
// (GPT-OSS) among them: on the tokens before the routing first differs from
// an F32 cache's (a near-tie flipped: the logits then jump, as between any
// two caches), the logits stay within a small share of their spread
// (measured: q8_0 0.047-0.085 of about 35 over 12-44 tokens, q4_0 0.45-1.11
// of 27-36 over the 1-8 tokens before a route flips; a row read at the
// wrong place, stride, block or nibble would move them by the spread
// itself), and they do move.
void block_cache_close_to_f32(DType type, double share, size_t min_tokens) {
  REQUIRE_FILE(kVocab / "ggml-vocab-gpt-oss.gguf");
  for (const char* name : kTinyNew) {
    const SynthShape& s = *find_synth_shape(name);
    SCOPED_TRACE(name);
    fs::path p = write(options(s, SynthType::kF32), "-kv");
    const CachedRun a = cached_run(p, DType::F32), b = cached_run(p, type);
    double max_d = 0;
    float lo = INFINITY, hi = -INFINITY;
    size_t compared = 0;
    for (; compared < a.logits.size() && a.routes[compared] == b.routes[compared]; ++compared)
      for (size_t i = 0; i < a.logits[compared].size(); ++i) {
        lo = std::min(lo, a.logits[compared][i]);
        hi = std::max(hi, a.logits[compared][i]);
        max_d = std::max(max_d, static_cast<double>(std::fabs(a.logits[compared][i] - b.logits[compared][i])));
      }
    std::printf(
        "  %-24s %s cache vs f32: max |dlogit| %.3g over a spread of %.3g (%zu of %zu tokens "
        "before the routing differs)\n",
        name, dtype_name(type), max_d, hi - lo, compared, a.logits.size());
    ASSERT_GE(compared, min_tokens);
    EXPECT_GT(max_d, 0.0);
    EXPECT_LT(max_d, share * (hi - lo));
    fs::remove(p);
  }
}

TEST(SynthFamilies, Q8CacheCloseToTheF32Cache) {
  block_cache_close_to_f32(DType::Q8_0, 0.01, 8);
}
TEST(SynthFamilies, Q4CacheCloseToTheF32Cache) {
  block_cache_close_to_f32(DType::Q4_0, 0.08, 1);
}

// "blk.7.ffn_up_exps.weight" -> "blk.N.ffn_up_exps.weight".
std::string pattern(const std::string& name) {
  if (!name.starts_with("blk.")) return name;
  return "blk.N" + name.substr(name.find('.', 4));
}

std::set<std::string> arch_keys(const GgufFile& f, const std::string& arch) {
  std::set<std::string> k;
  for (const GgufKV& kv : f.metadata())
    if (kv.key.starts_with(arch + ".")) k.insert(kv.key);
  return k;
}

// The golden files were written for llama.cpp and run by it: the same
// <arch>.* keys, the same tensor name patterns with the same ranks, and for
// MXFP4_MOE the same type for each. Differences are the real models' own:
// listed here with their reason.
TEST(SynthFamilies, KeysAndTensorsMatchTheGoldenFilesLlamaCppRan) {
  REQUIRE_FILE(kShared / "golden/glm4moe-q8_0.gguf");
  struct Pair {
    const char* shape;
    const char* golden;
    SynthType type;
    std::set<std::string> ours_only, golden_only;  // keys, without the arch prefix
  };
  const Pair pairs[] = {
      {"tiny-deepseek-v3", "deepseek-v3-q8_0.gguf", SynthType::kQ8_0, {}, {}},
      // DeepSeek-V2-Lite's config has rope_scaling (YaRN x40, mscale_all_dim
      // 0.707) and q_lora_rank null, which the converter does not write.
      {"tiny-deepseek-v2-lite",
       "deepseek-v2-lite-f32.gguf",
       SynthType::kF32,
       {"rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
        "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow", "rope.scaling.yarn_log_multiplier"},
       {"attention.q_lora_rank"}},
      {"tiny-deepseek-moe", "deepseek-moe-f32.gguf", SynthType::kF32, {}, {}},
      {"tiny-gpt-oss", "gptoss-mxfp4.gguf", SynthType::kMXFP4_MOE, {}, {}},
      // GLM-4.5-Air's NextN layer (the golden files have none).
      {"tiny-glm4moe", "glm4moe-q8_0.gguf", SynthType::kQ8_0, {"nextn_predict_layers"}, {}},
  };
  for (const Pair& pr : pairs) {
    SCOPED_TRACE(pr.shape);
    fs::path p = write(options(*find_synth_shape(pr.shape), pr.type));
    auto ours = GgufFile::open(p.string());
    auto ref = GgufFile::open((kShared / "golden" / pr.golden).string());
    const std::string arch(ref->require_string("general.architecture"));
    EXPECT_EQ(arch, ours->require_string("general.architecture"));
    std::set<std::string> want = arch_keys(*ref, arch), got = arch_keys(*ours, arch);
    for (const std::string& k : pr.golden_only) EXPECT_EQ(want.erase(arch + "." + k), 1u) << k;
    for (const std::string& k : pr.ours_only) EXPECT_EQ(got.erase(arch + "." + k), 1u) << k;
    EXPECT_EQ(got, want);
    EXPECT_EQ(ours->get_uint("general.file_type"), ref->get_uint("general.file_type"));
    auto patterns = [](const GgufFile& f) {
      std::map<std::string, std::pair<int, std::string>> m;  // pattern -> (dims, type)
      for (const GgufTensor& t : f.tensors())
        if (t.name.find(".nextn.") == std::string::npos) m[pattern(t.name)] = {t.n_dims, dtype_name(t.type)};
      return m;
    };
    auto a = patterns(*ours), b = patterns(*ref);
    for (auto& [name, dims_type] : b) {
      ASSERT_TRUE(a.count(name)) << name;
      EXPECT_EQ(a[name].first, dims_type.first) << name;
      if (pr.type == SynthType::kMXFP4_MOE) {
        EXPECT_EQ(a[name].second, dims_type.second) << name;
      }
    }
    EXPECT_EQ(a.size(), b.size());
    fs::remove(p);
  }
}

// Bytes of a tensor of n elements of a type, padded to GGUF's 32.
uint64_t bytes(DType t, uint64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return (n / i.block_size * i.block_bytes + 31) / 32 * 32;
}

// Every real shape at its full size, written without data: the loader binds
// every tensor, the config is the shape's, the file is a hole of the full
// size; and the data of one DeepSeek-V3 MoE layer is what its config gives
// by hand.
TEST(SynthFamilies, EveryRealShapeLoadsAtFullSizeWithoutData) {
  REQUIRE_FILE(kVocab / "ggml-vocab-qwen2.gguf");
  for (const SynthShape* s : synth_shapes()) {
    if (std::string(s->name).starts_with("tiny")) continue;
    std::vector<SynthType> types = {SynthType::kQ4_K_M, SynthType::kQ8_0};
    if (std::string(s->arch) == "gpt-oss") types.push_back(SynthType::kMXFP4_MOE);
    for (SynthType t : types) {
      SCOPED_TRACE(std::string(s->name) + " " + synth_type_name(t));
      SynthOptions o = options(*s, t);
      o.vocab_path = (kVocab / "ggml-vocab-qwen2.gguf").string();
      o.no_data = true;
      fs::path p = write(o);
      struct stat st{};
      ASSERT_EQ(::stat(p.c_str(), &st), 0);
      auto f = GgufFile::open(p.string());
      EXPECT_EQ(static_cast<uint64_t>(st.st_size), f->file_size());
      EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{64} << 20);  // a hole, not data
      ModelConfig c = ModelConfig::from_gguf(*f);
      ModelWeights w = bind_weights(*f, c);
      expect_config(c, *s, s->n_layer);
      // Every tensor the engine binds plus the NextN layers' is in the file.
      uint64_t nextn_bytes = 0;
      for (const GgufTensor& g : f->tensors())
        if (g.name.starts_with(strprintf("blk.%d.", s->n_layer))) nextn_bytes += (g.nbytes + 31) / 32 * 32;
      uint64_t all = 0;
      for (const GgufTensor& g : f->tensors()) all += (g.nbytes + 31) / 32 * 32;
      EXPECT_EQ(f->data_offset() + all, f->file_size());
      EXPECT_EQ(s->n_nextn > 0, nextn_bytes > 0);
      std::printf("%-18s %-9s %8.2f GiB (%6.1f GB), routed experts %.2f GiB\n", s->name, synth_type_name(t),
                  double(f->file_size()) / (1 << 30), double(f->file_size()) / 1e9,
                  double(w.expert_bytes) / (1 << 30));
      f.reset();
      fs::remove(p);
    }
  }
  // DeepSeek-V3 in Q8_0, slices of 4 and 5 layers: layer 4 is a MoE layer.
  const SynthShape& v3 = *find_synth_shape("deepseek-v3-671b");
  uint64_t data[2];
  for (int i = 0; i < 2; ++i) {
    SynthOptions o = options(v3, SynthType::kQ8_0);
    o.no_data = true;
    o.n_layers = 4 + i;
    fs::path p = write(o);
    auto f = GgufFile::open(p.string());
    EXPECT_EQ(f->get_uint("deepseek2.block_count"), uint64_t(4 + i));
    data[i] = f->file_size() - f->data_offset();
    f.reset();
    fs::remove(p);
  }
  const uint64_t E = 7168, H = 128, q_lora = 1536, kv = 512, nope = 128, rope = 64, v = 128, X = 256, F = 2048;
  const DType q8 = DType::Q8_0, f32 = DType::F32;
  const uint64_t layer = bytes(f32, E) + bytes(q8, E * q_lora) + bytes(f32, q_lora) +
                         bytes(q8, q_lora * H * (nope + rope)) + bytes(q8, E * (kv + rope)) + bytes(f32, kv) +
                         bytes(q8, nope * kv * H) + bytes(q8, kv * v * H) + bytes(q8, H * v * E) + bytes(f32, E) +
                         bytes(f32, E * X) + bytes(f32, X) + 3 * bytes(q8, E * F * X) + 3 * bytes(q8, E * F);
  EXPECT_EQ(data[1] - data[0], layer);
}

// A slice is the whole model's first layers: the same tensors with the same
// bytes, block_count N, and the engine runs it.
TEST(SynthFamilies, SlicesAreTheFirstLayersOfTheWholeModel) {
  REQUIRE_FILE(kVocab / "ggml-vocab-glm45-cl100k-4096.gguf");
  for (const char* name : {"tiny-deepseek-v3", "tiny-glm4moe"}) {
    SCOPED_TRACE(name);
    const SynthShape& s = *find_synth_shape(name);
    SynthOptions o = options(s, SynthType::kQ4_K_M);
    fs::path whole = write(o);
    o.n_layers = 2;
    fs::path slice = write(o);
    auto fw = GgufFile::open(whole.string());
    auto fs_ = GgufFile::open(slice.string());
    const std::string arch = s.arch;
    EXPECT_EQ(fs_->get_uint(arch + ".block_count"), 2u);
    EXPECT_EQ(fs_->find(arch + ".nextn_predict_layers"), nullptr);
    EXPECT_EQ(fs_->get_uint("synth.shape_layers"), uint64_t(s.n_layer));
    // Every other arch key as the whole model's.
    for (const std::string& k : arch_keys(*fw, arch)) {
      if (k == arch + ".block_count" || k == arch + ".nextn_predict_layers") continue;
      ASSERT_NE(fs_->find(k), nullptr) << k;
    }
    uint64_t want_data = 0;
    for (const GgufTensor& t : fw->tensors()) {
      const bool kept = !t.name.starts_with("blk.") || std::stoi(t.name.substr(4)) < 2;
      const GgufTensor* u = fs_->find_tensor(t.name);
      ASSERT_EQ(u != nullptr, kept) << t.name;
      if (!kept) continue;
      want_data += (t.nbytes + 31) / 32 * 32;
      EXPECT_EQ(u->type, t.type) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(fw->view(t).data, fs_->view(*u).data, t.nbytes), 0) << t.name;
    }
    EXPECT_EQ(fs_->file_size() - fs_->data_offset(), want_data);
    EXPECT_EQ(fs_->tensors().size() < fw->tensors().size(), true);
    fw.reset();
    fs_.reset();
    EngineOptions eo;
    eo.model_path = slice.string();
    eo.n_ctx = 16;
    eo.n_threads = 2;
    Engine e(eo);
    EXPECT_EQ(e.config().n_layer, 2);
    const float* logits = e.eval_prompt(std::vector<int32_t>{3, 14, 15}, 0, 0);
    EXPECT_TRUE(std::isfinite(logits[0]));
    fs::remove(whole);
    fs::remove(slice);
  }
}

// Share of the routings that go to each layer's most used quarter of experts,
// over a few hundred random tokens.
double top_quarter_share(const SynthShape& s, SynthRouting r) {
  SynthOptions o = options(s, SynthType::kQ8_0);
  o.vocab_path = (kVocab / "ggml-vocab-mpt.gguf").string();
  o.routing = r;
  fs::path p = write(o, synth_routing_name(r));
  EngineOptions eo;
  eo.model_path = p.string();
  eo.n_ctx = 512;
  eo.n_threads = 2;
  Engine e(eo);
  std::vector<int32_t> prompt(384);
  uint64_t x = 12345;
  for (int32_t& t : prompt) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((x >> 33) % 4000);
  }
  e.eval_prompt(prompt, 0, 0);
  const std::vector<uint64_t>& u = e.transformer().expert_usage();
  double share = 0;
  for (int l = 0; l < s.n_layer; ++l) {
    std::vector<uint64_t> c(u.begin() + l * s.n_expert, u.begin() + (l + 1) * s.n_expert);
    std::sort(c.rbegin(), c.rend());
    uint64_t top = 0, all = 0;
    for (int i = 0; i < s.n_expert; ++i) (i < s.n_expert / 4 ? top : all) += c[i];
    share += double(top) / double(top + all) / s.n_layer;
  }
  fs::remove(p);
  return share;
}

// Uniform routing keeps every expert near 1/n_expert (the top quarter near
// 25% plus sampling noise: 31% measured); natural routing is uneven (40%
// measured).
TEST(SynthFamilies, NaturalRoutingIsUnevenUniformIsNot) {
  REQUIRE_FILE(kVocab / "ggml-vocab-mpt.gguf");
  SynthShape s = *find_synth_shape("tiny-olmoe");
  s.n_layer = 6;
  s.n_expert = 16;
  s.n_expert_used = 2;
  const double uniform = top_quarter_share(s, SynthRouting::kUniform);
  const double natural = top_quarter_share(s, SynthRouting::kNatural);
  std::printf("top quarter of experts: uniform %.3f, natural %.3f of the routings\n", uniform, natural);
  EXPECT_LT(uniform, 0.34);
  EXPECT_GT(natural, 0.37);
}

}  // namespace
}  // namespace colibri
