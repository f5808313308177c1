// colibri run: generate text from a prompt, streaming tokens as they come.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "base/sys.h"
#include "base/utf8.h"
#include "cli/commands.h"
#include "cli/load_progress.h"
#include "engine/generate.h"
#include "moe/routing_log.h"

namespace colibri::cli {

namespace {

struct RunArgs {
  EngineOptions engine;
  bool quiet = false;  // no progress on stderr
  std::string prompt;
  GenerateOptions gen;
  bool verbose = false;
  bool greedy = false;
  std::string routing_out;  // routing log path, or empty
  bool timeline = false;    // print where the first forward step's time went
};

void print_routing(const Engine& e, int32_t token, const RoutingTrace& t) {
  const Tokenizer& tok = e.tokenizer();
  std::fprintf(stderr, "\n[token %d '%s']", token, utf8_sanitize(tok.token_to_piece(token)).c_str());
  for (int l = 0; l < t.n_layer; ++l) {
    const int32_t* ids = t.experts(0, l);
    if (ids[0] < 0) continue;
    std::fprintf(stderr, " L%d:", l);
    const float* w = t.expert_weights(0, l);
    for (int j = 0; j < t.k; ++j) std::fprintf(stderr, "%s%d(%.3f)", j ? "," : "", ids[j], w[j]);
  }
  std::fprintf(stderr, "\n");
}

int run(RunArgs& a) {
  if (a.greedy) a.gen.sampling.temperature = 0;
  const double t_start = now_seconds();
  Engine engine(a.engine);
  const double load_s = now_seconds() - t_start;
  double first_token_s = 0;
  a.gen.trace_routing = (a.verbose || !a.routing_out.empty()) && engine.config().is_moe();
  std::unique_ptr<FILE, int (*)(FILE*)> routing_log(nullptr, &std::fclose);
  if (!a.routing_out.empty()) {
    if (!engine.config().is_moe()) fail("--routing-out: '%s' has no routed experts", a.engine.model_path.c_str());
    routing_log.reset(std::fopen(a.routing_out.c_str(), "w"));
    if (!routing_log) fail("cannot write routing log '%s': %s", a.routing_out.c_str(), std::strerror(errno));
    std::fputs(routing_log_header(engine.config().n_layer, engine.config().n_expert).c_str(), routing_log.get());
  }
  const Plan& plan = engine.plan();
  std::fprintf(stderr, "memory budget %s (%s): dense %s resident, %s\n", format_size(plan.budget).c_str(),
               plan.budget_source.c_str(), format_size(plan.dense_bytes).c_str(),
               plan.all_experts_fit ? "all experts resident"
                                    : strprintf("%d expert slots + %d pinned, experts streamed from disk",
                                                plan.n_slots, plan.n_pinned).c_str());
  if (a.verbose) std::fprintf(stderr, "%s", plan.describe().c_str());
  // Fallbacks (io_uring refused, O_DIRECT unsupported) explain the speed that
  // follows, so they show without --verbose (describe() ends with them).
  if (!a.verbose && !plan.notes.empty()) std::fprintf(stderr, "note: %s\n", plan.notes.c_str());
  if (a.verbose) std::fprintf(stderr, "%s\n", engine.config().describe().c_str());
  // The dense weights load while the prompt is evaluated; the prompt is
  // echoed with the first token, once the progress line has gone.
  LoadProgress loading(engine.store(), progress_style(stderr, a.quiet));
  StepTimeline timeline;
  if (a.timeline) engine.transformer().set_timeline(&timeline);
  bool echoed = false;
  GenerateResult r = generate(engine, a.prompt, a.gen, [&](const GenerateStep& s) {
    if (!echoed) {
      loading.stop();
      std::fputs(a.prompt.c_str(), stdout);
      echoed = true;
    }
    if (first_token_s == 0 && s.token >= 0) first_token_s = now_seconds() - t_start;
    std::fwrite(s.text.data(), 1, s.text.size(), stdout);
    std::fflush(stdout);
    if (s.routing && a.verbose) print_routing(engine, s.token, *s.routing);
    if (s.routing && routing_log)
      std::fputs(routing_log_line(s.routing->experts(0, 0), s.routing->n_layer, s.routing->k).c_str(),
                 routing_log.get());
    return true;
  });
  loading.stop();
  if (!echoed) std::fputs(a.prompt.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (routing_log && std::fclose(routing_log.release()) != 0)
    fail("writing routing log '%s': %s", a.routing_out.c_str(), std::strerror(errno));
  std::fprintf(stderr, "load %.2f s, first token %.2f s after start\n", load_s, first_token_s);
  if (a.timeline && timeline.n_tokens > 0)
    std::fprintf(stderr, "first step (times from the start):\n%s", timeline.format(t_start).c_str());
  std::fprintf(stderr, "%s\n", format_summary(r, engine.stats()).c_str());
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand("run", "generate text from a prompt");
  add_engine_flags(c, &a->engine);
  c->add_option("-p,--prompt", a->prompt, "prompt text");
  c->add_option("-n,--n-predict", a->gen.n_predict, "tokens to generate (-1: until end of text)")
      ->capture_default_str();
  add_sampling_flags(c, &a->gen.sampling);
  c->add_flag("--greedy", a->greedy, "greedy decoding (same as --temp 0)");
  c->add_flag("--ignore-eos", [a](int64_t) { a->gen.stop_at_eog = false; },
              "keep generating past end-of-text tokens");
  c->add_flag("--parse-special", a->gen.parse_special,
              "recognise special-token text such as <|im_start|> in the prompt");
  c->add_option("--routing-out", a->routing_out,
                 "write the experts each generated token used, one line per token (replay it with "
                 "colibri plan --routing-trace)")
      ->type_name("FILE");
  c->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  c->add_flag("-v,--verbose", a->verbose,
              "print, per generated token, the experts each layer routed to and their weights");
  c->add_flag("--timeline", a->timeline,
              "print where the first forward step's time went: per layer, waits for dense weights and "
              "experts, compute");
  return [a] { return run(*a); };
}

COLIBRI_COMMAND(add_run);

}  // namespace colibri::cli
