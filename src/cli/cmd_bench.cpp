// colibri bench: prompt and generation speed, and generation against the
// memory-bandwidth roofline.
//
// Decoding one token reads every dense weight once and k expert slabs per MoE
// layer (the same count as `colibri inspect`), so a machine that streams B
// bytes/s cannot decode faster than B / bytes_per_token. The bandwidth is this
// machine's own: a multi-threaded streaming read of a buffer far larger than
// the last-level cache, best of several passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/error.h"
#include "base/sys.h"
#include "cli/commands.h"
#include "engine/bench.h"
#include "tensor/ops.h"

namespace colibri::cli {

namespace {

struct BenchArgs {
  EngineOptions engine;
  int n_prompt = 512;
  int n_gen = 128;
  int repeats = 3;
  int probe_mib = 2048;
  double roofline_gb_s = 0;
  int profile_tokens = 0;
  bool probe_only = false;
  bool probe_around = true;
  uint64_t seed = 1;
  bool json = false;
  std::string json_path;
};

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {med, v.front(), v.back()};
}

int32_t argmax(const float* x, int n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

// The prompt's jobs by kind: how long each takes and how fast its weight
// products multiply-accumulate, against the int8 peak.
void print_prompt_profile(const DecodeProfile& p, size_t n_jobs, size_t n_prompt,
                          double int8_peak) {
  double macs = 0;
  for (const JobKind& k : p.kinds) macs += k.macs;
  std::printf(
      "\nprofile of the %zu-token prompt: %.3f ms, %zu jobs, %.3f ms in jobs, %.3f ms between them "
      "(the calling thread alone, %.1f%%); products %.1f GMAC/s over the prompt, %.1f%% of the "
      "int8 peak (%.1f GMAC/s)\n",
      n_prompt, p.step_s * 1e3, n_jobs, p.in_jobs_s * 1e3, p.gaps_s * 1e3,
      100.0 * p.gaps_s / p.step_s, macs / p.step_s / 1e9, 100.0 * macs / p.step_s / int8_peak,
      int8_peak / 1e9);
  std::printf(
      "| job | jobs | ms each | GMAC each | GMAC/s | of the peak | of the prompt | idle at end | "
      "gap before, us |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const JobKind& k : p.kinds) {
    const double rate = k.seconds > 0 ? k.macs / k.seconds : 0.0;
    std::printf("| %s | %.0f | %.3f | %.3f | %.1f | %.1f%% | %.1f%% | %.1f%% | %.1f |\n",
                k.what.c_str(), k.jobs, 1e3 * k.seconds / k.jobs, k.macs / k.jobs / 1e9, rate / 1e9,
                100.0 * rate / int8_peak, 100.0 * k.seconds / p.step_s,
                k.seconds > 0 ? 100.0 * k.idle_s / k.seconds : 0.0, 1e6 * k.gap_before_s / k.jobs);
  }
}

// --profile: the prompt, then n decode steps after it, with every parallel
// job timed and summed by job; then the decode steps' jobs replayed with
// loads only.
void print_profile(Engine& e, const std::vector<int32_t>& prompt, int n, int threads,
                   double probe_b_s, double int8_peak) {
  const ModelConfig& c = e.config();
  JobTrace trace;
  // A prompt step runs the experts in chunks: up to two jobs per expert.
  const size_t prompt_jobs = static_cast<size_t>(c.n_layer) * (2 * c.n_expert + 16) + 32;
  const size_t batch = static_cast<size_t>(std::max(1, e.options().n_batch));
  trace.jobs.resize(std::max(static_cast<size_t>(n) * (12 * c.n_layer + 32),
                             prompt_jobs * ((prompt.size() + batch - 1) / batch)));
  e.transformer().set_job_trace(&trace);
  double t0 = now_seconds();
  const float* logits = e.eval_prompt(prompt, 0, 0);
  const double prompt_wall = now_seconds() - t0;
  e.transformer().set_job_trace(nullptr);
  CLB_CHECK(trace.dropped == 0, "profile: %zu jobs of the prompt past the trace's room",
            trace.dropped);
  print_prompt_profile(summarize_trace(trace, 1, prompt_wall, threads), trace.n, prompt.size(),
                       int8_peak);
  trace.n = 0;
  int32_t tok = argmax(logits, c.n_vocab);
  const int pos0 = static_cast<int>(prompt.size());
  std::vector<size_t> ends;
  e.transformer().set_job_trace(&trace);
  t0 = now_seconds();
  for (int i = 0; i < n; ++i) {
    logits = e.eval_token(tok, 0, pos0 + i);
    tok = argmax(logits, c.n_vocab);
    ends.push_back(trace.n);
  }
  const double wall = now_seconds() - t0;
  e.transformer().set_job_trace(nullptr);
  CLB_CHECK(trace.dropped == 0, "profile: %zu jobs past the trace's room", trace.dropped);
  DecodeProfile p = summarize_trace(trace, n, wall, threads);
  // The loads-only replay: the jobs of up to 8 tokens after the first.
  const int first = n > 1 ? 1 : 0, last = std::min(n, first + 8);
  const size_t j0 = first ? ends[first - 1] : 0;
  replay_loads_only(trace, j0, ends[last - 1] - j0, threads, p);

  const double per_tok = p.replay_bytes_per_token;
  std::printf(
      "\nprofile of %d decode steps after the %zu-token prompt: %.3f ms a step, %.1f jobs, %.3f ms "
      "in "
      "jobs, %.3f ms between them (the calling thread alone, %.1f%%)\n",
      n, prompt.size(), p.step_s * 1e3, p.jobs_per_token, p.in_jobs_s * 1e3, p.gaps_s * 1e3,
      100.0 * p.gaps_s / p.step_s);
  std::printf(
      "| job | per step | us each | MB each | GB/s | of the step | idle at end | gap before, us | "
      "loads-only "
      "GB/s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const JobKind& k : p.kinds) {
    const double per = k.jobs / n;
    std::printf("| %s | %.1f | %.1f | %.3f | %.1f | %.1f%% | %.1f%% | %.1f | %.1f |\n",
                k.what.c_str(), per, 1e6 * k.seconds / k.jobs, k.bytes / k.jobs / 1e6,
                k.seconds > 0 ? k.bytes / k.seconds / 1e9 : 0.0, 100.0 * k.seconds / n / p.step_s,
                k.seconds > 0 ? 100.0 * k.idle_s / k.seconds : 0.0, 1e6 * k.gap_before_s / k.jobs,
                k.loads_only_gb_s);
  }
  std::printf("jobs read %.1f MB a step; in jobs at %.1f GB/s; the probe %.1f GB/s\n",
              per_tok / 1e6, per_tok / p.in_jobs_s / 1e9, probe_b_s / 1e9);
  std::printf(
      "loads-only replay of the same jobs (%.0f steps): back to back %.3f ms a step (%.1f GB/s, "
      "%.1f%% of "
      "the probe), with the recorded gaps %.3f ms (%.1f tok/s; measured %.1f)\n",
      p.replay_tokens, p.replay_jobs_s * 1e3, per_tok / p.replay_jobs_s / 1e9,
      100.0 * per_tok / p.replay_jobs_s / probe_b_s, p.replay_step_s * 1e3, 1.0 / p.replay_step_s,
      1.0 / p.step_s);
}

int probe_only(int threads, int probe_mib) {
  const ReadProbe rp = probe_read(threads, static_cast<size_t>(probe_mib) << 20);
  const double peak = probe_int8_peak(threads);
  std::printf(
      "read bandwidth (%s loads, %d threads, %d MiB, median of 7 passes): %.2f GB/s in one stream "
      "a "
      "thread, %.2f GB/s in %d\n",
      isa_name(active_isa()), threads, probe_mib, rp.one_stream / 1e9, rp.streams / 1e9,
      kProbeStreams);
  std::printf("int8 multiply-accumulate peak (%s, %d threads): %.1f GMAC/s\n",
              isa_name(active_isa()), threads, peak / 1e9);
  return 0;
}

int bench(BenchArgs& a) {
  CLB_CHECK(a.n_prompt >= 1 && a.n_gen >= 1 && a.repeats >= 1, "-p, -n and -r must be at least 1");
  const int threads = a.engine.n_threads > 0
                          ? a.engine.n_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.probe_only) return probe_only(threads, a.probe_mib);
  CLB_CHECK(!a.engine.model_path.empty(), "bench needs a model (-m), or --probe-only");
  // Before the model is loaded, so the probe buffer does not evict it.
  std::fprintf(stderr, "probing read bandwidth (%d MiB, %d threads)...\n", a.probe_mib, threads);
  const ReadProbe rp = probe_read(threads, static_cast<size_t>(a.probe_mib) << 20);
  // The roofline: the probe, or what the user measured (likwid-bench).
  const double probe = a.roofline_gb_s > 0 ? a.roofline_gb_s * 1e9 : rp.bytes_per_s;
  const char* roof_src = a.roofline_gb_s > 0 ? "--roofline-gb-s" : "probe";
  const double int8_peak = probe_int8_peak(threads);

  a.engine.n_ctx = std::max(a.engine.n_ctx, a.n_prompt + std::max(a.n_gen, a.profile_tokens) + 1);
  Engine e(a.engine);
  e.store().wait_warm();  // timed rounds read nothing in the background
  const ModelConfig& c = e.config();
  const double per_tok = decode_bytes_per_token(c, e.weights());
  const double macs_per_tok = prompt_macs_per_token(c, e.weights());
  std::vector<int32_t> prompt(a.n_prompt);
  uint64_t x = a.seed;
  for (int32_t& t : prompt) {  // random ids from the vocabulary, fixed by the seed
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(c.n_vocab));
  }

  // The probe again around every timed decode (a smaller buffer: the model
  // is in memory now), in the way the first probe read faster.
  const int around_streams = rp.one_stream >= rp.streams ? 1 : kProbeStreams;
  std::unique_ptr<BandwidthProbe> around;
  if (a.roofline_gb_s <= 0 && a.probe_around)
    around = std::make_unique<BandwidthProbe>(
        threads, std::min<size_t>(size_t{1} << 30, static_cast<size_t>(a.probe_mib) << 20));

  // One round: prefill, then greedy generation of n tokens. The first round is
  // a warm-up (page cache, first touches) and is not reported.
  std::vector<double> pp, tg, roof, pct, stolen;
  for (int r = 0; r <= a.repeats; ++r) {
    const double s0 = stolen_cpu_seconds();
    double t0 = now_seconds();
    const float* logits = e.eval_prompt(prompt, 0, 0);
    double t1 = now_seconds();
    int32_t tok = argmax(logits, c.n_vocab);
    const double b0 = around && r > 0 ? around->median(around_streams, 3) : probe;
    const double t1g = now_seconds();
    for (int i = 0; i < a.n_gen; ++i)
      logits = e.eval_token(tok, 0, a.n_prompt + i), tok = argmax(logits, c.n_vocab);
    double t2 = now_seconds();
    // The share of the machine's CPU time the host took during the repeat.
    const double steal = (stolen_cpu_seconds() - s0) /
                         ((t2 - t0) * std::max(1u, std::thread::hardware_concurrency()));
    const double b1 = around && r > 0 ? around->median(around_streams, 3) : probe;
    const char* what = r == 0 ? "warm-up" : "repeat";
    std::fprintf(stderr, "%s %d: pp%d %.2f tok/s, tg%d %.2f tok/s", what, r, a.n_prompt,
                 a.n_prompt / (t1 - t0), a.n_gen, a.n_gen / (t2 - t1g));
    if (r == 0) {
      std::fprintf(stderr, "\n");
      continue;
    }
    pp.push_back(a.n_prompt / (t1 - t0));
    tg.push_back(a.n_gen / (t2 - t1g));
    roof.push_back(0.5 * (b0 + b1));
    pct.push_back(100.0 * per_tok * tg.back() / roof.back());
    stolen.push_back(100.0 * steal);
    std::fprintf(
        stderr,
        ", read bandwidth around it %.2f / %.2f GB/s: %.1f%%, %.1f%% of the CPU time stolen\n",
        b0 / 1e9, b1 / 1e9, pct.back(), stolen.back());
  }
  const Spread sp = spread(pp), sg = spread(tg), sr = spread(roof), spct = spread(pct);
  const double achieved = per_tok * sg.median;
  const EngineStats st = e.stats();

  nlohmann::json j;
  j["model"] = a.engine.model_path;
  j["arch"] = std::string(c.arch->name);
  j["describe"] = c.describe();
  j["file_bytes"] = e.file().bytes_on_disk();
  j["threads"] = threads;
  j["n_prompt"] = a.n_prompt;
  j["n_gen"] = a.n_gen;
  j["repeats"] = a.repeats;
  j["sampling"] = "greedy";
  j["prompt_tok_s"] = {{"median", sp.median}, {"min", sp.min}, {"max", sp.max}, {"all", pp}};
  j["gen_tok_s"] = {{"median", sg.median}, {"min", sg.min}, {"max", sg.max}, {"all", tg}};
  j["bytes_per_gen_token"] = per_tok;
  j["achieved_gb_s"] = achieved / 1e9;
  j["probe_read_gb_s"] = rp.bytes_per_s / 1e9;
  j["probe"] = {{"isa", isa_name(active_isa())},
                {"one_stream_gb_s", rp.one_stream / 1e9},
                {"streams", kProbeStreams},
                {"streams_gb_s", rp.streams / 1e9}};
  j["roofline_gb_s"] = probe / 1e9;
  j["roofline_source"] = roof_src;
  j["roofline_tok_s"] = probe / per_tok;
  j["int8_peak_gmac_s"] = int8_peak / 1e9;
  j["prompt_macs_per_token"] = macs_per_tok;
  j["prompt_pct_of_int8_peak"] = 100.0 * sp.median * macs_per_tok / int8_peak;
  j["cpu_stolen_pct"] = stolen;
  j["pct_of_roofline"] = 100.0 * achieved / probe;
  j["around"] = {{"streams", around_streams},
                 {"roofline_gb_s",
                  {{"median", sr.median / 1e9}, {"min", sr.min / 1e9}, {"max", sr.max / 1e9}}},
                 {"pct_of_roofline",
                  {{"median", spct.median}, {"min", spct.min}, {"max", spct.max}, {"all", pct}}}};
  j["load_s"] = st.load_s;
  j["peak_rss_bytes"] = st.peak_rss;
  j["expert_store"] = {
      {"name", e.store().name()},
      {"requests", st.store.requests},
      {"hits", st.store.hits},
      {"hit_rate", st.store.requests ? double(st.store.hits) / double(st.store.requests) : 1.0},
      {"bytes_read", st.store.bytes_read},
      {"io_wait_s", st.store.io_wait_s}};
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    CLB_CHECK(f.good(), "%s: cannot write", a.json_path.c_str());
    f << j.dump(2) << "\n";
  }
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%.2f GiB)\n%s\n", a.engine.model_path.c_str(),
              static_cast<double>(e.file().bytes_on_disk()) / (1 << 30), c.describe().c_str());
  std::printf(
      "threads %d, %d repeats after a warm-up, greedy decoding, random prompt tokens (seed "
      "%llu)\n\n",
      threads, a.repeats, static_cast<unsigned long long>(a.seed));
  std::printf(
      "| test   | tok/s median | min     | max     "
      "|\n|--------|--------------|---------|---------|\n");
  std::printf("| pp%-4d | %12.2f | %7.2f | %7.2f |\n", a.n_prompt, sp.median, sp.min, sp.max);
  std::printf("| tg%-4d | %12.2f | %7.2f | %7.2f |\n\n", a.n_gen, sg.median, sg.min, sg.max);
  std::printf("weight bytes per generated token: %.1f MiB\n", per_tok / (1 << 20));
  std::printf(
      "read bandwidth (probe: %s loads, median of 7 passes): %.2f GB/s in one stream a thread, "
      "%.2f GB/s in %d\n",
      isa_name(active_isa()), rp.one_stream / 1e9, rp.streams / 1e9, kProbeStreams);
  std::printf("achieved: %.2f GB/s; roofline (%s): %.2f GB/s, decode roofline %.1f tok/s\n",
              achieved / 1e9, roof_src, probe / 1e9, probe / per_tok);
  std::printf("generation at %.1f%% of roofline (%.2f GB/s, %s)\n", 100.0 * achieved / probe,
              probe / 1e9, roof_src);
  if (around)
    std::printf(
        "generation against the probe read around each repeat (%d stream%s a thread, median of 3 "
        "passes "
        "before and after): %.1f%% median, %.1f-%.1f%% (the probe %.2f-%.2f GB/s)\n",
        around_streams, around_streams == 1 ? "" : "s", spct.median, spct.min, spct.max,
        sr.min / 1e9, sr.max / 1e9);
  std::printf(
      "prompt: %.2f G multiply-accumulates a token, %.1f GMAC/s, %.1f%% of the int8 peak "
      "(%s, %d threads: %.1f GMAC/s)\n",
      macs_per_tok / 1e9, sp.median * macs_per_tok / 1e9,
      100.0 * sp.median * macs_per_tok / int8_peak, isa_name(active_isa()), threads,
      int8_peak / 1e9);
  const Spread ss = spread(stolen);
  std::printf("CPU time stolen by the host during the repeats: %.1f%% median, %.1f-%.1f%%\n",
              ss.median, ss.min, ss.max);
  std::printf("expert store %s: %llu requests, hit rate %.1f%%, %.1f MiB read, io wait %.3f s\n",
              e.store().name(), static_cast<unsigned long long>(st.store.requests),
              st.store.requests ? 100.0 * double(st.store.hits) / double(st.store.requests) : 100.0,
              static_cast<double>(st.store.bytes_read) / (1 << 20), st.store.io_wait_s);
  if (a.profile_tokens > 0) print_profile(e, prompt, a.profile_tokens, threads, probe, int8_peak);
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand(
      "bench", "prompt and generation speed against the memory-bandwidth roofline");
  add_engine_flags(c, &a->engine);
  c->get_option("--model")->required(false);  // --probe-only needs none
  c->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens per repeat")->capture_default_str();
  c->add_option("-n,--n-gen", a->n_gen, "generated tokens per repeat")->capture_default_str();
  c->add_option("-r,--repeats", a->repeats, "timed repeats (after one warm-up)")
      ->capture_default_str();
  c->add_option("--roofline-gb-s", a->roofline_gb_s,
                "measure decode against this read bandwidth (e.g. likwid-bench -t load_avx512) "
                "instead of the probe");
  c->add_option("--probe-mib", a->probe_mib,
                "size of the bandwidth probe's buffer (well above the L3 cache)")
      ->capture_default_str();
  c->add_option("--profile", a->profile_tokens,
                "after the table, time every parallel job of the prompt (GMAC/s against the int8 "
                "peak) and of this many decode steps (GB/s, and replayed with loads only)");
  c->add_flag("!--no-probe-around", a->probe_around,
              "do not read the probe again around each repeat (it holds 1 GiB more while the model "
              "is loaded)");
  c->add_flag("--probe-only", a->probe_only,
              "only measure the read bandwidth and the int8 peak (no model)");
  c->add_option("-s,--seed", a->seed, "seed of the random prompt tokens")->capture_default_str();
  c->add_flag("--json", a->json, "print the results as JSON instead of a table");
  c->add_option("-o,--output", a->json_path, "also write the results as JSON to this file");
  return [a] { return bench(*a); };
}

COLIBRI_COMMAND(add_bench);

}  // namespace colibri::cli
