// colibri synth: files that load (our reader, config, weights, engine), the
// metadata and tensor layout llama.cpp's own tools write (checked against the
// golden files, which llama.cpp made and ran), llama-quantize's per-tensor
// types, the variance of random blocks through the reference dequantizers,
// determinism, the vocabulary cut against llama.cpp's tokenizations, and
// skewed routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "../process_tmp_dir.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/synth.h"
#include "model/weights.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kShared = fs::path(COLIBRI_SHARED_DIR);
const fs::path kVocab = kShared / "data/vocab";

fs::path tmp_dir() {
  static const ProcessTmpDir dir("colibri-synth-");
  return dir.path;
}

#define REQUIRE_FILE(p) \
  if (!fs::exists(p)) GTEST_SKIP() << (p).string() << " is absent (test data from ../shared)"

// The vocab each tiny shape is paired with: cut (mpt 50432, qwen2 151646,
// llama-spm 32000) to 4096 tokens.
std::string vocab_for(const std::string& arch) {
  if (arch == "olmoe") return "ggml-vocab-mpt.gguf";
  if (arch == "llama") return "ggml-vocab-llama-spm.gguf";
  return "ggml-vocab-qwen2.gguf";
}

// skew > 0: Zipf routing of that exponent; otherwise the given mode (uniform
// by default: these tests check the constant channel's bookkeeping).
fs::path synth(const SynthShape& s, SynthType t, uint64_t seed = 7, float skew = 0, int threads = 2,
               const std::string& tag = "", SynthRouting routing = SynthRouting::kUniform) {
  SynthOptions o;
  o.shape = s;
  o.type = t;
  o.seed = seed;
  o.routing = skew > 0 ? SynthRouting::kZipf : routing;
  o.router_skew = skew;
  o.vocab_path = (kVocab / vocab_for(s.arch)).string();
  o.n_threads = threads;
  fs::path out = tmp_dir() / (std::string(s.name) + "-" + synth_type_name(t) + "-" + std::to_string(seed) + "-" +
                              std::to_string(skew) + "-" + synth_routing_name(o.routing) + "-" +
                              std::to_string(threads) + tag + ".gguf");
  write_synth_model(o, out.string());
  return out;
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

const char* kTiny[] = {"tiny", "tiny-olmoe", "tiny-mixtral", "tiny-qwen2moe"};
const SynthType kTypes[] = {
    SynthType::kF32,     SynthType::kQ8_0,   SynthType::kQ4_0,   SynthType::kQ2_K,
    SynthType::kQ3_K_M,  SynthType::kQ4_K_M, SynthType::kQ5_K_M, SynthType::kQ6_K,
    SynthType::kIQ4_NL,  SynthType::kIQ4_XS, SynthType::kIQ1_S,  SynthType::kIQ1_M,
    SynthType::kIQ2_XXS, SynthType::kIQ2_XS, SynthType::kIQ2_M,  SynthType::kIQ3_XXS};

TEST(Synth, EveryTinyShapeAndTypeLoadsAndRuns) {
  REQUIRE_FILE(kVocab / "ggml-vocab-qwen2.gguf");
  for (const char* name : kTiny) {
    const SynthShape& s = *find_synth_shape(name);
    for (SynthType t : kTypes) {
      SCOPED_TRACE(std::string(name) + " " + synth_type_name(t));
      fs::path p = synth(s, t);
      auto f = GgufFile::open(p.string());
      ModelConfig c = ModelConfig::from_gguf(*f);
      ModelWeights w = bind_weights(*f, c);
      EXPECT_EQ(c.arch->name, s.arch);
      EXPECT_EQ(c.n_layer, s.n_layer);
      EXPECT_EQ(c.n_embd, s.n_embd);
      EXPECT_EQ(c.n_head, s.n_head);
      EXPECT_EQ(c.n_head_kv, s.n_head_kv);
      EXPECT_EQ(c.head_dim, s.head_dim);
      EXPECT_EQ(c.n_vocab, s.n_vocab);
      EXPECT_EQ(c.n_expert, s.n_expert);
      EXPECT_EQ(c.n_expert_used, s.n_expert_used);
      EXPECT_EQ(c.n_ff_exp, s.n_ff_exp);
      EXPECT_EQ(c.n_ff_shexp, s.n_ff_shexp);
      EXPECT_FLOAT_EQ(c.rms_eps, s.rms_eps);
      EXPECT_FLOAT_EQ(c.rope_base, s.rope_base);
      f.reset();

      EngineOptions eo;
      eo.model_path = p.string();
      eo.n_ctx = 64;
      eo.n_threads = 2;
      Engine e(eo);
      std::vector<int32_t> prompt = {1, 17, 300, 2000, 4000, 5};
      const float* logits = e.eval_prompt(prompt, 0, 0);
      int32_t tok = 0;
      for (int i = 0; i < 4; ++i) {
        double sum2 = 0;
        for (int v = 0; v < s.n_vocab; ++v) {
          ASSERT_TRUE(std::isfinite(logits[v])) << "token " << i << " logit " << v;
          sum2 += double(logits[v]) * logits[v];
        }
        // output.weight is scaled for logits of standard deviation ~4.
        double sd = std::sqrt(sum2 / s.n_vocab);
        EXPECT_GT(sd, 1.5);
        EXPECT_LT(sd, 10.0);
        tok = static_cast<int32_t>(std::max_element(logits, logits + s.n_vocab) - logits);
        logits = e.eval_token(tok, 0, static_cast<int>(prompt.size()) + i);
      }
      fs::remove(p);
    }
  }
}

// The golden files were written for llama.cpp and run by it: our files must
// carry the same <arch>.* keys and the same tensor names and ranks.
TEST(Synth, KeysAndTensorsMatchTheGoldenFilesLlamaCppRan) {
  REQUIRE_FILE(kShared / "golden/olmoe-q8_0.gguf");
  const std::pair<const char*, const char*> pairs[] = {{"tiny", "qwen3moe-q8_0.gguf"},
                                                       {"tiny-olmoe", "olmoe-q8_0.gguf"},
                                                       {"tiny-mixtral", "mixtral-q4_0.gguf"},
                                                       {"tiny-qwen2moe", "qwen2moe-f32.gguf"}};
  for (auto [shape, golden] : pairs) {
    SCOPED_TRACE(shape);
    fs::path p = synth(*find_synth_shape(shape), SynthType::kQ8_0);
    auto ours = GgufFile::open(p.string());
    auto ref = GgufFile::open((kShared / "golden" / golden).string());
    const std::string arch(ref->require_string("general.architecture"));
    EXPECT_EQ(arch, ours->require_string("general.architecture"));
    auto arch_keys = [&](const GgufFile& f) {
      std::set<std::string> k;
      for (const GgufKV& kv : f.metadata())
        if (kv.key.starts_with(arch + ".")) k.insert(kv.key);
      return k;
    };
    EXPECT_EQ(arch_keys(*ours), arch_keys(*ref));
    for (const char* k : {"general.file_type", "general.quantization_version", "tokenizer.ggml.model",
                          "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"})
      EXPECT_NE(ours->find(k), nullptr) << k;
    // Tensors of the global part and of layer 0 (the golden files have 2-3
    // layers), with their number of dims.
    auto names = [](const GgufFile& f) {
      std::map<std::string, int> n;
      for (const GgufTensor& t : f.tensors())
        if (!t.name.starts_with("blk.") || t.name.starts_with("blk.0.")) n[t.name] = t.n_dims;
      return n;
    };
    EXPECT_EQ(names(*ours), names(*ref));
    fs::remove(p);
  }
}

// qwen3moe-h256-q4_k_m.gguf (shared/golden) and qwen3moe-h256-iq4_xs.gguf
// (tests/data/golden) are llama-quantize's Q4_K_M and IQ4_XS of a qwen3moe
// model; the same shape written as q4_k_m and iq4_xs must choose the same
// type for every tensor.
// The shape of the qwen3moe-h256 golden models.
SynthOptions h256_options(SynthType type) {
  SynthShape s = *find_synth_shape("tiny");
  s.name = "h256";
  s.n_layer = 2;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 64;
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.n_ff_exp = 256;
  s.n_ff = 512;
  s.n_vocab = 1024;
  SynthOptions o;
  o.shape = s;
  o.type = type;
  o.vocab_path = (kVocab / "ggml-vocab-deepseek-llm.gguf").string();
  return o;
}

// except: a tensor name part the golden file's --tensor-type override set.
void expect_llama_quantizes_types(const fs::path& golden, SynthType type, const std::string& except = "") {
  SCOPED_TRACE(golden.filename().string());
  fs::path p = tmp_dir() / (std::string("h256-") + synth_type_name(type) + ".gguf");
  write_synth_model(h256_options(type), p.string());
  auto ours = GgufFile::open(p.string());
  auto ref = GgufFile::open(golden.string());
  ASSERT_EQ(ours->tensors().size(), ref->tensors().size());
  for (const GgufTensor& t : ref->tensors()) {
    const GgufTensor* u = ours->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    if (except.empty() || t.name.find(except) == std::string::npos) {
      EXPECT_EQ(dtype_name(u->type), std::string(dtype_name(t.type))) << t.name;
    }
    for (int d = 0; d < 4; ++d) EXPECT_EQ(u->ne[d], t.ne[d]) << t.name;
  }
  EXPECT_EQ(ours->get_uint("general.file_type"), ref->get_uint("general.file_type"));
  fs::remove(p);
}

TEST(Synth, Q4KMTypesAreLlamaQuantizes) {
  REQUIRE_FILE(kShared / "golden/qwen3moe-h256-q4_k_m.gguf");
  REQUIRE_FILE(kVocab / "ggml-vocab-deepseek-llm.gguf");
  expect_llama_quantizes_types(kShared / "golden/qwen3moe-h256-q4_k_m.gguf", SynthType::kQ4_K_M);
}

// shared/golden's Q2_K, Q3_K_M, Q5_K_M and Q6_K files of the same model.
TEST(Synth, KQuantMixesAreLlamaQuantizes) {
  REQUIRE_FILE(kVocab / "ggml-vocab-deepseek-llm.gguf");
  const std::pair<const char*, SynthType> files[] = {{"q2_k", SynthType::kQ2_K},
                                                     {"q3_k_m", SynthType::kQ3_K_M},
                                                     {"q5_k_m", SynthType::kQ5_K_M},
                                                     {"q6_k", SynthType::kQ6_K}};
  for (const auto& [name, type] : files) {
    const fs::path golden = kShared / ("golden/qwen3moe-h256-" + std::string(name) + ".gguf");
    REQUIRE_FILE(golden);
    expect_llama_quantizes_types(golden, type);
  }
}

TEST(Synth, Iq4XsTypesAreLlamaQuantizes) {
  REQUIRE_FILE(kVocab / "ggml-vocab-deepseek-llm.gguf");
  expect_llama_quantizes_types(fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden/qwen3moe-h256-iq4_xs.gguf",
                               SynthType::kIQ4_XS);
}

// tests/data/golden/qwen3moe-h256-iq-types.json holds the type llama-quantize
// (with an importance matrix) gave each tensor of the same model in each
// IQ1-IQ3 file type; the IQ1_S and IQ3_XXS golden files were written with one
// override (ffn_down_exps) and every other tensor as the file type's own.
TEST(Synth, IqGridTypesAreLlamaQuantizes) {
  REQUIRE_FILE(kVocab / "ggml-vocab-deepseek-llm.gguf");
  const fs::path dir = fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden";
  expect_llama_quantizes_types(dir / "qwen3moe-h256-iq1_s.gguf", SynthType::kIQ1_S, "ffn_down_exps");
  expect_llama_quantizes_types(dir / "qwen3moe-h256-iq3_xxs.gguf", SynthType::kIQ3_XXS, "ffn_down_exps");
  std::ifstream in(dir / "qwen3moe-h256-iq-types.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["files"].size(), 7u);
  for (const auto& [name, file] : j["files"].items()) {
    SCOPED_TRACE(name);
    const std::optional<SynthType> t = parse_synth_type(name);
    ASSERT_TRUE(t.has_value());
    const fs::path p = tmp_dir() / ("h256-" + name + ".gguf");
    write_synth_model(h256_options(*t), p.string());
    auto ours = GgufFile::open(p.string());
    EXPECT_EQ(ours->get_uint("general.file_type"), file["file_type"].get<uint64_t>());
    EXPECT_EQ(ours->tensors().size(), file["tensors"].size());
    for (const auto& [tensor, type] : file["tensors"].items()) {
      const GgufTensor* u = ours->find_tensor(tensor);
      ASSERT_NE(u, nullptr) << tensor;
      std::string ty = dtype_name(u->type);  // "q4_K"; gguf-py writes "q4_k"
      for (char& c : ty) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_EQ(ty, type.get<std::string>()) << tensor;
    }
    fs::remove(p);
  }
}

// Dequantized with the reference dequantizers, matrix rows have standard
// deviation 1/sqrt(fan_in) (times the residual scale), embeddings carry the
// constant channel, and no layer writes to channel 0.
TEST(Synth, WeightStatisticsThroughTheReferenceDequantizers) {
  REQUIRE_FILE(kVocab / "ggml-vocab-qwen2.gguf");
  const SynthShape& s = *find_synth_shape("tiny-mixtral");  // has q5_K, q6_K, q8_0 in q4_k_m
  for (SynthType t : kTypes) {
    SCOPED_TRACE(synth_type_name(t));
    fs::path p = synth(s, t);
    auto f = GgufFile::open(p.string());
    std::set<std::string> types_seen;
    for (const GgufTensor& g : f->tensors()) {
      if (g.n_dims < 2 || g.name.find("gate_inp") != std::string::npos) continue;
      types_seen.insert(dtype_name(g.type));
      TensorView v = f->view(g);
      const int64_t n = g.ne[0], rows = g.n_elements() / n;
      std::vector<float> row(n);
      double sum = 0, sum2 = 0;
      int64_t count = 0;
      const bool resid = g.name.find("attn_output") != std::string::npos || g.name.find("ffn_down") != std::string::npos;
      const bool embd = g.name == "token_embd.weight";
      for (int64_t r = 0; r < rows; r += 7) {
        dequantize_row(g.type, v.data + r * v.row_stride(), row.data(), n);
        if (resid && r % g.ne[1] == 0) {
          for (float x : row) ASSERT_EQ(x, 0.f) << g.name << " row " << r;
          continue;
        }
        int64_t first = 0;
        if (embd) {  // the constant channel: 3 at element 0, zeros in the rest of its sub-block
          EXPECT_NEAR(row[0], 3.0f, 0.45f) << "row " << r;  // a 6-bit K-quant scale: within ~10%
          if (g.type == DType::IQ4_NL || g.type == DType::IQ4_XS) {
            EXPECT_NEAR(row[1], row[0] / 113, 1e-3f);  // no code is 0: the nearest, 1 in 113
          } else if (g.type == DType::IQ3_S) {  // no value is 0: the grid point (15, 1, 1, 1)'s
            EXPECT_NEAR(std::abs(row[1]), row[0] / 15, 1e-3f);
          } else if (g.type != DType::F32) {
            EXPECT_EQ(row[1], 0.f);
          }
          first = 32;
        }
        for (int64_t i = first; i < n; ++i) {
          sum += row[i];
          sum2 += double(row[i]) * row[i];
          ++count;
        }
      }
      double sd = std::sqrt(sum2 / count - (sum / count) * (sum / count));
      double want = embd ? 1.0 : 1.0 / std::sqrt(double(n));
      if (resid) want /= std::sqrt(2.0 * s.n_layer);
      if (g.name == "output.weight") want *= 4;
      EXPECT_NEAR(sd, want, 0.05 * want) << g.name << " (" << dtype_name(g.type) << ")";
      EXPECT_LT(std::abs(sum / count), 0.1 * want) << g.name;
    }
    if (t == SynthType::kQ4_K_M) {
      EXPECT_TRUE(types_seen.count("q4_K") && types_seen.count("q5_K") && types_seen.count("q6_K") &&
                  types_seen.count("q8_0"));
    }
    if (t == SynthType::kQ2_K) {
      EXPECT_TRUE(types_seen.count("q2_K") && types_seen.count("q3_K"));
    }
    if (t == SynthType::kQ3_K_M) {
      EXPECT_TRUE(types_seen.count("q3_K") && types_seen.count("q4_K"));
    }
    if (t == SynthType::kIQ4_XS) {
      EXPECT_TRUE(types_seen.count("iq4_xs") && types_seen.count("q5_K") && types_seen.count("q6_K") &&
                  types_seen.count("q8_0"));
    }
    fs::remove(p);
  }
}

TEST(Synth, SameSeedSameBytesOnAnyThreadCount) {
  REQUIRE_FILE(kVocab / "ggml-vocab-qwen2.gguf");
  const SynthShape& s = *find_synth_shape("tiny-qwen2moe");
  fs::path a = synth(s, SynthType::kQ4_K_M, 11, 0.5f, 1, "a");
  fs::path b = synth(s, SynthType::kQ4_K_M, 11, 0.5f, 2, "b");
  fs::path c = synth(s, SynthType::kQ4_K_M, 12, 0.5f, 2, "c");
  std::vector<uint8_t> ba = read_all(a), bb = read_all(b), bc = read_all(c);
  EXPECT_GT(ba.size(), 1000000u);
  EXPECT_TRUE(ba == bb);
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc);
  for (const fs::path& p : {a, b, c}) fs::remove(p);
}

std::vector<std::string> split_tests(const std::string& s) {
  std::vector<std::string> out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (size_t next; (next = s.find(sep, pos)) != std::string::npos; pos = next + sep.size())
    out.push_back(s.substr(pos, next - pos));
  return out;
}

// A cut vocabulary is a consistent smaller BPE: every llama.cpp tokenization
// of the full vocabulary that uses only kept ids is reproduced exactly; the
// BOS/EOS ids beyond the cut move to the last ids.
TEST(Synth, CutVocabularyTokenizesAsTheFullOneBelowTheCut) {
  const fs::path inp = kVocab / "ggml-vocab-qwen2.gguf.inp", out = kVocab / "ggml-vocab-qwen2.gguf.out";
  REQUIRE_FILE(inp);
  const SynthShape& s = *find_synth_shape("tiny");
  fs::path p = synth(s, SynthType::kQ4_0);
  auto f = GgufFile::open(p.string());
  auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->n_vocab(), s.n_vocab);
  // qwen2: BOS 151643 and EOS 151645 beyond the cut become 4094 and 4095.
  EXPECT_EQ(f->get_uint("tokenizer.ggml.bos_token_id"), 4094u);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.eos_token_id"), 4095u);
  EXPECT_EQ(tok->token_to_piece(4095), "<|im_end|>");
  std::stringstream si, so;
  si << std::ifstream(inp).rdbuf();
  so << std::ifstream(out).rdbuf();
  std::vector<std::string> texts = split_tests(si.str());
  std::vector<std::string> lines;
  for (std::string l; std::getline(so, l);) lines.push_back(l);
  ASSERT_EQ(texts.size(), lines.size());
  int checked = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream ls(lines[i]);
    for (int32_t id; ls >> id;) want.push_back(id);
    if (want.empty() || *std::max_element(want.begin(), want.end()) >= 4094) continue;
    EXPECT_EQ(tok->encode(texts[i], false, false), want) << "text " << i;
    ++checked;
  }
  EXPECT_GE(checked, 10);
  fs::remove(p);
}

TEST(Synth, SmallerVocabularyIsPaddedWithUnusedTokens) {
  REQUIRE_FILE(kVocab / "ggml-vocab-llama-spm.gguf");
  SynthShape s = *find_synth_shape("tiny-mixtral");
  s.n_vocab = 32000 + 64;
  fs::path p = synth(s, SynthType::kQ8_0);
  auto f = GgufFile::open(p.string());
  const auto* tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 32064u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[32000], "[PAD32000]");
  auto types = f->get_int_array("tokenizer.ggml.token_type");
  EXPECT_EQ((*types)[32063], 5);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.bos_token_id"), 1u);
  f.reset();
  EngineOptions eo;
  eo.model_path = p.string();
  eo.n_ctx = 32;
  eo.n_threads = 2;
  Engine e(eo);
  EXPECT_EQ(e.tokenizer().encode("Hello world", false, false),
            Engine(eo).tokenizer().encode("Hello world", false, false));
  const float* logits = e.eval_prompt(std::vector<int32_t>{1, 15043, 3186}, 0, 0);
  EXPECT_TRUE(std::isfinite(logits[32063]));
  fs::remove(p);
}

// Routing over a few hundred random tokens: uniform without skew; with skew the
// expert the router's column 0 ranks first is the most used in every layer,
// and usage falls with rank.
TEST(Synth, RouterSkewSkewsRouting) {
  REQUIRE_FILE(kVocab / "ggml-vocab-mpt.gguf");
  SynthShape s = *find_synth_shape("tiny-olmoe");
  s.n_expert = 16;
  s.n_expert_used = 2;
  auto usage = [&](float skew, std::vector<std::vector<float>>* bias) {
    fs::path p = synth(s, SynthType::kQ8_0, 3, skew);
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
    std::vector<std::vector<float>> share(s.n_layer, std::vector<float>(s.n_expert));
    const std::vector<uint64_t>& u = e.transformer().expert_usage();
    for (int l = 0; l < s.n_layer; ++l) {
      for (int x = 0; x < s.n_expert; ++x)
        share[l][x] = float(u[l * s.n_expert + x]) / float(prompt.size() * s.n_expert_used);
      if (bias) {
        const TensorView& r = e.weights().layers[l].router;
        bias->emplace_back();
        for (int x = 0; x < s.n_expert; ++x)
          bias->back().push_back(reinterpret_cast<const float*>(r.data + x * r.row_stride())[0]);
      }
    }
    fs::remove(p);
    return share;
  };
  const float mean = 1.0f / 16;
  auto uniform = usage(0, nullptr);
  for (int l = 0; l < s.n_layer; ++l)
    for (float sh : uniform[l]) {
      EXPECT_GT(sh, 0.4f * mean) << "layer " << l;
      EXPECT_LT(sh, 1.8f * mean) << "layer " << l;
    }
  std::vector<std::vector<float>> bias;
  auto skewed = usage(1.0f, &bias);
  for (int l = 0; l < s.n_layer; ++l) {
    std::printf("layer %d expert shares, skew 0 / skew 1:", l);
    for (int x = 0; x < s.n_expert; ++x) std::printf(" %.3f/%.3f", uniform[l][x], skewed[l][x]);
    std::printf("\n");
  }
  for (int l = 0; l < s.n_layer; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    std::vector<int> by_rank(s.n_expert);
    std::iota(by_rank.begin(), by_rank.end(), 0);
    std::sort(by_rank.begin(), by_rank.end(), [&](int a, int b) { return bias[l][a] > bias[l][b]; });
    EXPECT_EQ(bias[l][by_rank[0]], 0.f);
    EXPECT_GT(skewed[l][by_rank[0]], 2.5f * mean);
    // The four most popular by rank take most of the traffic; the last four little.
    float top4 = 0, last4 = 0;
    for (int i = 0; i < 4; ++i) {
      top4 += skewed[l][by_rank[i]];
      last4 += skewed[l][by_rank[s.n_expert - 1 - i]];
    }
    // Zipf with exponent 1 over 16 experts gives the top four 62% of the
    // first choices and the last four 6%; the second choice is flatter.
    EXPECT_GT(top4, 0.45f);
    EXPECT_LT(last4, 0.15f);
  }
}

}  // namespace
}  // namespace colibri
