#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/sys.h"
#include "engine/engine.h"
#include "server/api.h"
#include "server/chat_prompt.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/stats_feed.h"
#include "server/web_page.h"

namespace colibri::server {

using json = nlohmann::ordered_json;
using std::chrono::milliseconds;

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_json(e)), "application/json");
}

// A non-streaming answer that takes longer than this is sent chunked, with
// whitespace before the JSON every heartbeat, so that a client that went
// away is noticed (the write fails) and its sequence freed.
constexpr milliseconds kDirectWait{2000};
constexpr milliseconds kHeartbeat{1000};

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  Scheduler& scheduler;
  const ChatFormatter& chat;
  ServerOptions opts;
  httplib::Server http;
  HttpCounters counters;
  StatsFeed feed;
  int64_t started = 0;

  Impl(Engine& e, Scheduler& s, const ChatFormatter& c, const ServerOptions& o)
      : engine(e), scheduler(s), chat(c), opts(o),
        feed(e, s, o.model_ids.empty() ? std::string() : o.model_ids[0]) {}

  void setup();
  bool authorized(const httplib::Request& req) const;
  void completions(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void stats_stream(const httplib::Request& req, httplib::Response& res);
  JobParams prepare(ApiRequest& r);
  void respond_stream(httplib::Response& res, std::shared_ptr<Job> job,
                      std::shared_ptr<ResponseWriter> w);
  void respond_whole(httplib::Response& res, std::shared_ptr<Job> job,
                     std::shared_ptr<ResponseWriter> w);
};

HttpServer::HttpServer(Engine& engine, Scheduler& scheduler, const ChatFormatter& chat,
                       const ServerOptions& o)
    : impl_(std::make_unique<Impl>(engine, scheduler, chat, o)) {
  CLB_CHECK(!o.model_ids.empty(), "the server needs a model name to answer to");
  impl_->setup();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  Impl& m = *impl_;
  int port = m.opts.port;
  if (port == 0) {
    port = m.http.bind_to_any_port(m.opts.host);
    CLB_CHECK(port > 0, "cannot listen on %s (any port)", m.opts.host.c_str());
  } else {
    CLB_CHECK(m.http.bind_to_port(m.opts.host, port), "cannot listen on %s:%d (in use?)",
              m.opts.host.c_str(), port);
  }
  return port;
}

bool HttpServer::run() {
  return impl_->http.listen_after_bind();
}

void HttpServer::stop() {
  impl_->http.stop();
}

bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (opts.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + opts.api_key;
}

void HttpServer::Impl::setup() {
  started = std::chrono::duration_cast<std::chrono::seconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  const int threads =
      opts.n_http_threads > 0 ? opts.n_http_threads : scheduler.n_slots() + opts.max_queue + 8;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(opts.max_body_bytes);
  http.set_read_timeout(opts.timeout_s, 0);
  http.set_write_timeout(opts.timeout_s, 0);
  http.set_keep_alive_max_count(1000);
  http.set_keep_alive_timeout(5);
  http.set_tcp_nodelay(true);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // The page holds no secrets; what it shows comes from endpoints that ask
    // for the key like any other.
    if (req.path == "/health" || req.path == "/" || authorized(req))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError{401,
                             "incorrect or missing API key: send 'Authorization: Bearer KEY'",
                             "invalid_request_error",
                             "invalid_api_key",
                             {}});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (unknown path, body over the limit) in
  // OpenAI's shape; a body over the limit is a bad request like any other.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413) {
          send_error(res, bad_request(strprintf("the body is larger than the limit of %zu bytes",
                                                opts.max_body_bytes),
                                      {}, "request_too_large"));
        } else if (res.status == 404) {
          send_error(res, ApiError{404,
                                   "no route for " + req.method + " " + req.path,
                                   "invalid_request_error",
                                   "not_found",
                                   {}});
        } else if (res.status == 400) {
          send_error(res, bad_request("the request could not be read: malformed, incomplete, or "
                                      "sent too slowly"));
        } else {
          send_error(res, ApiError{res.status,
                                   strprintf("HTTP status %d", res.status),
                                   res.status >= 500 ? "server_error" : "invalid_request_error",
                                   {},
                                   {}});
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, ApiError{500, what, "server_error", {}, {}});
      });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    counters.count(req.matches.empty() ? "other" : req.path, res.status);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    SchedulerStats s = scheduler.stats();
    res.set_content(dump(json{{"status", "ok"},
                              {"slots_idle", s.n_slots - s.slots_busy},
                              {"slots_busy", s.slots_busy},
                              {"queue_depth", s.queue_depth}}),
                    "application/json");
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(kWebPage, sizeof(kWebPage) - 1, "text/html; charset=utf-8");
  });
  http.Get("/v1/colibri/stats", [this](const httplib::Request&, httplib::Response& res) {
    StatsFeed::Scratch scratch;
    res.set_header("Cache-Control", "no-cache");
    res.set_content(feed.render(scratch), "application/json");
  });
  http.Get("/v1/colibri/stats/stream", [this](const httplib::Request& req, httplib::Response& res) {
    stats_stream(req, res);
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(scheduler.stats(), counters.snapshot(), current_rss_bytes()),
                    "text/plain; version=0.0.4");
  });
  auto model_json = [this](const std::string& id) {
    return json{{"id", id},
                {"object", "model"},
                {"created", started},
                {"owned_by", "colibri"},
                {"meta",
                 {{"n_ctx", engine.n_ctx()},
                  {"n_vocab", engine.n_vocab()},
                  {"n_parallel", scheduler.n_slots()},
                  {"chat_template", chat.origin()}}}};
  };
  http.Get("/v1/models", [this, model_json](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        dump(json{{"object", "list"}, {"data", json::array({model_json(opts.model_ids[0])})}}),
        "application/json");
  });
  http.Get(R"(/v1/models/(.+))",
           [this, model_json](const httplib::Request& req, httplib::Response& res) {
             const std::string id = req.matches[1];
             for (const std::string& m : opts.model_ids)
               if (m == id) return res.set_content(dump(model_json(id)), "application/json");
             send_error(res, ApiError{404, "the model '" + id + "' does not exist",
                                      "invalid_request_error", "model_not_found", "model"});
           });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::kChat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, Endpoint::kCompletion);
  });
}

void HttpServer::Impl::stats_stream(const httplib::Request& req, httplib::Response& res) {
  int interval_ms = 0;
  try {
    interval_ms = StatsFeed::parse_interval_ms(req.get_param_value("interval_ms"));
  } catch (const ApiError& e) {
    return send_error(res, e);
  }
  res.set_header("Cache-Control", "no-cache");
  auto scratch = std::make_shared<StatsFeed::Scratch>();
  auto first = std::make_shared<bool>(true);
  res.set_chunked_content_provider(
      "text/event-stream", [this, interval_ms, scratch, first](size_t, httplib::DataSink& sink) {
        // The first event at once, so a page draws the map as it opens.
        if (!*first) std::this_thread::sleep_for(milliseconds(interval_ms));
        *first = false;
        const std::string event = "data: " + feed.render(*scratch) + "\n\n";
        return sink.write(event.data(), event.size());
      });
}

JobParams HttpServer::Impl::prepare(ApiRequest& r) {
  JobParams p = std::move(r.job);
  const Tokenizer& tok = engine.tokenizer();
  if (r.endpoint == Endpoint::kChat) {
    std::string text;
    try {
      text = chat.render(r.messages, r.tools, true);
    } catch (const Error& e) {
      throw bad_request(std::string("the chat template failed on these messages: ") + e.what(),
                        "messages", "template_error");
    }
    p.prompt = tokenize_prompt(tok, text);
  } else if (!r.prompt_tokens.empty()) {
    p.prompt = std::move(r.prompt_tokens);
  } else {
    p.prompt = tokenize_prompt(tok, r.prompt);
  }
  if (p.prompt.empty())
    throw bad_request("the prompt is empty and the vocabulary has no BOS token to start from",
                      r.endpoint == Endpoint::kChat ? "messages" : "prompt");
  if (static_cast<int64_t>(p.prompt.size()) >= engine.n_ctx())
    throw bad_request(strprintf("the prompt is %zu tokens but the context holds %d",
                                p.prompt.size(), engine.n_ctx()),
                      r.endpoint == Endpoint::kChat ? "messages" : "prompt",
                      "context_length_exceeded");
  return p;
}

void HttpServer::Impl::completions(const httplib::Request& req, httplib::Response& res,
                                   Endpoint ep) {
  std::shared_ptr<Job> job;
  std::shared_ptr<ResponseWriter> writer;
  bool stream = false;
  try {
    ApiRequest r = parse_request(req.body, ep, opts.model_ids, engine.n_vocab());
    stream = r.stream;
    writer = std::make_shared<ResponseWriter>(new_response_meta(ep, r.model), engine.tokenizer(),
                                              r.logprobs, r.include_usage);
    job = scheduler.submit(prepare(r));
  } catch (const ApiError& e) {
    return send_error(res, e);
  }
  if (!job) {
    res.set_header("Retry-After", "1");
    return send_error(res,
                      ApiError{429,
                               "the server is busy: every slot and the queue are full; retry later",
                               "rate_limit_error",
                               "rate_limit_exceeded",
                               {}});
  }
  if (stream)
    respond_stream(res, std::move(job), std::move(writer));
  else
    respond_whole(res, std::move(job), std::move(writer));
}

void HttpServer::Impl::respond_stream(httplib::Response& res, std::shared_ptr<Job> job,
                                      std::shared_ptr<ResponseWriter> w) {
  res.set_header("Cache-Control", "no-cache");
  auto events = std::make_shared<std::vector<JobEvent>>();
  auto started = std::make_shared<bool>(false);
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, w, events, started](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& s) {
          if (s.empty() || sink.write(s.data(), s.size())) return true;
          job->cancel();  // the client is gone
          return false;
        };
        if (!*started) {
          *started = true;
          return send(w->sse_start());
        }
        events->clear();
        // Nothing new: a comment line, which SSE clients ignore, so that a
        // closed connection shows up as a failed write.
        if (!job->wait(*events, kHeartbeat)) return send(": keep-alive\n\n");
        for (const JobEvent& e : *events) {
          if (!send(w->sse_event(e))) return false;
          if (e.finish != Finish::kNone) {
            sink.done();
            return true;
          }
        }
        return true;
      },
      [job](bool) { job->cancel(); });
}

void HttpServer::Impl::respond_whole(httplib::Response& res, std::shared_ptr<Job> job,
                                     std::shared_ptr<ResponseWriter> w) {
  // Most answers come quickly: wait for them here and send one plain response
  // with its true status.
  std::vector<JobEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + kDirectWait;
  auto absorb = [&]() -> const JobEvent* {
    for (const JobEvent& e : events) {
      w->add(e);
      if (e.finish != Finish::kNone) return &e;
    }
    events.clear();
    return nullptr;
  };
  while (std::chrono::steady_clock::now() < deadline) {
    job->wait(events, milliseconds(100));
    if (const JobEvent* last = absorb()) {
      if (last->finish == Finish::kError)
        return send_error(
            res, ApiError{500, "generation failed: " + last->error, "server_error", {}, {}});
      return res.set_content(dump(w->body()), "application/json");
    }
  }
  // Slow: chunked, with leading whitespace as the heartbeat (JSON allows it).
  auto pending = std::make_shared<std::vector<JobEvent>>();
  res.set_chunked_content_provider(
      "application/json",
      [job, w, pending](size_t, httplib::DataSink& sink) {
        pending->clear();
        if (!job->wait(*pending, kHeartbeat)) {
          if (sink.write("\n", 1)) return true;
          job->cancel();
          return false;
        }
        for (const JobEvent& e : *pending) {
          w->add(e);
          if (e.finish == Finish::kNone) continue;
          std::string body =
              e.finish == Finish::kError
                  ? dump(error_json(
                        ApiError{500, "generation failed: " + e.error, "server_error", {}, {}}))
                  : dump(w->body());
          if (!sink.write(body.data(), body.size())) return false;
          sink.done();
          return true;
        }
        return true;
      },
      [job](bool) { job->cancel(); });
}

}  // namespace colibri::server
