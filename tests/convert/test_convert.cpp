// colibri convert (Hugging Face folder -> GGUF) against independent
// references: llama.cpp's files and outputs in ../shared/golden (each model
// written back as the Hugging Face folder it would have come from, then
// converted: the result must be the same tensors, keys, tokens and logits),
// llama.cpp's own quantized file (converting its weights to Q8_0 again must
// give its bytes), and the published configs of real models (their shapes
// must be the ones colibri synth has for them).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../process_tmp_dir.h"
#include "../tiktoken_modules.h"
#include "base/error.h"
#include "convert/hf_convert.h"
#include "convert/hf_families.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "hf_export.h"
#include "model/config.h"
#include "model/synth.h"
#include "tensor/ops.h"
#include "tokenizer/tokenizer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

ProcessTmpDir& tmp() {
  static ProcessTmpDir d("colibri-convert-test-");
  return d;
}

json load_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

fs::path convert(const fs::path& folder, std::optional<DType> type = std::nullopt) {
  HfConvertOptions o;
  o.folder = folder.string();
  o.out = (folder.string() + ".gguf");
  o.type = type;
  convert_hf_folder(o);
  return o.out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Every tensor of want is in got with its type, shape and bytes, and nothing more.
void expect_same_tensors(const GgufFile& want, const GgufFile& got) {
  EXPECT_EQ(got.tensors().size(), want.tensors().size());
  for (const GgufTensor& w : want.tensors()) {
    const GgufTensor* g = got.find_tensor(w.name);
    if (!g) {
      ADD_FAILURE() << w.name << " is missing";
      continue;
    }
    EXPECT_EQ(dtype_name(g->type), std::string(dtype_name(w.type))) << w.name;
    EXPECT_EQ(g->n_dims, w.n_dims) << w.name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(g->ne[d], w.ne[d]) << w.name << " dim " << d;
    if (g->nbytes == w.nbytes) {
      EXPECT_EQ(std::memcmp(got.tensor_data(*g), want.tensor_data(w), w.nbytes), 0)
          << w.name << ": bytes differ";
    }
  }
}

// The hyperparameters (every key under the architecture's prefix).
void expect_same_hparams(const GgufFile& want, const GgufFile& got) {
  const std::string arch(want.require_string("general.architecture"));
  EXPECT_EQ(got.require_string("general.architecture"), arch);
  for (const GgufKV& kv : want.metadata()) {
    if (kv.key.rfind(arch + ".", 0) != 0) continue;
    const GgufValue* g = got.find(kv.key);
    if (!g) {
      ADD_FAILURE() << kv.key << " is missing";
      continue;
    }
    if (kv.value.is_float())
      EXPECT_FLOAT_EQ(static_cast<float>(g->f), static_cast<float>(kv.value.f)) << kv.key;
    else
      EXPECT_EQ(gguf_value_to_string(*g), gguf_value_to_string(kv.value)) << kv.key;
  }
}

// The golden cases: llama.cpp's tokens of each prompt (where check_tokens),
// and its logits on them.
void expect_golden_outputs(const fs::path& model, const json& ref, double tol,
                           bool check_tokens = true) {
  EngineOptions o;
  o.model_path = model.string();
  o.n_ctx = 512;
  o.n_batch = 128;
  o.n_threads = 2;
  o.kv_type = DType::F32;
  o.store.no_history = true;
  Engine engine(o);
  const int n_vocab = engine.n_vocab();
  int rows = 0;
  for (const json& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    std::vector<int32_t> ours = engine.tokenizer().encode(prompt, true, false);
    if (prompt.empty() && ours.empty()) ours.push_back(engine.tokenizer().bos());
    if (check_tokens) {
      EXPECT_EQ(ours, tokens) << c["name"] << ": tokenization differs";
    }
    const int n = static_cast<int>(tokens.size());
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
    std::vector<BatchToken> batch(n);
    for (int i = 0; i < n; ++i) batch[i] = {tokens[i], i, 0, true};
    engine.transformer().forward(batch, engine.kv(), logits.data(), nullptr);
    for (int i = 0; i < n; ++i) {
      for (const json& p : c["prompt_top"][i]) {
        const int id = p[0].get<int>();
        EXPECT_NEAR(logits[static_cast<size_t>(i) * n_vocab + id], p[1].get<double>(), tol)
            << c["name"] << " row " << i << " token " << id;
      }
      ++rows;
    }
  }
  EXPECT_GT(rows, 0);
}

// Rewrites dir/model.safetensors through f(name, dtype, shape, bytes) -> keep?,
// then extra adds tensors.
using TensorEdit =
    std::function<bool(std::string&, StDType&, std::vector<int64_t>&, std::vector<uint8_t>&)>;
void rewrite_tensors(const fs::path& d, const TensorEdit& f,
                     const std::function<void(SafetensorsWriter&)>& extra) {
  std::vector<uint8_t> old;
  {
    std::ifstream in(d / "model.safetensors", std::ios::binary);
    old.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto st = SafetensorsFile::parse(old.data(), old.size(), "model.safetensors");
  SafetensorsWriter w;
  for (const SafetensorsTensor& t : st->tensors()) {
    std::string name = t.name;
    StDType dt = t.dtype;
    std::vector<int64_t> shape = t.shape;
    std::vector<uint8_t> bytes(st->data(t), st->data(t) + t.nbytes);
    if (f(name, dt, shape, bytes)) w.add(name, dt, shape, std::move(bytes));
  }
  if (extra) extra(w);
  w.write((d / "model.safetensors").string());
}

struct RoundTrip {
  const char* model;
  int n_shards;
  // The golden SentencePiece vocabularies are cut from a real one, so some of
  // their pieces are made of characters that are not tokens: llama.cpp's
  // SentencePiece merges them, a Hugging Face BPE (whose merges name two
  // tokens) cannot. Real SentencePiece vocabularies hold every character;
  // tests/tokenizer checks the import on Mixtral's own tokenizer.json.
  bool check_tokens = true;
};

class GoldenRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

// GGUF -> Hugging Face folder -> colibri convert -> the same GGUF, and
// llama.cpp's outputs from it.
TEST_P(GoldenRoundTrip, ConvertsBackToLlamaCppsFile) {
  const RoundTrip& p = GetParam();
  const fs::path gguf = kGolden / (std::string(p.model) + ".gguf");
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path folder = tmp().path / (std::string(p.model) + "-" + std::to_string(p.n_shards));
  test::ExportOptions eo;
  eo.n_shards = p.n_shards;
  test::export_hf_folder(*golden, folder, eo);
  if (p.n_shards > 1) {
    ASSERT_TRUE(fs::exists(folder / "model.safetensors.index.json"));
  }

  const fs::path out = convert(folder);
  auto got = GgufFile::open(out.string());
  expect_same_tensors(*golden, *got);
  expect_same_hparams(*golden, *got);
  expect_golden_outputs(out, load_json(kGolden / (std::string(p.model) + ".json")), 1e-3,
                        p.check_tokens);
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenRoundTrip,
                         ::testing::Values(RoundTrip{"qwen3moe-f32", 1},
                                           RoundTrip{"qwen2moe-f32", 1}, RoundTrip{"olmoe-f32", 3},
                                           RoundTrip{"mixtral-f32", 2, false},
                                           RoundTrip{"glm4moe-f32", 1},
                                           RoundTrip{"deepseek-v3-f32", 2},
                                           RoundTrip{"gptoss-f32", 1}),
                         [](const auto& info) {
                           std::string s = info.param.model;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// A folder with a tiktoken tokenizer instead of tokenizer.json, as Qwen-7B
// and Kimi-K2 ship theirs: the DeepSeek-V3 golden model, whose vocabulary is
// qwen.tiktoken's first 4094 ranks with <|endoftext|> and <|im_end|> after
// them, written with those ranks cut from ../shared's qwen.tiktoken.
struct TiktokenFolder {
  fs::path dir;
  std::unique_ptr<GgufFile> golden;
};
TiktokenFolder tiktoken_folder(const std::string& name, const std::string& ranks_name,
                               const std::string& module_name, const std::string& module,
                               const json& tokenizer_config) {
  TiktokenFolder f;
  f.golden = GgufFile::open((kGolden / "deepseek-v3-f32.gguf").string());
  f.dir = tmp().path / name;
  test::export_hf_folder(*f.golden, f.dir);
  fs::remove(f.dir / "tokenizer.json");
  std::ifstream in(fs::path(COLIBRI_SHARED_DIR) / "data/tokenizers/qwen/qwen.tiktoken");
  std::ofstream ranks(f.dir / ranks_name);
  std::string line;
  for (int i = 0; i < 4094 && std::getline(in, line); ++i) ranks << line << "\n";
  std::ofstream(f.dir / module_name) << module;
  std::ofstream(f.dir / "tokenizer_config.json") << tokenizer_config.dump(2);
  return f;
}

bool have_tiktoken_data() {
  return fs::exists(kGolden / "deepseek-v3-f32.gguf") &&
         fs::exists(fs::path(COLIBRI_SHARED_DIR) / "data/tokenizers/qwen/qwen.tiktoken");
}

// Qwen's layout: the converted vocabulary is llama.cpp's (tokens, types,
// merges, pre-tokenizer, BOS/EOS) and gives its tokens and logits.
TEST(HfConvert, TiktokenFolderGivesLlamaCppsVocabulary) {
  if (!have_tiktoken_data()) GTEST_SKIP() << "test data absent: golden deepseek-v3, qwen.tiktoken";
  const json cfg = {
      {"added_tokens_decoder",
       {{"4094", {{"content", "<|endoftext|>"}, {"special", true}}},
        {"4095", {{"content", "<|im_end|>"}, {"special", true}}}}},
      {"bos_token", "<|endoftext|>"},
      {"eos_token", "<|im_end|>"},
      {"add_bos_token", false},
      {"auto_map", {{"AutoTokenizer", {"tokenization_qwen.QWenTokenizer", nullptr}}}}};
  const TiktokenFolder f = tiktoken_folder(
      "tiktoken-qwen", "qwen.tiktoken", "tokenization_qwen.py",
      test::kQwenModule, cfg);
  const fs::path out = convert(f.dir);
  auto got = GgufFile::open(out.string());
  for (const char* key :
       {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"}) {
    const GgufValue* want = f.golden->find(key);
    const GgufValue* have = got->find(key);
    ASSERT_TRUE(want && have) << key;
    EXPECT_EQ(gguf_value_to_string(*have, 1 << 30), gguf_value_to_string(*want, 1 << 30)) << key;
  }
  expect_same_tensors(*f.golden, *got);
  expect_golden_outputs(out, load_json(kGolden / "deepseek-v3-f32.json"), 1e-3);
}

// Kimi-K2's layout (DeepseekV3ForCausalLM with tokenization_kimi.py's
// TikTokenTokenizer): reserved special ids after the ranks, named by
// added_tokens_decoder. Kimi-K2 reserves 256; this folder's module reserves
// the 2 ids the golden model has. The weights give llama.cpp's logits.
TEST(HfConvert, KimiStyleTiktokenFolder) {
  if (!have_tiktoken_data()) GTEST_SKIP() << "test data absent: golden deepseek-v3, qwen.tiktoken";
  const json cfg = {
      {"added_tokens_decoder", {{"4094", {{"content", "[BOS]"}, {"special", true}}}}},
      {"bos_token", "[BOS]"},
      {"eos_token", "<|reserved_token_4095|>"},
      {"tokenizer_class", "TikTokenTokenizer"},
      {"auto_map", {{"AutoTokenizer", {"tokenization_kimi.TikTokenTokenizer", nullptr}}}}};
  const std::string module = test::kimi_module(/*num_reserved=*/2);
  const TiktokenFolder f =
      tiktoken_folder("tiktoken-kimi", "tiktoken.model", "tokenization_kimi.py", module, cfg);
  const fs::path out = convert(f.dir);
  auto got = GgufFile::open(out.string());
  EXPECT_EQ(got->require_string("tokenizer.ggml.pre"), "kimi-k2");
  const auto* want_tokens = f.golden->get_string_array("tokenizer.ggml.tokens");
  const auto* tokens = got->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(want_tokens && tokens);
  ASSERT_EQ(tokens->size(), 4096u);
  for (size_t i = 0; i < 4094; ++i) ASSERT_EQ((*tokens)[i], (*want_tokens)[i]) << i;
  EXPECT_EQ((*tokens)[4094], "[BOS]");
  EXPECT_EQ((*tokens)[4095], "<|reserved_token_4095|>");
  EXPECT_EQ(got->find("tokenizer.ggml.bos_token_id")->u, 4094u);
  EXPECT_EQ(got->find("tokenizer.ggml.eos_token_id")->u, 4095u);
  expect_same_tensors(*f.golden, *got);
  expect_golden_outputs(out, load_json(kGolden / "deepseek-v3-f32.json"), 1e-3,
                        /*check_tokens=*/false);

  // Without the module, or with one that gives no regex, the error says so.
  fs::rename(f.dir / "tokenization_kimi.py", f.dir / "kimi.py");
  EXPECT_NE(error_of([&] { convert(f.dir); }).find("tokenization_kimi.py"), std::string::npos);
  std::ofstream(f.dir / "tokenization_kimi.py") << "pat_str = compile_pattern()\n";
  EXPECT_NE(error_of([&] {
              convert(f.dir);
            }).find("tokenization_kimi.py: pat_str line 1: expected a string literal"),
            std::string::npos);
  fs::remove(f.dir / "tiktoken.model");
  EXPECT_NE(error_of([&] {
              convert(f.dir);
            }).find("no tokenizer.json (nor a tiktoken.model or *.tiktoken file)"),
            std::string::npos);
}

// GLM-4.5's multi-token-prediction (NextN) layer: llama.cpp's converter
// keeps it as a block after the model's own, counted in block_count and named
// by nextn_predict_layers, with its own eh_proj, enorm, hnorm and shared_head
// norm. The golden GLM file with its last layer made a NextN layer (those four
// tensors added) round trips; the engine runs the layers before it.
TEST(HfConvert, GlmNextnLayerIsKeptAsLlamaCppKeepsIt) {
  const fs::path gguf = kGolden / "glm4moe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const int64_t E = static_cast<int64_t>(golden->require_uint("glm4moe.embedding_length"));
  const uint64_t n_block = golden->require_uint("glm4moe.block_count");
  const std::string last = "blk." + std::to_string(n_block - 1) + ".nextn.";
  GgufWriter w;
  for (const GgufKV& kv : golden->metadata()) w.set_value(kv.key, kv.value);
  w.set_u32("glm4moe.nextn_predict_layers", 1);
  for (const GgufTensor& t : golden->tensors())
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(golden->tensor_data(t), golden->tensor_data(t) + t.nbytes));
  auto values = [](int64_t n, float scale) {
    std::vector<uint8_t> b(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = scale * static_cast<float>((i * 37) % 101 - 50) / 50.0f;
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
    return b;
  };
  w.add_tensor(last + "eh_proj.weight", DType::F32, {2 * E, E}, values(2 * E * E, 0.1f));
  for (const char* norm : {"enorm", "hnorm", "shared_head_norm"})
    w.add_tensor(last + norm + ".weight", DType::F32, {E}, values(E, 1.0f));
  const fs::path src = tmp().path / "glm-nextn.gguf";
  w.write(src.string());
  auto with_nextn = GgufFile::open(src.string());

  const fs::path d = tmp().path / "glm-nextn";
  test::export_hf_folder(*with_nextn, d);
  const json cfg = load_json(d / "config.json");
  EXPECT_EQ(cfg["num_hidden_layers"], n_block - 1);
  EXPECT_EQ(cfg["num_nextn_predict_layers"], 1);
  const fs::path out = convert(d);
  auto got = GgufFile::open(out.string());
  expect_same_tensors(*with_nextn, *got);
  expect_same_hparams(*with_nextn, *got);
  EXPECT_EQ(got->get_uint("glm4moe.block_count"), n_block);
  EXPECT_EQ(ModelConfig::from_gguf(*got).n_layer, static_cast<int>(n_block - 1));

  // The NextN layer's own tensors are required, as llama.cpp's loader requires them.
  rewrite_tensors(
      d,
      [&](std::string& name, StDType&, std::vector<int64_t>&, std::vector<uint8_t>&) {
        return name.find(".hnorm.") == std::string::npos;
      },
      {});
  EXPECT_NE(error_of([&] { convert(d); })
                .find("model.layers." + std::to_string(n_block - 1) + ".hnorm.weight"),
            std::string::npos);
}

// compressed-tensors' pack-quantized integer experts (Kimi-K2 Thinking's INT4
// release), written here as compressed-tensors' pack_to_int32 writes them:
// NAME_packed (I32 words, eight 4-bit codes from the lowest bits up, code =
// value + 8), NAME_scale (BF16, one per 32 columns), NAME_shape (rows, cols).
// The golden DeepSeek-V3 model with its experts replaced by such values
// converts (to F32) to exactly those values.
TEST(HfConvert, PackedInt4ExpertsDequantize) {
  const fs::path gguf = kGolden / "deepseek-v3-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  struct Packed {
    int64_t rows, cols;
    std::vector<uint8_t> words, scales;  // I32 (rows, cols / 8), BF16 (rows, cols / 32)
  };
  std::map<std::string, Packed> packed;  // by Hugging Face name
  GgufWriter w;
  for (const GgufKV& kv : golden->metadata()) w.set_value(kv.key, kv.value);
  for (const GgufTensor& t : golden->tensors()) {
    const float* x = reinterpret_cast<const float*>(golden->tensor_data(t));
    std::vector<float> v(x, x + t.n_elements());
    const std::string name(t.name);
    const size_t at = name.find(".ffn_"), end = name.find("_exps.weight");
    if (at != std::string::npos && end != std::string::npos) {
      const int64_t cols = t.ne[0], rows = t.ne[1];
      const std::string layer = name.substr(4, at - 4), proj = name.substr(at + 5, end - at - 5);
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        Packed pk{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols / 2)),
                  std::vector<uint8_t>(static_cast<size_t>(rows * cols / 32) * 2)};
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t g = 0; g < cols / 32; ++g) {
            float* grp = &v[static_cast<size_t>((e * rows + r) * cols + g * 32)];
            float amax = 0;
            for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(grp[i]));
            const uint16_t sb = fp32_to_bf16(std::max(amax, 1e-6f) / 7.0f);
            const float scale = bf16_to_fp32(sb);
            std::memcpy(&pk.scales[static_cast<size_t>(r * (cols / 32) + g) * 2], &sb, 2);
            for (int i = 0; i < 32; ++i) {
              const long q = std::clamp(std::lround(grp[i] / scale), -8L, 7L);
              grp[i] = static_cast<float>(q) * scale;
              const int64_t c = g * 32 + i;
              uint8_t& byte = pk.words[static_cast<size_t>((r * cols + c) / 2)];
              byte = static_cast<uint8_t>(byte | (q + 8) << (4 * (c % 2)));
            }
          }
        packed["model.layers." + layer + ".mlp.experts." + std::to_string(e) + "." + proj +
               "_proj.weight"] = std::move(pk);
      }
    }
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), std::move(bytes));
  }
  ASSERT_GT(packed.size(), 0u);
  const fs::path src = tmp().path / "v3-int4.gguf";
  w.write(src.string());
  auto want = GgufFile::open(src.string());

  const fs::path d = tmp().path / "v3-int4";
  test::export_hf_folder(*want, d);
  json cfg = load_json(d / "config.json");
  cfg["quantization_config"] = json::parse(R"({"quant_method": "compressed-tensors",
      "format": "pack-quantized", "quantization_status": "compressed",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4,
        "group_size": 32, "strategy": "group", "symmetric": true, "type": "int"}}}})");
  std::ofstream(d / "config.json") << cfg.dump(2);
  std::vector<std::string> with_scales;
  rewrite_tensors(
      d,
      [&](std::string& name, StDType& dt, std::vector<int64_t>& shape, std::vector<uint8_t>& b) {
        const auto it = packed.find(name);
        if (it == packed.end()) return true;
        // The bytes of the words are the codes two to a byte, low nibble first.
        b = it->second.words;
        dt = StDType::kI32;
        shape = {it->second.rows, it->second.cols / 8};
        with_scales.push_back(name);
        name += "_packed";
        return true;
      },
      [&](SafetensorsWriter& sw) {
        for (const std::string& n : with_scales) {
          const Packed& pk = packed.at(n);
          sw.add(n + "_scale", StDType::kBF16, {pk.rows, pk.cols / 32}, pk.scales);
          const int32_t dims[2] = {static_cast<int32_t>(pk.rows), static_cast<int32_t>(pk.cols)};
          std::vector<uint8_t> shape_bytes(8);
          std::memcpy(shape_bytes.data(), dims, 8);
          sw.add(n + "_shape", StDType::kI32, {2}, std::move(shape_bytes));
        }
      });
  ASSERT_EQ(with_scales.size(), packed.size());

  const fs::path out = convert(d, DType::F32);
  auto got = GgufFile::open(out.string());
  expect_same_tensors(*want, *got);
  // Without --type, packed experts become BF16, as llama.cpp's converter makes them.
  auto natural = GgufFile::open(convert(d).string());
  EXPECT_EQ(natural->find_tensor("blk.1.ffn_up_exps.weight")->type, DType::BF16);
  EXPECT_EQ(natural->find_tensor("blk.1.attn_q_a.weight")->type, DType::F32);

  // What is not converted says so.
  cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  std::ofstream(d / "config.json") << cfg.dump(2);
  EXPECT_NE(error_of([&] { convert(d); }).find("only symmetric weights"), std::string::npos);
  cfg.erase("quantization_config");
  std::ofstream(d / "config.json") << cfg.dump(2);
  EXPECT_NE(error_of([&] { convert(d); }).find("_packed, but config.json's quantization_config"),
            std::string::npos);
}

// A Q8_0 file of llama.cpp's, dequantized, written as a Hugging Face folder
// and converted with --type q8_0: Q8_0 of Q8_0 values is those values, so the
// bytes must be llama.cpp's, and the types its quantizer chose per tensor
// (embeddings and output Q8_0, norms and routers F32).
TEST(HfConvert, Q8_0OfLlamaCppsQ8_0IsItsBytes) {
  const fs::path gguf = kGolden / "olmoe-q8_0.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto q8 = GgufFile::open(gguf.string());
  GgufWriter w;
  for (const GgufKV& kv : q8->metadata())
    if (kv.key != "general.alignment") w.set_value(kv.key, kv.value);
  for (const GgufTensor& t : q8->tensors()) {
    std::vector<float> f(static_cast<size_t>(t.n_elements()));
    const size_t rb = row_bytes(t.type, t.ne[0]);
    for (int64_t r = 0; r < t.n_elements() / t.ne[0]; ++r)
      dequantize_row(t.type, q8->tensor_data(t) + r * rb, f.data() + r * t.ne[0], t.ne[0]);
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    w.add_tensor(t.name, DType::F32, ne, std::move(bytes));
  }
  const std::vector<uint8_t> f32 = w.to_bytes();
  auto dequant = GgufFile::parse(f32.data(), f32.size(), "olmoe-q8_0 as f32");
  const fs::path folder = tmp().path / "olmoe-q8_0";
  test::export_hf_folder(*dequant, folder);
  auto got = GgufFile::open(convert(folder, DType::Q8_0).string());
  expect_same_tensors(*q8, *got);
  EXPECT_EQ(got->get_uint("general.file_type"), q8->get_uint("general.file_type"));
}

// llama-quantize's K-quant and IQ4 files of shared/golden's and
// tests/data/golden's (made without an importance matrix from the float models
// beside them): each float model written as a Hugging Face folder and
// converted with that file type must be that file, tensor for tensor and byte
// for byte (the mix of types it chose, Q6_K output, Q5_K ffn_down in the first
// eighth, ...; the quantizers' bytes), with its general.file_type.
TEST(HfConvert, FileTypesAreLlamaQuantizesFiles) {
  const fs::path repo = fs::path(COLIBRI_SOURCE_DIR) / "tests/data/golden";
  struct Case {
    const char* src;
    fs::path want;
    QuantMix mix;
  };
  const Case cases[] = {
      {"qwen3moe-h256-f16", kGolden / "qwen3moe-h256-q4_k_m.gguf", QuantMix::kQ4_K_M},
      {"qwen3moe-h256-f16", kGolden / "qwen3moe-h256-q5_k_m.gguf", QuantMix::kQ5_K_M},
      {"qwen3moe-h256-f16", kGolden / "qwen3moe-h256-q6_k.gguf", QuantMix::kQ6_K},
      {"qwen3moe-h256-f16", kGolden / "qwen3moe-h256-q2_k.gguf", QuantMix::kQ2_K},
      {"qwen3moe-h256-f16", kGolden / "qwen3moe-h256-q3_k_m.gguf", QuantMix::kQ3_K_M},
      {"qwen3moe-h256-f16", repo / "qwen3moe-h256-iq4_xs.gguf", QuantMix::kIQ4_XS},
      {"deepseek-v3-f32", repo / "deepseek-v3-iq4_nl.gguf", QuantMix::kIQ4_NL}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want.filename().string());
    const fs::path gguf = kGolden / (std::string(c.src) + ".gguf");
    if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
    auto src = GgufFile::open(gguf.string());
    auto want = GgufFile::open(c.want.string());
    const fs::path folder = tmp().path / (std::string(c.src) + "-" + quant_mix_name(c.mix));
    test::export_hf_folder(*src, folder);
    HfConvertOptions o;
    o.folder = folder.string();
    o.out = folder.string() + ".gguf";
    o.mix = c.mix;
    convert_hf_folder(o);
    auto got = GgufFile::open(o.out);
    expect_same_tensors(*want, *got);
    EXPECT_EQ(got->get_uint("general.file_type"), want->get_uint("general.file_type"));
  }
}

// GPT-OSS as OpenAI ships it (MXFP4 experts with gate and up interleaved,
// the rest BF16 or F32), from llama.cpp's MXFP4_MOE file: converting with
// --type q8_0 must give that file's tensors byte for byte (its MXFP4 blocks
// repacked, its Q8_0 values quantized again), its keys, tokens and logits.
TEST(HfConvert, GptOssMxfp4IsLlamaCppsFile) {
  const fs::path gguf = kGolden / "gptoss-mxfp4.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path folder = tmp().path / "gptoss-mxfp4";
  test::ExportOptions eo;
  eo.n_shards = 2;
  test::export_hf_folder(*golden, folder, eo);
  auto st = SafetensorsSet::open_dir(folder.string());
  ASSERT_NE(st->find("model.layers.0.mlp.experts.gate_up_proj_blocks"), nullptr);
  const fs::path out = convert(folder, DType::Q8_0);
  auto got = GgufFile::open(out.string());
  expect_same_tensors(*golden, *got);
  expect_same_hparams(*golden, *got);
  EXPECT_EQ(got->get_uint("general.file_type"), golden->get_uint("general.file_type"));
  // The same bytes: the same logits as the golden file's, bit for bit (the
  // golden test holds those to llama.cpp's, near-tie routing rules and all).
  auto logits_of = [](const fs::path& model, const std::vector<int32_t>& tokens) {
    EngineOptions o;
    o.model_path = model.string();
    o.n_ctx = 256;
    o.n_batch = 128;
    o.n_threads = 2;
    o.kv_type = DType::F32;
    o.store.no_history = true;
    Engine engine(o);
    std::vector<float> logits(tokens.size() * static_cast<size_t>(engine.n_vocab()));
    std::vector<BatchToken> batch(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) batch[i] = {tokens[i], static_cast<int>(i), 0, true};
    engine.transformer().forward(batch, engine.kv(), logits.data(), nullptr);
    return logits;
  };
  const json ref = load_json(kGolden / "gptoss-mxfp4.json");
  for (const json& c : ref["cases"]) {
    const auto tokens = c["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(logits_of(out, tokens), logits_of(gguf, tokens)) << c["name"];
  }
}

// BF16 checkpoints (what most models ship as) stay BF16, bit for bit, and
// give llama.cpp's outputs within its BF16 tolerance.
TEST(HfConvert, Bf16StaysBf16) {
  const fs::path gguf = kGolden / "qwen3moe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path folder = tmp().path / "qwen3moe-bf16";
  test::ExportOptions eo;
  eo.bf16 = true;
  test::export_hf_folder(*golden, folder, eo);
  const fs::path out = convert(folder);
  auto got = GgufFile::open(out.string());
  auto st = SafetensorsSet::open_dir(folder.string());
  for (const GgufTensor& t : got->tensors()) {
    const bool matrix = t.n_dims >= 2 && t.name.find("ffn_gate_inp") == std::string::npos;
    EXPECT_EQ(dtype_name(t.type), std::string(dtype_name(matrix ? DType::BF16 : DType::F32)))
        << t.name;
  }
  // One matrix compared with the checkpoint's bytes.
  const auto* src = st->find("model.layers.1.self_attn.o_proj.weight");
  ASSERT_NE(src, nullptr);
  const GgufTensor* wo = got->find_tensor("blk.1.attn_output.weight");
  ASSERT_NE(wo, nullptr);
  ASSERT_EQ(wo->nbytes, src->tensor->nbytes);
  EXPECT_EQ(std::memcmp(got->tensor_data(*wo), src->file->data(*src->tensor), wo->nbytes), 0);
  EXPECT_EQ(got->get_uint("general.file_type"), 32u);
  // Every value is the F32 original rounded to BF16 (nearest, ties to even).
  for (const GgufTensor& t : golden->tensors()) {
    const GgufTensor* g = got->find_tensor(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    const int64_t n = t.n_elements();
    std::vector<float> back(static_cast<size_t>(n));
    dequantize_row(g->type, got->tensor_data(*g), back.data(), n);
    const float* orig = reinterpret_cast<const float*>(golden->tensor_data(t));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &orig[i], 4);
      const uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
      float want;
      std::memcpy(&want, &rounded, 4);
      if (t.n_dims == 1) want = orig[i];  // vectors were written as F32
      ASSERT_EQ(back[i], want) << t.name << " element " << i;
    }
  }
  // And the model runs.
  EngineOptions eo2;
  eo2.model_path = out.string();
  eo2.n_ctx = 64;
  eo2.n_threads = 2;
  eo2.store.no_history = true;
  Engine engine(eo2);
  EXPECT_EQ(engine.config().n_layer, 2);
}

// The published config.json of real models: the hyperparameters colibri
// reads from the converted keys are the ones `colibri synth` has for them.
TEST(HfConvert, PublishedConfigsGiveThePublishedShapes) {
  struct Case {
    const char* synth_shape;
    const char* config;
  };
  const Case cases[] = {
      {"qwen3-30b-a3b",
       R"({"architectures":["Qwen3MoeForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
           "bos_token_id":151643,"decoder_sparse_step":1,"eos_token_id":151645,"head_dim":128,"hidden_act":"silu",
           "hidden_size":2048,"initializer_range":0.02,"intermediate_size":6144,"max_position_embeddings":40960,
           "max_window_layers":48,"mlp_only_layers":[],"model_type":"qwen3_moe","moe_intermediate_size":768,
           "norm_topk_prob":true,"num_attention_heads":32,"num_experts":128,"num_experts_per_tok":8,
           "num_hidden_layers":48,"num_key_value_heads":4,"output_router_logits":false,"rms_norm_eps":1e-06,
           "rope_scaling":null,"rope_theta":1000000.0,"router_aux_loss_coef":0.001,"sliding_window":null,
           "tie_word_embeddings":false,"torch_dtype":"bfloat16","transformers_version":"4.51.0","use_cache":true,
           "use_sliding_window":false,"vocab_size":151936})"},
      {"mixtral-8x7b",
       R"({"architectures":["MixtralForCausalLM"],"attention_dropout":0.0,"bos_token_id":1,"eos_token_id":2,
           "hidden_act":"silu","hidden_size":4096,"initializer_range":0.02,"intermediate_size":14336,
           "max_position_embeddings":32768,"model_type":"mixtral","num_attention_heads":32,"num_experts_per_tok":2,
           "num_hidden_layers":32,"num_key_value_heads":8,"num_local_experts":8,"output_router_logits":false,
           "rms_norm_eps":1e-05,"rope_theta":1000000.0,"router_aux_loss_coef":0.02,"sliding_window":null,
           "tie_word_embeddings":false,"torch_dtype":"bfloat16","transformers_version":"4.36.0.dev0",
           "use_cache":true,"vocab_size":32000})"},
      {"olmoe-1b-7b",
       R"({"architectures":["OlmoeForCausalLM"],"attention_bias":false,"attention_dropout":0.0,"clip_qkv":null,
           "eos_token_id":50279,"hidden_act":"silu","hidden_size":2048,"initializer_range":0.02,
           "intermediate_size":1024,"max_position_embeddings":4096,"model_type":"olmoe","norm_topk_prob":false,
           "num_attention_heads":16,"num_experts":64,"num_experts_per_tok":8,"num_hidden_layers":16,
           "num_key_value_heads":16,"output_router_logits":false,"pad_token_id":1,"rms_norm_eps":1e-05,
           "rope_scaling":null,"rope_theta":10000.0,"router_aux_loss_coef":0.01,"tie_word_embeddings":false,
           "torch_dtype":"bfloat16","use_cache":true,"vocab_size":50304})"},
      {"qwen1.5-moe-a2.7b",
       R"({"architectures":["Qwen2MoeForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
           "decoder_sparse_step":1,"eos_token_id":151643,"hidden_act":"silu","hidden_size":2048,
           "initializer_range":0.02,"intermediate_size":5632,"max_position_embeddings":8192,"max_window_layers":21,
           "model_type":"qwen2_moe","moe_intermediate_size":1408,"norm_topk_prob":false,"num_attention_heads":16,
           "num_experts":60,"num_experts_per_tok":4,"num_hidden_layers":24,"num_key_value_heads":16,
           "output_router_logits":false,"rms_norm_eps":1e-06,"rope_theta":1000000.0,"router_aux_loss_coef":0.001,
           "shared_expert_intermediate_size":5632,"sliding_window":32768,"tie_word_embeddings":false,
           "torch_dtype":"bfloat16","use_cache":true,"use_sliding_window":false,"vocab_size":151936})"},
      {"glm-4.5-air",
       R"({"architectures":["Glm4MoeForCausalLM"],"attention_bias":true,"attention_dropout":0.0,
           "pad_token_id":151329,"eos_token_id":[151329,151336,151338],"head_dim":128,"hidden_act":"silu",
           "hidden_size":4096,"partial_rotary_factor":0.5,"initializer_range":0.02,"intermediate_size":10944,
           "max_position_embeddings":131072,"model_type":"glm4_moe","moe_intermediate_size":1408,
           "norm_topk_prob":true,"num_attention_heads":96,"n_group":1,"topk_group":1,"n_routed_experts":128,
           "n_shared_experts":1,"routed_scaling_factor":1.0,"num_experts_per_tok":8,"first_k_dense_replace":1,
           "num_hidden_layers":46,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_scaling":null,
           "rope_theta":1000000,"num_nextn_predict_layers":1,"tie_word_embeddings":false,
           "torch_dtype":"bfloat16","transformers_version":"4.54.0","use_cache":true,"use_qk_norm":false,
           "vocab_size":151552})"},
      {"deepseek-v3-671b",
       R"({"architectures":["DeepseekV3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
           "aux_loss_alpha":0.001,"bos_token_id":0,"eos_token_id":1,"ep_size":1,"first_k_dense_replace":3,
           "hidden_act":"silu","hidden_size":7168,"initializer_range":0.02,"intermediate_size":18432,
           "kv_lora_rank":512,"max_position_embeddings":163840,"model_type":"deepseek_v3",
           "moe_intermediate_size":2048,"moe_layer_freq":1,"n_group":8,"n_routed_experts":256,
           "n_shared_experts":1,"norm_topk_prob":true,"num_attention_heads":128,"num_experts_per_tok":8,
           "num_hidden_layers":61,"num_key_value_heads":128,"num_nextn_predict_layers":1,"pretraining_tp":1,
           "q_lora_rank":1536,"qk_nope_head_dim":128,"qk_rope_head_dim":64,
           "quantization_config":{"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8",
                                  "weight_block_size":[128,128]},
           "rms_norm_eps":1e-06,"rope_scaling":{"beta_fast":32,"beta_slow":1,"factor":40,"mscale":1.0,
           "mscale_all_dim":1.0,"original_max_position_embeddings":4096,"type":"yarn"},"rope_theta":10000,
           "routed_scaling_factor":2.5,"scoring_func":"sigmoid","seq_aux":true,"tie_word_embeddings":false,
           "topk_group":4,"topk_method":"noaux_tc","torch_dtype":"bfloat16","transformers_version":"4.33.1",
           "use_cache":true,"v_head_dim":128,"vocab_size":129280})"},
      {"gpt-oss-20b",
       R"({"architectures":["GptOssForCausalLM"],"attention_bias":true,"attention_dropout":0.0,
           "eos_token_id":200002,"experts_per_token":4,"head_dim":64,"hidden_act":"silu","hidden_size":2880,
           "initial_context_length":4096,"initializer_range":0.02,"intermediate_size":2880,
           "max_position_embeddings":131072,"model_type":"gpt_oss","num_attention_heads":64,
           "num_experts_per_tok":4,"num_hidden_layers":24,"num_key_value_heads":8,"num_local_experts":32,
           "output_router_logits":false,"pad_token_id":199999,
           "quantization_config":{"modules_to_not_convert":["model.layers.*.self_attn","model.layers.*.mlp.router",
                                  "model.embed_tokens","lm_head"],"quant_method":"mxfp4"},
           "rms_norm_eps":1e-05,"rope_scaling":{"beta_fast":32.0,"beta_slow":1.0,"factor":32.0,
           "original_max_position_embeddings":4096,"rope_type":"yarn","truncate":false},"rope_theta":150000,
           "router_aux_loss_coef":0.9,"sliding_window":128,"swiglu_limit":7.0,"tie_word_embeddings":false,
           "use_cache":true,"vocab_size":201088})"},
  };
  for (const Case& c : cases) {
    json config = json::parse(c.config);
    if (config["architectures"][0] == "GptOssForCausalLM") {
      // layer_types: sliding, full, sliding, ... (24 entries in the file).
      for (int l = 0; l < 24; ++l)
        config["layer_types"].push_back(l % 2 ? "full_attention" : "sliding_attention");
    }
    const HfFamily* fam = find_hf_family(config["architectures"][0].get<std::string>());
    ASSERT_NE(fam, nullptr) << c.synth_shape;
    GgufWriter w;
    w.set_string("general.architecture", std::string(fam->gguf_arch));
    hf_config_to_gguf(config, *fam, w, c.synth_shape);
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), c.synth_shape);
    const ModelConfig m = ModelConfig::from_gguf(*f);
    const SynthShape* s = find_synth_shape(c.synth_shape);
    ASSERT_NE(s, nullptr) << c.synth_shape;
    EXPECT_EQ(std::string(m.arch->name), s->arch) << c.synth_shape;
    EXPECT_EQ(m.n_layer, s->n_layer) << c.synth_shape;
    EXPECT_EQ(m.n_embd, s->n_embd) << c.synth_shape;
    EXPECT_EQ(m.n_head, s->n_head) << c.synth_shape;
    EXPECT_EQ(m.n_head_kv, s->n_head_kv) << c.synth_shape;
    if (s->q_lora_rank || s->kv_lora_rank) {
      EXPECT_EQ(m.q_lora_rank, s->q_lora_rank) << c.synth_shape;
      EXPECT_EQ(m.kv_lora_rank, s->kv_lora_rank) << c.synth_shape;
      EXPECT_EQ(m.mla_nope, s->qk_nope) << c.synth_shape;
      EXPECT_EQ(m.mla_v, s->v_head_dim ? s->v_head_dim : s->qk_nope) << c.synth_shape;
      EXPECT_EQ(m.n_expert_group, s->n_expert_group) << c.synth_shape;
      EXPECT_EQ(m.n_expert_group_used, s->n_expert_group_used) << c.synth_shape;
      EXPECT_NE(m.yarn_ext_factor, 0.f) << c.synth_shape;
    } else {
      EXPECT_EQ(m.head_dim, s->head_dim) << c.synth_shape;
    }
    EXPECT_EQ(m.n_ctx_train, s->n_ctx_train) << c.synth_shape;
    EXPECT_EQ(m.n_ff, s->n_ff) << c.synth_shape;
    EXPECT_EQ(m.n_expert, s->n_expert) << c.synth_shape;
    EXPECT_EQ(m.n_expert_used, s->n_expert_used) << c.synth_shape;
    EXPECT_EQ(m.n_ff_exp, s->n_ff_exp) << c.synth_shape;
    EXPECT_EQ(m.n_ff_shexp, s->n_ff_shexp ? s->n_ff_shexp : s->n_expert_shared * s->n_ff_exp)
        << c.synth_shape;
    EXPECT_EQ(m.n_layer_dense_lead, s->n_layer_dense_lead) << c.synth_shape;
    EXPECT_EQ(m.n_rot, s->n_rot ? s->n_rot : s->head_dim) << c.synth_shape;
    EXPECT_EQ(m.gating == Gating::kSigmoid, s->gating_func == 2) << c.synth_shape;
    if (s->expert_weights_scale != 0) {
      EXPECT_FLOAT_EQ(m.expert_weights_scale, s->expert_weights_scale) << c.synth_shape;
    }
    EXPECT_FLOAT_EQ(m.rms_eps, s->rms_eps) << c.synth_shape;
    EXPECT_FLOAT_EQ(m.rope_base, s->rope_base) << c.synth_shape;
    EXPECT_EQ(m.n_vocab, s->n_vocab) << c.synth_shape;
    EXPECT_EQ(m.n_swa, s->n_swa) << c.synth_shape;
  }
}

// What cannot be converted ends in an error naming the file and the field,
// and writes nothing.
TEST(HfConvert, RefusesWhatItCannotConvert) {
  const fs::path gguf = kGolden / "qwen3moe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path base = tmp().path / "refuse-base";
  test::export_hf_folder(*golden, base);

  int n = 0;
  // A fresh copy of the folder, changed by edit; the error convert gives.
  auto convert_edited = [&](const std::function<void(const fs::path&)>& edit) {
    const fs::path d = tmp().path / ("refuse-" + std::to_string(n++));
    fs::remove_all(d);
    fs::copy(base, d);
    edit(d);
    std::string e = error_of([&] { convert(d); });
    EXPECT_FALSE(fs::exists(d.string() + ".gguf")) << e;
    return e;
  };
  auto edit_config = [&](const std::function<void(json&)>& f) {
    return [f](const fs::path& d) {
      json c = load_json(d / "config.json");
      f(c);
      std::ofstream(d / "config.json") << c.dump();
    };
  };
  auto edit_tensors = [&](const TensorEdit& f, std::function<void(SafetensorsWriter&)> extra = {}) {
    return [f, extra](const fs::path& d) { rewrite_tensors(d, f, extra); };
  };

  EXPECT_NE(convert_edited(edit_config([](json& c) {
              c["architectures"] = {"Llama4ForConditionalGeneration"};
            })).find("architecture Llama4ForConditionalGeneration is not converted"),
            std::string::npos);
  EXPECT_NE(convert_edited(edit_config([](json& c) {
              c["norm_topk_prob"] = false;
            })).find("norm_topk_prob"),
            std::string::npos);
  EXPECT_NE(
      convert_edited(edit_config([](json& c) { c["hidden_act"] = "gelu"; })).find("hidden_act"),
      std::string::npos);
  EXPECT_NE(convert_edited(edit_config([](json& c) {
              c["num_hidden_layers"] = "2";
            })).find("num_hidden_layers: expected an integer"),
            std::string::npos);
  EXPECT_NE(convert_edited(edit_config([](json& c) {
              c.erase("num_experts");
            })).find("num_experts is missing"),
            std::string::npos);
  // One expert more than the folder has, or one fewer.
  EXPECT_NE(convert_edited(edit_config([](json& c) {
              c["num_experts"] = 9;
            })).find("model.layers.0.mlp.experts.8.gate_proj.weight is missing"),
            std::string::npos);
  EXPECT_NE(
      convert_edited(edit_config([](json& c) { c["num_experts"] = 7; })).find("no rule maps it"),
      std::string::npos);
  EXPECT_NE(convert_edited([](const fs::path& d) {
              std::ofstream(d / "config.json") << "{\"architectures\": [";
            }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(convert_edited([](const fs::path& d) {
              fs::remove(d / "tokenizer.json");
            }).find("no tokenizer.json"),
            std::string::npos);
  EXPECT_NE(convert_edited([](const fs::path& d) {
              fs::remove(d / "model.safetensors");
            }).find("model.safetensors"),
            std::string::npos);
  // Tensors: a missing one, an unknown one, FP8, integers, a ragged expert.
  EXPECT_NE(convert_edited(edit_tensors([](std::string& n, auto&, auto&, auto&) {
              return n != "model.layers.1.self_attn.k_norm.weight";
            })).find("model.layers.1.self_attn.k_norm.weight is missing"),
            std::string::npos);
  EXPECT_NE(convert_edited(edit_tensors([](auto&, auto&, auto&, auto&) { return true; },
                                        [](SafetensorsWriter& w) {
                                          w.add("model.layers.0.mlp.extra.weight", StDType::kF32,
                                                {2}, std::vector<uint8_t>(8));
                                        }))
                .find("model.layers.0.mlp.extra.weight is not part"),
            std::string::npos);
  const std::string fp8 =
      convert_edited(edit_tensors([](std::string& n, StDType& dt, auto&, std::vector<uint8_t>& b) {
        if (n == "model.layers.0.self_attn.v_proj.weight") {
          dt = StDType::kF8E4M3;
          b.resize(b.size() / 4);
        }
        return true;
      }));
  EXPECT_NE(fp8.find("tensor model.layers.0.self_attn.v_proj.weight is FP8 without its scales"),
            std::string::npos)
      << fp8;
  EXPECT_NE(convert_edited(edit_tensors([](std::string& n, StDType& dt, auto&, auto&) {
              if (n == "model.norm.weight") dt = StDType::kI32;
              return true;
            })).find("model.norm.weight: dtype I32"),
            std::string::npos);
  EXPECT_NE(convert_edited(edit_tensors([](std::string& n, auto&, std::vector<int64_t>& s,
                                           std::vector<uint8_t>& b) {
              if (n == "model.layers.1.mlp.experts.3.up_proj.weight") {
                s[0] /= 2;
                b.resize(b.size() / 2);
              }
              return true;
            })).find("model.layers.1.mlp.experts.3.up_proj.weight: shape or dtype differs"),
            std::string::npos);
  // A real config of a family not converted: Mistral-7B's.
  const fs::path mistral = fs::path(COLIBRI_SHARED_DIR) / "data/tokenizers/mixtral/config.json";
  if (fs::exists(mistral)) {
    EXPECT_NE(convert_edited([&](const fs::path& d) {
                fs::copy_file(mistral, d / "config.json", fs::copy_options::overwrite_existing);
              }).find("MistralForCausalLM is not converted"),
              std::string::npos);
  }
}

// FP8 checkpoints (DeepSeek-V3, Kimi K2): E4M3 bytes times their block's
// scale, stored as BF16. Every byte value, four blocks of distinct scales.
TEST(HfConvert, Fp8WeightsDequantizeByBlock) {
  const fs::path gguf = kGolden / "qwen3moe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path d = tmp().path / "fp8";
  test::export_hf_folder(*golden, d);
  {
    json c = load_json(d / "config.json");
    c["quantization_config"] = {
        {"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {32, 32}}};
    std::ofstream(d / "config.json") << c.dump();
  }
  const std::string name = "model.layers.0.self_attn.v_proj.weight";
  const float scales[4] = {0.5f, 2.f, -1.f, 0.25f};
  int64_t rows = 0, cols = 0;
  rewrite_tensors(
      d,
      [&](std::string& n, StDType& dt, std::vector<int64_t>& shape, std::vector<uint8_t>& b) {
        if (n != name) return true;
        rows = shape[0];
        cols = shape[1];
        dt = StDType::kF8E4M3;
        b.resize(static_cast<size_t>(rows * cols));
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i % 256);
        return true;
      },
      [&](SafetensorsWriter& w) {
        std::vector<uint8_t> sb(sizeof scales);
        std::memcpy(sb.data(), scales, sizeof scales);
        w.add(name + "_scale_inv", StDType::kF32, {2, 2}, sb);
      });
  ASSERT_EQ(rows, 64);
  ASSERT_EQ(cols, 64);
  auto got = GgufFile::open(convert(d).string());
  const GgufTensor* t = got->find_tensor("blk.0.attn_v.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, DType::BF16);

  // E4M3 as the OCP FP8 specification tabulates it: bias 7, 3 mantissa
  // bits, subnormals m/8 * 2^-6, S.1111.111 NaN, largest 448.
  auto e4m3 = [](int b) -> double {
    const double sign = (b & 0x80) ? -1 : 1;
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return NAN;
    return sign * (e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7));
  };
  EXPECT_EQ(e4m3(0x01), 1.0 / 512);
  EXPECT_EQ(e4m3(0x08), 1.0 / 64);
  EXPECT_EQ(e4m3(0x38), 1.0);
  EXPECT_EQ(e4m3(0x3C), 1.5);
  EXPECT_EQ(e4m3(0x7E), 448.0);
  EXPECT_EQ(e4m3(0xC0), -2.0);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(DType::BF16, got->tensor_data(*t) + r * cols * 2, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double want =
          e4m3(static_cast<int>((r * cols + c) % 256)) * scales[(r / 32) * 2 + c / 32];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(row[c])) << r << "," << c;
      } else {
        // BF16 keeps 8 significant bits; E4M3 times a power of two fits exactly.
        EXPECT_EQ(row[c], static_cast<float>(want)) << r << "," << c;
      }
    }
  }
  // Scales of the wrong shape are refused.
  rewrite_tensors(
      d,
      [&](std::string& n, StDType&, std::vector<int64_t>& shape, std::vector<uint8_t>& b) {
        if (n == name + "_scale_inv") {
          shape = {1, 4};
          (void)b;
        }
        return true;
      },
      {});
  const std::string e = error_of([&] { convert(d); });
  EXPECT_NE(e.find("_scale_inv: expected F32 scales of 2 x 2"), std::string::npos) << e;
}

// The command line: convert a folder, generate from the file; a folder given
// to run is answered with the command that converts it.
TEST(HfConvert, CommandLine) {
  const fs::path gguf = kGolden / "olmoe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path d = tmp().path / "cli-olmoe";
  test::export_hf_folder(*golden, d);
  auto sh = [](const std::string& args, std::string* out) {
    const std::string cmd = std::string("timeout 120 ") + COLIBRI_EXE + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  };
  std::string out;
  const fs::path q8 = tmp().path / "cli-olmoe-q8_0.gguf";
  ASSERT_EQ(sh("convert " + d.string() + " -o " + q8.string() + " --type q8_0 -q", &out), 0) << out;
  EXPECT_NE(out.find("OlmoeForCausalLM -> olmoe"), std::string::npos) << out;
  auto f = GgufFile::open(q8.string());
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up_exps.weight")->type, DType::Q8_0);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::F32);
  out.clear();
  ASSERT_EQ(sh("run -m " + q8.string() + " -p \"The old lighthouse\" -n 8 --temp 0 -t 2", &out), 0)
      << out;
  out.clear();
  EXPECT_EQ(sh("run -m " + d.string() + " -p hi -n 1", &out), 1) << out;
  EXPECT_NE(out.find("colibri convert"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(sh("convert " + d.string() + " -o " + q8.string() + " --type q4_k", &out), 1) << out;
  EXPECT_NE(out.find("unknown type 'q4_k'"), std::string::npos) << out;
}

// Every key of config.json, tokenizer.json (and its model) and
// tokenizer_config.json given a value of each wrong type: convert ends in an
// Error or, where the key does not matter, a file; never anything else.
TEST(HfConvert, ValuesOfTheWrongTypeEndInErrors) {
  const fs::path gguf = kGolden / "qwen3moe-f32.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  auto golden = GgufFile::open(gguf.string());
  const fs::path base = tmp().path / "types-base";
  test::export_hf_folder(*golden, base);
  const fs::path d = tmp().path / "types";
  fs::remove_all(d);
  fs::copy(base, d);
  const json wrong[] = {
      json(), json(-1), json(1.5), json("x"), json::array({1, "y"}), json::object({{"z", 1}})};
  int errors = 0, runs = 0;
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    const json orig = load_json(base / file);
    std::vector<json::json_pointer> keys;
    for (const auto& [k, v] : orig.items()) keys.emplace_back("/" + k);
    if (std::string(file) == "tokenizer.json")
      for (const auto& [k, v] : orig["model"].items()) keys.emplace_back("/model/" + k);
    for (const json::json_pointer& key : keys) {
      for (const json& w : wrong) {
        json j = orig;
        j[key] = w;
        std::ofstream(d / file) << j.dump();
        ++runs;
        if (error_of([&] { convert(d); }) != "(no error)") ++errors;
      }
    }
    std::ofstream(d / file) << orig.dump();
  }
  EXPECT_GT(runs, 100);
  EXPECT_GT(errors, runs / 2);
}

TEST(HfConvert, KnowsAModelFolder) {
  const fs::path d = tmp().path / "is-folder";
  fs::create_directories(d);
  EXPECT_FALSE(is_hf_folder(d.string()));
  std::ofstream(d / "config.json") << "{}";
  EXPECT_TRUE(is_hf_folder(d.string()));
  EXPECT_FALSE(is_hf_folder((d / "config.json").string()));
}

}  // namespace
}  // namespace colibri
