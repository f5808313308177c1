// colibri plan: where a model's parts would live under a memory budget, and
// the disk reads per token to expect.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "base/progress.h"
#include "cli/commands.h"
#include "cli/store_flags.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "moe/routing_log.h"

namespace colibri::cli {

namespace {

struct PlanArgs {
  std::string model;
  int n_ctx = 4096, n_batch = 512, n_seq = 1, n_threads = 0;
  DType kv_type = DType::F16;
  ExpertStoreOptions store;
  std::string routing_trace;  // routing log to replay, or empty
  bool quiet = false;         // no progress on stderr
};

// What the plan's cache would serve on a recorded workload.
void replay(const Plan& p, const ModelConfig& cfg, const std::string& path, bool quiet) {
  const ProgressStyle style = progress_style(stderr, quiet);
  RoutingLog log;
  {
    std::error_code size_error;  // an unreadable size: no percent, read_routing_log says why
    const uint64_t bytes = std::filesystem::file_size(path, size_error);
    Progress reading("reading " + path, size_error ? 0 : bytes, style);
    log = read_routing_log(path, [&](uint64_t done, uint64_t) { reading.update(done); });
  }
  if (log.n_layer != cfg.n_layer || log.n_expert != cfg.n_expert)
    fail("routing log '%s' is for %d layers x %d experts; the model has %d x %d", path.c_str(), log.n_layer,
         log.n_expert, cfg.n_layer, cfg.n_expert);
  const double per_token = static_cast<double>(log.keys.size()) / static_cast<double>(std::max<int64_t>(log.n_tokens, 1));
  const double per_use = static_cast<double>(p.expert_bytes) / (static_cast<double>(p.n_moe_layers) * p.n_expert);
  std::printf("routing trace %s: %lld tokens, %.0f expert uses per token\n", path.c_str(),
              static_cast<long long>(log.n_tokens), per_token);
  if (p.all_experts_fit) {
    std::printf("  every expert is resident: all uses served from memory\n");
    return;
  }
  Replay r;
  {
    std::unique_ptr<Progress> replaying;  // sized by the first report
    r = replay_policies(log, p.n_slots, p.pinned, p.history, [&](uint64_t done, uint64_t total) {
      if (!replaying)
        replaying = std::make_unique<Progress>("replaying", total, style, stderr, ProgressUnit::kCount, "uses");
      replaying->update(done);
    });
  }
  for (const PolicyReplay& row : r.rows)
    std::printf("  %-15s %5.1f%% of expert uses from memory, %s read per token; second half %5.1f%%\n",
                row.name.c_str(), 100.0 * row.served,
                format_size((1.0 - row.served) * per_token * per_use).c_str(), 100.0 * row.late);
  std::printf("  (the last two know the whole trace in advance; no policy serves more than \"optimal\",\n"
              "   even one that fills the cache before the first token)\n");
  std::printf("  learned: the experts used most in the first half, held, serve %.1f%% of the second half's\n"
              "  uses (against its own best fixed set above: the rest of that bound is hindsight)\n",
              100.0 * r.learned_late);
}

int plan(const PlanArgs& a) {
  auto f = GgufFile::open(a.model);
  ModelConfig cfg = ModelConfig::from_gguf(*f);
  ModelWeights w = bind_weights(*f, cfg);
  const int n_ctx = a.n_ctx > 0 ? a.n_ctx : cfg.n_ctx_train;
  const int threads = a.n_threads > 0 ? a.n_threads
                                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const uint64_t scratch = scratch_bytes_estimate(cfg, n_ctx, a.n_batch, threads);
  KVCache::check_type(cfg, a.kv_type);
  const uint64_t kv_full = kv_cache_bytes(cfg, n_ctx, std::max(a.n_seq, 1), a.kv_type);
  Plan p = make_plan(a.store, *f, cfg, w, scratch, kv_full, a.kv_type);
  std::printf("model: %s (%s)\n%s\n", a.model.c_str(),
              format_size(static_cast<double>(f->bytes_on_disk())).c_str(), cfg.describe().c_str());
  std::printf("KV cache (%s) and scratch for %d tokens of context, batches of %d, %d threads\n",
              dtype_name(a.kv_type), n_ctx, a.n_batch, threads);
  std::fputs(p.describe().c_str(), stdout);
  if (!a.routing_trace.empty()) replay(p, cfg, a.routing_trace, a.quiet);
  return 0;
}

}  // namespace

Runner add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand(
      "plan", "show where a model's weights would live under a memory budget (--mem)");
  // The engine's sizing flags, without --precision: a plan only sizes.
  c->add_option("-m,--model", a->model, "model file (GGUF)")->required();
  c->add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (0: the model's)")->capture_default_str();
  c->add_option("-b,--batch-size", a->n_batch, "tokens per forward step in prefill")->capture_default_str();
  c->add_option("--parallel", a->n_seq, "sequences decoded together")->capture_default_str();
  c->add_option("-t,--threads", a->n_threads, "threads (0: all cores)")->capture_default_str();
  add_kv_type_flag(c, &a->kv_type);
  add_store_flags(c, &a->store);
  c->add_option("--routing-trace", a->routing_trace,
                "replay a routing log (colibri run --routing-out) through this plan's expert cache")
      ->type_name("FILE");
  c->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  return [a] { return plan(*a); };
}

COLIBRI_COMMAND(add_plan);

}  // namespace colibri::cli
