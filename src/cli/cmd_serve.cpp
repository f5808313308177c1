// colibri serve: the OpenAI-compatible HTTP server (docs/SERVER.md).
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/load_progress.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/scheduler.h"

namespace colibri::cli {

namespace {

struct ServeArgs {
  EngineOptions engine;
  server::ServerOptions http;
  std::string chat_template;
  std::string alias;
  int parallel = 4;
  bool quiet = false;  // no progress on stderr
};

server::HttpServer* g_server = nullptr;

extern "C" void on_stop_signal(int) {
  if (g_server) g_server->stop();
}

int serve(ServeArgs& a) {
  CLB_CHECK(a.parallel >= 1 && a.parallel <= 256, "--parallel %d must be between 1 and 256",
            a.parallel);
  a.engine.n_seq = a.parallel;
  // Every decoding sequence puts one token in each step's batch.
  a.engine.n_batch = std::max(a.engine.n_batch, a.parallel);
  Engine engine(a.engine);
  server::ChatFormatter chat(engine, a.chat_template);
  server::Scheduler scheduler(engine, server::SchedulerOptions{a.http.max_queue});

  const std::filesystem::path path(a.engine.model_path);
  if (!a.alias.empty()) a.http.model_ids.push_back(a.alias);
  a.http.model_ids.push_back(path.stem().string());
  a.http.model_ids.push_back(path.filename().string());
  a.http.model_ids.push_back(a.engine.model_path);

  server::HttpServer http(engine, scheduler, chat, a.http);
  const int port = http.bind();
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not end the server
  g_server = &http;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::fprintf(stderr,
               "colibri: serving '%s' on http://%s:%d (%d parallel, context %d per sequence, "
               "batch %d, chat template: %s)\n",
               a.http.model_ids[0].c_str(), a.http.host.c_str(), port, scheduler.n_slots(),
               engine.n_ctx(), engine.transformer().max_batch(), chat.origin().c_str());
  std::fflush(stderr);
  LoadProgress loading(engine.store(), progress_style(stderr, a.quiet));
  const bool ok = http.run();
  loading.stop();
  g_server = nullptr;
  std::fprintf(stderr, "colibri: server stopped\n");
  return ok ? 0 : 1;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_engine_flags(c, &a->engine);
  c->add_option("--host", a->http.host, "address to listen on")->capture_default_str();
  c->add_option("--port", a->http.port, "port (0: any free port, printed at start)")
      ->capture_default_str();
  c->add_option("--parallel", a->parallel, "requests decoded together (KV sequences)")
      ->capture_default_str();
  c->add_option("--queue", a->http.max_queue, "requests waiting for a slot before 429")
      ->capture_default_str();
  c->add_option("--api-key", a->http.api_key, "require 'Authorization: Bearer KEY'");
  c->add_option("--chat-template", a->chat_template,
                "Jinja chat template file (default: the model's tokenizer.chat_template)");
  c->add_option("--alias", a->alias, "model name to answer to and list in /v1/models");
  c->add_option("--timeout", a->http.timeout_s, "seconds a read or write may stall")
      ->capture_default_str();
  c->add_option("--max-body", a->http.max_body_bytes, "largest request body in bytes")
      ->capture_default_str();
  c->add_option("--http-threads", a->http.n_http_threads,
                "connection threads (0: parallel + queue + 8)")
      ->capture_default_str();
  c->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  return [a] { return serve(*a); };
}

COLIBRI_COMMAND(add_serve);

}  // namespace colibri::cli
