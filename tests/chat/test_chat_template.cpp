// Real chat templates (../shared/data/chat-templates) against Python jinja2
// with Hugging Face's settings, and gpt-oss against openai/harmony's own
// expected renderings.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "chat/chat_template.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const std::string kShared = COLIBRI_SHARED_DIR;
const std::string kHere = std::string(COLIBRI_SOURCE_DIR) + "/tests/chat";

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path templates_dir() {
  return fs::path(kShared) / "data" / "chat-templates";
}

// The fixed clock of make_reference.py: 2025-06-28 14:05:09.
std::tm reference_now() {
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 5;
  tm.tm_mday = 28;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  tm.tm_wday = 6;
  tm.tm_yday = 178;
  return tm;
}

// First line where two renderings differ, for a readable failure.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) i++;
  size_t from = i < 60 ? 0 : i - 60;
  return "at byte " + std::to_string(i) + "\n  want: ..." + want.substr(from, 120) +
         "\n  got:  ..." + got.substr(from, 120);
}

TEST(ChatTemplate, MatchesHuggingFaceRenderings) {
  if (!fs::exists(templates_dir())) GTEST_SKIP() << "no " << templates_dir() << " (../shared)";
  auto conversations = ordered_json::parse(read_file(kHere + "/conversations.json"));
  auto index = ordered_json::parse(read_file(kHere + "/reference/index.json"));
  std::map<std::string, ordered_json> by_name;
  for (const auto& c : conversations) by_name[c["name"]] = c;

  // Every shipped template is covered by the references.
  std::set<std::string> covered;
  for (const auto& r : index["renderings"]) covered.insert(r["template"].get<std::string>());
  for (const auto& entry : fs::directory_iterator(templates_dir())) {
    if (entry.path().extension() == ".jinja") {
      EXPECT_TRUE(covered.count(entry.path().filename().string()))
          << entry.path() << " has no references";
    }
  }

  std::map<std::string, std::unique_ptr<ChatTemplate>> parsed;
  int n_text = 0, n_error = 0;
  for (const auto& r : index["renderings"]) {
    std::string tmpl = r["template"], file = r["file"];
    SCOPED_TRACE(file);
    if (!parsed.count(tmpl))
      parsed[tmpl] = std::make_unique<ChatTemplate>(read_file(templates_dir() / tmpl));
    const ordered_json& conv = by_name.at(r["conversation"]);
    ChatRequest req;
    req.messages = conv["messages"];
    req.tools = conv.value("tools", ordered_json());
    req.extra_context = conv.value("extra", ordered_json());
    req.add_generation_prompt = r["add_generation_prompt"];
    req.bos_token = index["bos_token"];
    req.eos_token = index["eos_token"];
    req.now = reference_now();
    std::string want = read_file(kHere + "/reference/" + file);
    if (r["kind"] == "error") {
      EXPECT_THROW(parsed[tmpl]->render(req), Error) << "jinja2 raised: " << want;
      n_error++;
      continue;
    }
    std::string got;
    try {
      got = parsed[tmpl]->render(req);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
      continue;
    }
    EXPECT_TRUE(got == want) << first_difference(want, got);
    n_text++;
  }
  EXPECT_GT(n_text, 150);
  EXPECT_GT(n_error, 5);
}

// openai/harmony's renderer output for conversations that the gpt-oss
// template can express. The template always writes a system message with
// "Current date:" (from strftime_now), "Knowledge cutoff: 2024-06" and all
// three channels, and turns a leading system/developer message into the
// developer "# Instructions". So the harmony cases that match are those whose
// system message has a conversation start date and default settings:
//   test_no_tools, test_browser_tool_only, test_browser_and_python_tool,
//   test_browser_and_function_tool (builtin_tools and tools as kwargs,
//   an empty system message standing for "no developer instructions").
// The conversations without a date line are in the next test, which also
// lists those the template cannot express; test_simple_reasoning_response and
// test_simple_tool_call are token ids (tests/tokenizer), test_streamable_parser
// and test_tool_response_parsing parser inputs.
TEST(ChatTemplate, GptOssMatchesHarmony) {
  fs::path harmony = fs::path(kShared) / "data" / "gpt-oss-harmony";
  fs::path tmpl_path = templates_dir() / "openai-gpt-oss-120b.jinja";
  if (!fs::exists(harmony) || !fs::exists(tmpl_path)) GTEST_SKIP() << "no ../shared gpt-oss data";
  ChatTemplate tmpl(read_file(tmpl_path));
  auto lookup_weather = ordered_json::parse(R"({"type": "function", "function": {
      "name": "lookup_weather",
      "description": "Use this tool to lookup the weather in a given location. Call it with the parameter 'location', can be any textual description of a location.",
      "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                     "required": ["location"]}}})");
  struct Case {
    const char* file;
    ordered_json builtin_tools;
    ordered_json tools;
  };
  const Case cases[] = {
      {"test_no_tools.txt", nullptr, nullptr},
      {"test_browser_tool_only.txt", {"browser"}, nullptr},
      {"test_browser_and_python_tool.txt", {"browser", "python"}, nullptr},
      {"test_browser_and_function_tool.txt", {"browser"}, ordered_json::array({lookup_weather})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    ChatRequest req;
    req.messages = ordered_json::parse(R"([{"role": "system", "content": ""}])");
    req.tools = c.tools;
    if (!c.builtin_tools.is_null()) req.extra_context = {{"builtin_tools", c.builtin_tools}};
    req.now = reference_now();
    std::string want = read_file(harmony / c.file);
    // harmony's tests compare against the file with trailing whitespace removed.
    while (!want.empty() && std::isspace(static_cast<unsigned char>(want.back()))) want.pop_back();
    std::string got = tmpl.render(req);
    EXPECT_TRUE(got == want) << first_difference(want, got);
  }
}

// harmony's conversations without a conversation start date: the template
// cannot leave out its "Current date:" line (it always calls strftime_now), so
// that one line is removed from the rendering and everything else must match:
// reasoning effort, the user turn and the generation prompt. test_dropping_cot_by_default has
// no system message at all; the template always writes one, so there the
// turns after it are compared (an earlier turn's analysis is dropped).
// Not expressible through the template: test_simple_convo_*_effort with
// developer instructions (the template writes "\n\n" after the instructions,
// for a "# Tools" section that may follow, also when none does; harmony ends the
// message right after them), test_reasoning_system_message* (their
// system message lists only the analysis and final channels, one also another
// knowledge cutoff), test_preserve_cot (keeps an earlier turn's analysis),
// test_keep_analysis_between_finals (the template ends a final assistant turn
// with <|return|>, harmony with <|end|>), test_does_not_drop_if_ongoing_analysis
// (harmony writes "<|constrain|>json" and renders tool results as
// "<|start|>functions.X<|message|>", the template "json" and
// "functions.X to=assistant<|channel|>commentary"), and
// test_render_functions_with_parameters (schema titles and examples).
TEST(ChatTemplate, GptOssMatchesHarmonyOutsideTheDateLine) {
  fs::path harmony = fs::path(kShared) / "data" / "gpt-oss-harmony";
  fs::path tmpl_path = templates_dir() / "openai-gpt-oss-120b.jinja";
  if (!fs::exists(harmony) || !fs::exists(tmpl_path)) GTEST_SKIP() << "no ../shared gpt-oss data";
  ChatTemplate tmpl(read_file(tmpl_path));
  const std::string capital = "What is the capital of the largest country in the world?";
  auto user = [](const std::string& text) { return ordered_json{{"role", "user"}, {"content", text}}; };
  struct Case {
    std::string file;
    ordered_json messages;
    const char* effort;  // nullptr: the template's default (medium)
  };
  const std::vector<Case> cases = {
      {"test_simple_convo.txt", {user("What is 2 + 2?")}, nullptr},
      {"test_simple_convo_low_effort_no_instruction.txt", {user(capital)}, "low"},
      {"test_simple_convo_medium_effort_no_instruction.txt", {user(capital)}, "medium"},
      {"test_simple_convo_high_effort_no_instruction.txt", {user(capital)}, "high"},
  };
  const std::string date_line = "Current date: 2025-06-28\n";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    ChatRequest req;
    req.messages = c.messages;
    if (c.effort) req.extra_context = {{"reasoning_effort", c.effort}};
    req.now = reference_now();
    std::string got = tmpl.render(req);
    const size_t at = got.find(date_line);
    ASSERT_NE(at, std::string::npos) << got;
    got.erase(at, date_line.size());
    std::string want = read_file(harmony / c.file);
    while (!want.empty() && std::isspace(static_cast<unsigned char>(want.back()))) want.pop_back();
    EXPECT_TRUE(got == want) << first_difference(want, got);
  }

  SCOPED_TRACE("test_dropping_cot_by_default.txt");
  ChatRequest req;
  req.messages = ordered_json::array(
      {user("What is 2 + 2?"),
       {{"role", "assistant"},
        {"thinking", "User asks a simple question: \"What is 2 + 2?\" The answer: 4."},
        {"content", "2 + 2 equals 4."}},
       user("What about 9 / 2?")});
  req.now = reference_now();
  std::string got = tmpl.render(req);
  const std::string system_end = "<|end|>";
  ASSERT_EQ(got.rfind("<|start|>system<|message|>", 0), 0u);
  got.erase(0, got.find(system_end) + system_end.size());
  std::string want = read_file(harmony / "test_dropping_cot_by_default.txt");
  while (!want.empty() && std::isspace(static_cast<unsigned char>(want.back()))) want.pop_back();
  EXPECT_TRUE(got == want) << first_difference(want, got);
}

TEST(ChatTemplate, RaiseExceptionCarriesTheMessage) {
  try {
    render_chat("{{ raise_exception('roles must alternate') }}", ordered_json::array(), nullptr,
                true, "", "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, PassesVariablesAsHuggingFaceDoes) {
  std::string out = render_chat(
      "{{ bos_token }}|{{ messages[0].content }}|{{ tools is none }}|{{ add_generation_prompt }}|"
      "{{ enable_thinking }}|{{ eos_token }}",
      ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, false, "<s>", "</s>",
      {{"enable_thinking", false}});
  EXPECT_EQ(out, "<s>|hi|True|False|False|</s>");
}

// Callers holding nlohmann::json (sorted keys) convert implicitly.
TEST(ChatTemplate, AcceptsPlainJson) {
  nlohmann::json messages = nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(render_chat("{{ messages[0] | tojson }}", messages, nullptr, true, "", ""),
            R"({"content": "hi", "role": "user"})");
}

}  // namespace
}  // namespace colibri
