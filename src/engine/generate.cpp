#include "engine/generate.h"

#include <algorithm>

#include "base/error.h"
#include "base/sys.h"
#include "base/utf8.h"

namespace colibri {

GenerateResult generate(Engine& engine, std::string_view prompt, const GenerateOptions& o,
                        const StepCallback& on_step) {
  GenerateResult r;
  const Tokenizer& tok = engine.tokenizer();
  r.prompt_tokens = tok.encode(prompt, o.add_special, o.parse_special);
  if (r.prompt_tokens.empty()) {
    // An empty prompt without BOS: start from BOS if there is one.
    CLB_CHECK(tok.bos() >= 0, "the prompt is empty and the vocabulary has no BOS token to start from");
    r.prompt_tokens.push_back(tok.bos());
  }
  const int n_prompt = static_cast<int>(r.prompt_tokens.size());
  CLB_CHECK(n_prompt < engine.n_ctx(),
            "the prompt is %d tokens but the context holds %d (use -c to enlarge it)", n_prompt,
            engine.n_ctx());

  double t0 = now_seconds();
  const float* logits = engine.eval_prompt(r.prompt_tokens, 0, 0);
  r.prompt_s = now_seconds() - t0;

  Sampler sampler(engine.n_vocab(), o.sampling);
  std::vector<int32_t> history = r.prompt_tokens;
  history.reserve(history.size() + (o.n_predict > 0 ? o.n_predict : 256));
  RoutingTrace trace;
  if (o.trace_routing) trace.resize(1, engine.config().n_layer, std::max(engine.config().n_expert_used, 1));

  std::string pending;  // bytes not yet printed: incomplete UTF-8 or a possible stop string
  size_t emitted = 0;   // bytes of r.text already handed out
  t0 = now_seconds();
  int pos = n_prompt;
  for (int i = 0; o.n_predict < 0 || i < o.n_predict; ++i) {
    const int32_t id = sampler.sample(logits, history);
    if (o.stop_at_eog && tok.is_eog(id)) {
      r.finish = FinishReason::kStop;
      break;
    }
    r.tokens.push_back(id);
    history.push_back(id);
    r.text += tok.token_to_piece(id);

    // Stop strings end generation and are cut from the text.
    bool stopped = false;
    for (const std::string& s : o.stop) {
      size_t at = s.empty() ? std::string::npos : r.text.find(s, emitted > s.size() ? emitted - s.size() : 0);
      if (at != std::string::npos) {
        r.text.resize(at);
        stopped = true;
      }
    }
    // Hold back what could still become a stop string or an incomplete character.
    size_t ready = utf8_complete_prefix(r.text);
    if (!stopped)
      for (const std::string& s : o.stop)
        for (size_t k = std::min(s.size() - 1, ready - emitted); k > 0; --k)
          if (r.text.compare(ready - k, k, s, 0, k) == 0) {
            ready -= k;
            break;
          }
    if (ready < emitted) ready = emitted;

    // Decode the token unless this was the last one. Its text goes out
    // first, so a reader sees each token as soon as it is sampled, not one
    // decode step later; only a routing trace, which is this token's own
    // routing, waits for the decode that makes it.
    const bool last = stopped || (o.n_predict >= 0 && i + 1 >= o.n_predict);
    bool decoded = false;
    const auto decode = [&] {
      if (last) return;
      if (pos >= engine.n_ctx()) {
        r.finish = FinishReason::kContext;
        stopped = true;
      } else {
        logits = engine.eval_token(id, 0, pos, o.trace_routing ? &trace : nullptr);
        ++pos;
        decoded = true;
      }
    };
    if (o.trace_routing) decode();
    GenerateStep step{id, std::string_view(r.text).substr(emitted, ready - emitted),
                      decoded ? &trace : nullptr};
    emitted = ready;
    if (on_step && !on_step(step)) {
      r.finish = FinishReason::kCancelled;
      break;
    }
    if (!o.trace_routing) decode();
    if (stopped) {
      if (r.finish != FinishReason::kContext) r.finish = FinishReason::kStop;
      break;
    }
  }
  if (on_step && emitted < r.text.size()) {
    GenerateStep tail{-1, std::string_view(r.text).substr(emitted), nullptr};
    on_step(tail);
  }
  r.gen_s = now_seconds() - t0;
  engine.add_gen_time(r.gen_s, r.tokens.size());
  return r;
}

std::string format_summary(const GenerateResult& r, const EngineStats& s) {
  auto rate = [](size_t n, double t) { return t > 0 ? n / t : 0.0; };
  std::string out = strprintf(
      "prompt %zu tok, %.1f tok/s | generation %zu tok, %.1f tok/s | peak RSS %.1f MiB",
      r.prompt_tokens.size(), rate(r.prompt_tokens.size(), r.prompt_s), r.tokens.size(),
      rate(r.tokens.size(), r.gen_s), s.peak_rss / 1048576.0);
  const ExpertStoreStats& x = s.store;
  if (x.loads > 0) {
    const double tokens = static_cast<double>(s.n_prompt_tokens + s.n_gen_tokens);
    // "hit": served without waiting, prefetched loads included; "resident":
    // served with no load at all (1 - loads / requests, a lower bound since
    // loads also count mispredicted prefetches and the pinned set).
    const double resident =
        x.requests ? std::max(0.0, 1.0 - static_cast<double>(x.loads) / x.requests) : 0.0;
    out += strprintf(" | experts: hit %.1f%% (resident %.1f%%), %.2f MB/token from disk at %.2f GB/s, io wait %.2f s",
                     x.requests ? 100.0 * x.hits / x.requests : 0.0, 100.0 * resident,
                     tokens > 0 ? x.bytes_read / tokens / 1e6 : 0.0,
                     x.read_busy_s > 0 ? x.bytes_read / x.read_busy_s / 1e9 : 0.0, x.io_wait_s);
    if (x.read_faulted > 0)
      out += strprintf(", %.0f MB read into fresh memory", x.read_faulted / 1e6);
    if (x.pred_acquires > 0)
      out += strprintf(", prefetch recall %.1f%%, %llu guessed loads (%.1f%% used)",
                       100.0 * x.pred_hits / x.pred_acquires, static_cast<unsigned long long>(x.pred_loads),
                       x.pred_loads ? 100.0 * x.pred_loads_used / x.pred_loads : 0.0);
    if (x.warm_loads > 0)
      out += x.warm_done_s > 0
                 ? strprintf(", warm-up read %llu experts in %.2f s", static_cast<unsigned long long>(x.warm_loads),
                             x.warm_done_s)
                 : strprintf(", warm-up read %llu experts (still reading)",
                             static_cast<unsigned long long>(x.warm_loads));
    if (x.slots_given_back > 0)
      out += strprintf(", cache slots %d of %d (the rest given to the KV cache)", x.cache_slots,
                       x.cache_slots_start);
  }
  return out;
}

}  // namespace colibri
