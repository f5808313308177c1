// The OpenAI wire format: request validation, SSE chunk order, stop strings.
// Expectations follow OpenAI's published API reference (field names, chunk
// order, error object shape).
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/gguf.h"
#include "server/api.h"
#include "server/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace colibri::server {
namespace {

using json = nlohmann::ordered_json;
const std::vector<std::string> kModels = {"tiny", "tiny.gguf"};

ApiError parse_error(const std::string& body, Endpoint ep = Endpoint::kChat) {
  try {
    parse_request(body, ep, kModels, 100);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

const char* kChat = R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})";

json with(const char* base, const json& patch) {
  json j = json::parse(base);
  j.update(patch);
  return j;
}

TEST(Api, ParsesAChatRequest) {
  json body = with(kChat, {{"temperature", 0.5},
                           {"top_p", 0.9},
                           {"top_k", 7},
                           {"min_p", 0.1},
                           {"max_tokens", 12},
                           {"seed", 42},
                           {"stop", "END"},
                           {"presence_penalty", 0.5},
                           {"frequency_penalty", -0.5},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}},
                           {"logprobs", true},
                           {"top_logprobs", 3}});
  ApiRequest r = parse_request(body.dump(), Endpoint::kChat, kModels, 100);
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");
  EXPECT_FLOAT_EQ(r.job.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.job.sampling.top_p, 0.9f);
  EXPECT_EQ(r.job.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(r.job.sampling.min_p, 0.1f);
  EXPECT_EQ(r.job.max_tokens, 12);
  EXPECT_EQ(r.job.sampling.seed, 42u);
  EXPECT_EQ(r.job.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.job.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.job.sampling.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.job.n_logprobs, 3);
}

TEST(Api, ContentPartsAreJoined) {
  json body = with(
      kChat,
      {{"messages",
        {{{"role", "user"},
          {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}});
  ApiRequest r = parse_request(body.dump(), Endpoint::kChat, kModels, 100);
  EXPECT_EQ(r.messages[0]["content"], "ab");
}

TEST(Api, CompletionPrompts) {
  ApiRequest r = parse_request(R"({"model": "tiny.gguf", "prompt": "x", "logprobs": 2})",
                               Endpoint::kCompletion, kModels, 100);
  EXPECT_EQ(r.prompt, "x");
  EXPECT_EQ(r.job.n_logprobs, 2);
  r = parse_request(R"({"model": "tiny", "prompt": [[5, 6]]})", Endpoint::kCompletion, kModels,
                    100);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{5, 6}));
  r = parse_request(R"({"model": "tiny", "prompt": ["y"]})", Endpoint::kCompletion, kModels, 100);
  EXPECT_EQ(r.prompt, "y");
  EXPECT_EQ(r.job.n_logprobs, -1);
  r = parse_request(R"({"model": "tiny", "prompt": [1, 2, 99]})", Endpoint::kCompletion, kModels,
                    100);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 99}));
}

TEST(Api, ModelMayBeLeftOut) {
  ApiRequest r = parse_request(R"({"messages": [{"role": "user", "content": "hi"}]})",
                               Endpoint::kChat, kModels, 100);
  EXPECT_EQ(r.model, kModels[0]);
}

TEST(Api, RejectsBadInputWithTheFieldNamed) {
  struct Case {
    std::string body;
    std::string param;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"{", "", "invalid_json"},
      {"[1]", "", "invalid_json"},
      {R"({"model": 3, "messages": []})", "model", ""},
      {R"({"model": "other", "messages": [{"role": "user", "content": "x"}]})", "model",
       "model_not_found"},
      {R"({"model": "tiny"})", "messages", ""},
      {R"({"model": "tiny", "messages": []})", "messages", ""},
      {R"({"model": "tiny", "messages": "hi"})", "messages", ""},
      {R"({"model": "tiny", "messages": [{"content": "x"}]})", "messages[0].role", ""},
      {R"({"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role",
       ""},
      {R"({"model": "tiny", "messages": [{"role": "user"}]})", "messages[0].content", ""},
      {R"({"model": "tiny", "messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       ""},
      {with(kChat, {{"temperature", "hot"}}).dump(), "temperature", ""},
      {with(kChat, {{"temperature", 2.5}}).dump(), "temperature", ""},
      {with(kChat, {{"top_p", 1.5}}).dump(), "top_p", ""},
      {with(kChat, {{"top_k", -1}}).dump(), "top_k", ""},
      {with(kChat, {{"top_k", 1.5}}).dump(), "top_k", ""},
      {with(kChat, {{"min_p", -0.1}}).dump(), "min_p", ""},
      {with(kChat, {{"max_tokens", 0}}).dump(), "max_tokens", ""},
      {with(kChat, {{"max_tokens", "10"}}).dump(), "max_tokens", ""},
      {with(kChat, {{"presence_penalty", 3}}).dump(), "presence_penalty", ""},
      {with(kChat, {{"frequency_penalty", -3}}).dump(), "frequency_penalty", ""},
      {with(kChat, {{"seed", "1"}}).dump(), "seed", ""},
      {with(kChat, {{"stop", 5}}).dump(), "stop", ""},
      {with(kChat, {{"stop", {"a", ""}}}).dump(), "stop", ""},
      {with(kChat, {{"stream", "yes"}}).dump(), "stream", ""},
      {with(kChat, {{"stream_options", {{"include_usage", true}}}}).dump(), "stream_options", ""},
      {with(kChat, {{"n", 2}}).dump(), "n", ""},
      {with(kChat, {{"logprobs", 1}}).dump(), "logprobs", ""},
      {with(kChat, {{"top_logprobs", 2}}).dump(), "top_logprobs", ""},
      {with(kChat, {{"logprobs", true}, {"top_logprobs", 21}}).dump(), "top_logprobs", ""},
  };
  for (const Case& c : cases) {
    ApiError e = parse_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_EQ(e.code, c.code) << c.body;
    EXPECT_FALSE(e.message.empty());
  }
  EXPECT_EQ(parse_error(R"({"model": "tiny"})", Endpoint::kCompletion).param, "prompt");
  EXPECT_EQ(parse_error(R"({"model": "tiny", "prompt": 5})", Endpoint::kCompletion).param,
            "prompt");
  EXPECT_EQ(parse_error(R"({"model": "tiny", "prompt": [1, 100]})", Endpoint::kCompletion).param,
            "prompt");
  EXPECT_EQ(parse_error(R"({"model": "tiny", "prompt": ["a", "b"]})", Endpoint::kCompletion).param,
            "prompt");
  EXPECT_EQ(
      parse_error(R"({"model": "tiny", "prompt": "a", "logprobs": true})", Endpoint::kCompletion)
          .param,
      "logprobs");
}

TEST(Api, ErrorObjectShape) {
  json j = error_json(bad_request("bad temperature", "temperature"));
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad temperature");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

// SSE needs a tokenizer only for logprobs; any golden model's will do.
std::unique_ptr<Tokenizer> golden_tokenizer(std::unique_ptr<GgufFile>& file) {
  const std::string path = std::string(COLIBRI_SHARED_DIR) + "/golden/qwen3moe-q8_0.gguf";
  if (!std::filesystem::exists(path)) return nullptr;
  file = GgufFile::open(path);
  return Tokenizer::from_gguf(*file);
}

std::vector<json> parse_sse(const std::string& s, bool* done) {
  std::vector<json> out;
  *done = false;
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event must end with a blank line";
    if (end == std::string::npos) break;
    std::string ev = s.substr(at, end - at);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    EXPECT_FALSE(*done) << "nothing may follow [DONE]";
    if (ev == "data: [DONE]")
      *done = true;
    else
      out.push_back(json::parse(ev.substr(6)));
    at = end + 2;
  }
  return out;
}

TEST(Api, ChatStreamChunkOrder) {
  std::unique_ptr<GgufFile> file;
  auto tok = golden_tokenizer(file);
  if (!tok) GTEST_SKIP() << "golden models not found in " << COLIBRI_SHARED_DIR;
  ResponseWriter w(new_response_meta(Endpoint::kChat, "tiny"), *tok, true, true);
  std::string s = w.sse_start();
  JobEvent a;
  a.text = "Hel";
  a.logprobs = {{65, -0.5f, {{65, -0.5f, {}}, {66, -1.5f, {}}}}};
  s += w.sse_event(a);
  JobEvent b;
  b.text = "lo";
  b.finish = Finish::kStop;
  b.usage = {7, 2, 3};
  s += w.sse_event(b);
  bool done = false;
  std::vector<json> chunks = parse_sse(s, &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 5u);  // role, "Hel", "lo", finish, usage
  for (const json& c : chunks) {
    EXPECT_EQ(c["id"], chunks[0]["id"]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["created"], chunks[0]["created"]);
    EXPECT_EQ(c["model"], "tiny");
  }
  EXPECT_EQ(chunks[0]["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "Hel");
  const json& lp = chunks[1]["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["token"], tok->token_to_piece(65, false));
  EXPECT_FLOAT_EQ(lp["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp["top_logprobs"].size(), 2u);
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["content"], "lo");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(chunks[3]["choices"][0]["delta"].empty());
  EXPECT_TRUE(chunks[4]["choices"].empty());
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(chunks[4]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(chunks[4]["usage"]["total_tokens"], 10);
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(chunks[i]["usage"].is_null());
}

TEST(Api, CompletionStreamAndBody) {
  std::unique_ptr<GgufFile> file;
  auto tok = golden_tokenizer(file);
  if (!tok) GTEST_SKIP() << "golden models not found in " << COLIBRI_SHARED_DIR;
  ResponseWriter w(new_response_meta(Endpoint::kCompletion, "tiny"), *tok, false, false);
  EXPECT_EQ(w.sse_start(), "");  // completions have no role chunk
  JobEvent a;
  a.text = "x";
  JobEvent b;
  b.finish = Finish::kLength;
  b.usage = {3, 0, 1};
  bool done = false;
  std::vector<json> chunks = parse_sse(w.sse_event(a) + w.sse_event(b), &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["object"], "text_completion");
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "x");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(chunks[0].contains("usage"));

  w.add(a);
  w.add(b);
  json body = w.body();
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body["choices"][0]["text"], "x");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 4);
}

TEST(Api, ErrorEventEndsTheStream) {
  std::unique_ptr<GgufFile> file;
  auto tok = golden_tokenizer(file);
  if (!tok) GTEST_SKIP() << "golden models not found in " << COLIBRI_SHARED_DIR;
  ResponseWriter w(new_response_meta(Endpoint::kChat, "tiny"), *tok, false, false);
  JobEvent e;
  e.finish = Finish::kError;
  e.error = "disk on fire";
  bool done = false;
  std::vector<json> chunks = parse_sse(w.sse_event(e), &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_NE(chunks[0]["error"]["message"].get<std::string>().find("disk on fire"),
            std::string::npos);
}

std::string feed(TextStream& t, const std::vector<std::string>& pieces,
                 std::vector<std::string>* sent) {
  std::string all;
  for (const std::string& p : pieces) {
    std::string out;
    t.add(p, out);
    sent->push_back(out);
    all += out;
  }
  std::string tail;
  t.flush(tail);
  return all + tail;
}

TEST(TextStream, StopStringAcrossTokensIsCutAndNeverSent) {
  std::vector<std::string> stop = {"</end>"};
  TextStream t;
  t.reset(&stop);
  std::vector<std::string> sent;
  std::string all = feed(t, {"ab", "c<", "/e", "nd>", "zz"}, &sent);
  EXPECT_EQ(all, "abc");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(sent[0], "ab");
  EXPECT_EQ(sent[1], "c");  // "<" could start the stop string: held
  EXPECT_EQ(sent[2], "");
}

TEST(TextStream, HeldBackTextIsReleasedWhenItDiverges) {
  std::vector<std::string> stop = {"STOP", "xy"};
  TextStream t;
  t.reset(&stop);
  std::vector<std::string> sent;
  EXPECT_EQ(feed(t, {"aST", "Ox", "!"}, &sent), "aSTOx!");
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(sent[0], "a");
  EXPECT_EQ(sent[1], "STO");  // "x" may begin "xy"
  EXPECT_EQ(sent[2], "x!");
}

TEST(TextStream, Utf8SplitAcrossTokensWaitsForTheWholeCharacter) {
  TextStream t;
  t.reset(nullptr);
  std::vector<std::string> sent;
  // U+00E9 is C3 A9; U+4E2D is E4 B8 AD.
  EXPECT_EQ(feed(t, {"caf\xC3", "\xA9 \xE4", "\xB8", "\xAD"}, &sent), "caf\xC3\xA9 \xE4\xB8\xAD");
  EXPECT_EQ(sent[0], "caf");
  EXPECT_EQ(sent[1], "\xC3\xA9 ");
  EXPECT_EQ(sent[2], "");
  EXPECT_EQ(sent[3], "\xE4\xB8\xAD");
}

TEST(TextStream, InvalidBytesBecomeReplacementCharacters) {
  TextStream t;
  t.reset(nullptr);
  std::vector<std::string> sent;
  EXPECT_EQ(feed(t, {"a\xFF", "b"}, &sent),
            "a\xEF\xBF\xBD"
            "b");
}

}  // namespace
}  // namespace colibri::server
