// The colibri binary on bad input: one clear error line naming what and
// where, and a non-zero exit; never a crash or a hang.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

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
  static const struct Dir {
    fs::path path = fs::temp_directory_path() / ("colibri_cli_" + std::to_string(::getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } dir;
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
void expect_error(const Result& r, std::initializer_list<const char*> fragments) {
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

}  // namespace
}  // namespace colibri
