// gpt-oss replies, as colibri decodes them, back into the messages the
// gpt-oss template takes; the examples follow openai/harmony's format
// (../shared/data/gpt-oss-harmony).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/harmony.h"

namespace colibri {
namespace {

using nlohmann::ordered_json;

TEST(Harmony, SplitsAnalysisAndFinal) {
  const auto r = parse_harmony_reply(
      "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final"
      "<|message|>2 + 2 = 4.");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->analysis, "Add them.");
  EXPECT_EQ(r->final, "2 + 2 = 4.");

  // As harmony's test_simple_reasoning_response ids decode: <|return|> kept.
  const auto kept = parse_harmony_reply(
      "<|channel|>analysis<|message|>Simple arithmetic.<|return|><|start|>assistant"
      "<|channel|>final<|message|>4<|return|>");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->analysis, "Simple arithmetic.");
  EXPECT_EQ(kept->final, "4");

  const auto final_only = parse_harmony_reply("<|channel|>final<|message|>Hi!");
  ASSERT_TRUE(final_only);
  EXPECT_EQ(final_only->analysis, "");
  EXPECT_EQ(final_only->final, "Hi!");
}

TEST(Harmony, LeavesOtherTextAlone) {
  EXPECT_FALSE(parse_harmony_reply("Just text, no markers."));
  EXPECT_FALSE(parse_harmony_reply(""));
  // A tool call goes to the commentary channel with a recipient.
  EXPECT_FALSE(parse_harmony_reply(
      "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant to=functions.lookup"
      "<|channel|>commentary json<|message|>{\"q\": 1}"));
  EXPECT_FALSE(parse_harmony_reply("<|channel|>commentary<|message|>Working on it."));
  EXPECT_FALSE(parse_harmony_reply("text before <|channel|>final<|message|>x"));
  EXPECT_FALSE(parse_harmony_reply("<|channel|>final without a message marker"));
  EXPECT_FALSE(parse_harmony_reply("<|channel|>final<|message|>a<|end|>trailing"));
}

std::string gpt_oss_template() {
  const std::filesystem::path p =
      std::filesystem::path(COLIBRI_SHARED_DIR) / "data/chat-templates/openai-gpt-oss-120b.jinja";
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A multi-turn gpt-oss chat: the first reply goes back as generated. The
// template refuses the raw text; split, it renders as if the client had sent
// thinking and content separately (the analysis of an earlier turn dropped).
TEST(Harmony, NextTurnRendersThroughTheGptOssTemplate) {
  const std::string source = gpt_oss_template();
  if (source.empty()) GTEST_SKIP() << "no ../shared gpt-oss chat template";
  ChatTemplate tmpl(source);
  const std::string reply =
      "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final"
      "<|message|>2 + 2 = 4.";
  ChatRequest raw;
  raw.messages = ordered_json::array({{{"role", "user"}, {"content", "What is 2 + 2?"}},
                                      {{"role", "assistant"}, {"content", reply}},
                                      {{"role", "user"}, {"content", "And 3 + 3?"}}});
  std::tm now{};
  now.tm_year = 125;
  now.tm_mon = 5;
  now.tm_mday = 28;
  raw.now = now;
  EXPECT_THROW(tmpl.render(raw), Error);

  ChatRequest split = raw;
  split.messages = split_harmony_replies(raw.messages);
  EXPECT_EQ(split.messages[1]["thinking"], "Add them.");
  EXPECT_EQ(split.messages[1]["content"], "2 + 2 = 4.");
  EXPECT_EQ(split.messages[0], raw.messages[0]);
  ChatRequest explicit_fields = raw;
  explicit_fields.messages[1] = {
      {"role", "assistant"}, {"content", "2 + 2 = 4."}, {"thinking", "Add them."}};
  const std::string got = tmpl.render(split);
  EXPECT_EQ(got, tmpl.render(explicit_fields));
  EXPECT_NE(got.find("<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|end|>"
                     "<|start|>user<|message|>And 3 + 3?<|end|><|start|>assistant"),
            std::string::npos)
      << got;

  // A message that already has its thinking is the client's, kept as sent.
  ordered_json own = raw.messages;
  own[1]["thinking"] = "mine";
  EXPECT_EQ(split_harmony_replies(own), own);
}

}  // namespace
}  // namespace colibri
