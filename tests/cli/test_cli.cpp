// The colibri binary on bad input: one clear error line naming what and
// where, and a non-zero exit; never a crash or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../process_tmp_dir.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(COLIBRI_SHARED_DIR) / "golden";

struct Result {
  int status = -1;
  std::string err;  // stderr
  std::string out;  // stdout
};

// This process's own directory for the files the tests write, removed when
// it exits: test runs side by side never share a file.
const fs::path& scratch_dir() {
  static const ProcessTmpDir dir("colibri_cli_");
  return dir.path;
}

Result run(const std::string& args) {
  fs::path err = scratch_dir() / "stderr.txt";
  std::string cmd = std::string("timeout 60 ") + COLIBRI_EXE + " " + args + " 2>" + err.string();
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

// Exactly one error line, "colibri: error: ...", last on stderr (progress
// lines such as the memory plan may precede it), containing every fragment.
void expect_error(const Result& r, const std::vector<const char*>& fragments) {
  EXPECT_EQ(r.status, 1) << r.err;
  ASSERT_FALSE(r.err.empty());
  ASSERT_EQ(r.err.back(), '\n') << r.err;
  size_t start = r.err.rfind('\n', r.err.size() - 2);
  std::string last = r.err.substr(start == std::string::npos ? 0 : start + 1);
  EXPECT_EQ(last.rfind("colibri: error: ", 0), 0u) << r.err;
  size_t n_errors = 0;
  for (size_t at = r.err.find("colibri: error:"); at != std::string::npos;
       at = r.err.find("colibri: error:", at + 1))
    ++n_errors;
  EXPECT_EQ(n_errors, 1u) << r.err;
  for (const char* f : fragments)
    EXPECT_NE(last.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
}

fs::path tmp(const std::string& name) { return scratch_dir() / name; }

// Rewrites a golden model through GgufWriter with one change.
fs::path rewrite(const std::string& model, const std::string& out_name,
                 const std::function<void(const GgufFile&, GgufWriter&)>& edit,
                 const std::string& drop_tensor = "") {
  auto f = GgufFile::open((kGolden / model).string());
  GgufWriter w;
  for (const GgufKV& kv : f->metadata())
    if (kv.key != "general.alignment") w.set_value(kv.key, kv.value);
  for (const GgufTensor& t : f->tensors()) {
    if (t.name == drop_tensor) continue;
    const uint8_t* d = f->tensor_data(t);
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::vector<uint8_t>(d, d + t.nbytes));
  }
  edit(*f, w);
  fs::path p = tmp(out_name);
  w.write(p.string());
  return p;
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kGolden / "qwen3moe-f32.gguf")) GTEST_SKIP() << "../shared/golden is absent";
  }
};

TEST(Cli, MissingFile) {
  expect_error(run("run -m /nonexistent.gguf -p hi -n 1"), {"/nonexistent.gguf", "cannot open"});
}

TEST(Cli, WrongMagic) {
  fs::path p = tmp("magic.gguf");
  std::ofstream(p) << "GGML this is not gguf at all, just text of some length";
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"not a GGUF file", "magic"});
}

TEST_F(CliErrors, TruncatedModel) {
  fs::path p = tmp("trunc.gguf");
  fs::copy_file(kGolden / "qwen3moe-f32.gguf", p, fs::copy_options::overwrite_existing);
  fs::resize_file(p, fs::file_size(p) - 1000);
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"outside the file", "truncated"});
  fs::resize_file(p, 100);
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"truncated"});
}

TEST_F(CliErrors, UnsupportedArchitecture) {
  fs::path p = rewrite("qwen3moe-f32.gguf", "arch.gguf",
                       [](const GgufFile&, GgufWriter& w) { w.set_string("general.architecture", "gpt2"); });
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"architecture 'gpt2'", "qwen3moe"});
}

TEST_F(CliErrors, MissingTensor) {
  fs::path p = rewrite("qwen3moe-f32.gguf", "missing.gguf", [](const GgufFile&, GgufWriter&) {},
                       "blk.1.ffn_up_exps.weight");
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"blk.1.ffn_up_exps.weight", "missing"});
}

TEST_F(CliErrors, WrongShape) {
  fs::path p = rewrite("qwen3moe-f32.gguf", "shape.gguf", [](const GgufFile&, GgufWriter& w) {
    w.set_u32("qwen3moe.expert_count", 16);
  });
  expect_error(run("run -m " + p.string() + " -p hi -n 1"), {"ffn_gate_inp", "expected dimension 1 to be 16"});
}

TEST_F(CliErrors, PromptLongerThanContext) {
  std::string prompt(400, 'a');
  for (size_t i = 1; i < prompt.size(); i += 2) prompt[i] = ' ';
  expect_error(run("run -m " + (kGolden / "qwen3moe-f32.gguf").string() + " -c 16 -n 4 -p '" + prompt + "'"),
               {"prompt", "context holds 16"});
}

TEST_F(CliErrors, GeneratesAndSummarises) {
  Result r = run("run -m " + (kGolden / "stories260K.gguf").string() + " -p 'Once upon a time' -n 20 --temp 0 -t 1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("generation 20 tok"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("peak RSS"), std::string::npos) << r.err;
}

TEST_F(CliErrors, TokenizeAndInspect) {
  Result r = run("tokenize -m " + (kGolden / "stories260K.gguf").string() + " -p 'Once upon a time'");
  EXPECT_EQ(r.status, 0) << r.err;
  // The golden case "short" is "Lily and Tom went to"; here we only check the
  // BOS and the shape of the output.
  EXPECT_EQ(r.out.rfind("[1, ", 0), 0u) << r.out;
  r = run("inspect " + (kGolden / "olmoe-q8_0.gguf").string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("16 experts x 25.50 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weight bytes read per generated token"), std::string::npos) << r.out;
}

// The frontier families' files with inconsistent metadata or a tensor their
// metadata requires left out: one error naming the key or tensor.
TEST_F(CliErrors, FrontierFamiliesInconsistentRanksAndMissingTensors) {
  if (!fs::exists(kGolden / "deepseek-v3-f32.gguf")) GTEST_SKIP() << "no deepseek golden";
  struct Case {
    const char* model;
    const char* out;
    std::function<void(const GgufFile&, GgufWriter&)> edit;
    const char* drop;
    std::vector<const char*> want;
  };
  const auto none = [](const GgufFile&, GgufWriter&) {};
  const Case cases[] = {
      {"deepseek-v3-f32.gguf", "kvlora.gguf",
       [](const GgufFile&, GgufWriter& w) { w.set_u32("deepseek2.attention.kv_lora_rank", 4096); }, "",
       {"kv_lora_rank", "4096", "hidden size"}},
      {"deepseek-v3-f32.gguf", "groups_many.gguf",
       [](const GgufFile&, GgufWriter& w) { w.set_u32("deepseek2.expert_group_count", 32); }, "",
       {"expert_group_count", "32"}},
      {"deepseek-v3-f32.gguf", "groups_divide.gguf",
       [](const GgufFile&, GgufWriter& w) { w.set_u32("deepseek2.expert_group_count", 3); }, "",
       {"expert_group_count", "do not divide"}},
      {"deepseek-v3-f32.gguf", "ropedim.gguf",
       [](const GgufFile&, GgufWriter& w) { w.set_u32("deepseek2.rope.dimension_count", 64); }, "",
       {"rope.dimension_count", "64"}},
      {"glm4moe-f32.gguf", "glm_rope.gguf",
       [](const GgufFile&, GgufWriter& w) { w.set_u32("glm4moe.rope.dimension_count", 64); }, "",
       {"rope.dimension_count", "head dim 32"}},
      {"deepseek-v3-f32.gguf", "nokva.gguf", none, "blk.1.attn_kv_a_mqa.weight",
       {"blk.1.attn_kv_a_mqa.weight", "missing"}},
      {"deepseek-v2-lite-f32.gguf", "nokb.gguf", none, "blk.2.attn_k_b.weight", {"blk.2.attn_k_b.weight", "missing"}},
      {"gptoss-f32.gguf", "nosinks.gguf", none, "blk.0.attn_sinks.weight", {"blk.0.attn_sinks.weight", "missing"}},
      {"gptoss-f32.gguf", "noexpbias.gguf", none, "blk.2.ffn_down_exps.bias", {"blk.2.ffn_down_exps.bias", "missing"}},
      {"glm4moe-f32.gguf", "nobias.gguf", none, "blk.1.exp_probs_b.bias", {"blk.1.exp_probs_b.bias", "missing"}},
      {"glm4moe-f32.gguf", "nodense.gguf", none, "blk.0.ffn_up.weight", {"blk.0.ffn_up.weight", "missing"}},
      {"deepseek-moe-f32.gguf", "noshexp.gguf", none, "blk.1.ffn_down_shexp.weight",
       {"blk.1.ffn_down_shexp.weight", "missing"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.out);
    fs::path p = rewrite(c.model, c.out, c.edit, c.drop);
    expect_error(run("run -m " + p.string() + " -p hi -n 1"), c.want);
  }
}

// Every frontier family generates through `colibri run` with its experts
// streamed under a budget that holds a few slots a layer.
TEST_F(CliErrors, FrontierFamiliesGenerateStreamed) {
  for (const char* m : {"deepseek-v3-q8_0", "deepseek-v2-lite-f32", "deepseek-moe-f32", "gptoss-f32", "glm4moe-q8_0"}) {
    const fs::path f = kGolden / (std::string(m) + ".gguf");
    if (!fs::exists(f)) continue;
    Result r = run("run -m " + f.string() + " -c 256 --mem 12M -p 'The old lighthouse keeper' -n 16 --temp 0 -t 2");
    EXPECT_EQ(r.status, 0) << m << ": " << r.err;
    EXPECT_NE(r.err.find("generation 16 tok"), std::string::npos) << m << ": " << r.err;
    EXPECT_NE(r.err.find("MB/token from disk"), std::string::npos) << m << ": " << r.err;
  }
}

}  // namespace
}  // namespace colibri
