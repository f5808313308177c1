// colibri: run | tokenize | inspect | ...
#include <cstdio>
#include <map>
#include <vector>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/store_flags.h"

namespace colibri::cli {

void add_kv_type_flag(CLI::App* app, DType* t) {
  static std::map<std::string, DType> kTypes = {
      {"f16", DType::F16}, {"f32", DType::F32}, {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0}};
  app->add_option("--kv-type", *t,
                  "KV cache storage: f16 (as llama.cpp), f32 (the exact products), q8_0 "
                  "(blocks of 32 int8 and a scale: 53% of f16's bytes, so long contexts "
                  "decode faster) or q4_0 (blocks of 32 4-bit values and a scale: 28% of "
                  "f16's bytes, less exact)")
      ->transform(CLI::CheckedTransformer(kTypes, CLI::ignore_case))
      ->default_str("f16");
}

void add_engine_flags(CLI::App* app, EngineOptions* o) {
  app->add_option("-m,--model", o->model_path, "model file (GGUF)")->required();
  app->add_option("-c,--ctx-size", o->n_ctx, "context size in tokens (0: the model's)")
      ->capture_default_str();
  app->add_option("-t,--threads", o->n_threads, "threads (0: all cores)")->capture_default_str();
  app->add_option("-b,--batch-size", o->n_batch, "tokens per forward step in prefill")
      ->capture_default_str();
  static std::map<std::string, Precision> kPrecisions = {{"native", Precision::kNative},
                                                         {"reference", Precision::kReference}};
  app->add_option("--precision", o->precision,
                  "native: activations quantized to the weight's dot type (as llama.cpp); "
                  "reference: weights dequantized to F32")
      ->transform(CLI::CheckedTransformer(kPrecisions, CLI::ignore_case))
      ->default_str("native");
  add_kv_type_flag(app, &o->kv_type);
  add_store_flags(app, &o->store);
  // The kernels are chosen once for the process; this overrides the choice
  // (scalar: the reference kernels, to compare or to rule the SIMD out).
  static std::map<std::string, Isa> kIsas = {
      {"scalar", Isa::kScalar}, {"avx2", Isa::kAvx2},           {"avx512", Isa::kAvx512},
      {"neon", Isa::kNeon},     {"neon-dotprod", Isa::kNeonDot}, {"neon-i8mm", Isa::kNeonI8mm}};
  app->add_option_function<Isa>(
         "--isa", [](const Isa& isa) { set_kernel_isa(isa); },
         "kernels to use: scalar, avx2, avx512, neon, neon-dotprod, neon-i8mm (default: the "
         "best this CPU has)")
      ->transform(CLI::CheckedTransformer(kIsas, CLI::ignore_case));
}

void add_sampling_flags(CLI::App* c, SamplerParams* s) {
  c->add_option("--temp", s->temperature, "temperature (0: greedy)")->capture_default_str();
  c->add_option("--top-k", s->top_k, "top-k (0: off)")->capture_default_str();
  c->add_option("--top-p", s->top_p, "top-p (1: off)")->capture_default_str();
  c->add_option("--min-p", s->min_p, "min-p (0: off)")->capture_default_str();
  c->add_option("--repeat-penalty", s->repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str();
  c->add_option("--repeat-last-n", s->repeat_last_n, "tokens the penalty looks back over")
      ->capture_default_str();
  c->add_option("-s,--seed", s->seed, "random seed")->capture_default_str();
}

std::vector<CommandFactory>& command_registry() {
  static std::vector<CommandFactory> r;
  return r;
}

bool register_command(CommandFactory f) {
  command_registry().push_back(f);
  return true;
}

}  // namespace colibri::cli

int main(int argc, char** argv) {
  using namespace colibri;
  CLI::App app{"colibri: Mixture-of-Experts inference on machines too small to hold the model"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "colibri 0.1.0");
  std::vector<std::pair<CLI::App*, cli::Runner>> cmds;
  for (cli::CommandFactory f : cli::command_registry()) {
    cli::Runner r = f(app);
    // get_subcommands() without a filter lists only the parsed ones.
    auto all = app.get_subcommands([](const CLI::App*) { return true; });
    cmds.emplace_back(all.back(), std::move(r));
  }
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
    for (auto& [sub, run] : cmds)
      if (sub->parsed()) return run();
  } catch (const Error& e) {
    std::fprintf(stderr, "colibri: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "colibri: error: out of memory\n");
    return 1;
  }
  return 0;
}
