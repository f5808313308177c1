// colibri synth: a random-weight model of a real model's exact shape, to
// benchmark without downloading weights (model/synth.h says what is in it).
#include <cstdio>
#include <memory>

#include "base/error.h"
#include "base/progress.h"
#include "base/sys.h"
#include "cli/commands.h"
#include "model/synth.h"

namespace colibri::cli {

namespace {

struct SynthArgs {
  std::string shape;
  std::string type = "q4_0";
  std::string vocab;
  std::string out;
  uint64_t seed = 1;
  std::string routing;  // empty: natural, or zipf when --router-skew is given
  float router_skew = 1;
  bool router_skew_given = false;
  int n_layers = 0;
  bool no_data = false;
  int n_threads = 0;
  bool quiet = false;
};

int synth(const SynthArgs& a) {
  const SynthShape* shape = find_synth_shape(a.shape);
  CLB_CHECK(shape != nullptr, "unknown shape '%s' (known: %s)", a.shape.c_str(), synth_shape_names().c_str());
  std::optional<SynthType> type = parse_synth_type(a.type);
  CLB_CHECK(type.has_value(),
            "unknown type '%s' (known: f32, f16, q8_0, q4_0, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, "
            "mxfp4_moe, iq4_nl, iq4_xs, iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq2_m, iq3_xxs)",
            a.type.c_str());
  // --router-skew alone asks for Zipf routing, as it did before --routing.
  const std::string routing_name = !a.routing.empty() ? a.routing : a.router_skew_given ? "zipf" : "natural";
  std::optional<SynthRouting> routing = parse_synth_routing(routing_name);
  CLB_CHECK(routing.has_value(), "unknown routing '%s' (known: natural, uniform, zipf)", routing_name.c_str());
  CLB_CHECK(!a.router_skew_given || *routing == SynthRouting::kZipf,
            "--router-skew sets the Zipf exponent; it goes with --routing zipf, not %s", routing_name.c_str());
  SynthOptions o;
  o.shape = *shape;
  o.type = *type;
  o.seed = a.seed;
  o.routing = *routing;
  o.router_skew = a.router_skew;
  o.n_layers = a.n_layers;
  o.no_data = a.no_data;
  o.vocab_path = a.vocab;
  o.n_threads = a.n_threads;
  const double t0 = now_seconds();
  // Sized on the first call: the total is known once the tensors are planned.
  std::unique_ptr<Progress> progress;
  const ProgressStyle style = progress_style(stderr, a.quiet);
  o.progress = [&](uint64_t done, uint64_t total) {
    if (!progress) progress = std::make_unique<Progress>("writing " + a.out, total, style);
    progress->update(done);
  };
  SynthSummary r = write_synth_model(o, a.out);
  if (progress) progress->finish();
  std::string layers = a.n_layers > 0 ? strprintf(" (first %d of %d layers)", a.n_layers, shape->n_layer) : "";
  std::string how = *routing == SynthRouting::kZipf ? strprintf("zipf routing, skew %g", a.router_skew)
                                                    : strprintf("%s routing", synth_routing_name(*routing));
  std::printf("%s: %s%s %s, %d tensors, %.3f B parameters, %.2f GiB%s, seed %llu, %s (%.1f s)\n", a.out.c_str(),
              shape->name, layers.c_str(), synth_type_name(*type), r.n_tensors, static_cast<double>(r.n_params) / 1e9,
              static_cast<double>(r.file_bytes) / (1 << 30), a.no_data ? " (no data: a sparse file)" : "",
              static_cast<unsigned long long>(a.seed), how.c_str(), now_seconds() - t0);
  std::printf("weights:");
  for (const auto& [name, n] : r.params_by_type)
    std::printf(" %s %.1f%%", name.c_str(), 100.0 * static_cast<double>(n) / static_cast<double>(r.n_params));
  std::printf("\nvocabulary: %s\n", r.vocab_note.c_str());
  return 0;
}

}  // namespace

Runner add_synth(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* c = app.add_subcommand("synth", "write a random-weight model of a real model's shape");
  c->add_option("--shape", a->shape, "model shape: " + synth_shape_names())->required();
  c->add_option("--type", a->type,
                "file type as llama-quantize names it: f32, f16, q8_0, q4_0, q2_k, q3_k_m, q4_k_m, "
                "q5_k_m, q6_k, "
                "mxfp4_moe (routed experts "
                "in MXFP4, the rest Q8_0), iq4_nl, iq4_xs, iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, "
                "iq2_m, iq3_xxs "
                "(the types llama-quantize gives each tensor with an importance matrix)")
      ->capture_default_str();
  c->add_option("--vocab", a->vocab, "vocab GGUF whose tokenizer is copied (cut or padded to the shape's size)")
      ->required();
  c->add_option("-o,--output", a->out, "output file")->required();
  c->add_option("-s,--seed", a->seed, "random seed (the same seed writes the same bytes)")->capture_default_str();
  c->add_option("--routing", a->routing,
                "natural (default): routers and biases as drawn, reading a massive activation in the "
                "embeddings, so routing is uneven as a trained model's is; uniform: every expert about equally popular, the worst case for a cache; zipf: "
                "expert popularity ~(rank+1)^-S, S from --router-skew");
  c->add_option("--router-skew", a->router_skew, "Zipf exponent S of --routing zipf (given alone, selects it)")
      ->capture_default_str()
      ->each([a](const std::string&) { a->router_skew_given = true; });
  c->add_option("--layers", a->n_layers,
                "write only the first N layers (block_count N, every other key as the real model's), to measure "
                "a slice of a model too large for the disk")
      ->check(CLI::PositiveNumber);
  c->add_flag("--no-data", a->no_data,
              "write the metadata and tensor table and leave the data a hole (a sparse file of the full size), "
              "for inspect and the loader");
  c->add_option("-t,--threads", a->n_threads, "threads generating weights (0: all cores)")->capture_default_str();
  c->add_flag("-q,--quiet", a->quiet, "no progress line");
  return [a] { return synth(*a); };
}

COLIBRI_COMMAND(add_synth);

}  // namespace colibri::cli
