// The OpenAI-compatible HTTP front: routes, authentication, validation.
//
// Built on cpp-httplib (Debian's libcpp-httplib, see docs/SERVER.md for the
// choice). Its worker threads parse and validate a request, turn it into
// tokens and submit a Job; they then drain the Job's events into the
// response. Everything that touches the Engine happens on the Scheduler's
// thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace colibri {
class Engine;
}

namespace colibri::server {

class Scheduler;
class ChatFormatter;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                     // 0: any free port (see bind())
  std::string api_key;                 // non-empty: required as "Authorization: Bearer KEY"
  std::vector<std::string> model_ids;  // names accepted in "model"; the first is listed
  size_t max_body_bytes = 8u << 20;    // larger bodies are refused with 400
  int timeout_s = 30;                  // per read/write on a connection
  int n_http_threads = 0;              // 0: slots + queue + 8 (one per open connection)
  int max_queue = 64;
};

class HttpServer {
 public:
  HttpServer(Engine& engine, Scheduler& scheduler, const ChatFormatter& chat,
             const ServerOptions& o);
  ~HttpServer();

  // Binds the listening socket; returns the port (useful with port 0).
  // Throws Error when the address cannot be bound.
  int bind();
  // Serves until stop(); returns false when listening failed.
  bool run();
  // Safe to call from another thread or a signal handler.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace colibri::server
