// colibri chat: a multi-turn conversation in the terminal.
//
// Each turn renders the whole conversation with the model's chat template
// and submits it to a one-slot Scheduler; its prefix cache finds the earlier
// turns' KV still in the sequence, so only the new turn is evaluated.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "base/error.h"
#include "base/sys.h"
#include "cli/commands.h"
#include "server/chat_prompt.h"
#include "server/scheduler.h"

namespace colibri::cli {

namespace {

struct ChatArgs {
  EngineOptions engine;
  SamplerParams sampling;
  std::string system;
  std::string chat_template;
  int n_predict = -1;
};

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  g_interrupted = true;
}

// Streams one reply to stdout; returns its text.
std::string reply(server::Scheduler& sched, server::JobParams p, server::Usage* usage) {
  std::shared_ptr<server::Job> job = sched.submit(std::move(p));
  CLB_CHECK(job != nullptr, "the scheduler refused the request");
  std::string text;
  std::vector<server::JobEvent> events;
  for (;;) {
    events.clear();
    job->wait(events, std::chrono::milliseconds(100));
    if (g_interrupted.exchange(false)) job->cancel();
    for (const server::JobEvent& e : events) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
      text += e.text;
      if (e.finish == server::Finish::kError) fail("generation failed: %s", e.error.c_str());
      if (e.finish != server::Finish::kNone) {
        *usage = e.usage;
        return text;
      }
    }
  }
}

int chat(ChatArgs& a) {
  a.engine.n_seq = 1;
  Engine engine(a.engine);
  server::ChatFormatter fmt(engine, a.chat_template);
  server::Scheduler sched(engine, server::SchedulerOptions{0});
  const bool tty = isatty(STDIN_FILENO);
  if (tty)
    std::fprintf(stderr,
                 "colibri chat: chat template: %s. /reset starts over, /exit or Ctrl-D ends, "
                 "Ctrl-C stops a reply.\n",
                 fmt.origin().c_str());
  // Ctrl-C interrupts a reply, or the read of the next line (no SA_RESTART).
  struct sigaction sa = {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  };
  reset();
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    server::JobParams p;
    p.prompt = server::tokenize_prompt(engine.tokenizer(), fmt.render(messages, nullptr, true));
    if (static_cast<int64_t>(p.prompt.size()) >= engine.n_ctx()) {
      std::fprintf(stderr,
                   "[the conversation is %zu tokens and the context holds %d: /reset, "
                   "or restart with a larger -c]\n",
                   p.prompt.size(), engine.n_ctx());
      messages.erase(messages.size() - 1);
      continue;
    }
    p.sampling = a.sampling;
    p.max_tokens = a.n_predict;
    server::Usage u;
    const double t0 = now_seconds();
    std::string text = reply(sched, std::move(p), &u);
    const double dt = now_seconds() - t0;
    std::fputc('\n', stdout);
    messages.push_back({{"role", "assistant"}, {"content", text}});
    std::fprintf(stderr, "[prompt %d tok, %d reused from the previous turns | %d tok in %.2f s]\n",
                 u.prompt_tokens, u.cached_tokens, u.completion_tokens, dt);
  }
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* c = app.add_subcommand("chat", "interactive multi-turn chat with the model's template");
  add_engine_flags(c, &a->engine);
  c->add_option("--system", a->system, "system prompt");
  c->add_option("--chat-template", a->chat_template,
                "Jinja chat template file (default: the model's tokenizer.chat_template)");
  c->add_option("-n,--n-predict", a->n_predict, "tokens per reply at most (-1: until end of turn)")
      ->capture_default_str();
  add_sampling_flags(c, &a->sampling);
  return [a] { return chat(*a); };
}

COLIBRI_COMMAND(add_chat);

}  // namespace colibri::cli
