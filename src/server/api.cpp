#include "server/api.h"

#include <atomic>
#include <chrono>
#include <random>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace colibri::server {

using json = nlohmann::ordered_json;

ApiError bad_request(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(code),
                  std::move(param)};
}

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_data(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

namespace {

// Field readers: absent or null -> the default; anything else must have the
// right type and range.
const json* field(const json& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

bool read_bool(const json& o, const char* name, bool dflt) {
  const json* v = field(o, name);
  if (!v) return dflt;
  if (!v->is_boolean()) throw bad_request(strprintf("%s must be a boolean", name), name);
  return v->get<bool>();
}

double read_number(const json& o, const char* name, double dflt, double lo, double hi) {
  const json* v = field(o, name);
  if (!v) return dflt;
  if (!v->is_number() || v->get<double>() < lo || v->get<double>() > hi)
    throw bad_request(strprintf("%s must be a number between %g and %g", name, lo, hi), name);
  return v->get<double>();
}

int64_t read_int(const json& o, const char* name, int64_t dflt, int64_t lo, int64_t hi) {
  const json* v = field(o, name);
  if (!v) return dflt;
  bool ok = v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX);
  if (!ok || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
    throw bad_request(strprintf("%s must be an integer between %lld and %lld", name,
                                static_cast<long long>(lo), static_cast<long long>(hi)),
                      name);
  return v->get<int64_t>();
}

uint64_t random_seed() {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  return counter.fetch_add(0x9e3779b97f4a7c15ull) ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// content: a string, null (assistant turns with tool calls), or an array of
// {"type": "text", "text": ...} parts, which are joined.
json normalize_content(const json& content, size_t i) {
  if (content.is_null() || content.is_string()) return content;
  const std::string param = strprintf("messages[%zu].content", i);
  if (!content.is_array())
    throw bad_request(param + " must be a string or an array of parts", param);
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad_request(
          param + ": only parts of type \"text\" with a string \"text\" are supported", param);
    text += part["text"].get<std::string>();
  }
  return text;
}

json parse_messages(const json& body) {
  const json* m = field(body, "messages");
  if (!m) throw bad_request("messages is required", "messages");
  if (!m->is_array() || m->empty())
    throw bad_request("messages must be a non-empty array", "messages");
  json out = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string param = strprintf("messages[%zu]", i);
    if (!msg.is_object()) throw bad_request(param + " must be an object", param);
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string())
      throw bad_request(param + ".role must be a string", param + ".role");
    static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
    bool known = false;
    for (const char* r : kRoles) known |= *role == r;
    if (!known)
      throw bad_request(param + ".role must be one of system, developer, user, assistant, tool",
                        param + ".role");
    json copy = msg;
    auto content = msg.find("content");
    if (content == msg.end()) {
      if (*role != "assistant")
        throw bad_request(param + ".content is required", param + ".content");
      copy["content"] = nullptr;
    } else {
      copy["content"] = normalize_content(*content, i);
    }
    out.push_back(std::move(copy));
  }
  return out;
}

void parse_prompt(const json& body, int n_vocab, ApiRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("prompt is required", "prompt");
  const json* one = p;
  // A list of one prompt is accepted; several prompts in one request are not.
  if (p->is_array() && !p->empty() && (p->at(0).is_string() || p->at(0).is_array())) {
    if (p->size() != 1) throw bad_request("only one prompt per request is supported", "prompt");
    one = &p->at(0);
  }
  if (one->is_string()) {
    r.prompt = one->get<std::string>();
    return;
  }
  if (one->is_array() && !one->empty()) {
    for (const json& t : *one) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
        throw bad_request(strprintf("prompt tokens must be integers in [0, %d)", n_vocab),
                          "prompt");
      r.prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return;
  }
  throw bad_request("prompt must be a string, an array of token ids, or a list of one of these",
                    "prompt");
}

std::vector<std::string> parse_stop(const json& body) {
  const json* s = field(body, "stop");
  if (!s) return {};
  if (s->is_string()) return {s->get<std::string>()};
  std::vector<std::string> out;
  if (s->is_array() && s->size() <= 16) {
    for (const json& x : *s) {
      if (!x.is_string() || x.get<std::string>().empty()) {
        out.clear();
        break;
      }
      out.push_back(x.get<std::string>());
    }
    if (out.size() == s->size()) return out;
  }
  throw bad_request("stop must be a string or an array of up to 16 non-empty strings", "stop");
}

}  // namespace

ApiRequest parse_request(std::string_view text, Endpoint endpoint,
                         const std::vector<std::string>& model_ids, int n_vocab) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::parse_error& e) {
    throw bad_request(std::string("the body is not valid JSON: ") + e.what(), {}, "invalid_json");
  }
  if (!body.is_object()) throw bad_request("the body must be a JSON object", {}, "invalid_json");

  ApiRequest r;
  r.endpoint = endpoint;
  // OpenAI requires "model"; like llama.cpp's server we serve the one model
  // when it is left out, but a wrong type or an unknown name is an error.
  const json* model = field(body, "model");
  if (model && !model->is_string()) throw bad_request("model must be a string", "model");
  r.model = model ? model->get<std::string>() : (model_ids.empty() ? "" : model_ids[0]);
  bool known = false;
  for (const std::string& id : model_ids) known |= id == r.model;
  if (!known)
    throw bad_request(strprintf("the model '%s' does not exist; this server serves '%s'",
                                r.model.c_str(), model_ids.empty() ? "" : model_ids[0].c_str()),
                      "model", "model_not_found");

  if (endpoint == Endpoint::kChat) {
    r.messages = parse_messages(body);
    if (const json* tools = field(body, "tools")) {
      if (!tools->is_array()) throw bad_request("tools must be an array", "tools");
      r.tools = *tools;
    }
  } else {
    parse_prompt(body, n_vocab, r);
  }

  if (read_int(body, "n", 1, 1, 1) != 1) throw bad_request("n must be 1", "n");
  r.stream = read_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_request("stream_options must be an object", "stream_options");
    if (!r.stream)
      throw bad_request("stream_options is only allowed when stream is true", "stream_options");
    r.include_usage = read_bool(*so, "include_usage", false);
  }

  JobParams& j = r.job;
  const char* max_name =
      field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  j.max_tokens = static_cast<int>(read_int(body, max_name, -1, 1, INT32_MAX));
  SamplerParams& s = j.sampling;
  s.temperature = static_cast<float>(read_number(body, "temperature", s.temperature, 0, 2));
  s.top_p = static_cast<float>(read_number(body, "top_p", s.top_p, 0, 1));
  s.top_k = static_cast<int>(read_int(body, "top_k", s.top_k, 0, INT32_MAX));
  s.min_p = static_cast<float>(read_number(body, "min_p", s.min_p, 0, 1));
  s.presence_penalty = static_cast<float>(read_number(body, "presence_penalty", 0, -2, 2));
  s.frequency_penalty = static_cast<float>(read_number(body, "frequency_penalty", 0, -2, 2));
  s.repeat_penalty = static_cast<float>(read_number(body, "repeat_penalty", 1, 0.01, 100));
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad_request("seed must be an integer", "seed");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    s.seed = random_seed();
  }
  j.stop = parse_stop(body);
  j.ignore_eos = read_bool(body, "ignore_eos", false);

  if (endpoint == Endpoint::kChat) {
    r.logprobs = read_bool(body, "logprobs", false);
    r.top_logprobs = static_cast<int>(read_int(body, "top_logprobs", 0, 0, 20));
    if (field(body, "top_logprobs") && !r.logprobs)
      throw bad_request("top_logprobs requires logprobs to be true", "top_logprobs");
  } else {
    // Completions: logprobs is the number of alternatives to list.
    const json* lp = field(body, "logprobs");
    r.logprobs = lp != nullptr;
    r.top_logprobs = static_cast<int>(read_int(body, "logprobs", 0, 0, 20));
  }
  j.n_logprobs = r.logprobs ? r.top_logprobs : -1;
  return r;
}

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  std::mt19937_64 rng(random_seed() ^ counter.fetch_add(1));
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = strprintf("%s-%016llx%08llx", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                   static_cast<unsigned long long>(rng()),
                   static_cast<unsigned long long>(rng() & 0xffffffffu));
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = model;
  return m;
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

ResponseWriter::ResponseWriter(ResponseMeta meta, const Tokenizer& tok, bool logprobs,
                               bool include_usage)
    : meta_(std::move(meta)), tok_(tok), logprobs_(logprobs), include_usage_(include_usage) {}

json ResponseWriter::token_json(int32_t id, float logprob) const {
  const std::string piece = tok_.token_to_piece(id, false);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return {{"token", utf8_sanitize(piece)}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

json ResponseWriter::logprobs_json(const std::vector<TokenLogprob>& lps, size_t text_offset) const {
  if (meta_.endpoint == Endpoint::kChat) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) {
      json t = token_json(lp.id, lp.logprob);
      json top = json::array();
      for (const TokenLogprob& alt : lp.top) top.push_back(token_json(alt.id, alt.logprob));
      t["top_logprobs"] = std::move(top);
      content.push_back(std::move(t));
    }
    return {{"content", std::move(content)}};
  }
  // Completions: parallel arrays, and the byte offset of each token's text.
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string piece = tok_.token_to_piece(lp.id, false);
    tokens.push_back(utf8_sanitize(piece));
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : lp.top)
      top[utf8_sanitize(tok_.token_to_piece(alt.id, false))] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json ResponseWriter::chunk(const std::string& text, const std::vector<TokenLogprob>& lps,
                           Finish finish) const {
  const bool chat = meta_.endpoint == Endpoint::kChat;
  json choice = {{"index", 0}};
  if (chat) {
    choice["delta"] = finish == Finish::kNone ? json{{"content", text}} : json::object();
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] =
      logprobs_ && !lps.empty() ? logprobs_json(lps, streamed_bytes_) : json(nullptr);
  choice["finish_reason"] = finish == Finish::kNone ? json(nullptr) : json(finish_name(finish));
  json c = {{"id", meta_.id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta_.created},
            {"model", meta_.model},
            {"choices", json::array({std::move(choice)})}};
  if (include_usage_) c["usage"] = nullptr;
  return c;
}

std::string ResponseWriter::sse_start() {
  if (meta_.endpoint != Endpoint::kChat) return {};
  json c = chunk("", {}, Finish::kNone);
  c["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
  return sse_data(c);
}

std::string ResponseWriter::sse_event(const JobEvent& e) {
  std::string out;
  if (e.finish == Finish::kError) {
    ApiError err{500, "generation failed: " + e.error, "server_error", {}, {}};
    return sse_data(error_json(err)) + "data: [DONE]\n\n";
  }
  if (!e.text.empty() || (logprobs_ && !e.logprobs.empty())) {
    out += sse_data(chunk(e.text, e.logprobs, Finish::kNone));
    streamed_bytes_ += e.text.size();
  }
  if (e.finish != Finish::kNone) {
    out += sse_data(chunk("", {}, e.finish));
    if (include_usage_) {
      json u = chunk("", {}, Finish::kNone);
      u["choices"] = json::array();
      u["usage"] = usage_json(e.usage);
      out += sse_data(u);
    }
    out += "data: [DONE]\n\n";
  }
  return out;
}

void ResponseWriter::add(const JobEvent& e) {
  text_ += e.text;
  all_lps_.insert(all_lps_.end(), e.logprobs.begin(), e.logprobs.end());
  if (e.finish != Finish::kNone) {
    finish_ = e.finish;
    usage_ = e.usage;
  }
}

json ResponseWriter::body() const {
  const bool chat = meta_.endpoint == Endpoint::kChat;
  json choice = {{"index", 0}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  else
    choice["text"] = text_;
  choice["logprobs"] = logprobs_ ? logprobs_json(all_lps_, 0) : json(nullptr);
  choice["finish_reason"] = finish_name(finish_);
  return {{"id", meta_.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json(usage_)}};
}

}  // namespace colibri::server
