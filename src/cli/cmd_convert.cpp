// colibri convert: a Hugging Face model folder (safetensors) -> one GGUF file.
#include <cstdio>
#include <map>
#include <memory>

#include "base/error.h"
#include "base/progress.h"
#include "base/sys.h"
#include "cli/commands.h"
#include "convert/hf_convert.h"
#include "moe/placement.h"

namespace colibri::cli {

namespace {

struct ConvertArgs {
  std::string folder;
  std::string out;
  std::string type = "auto";
  std::string name;
  int n_threads = 0;
  bool quiet = false;
};

int convert(const ConvertArgs& a) {
  static const std::map<std::string, DType> kTypes = {
      {"f32", DType::F32},      {"f16", DType::F16},   {"bf16", DType::BF16},
      {"q8_0", DType::Q8_0},    {"q4_0", DType::Q4_0}, {"q4_1", DType::Q4_1},
      {"q5_0", DType::Q5_0},    {"q5_1", DType::Q5_1}};
  HfConvertOptions o;
  o.folder = a.folder;
  o.out = a.out;
  o.name = a.name;
  o.n_threads = a.n_threads;
  // The K-quant and IQ4 file types as llama-quantize mixes them.
  static const std::map<std::string, QuantMix> kMixes = {
      {"q2_k", QuantMix::kQ2_K},     {"q3_k_m", QuantMix::kQ3_K_M}, {"q4_k_m", QuantMix::kQ4_K_M},
      {"q5_k_m", QuantMix::kQ5_K_M}, {"q6_k", QuantMix::kQ6_K},     {"iq4_nl", QuantMix::kIQ4_NL},
      {"iq4_xs", QuantMix::kIQ4_XS}};
  if (a.type != "auto") {
    auto it = kTypes.find(a.type);
    auto mix = kMixes.find(a.type);
    CLB_CHECK(it != kTypes.end() || mix != kMixes.end(),
              "unknown type '%s' (known: auto, f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
              "q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, iq4_nl, iq4_xs)",
              a.type.c_str());
    if (it != kTypes.end()) o.type = it->second;
    else o.mix = mix->second;
  }
  const double t0 = now_seconds();
  std::unique_ptr<Progress> progress;
  const ProgressStyle style = progress_style(stderr, a.quiet);
  o.progress = [&](uint64_t done, uint64_t total) {
    if (!progress) progress = std::make_unique<Progress>("writing " + a.out, total, style);
    progress->update(done);
  };
  const HfConvertReport r = convert_hf_folder(o);
  if (progress) progress->finish();
  std::printf("%s: %s -> %s, %zu tensors, %s of weights (%.1f s)\n", a.out.c_str(),
              r.hf_arch.c_str(), r.gguf_arch.c_str(), r.n_tensors,
              format_size(r.data_bytes).c_str(), now_seconds() - t0);
  return 0;
}

}  // namespace

Runner add_convert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* c = app.add_subcommand("convert",
                                   "convert a Hugging Face model folder (config.json, "
                                   "*.safetensors, tokenizer.json or tiktoken.model) to GGUF");
  c->add_option("folder", a->folder, "the model folder")->required();
  c->add_option("-o,--output", a->out, "output GGUF file")->required();
  c->add_option(
       "--type", a->type,
       "type of the matrices: auto (as stored: f32, f16 or bf16), f32, f16, bf16, q8_0, "
       "q4_0, q4_1, q5_0, q5_1 (every matrix in that type); q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, "
       "iq4_nl, "
       "iq4_xs (each matrix in the type llama-quantize gives it in that file type, the same "
       "bytes); vectors and routers stay f32")
      ->capture_default_str();
  c->add_option("--name", a->name, "general.name (default: the folder's name)");
  c->add_option("-t,--threads", a->n_threads, "threads converting rows (0: all cores)")
      ->capture_default_str();
  c->add_flag("-q,--quiet", a->quiet, "no progress line");
  return [a] { return convert(*a); };
}

COLIBRI_COMMAND(add_convert);

}  // namespace colibri::cli
