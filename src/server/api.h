// The OpenAI wire format: request bodies in, response bodies and server-sent
// event chunks out. No HTTP and no engine here, so every rule can be tested
// on its own.
//
// Requests are untrusted: parse_request checks every field it reads and
// throws ApiError naming the field ("temperature must be a number between 0
// and 2"), which the server returns as
//   400 {"error": {"message": ..., "type": "invalid_request_error", "param": ..., "code": ...}}
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/job.h"

namespace colibri {
class Tokenizer;
}

namespace colibri::server {

enum class Endpoint { kChat, kCompletion };

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;   // "" -> null
  std::string param;  // "" -> null
};

ApiError bad_request(std::string message, std::string param = {}, std::string code = {});
nlohmann::ordered_json error_json(const ApiError& e);

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  nlohmann::ordered_json messages =
      nlohmann::ordered_json::array();  // chat; content normalized to strings
  nlohmann::ordered_json tools;         // chat; null when absent
  std::string prompt;                   // completions, as text
  std::vector<int32_t> prompt_tokens;   // completions, given as token ids
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;
  JobParams job;  // everything but the prompt
};

// `model_ids`: the names this server answers to. `n_vocab` bounds token-id
// prompts. Throws ApiError.
ApiRequest parse_request(std::string_view body, Endpoint endpoint,
                         const std::vector<std::string>& model_ids, int n_vocab);

// Identity of one response: the same id and created time in every chunk.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;       // chatcmpl-... / cmpl-...
  int64_t created = 0;  // Unix seconds
  std::string model;
};
ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model);

nlohmann::ordered_json usage_json(const Usage& u);

// Builds one response from the job's events, as one body or as SSE chunks.
class ResponseWriter {
 public:
  ResponseWriter(ResponseMeta meta, const Tokenizer& tok, bool logprobs, bool include_usage);

  // Streaming: the first chunk (chat: the assistant role), then one string of
  // SSE events per job event; the last carries finish_reason, then the usage
  // chunk when asked for, then "data: [DONE]".
  std::string sse_start();
  std::string sse_event(const JobEvent& e);

  // Non-streaming: feed every event, then body().
  void add(const JobEvent& e);
  nlohmann::ordered_json body() const;

  const ResponseMeta& meta() const { return meta_; }

 private:
  nlohmann::ordered_json chunk(const std::string& text, const std::vector<TokenLogprob>& lps,
                               Finish finish) const;
  nlohmann::ordered_json logprobs_json(const std::vector<TokenLogprob>& lps,
                                       size_t text_offset) const;
  nlohmann::ordered_json token_json(int32_t id, float logprob) const;

  ResponseMeta meta_;
  const Tokenizer& tok_;
  bool logprobs_;
  bool include_usage_;
  std::string text_;                   // non-streaming: all text
  std::vector<TokenLogprob> all_lps_;  // non-streaming: all logprobs
  size_t streamed_bytes_ = 0;          // streaming: text sent so far (completions text_offset)
  Finish finish_ = Finish::kNone;
  Usage usage_;
};

// "data: <json>\n\n"
std::string sse_data(const nlohmann::ordered_json& j);
// JSON text safe to send: invalid UTF-8 in strings becomes U+FFFD.
std::string dump(const nlohmann::ordered_json& j);

}  // namespace colibri::server
