// GPT-OSS replies (the harmony format) back into chat messages.
//
// A gpt-oss reply, decoded as colibri decodes it, keeps its harmony markers:
// <|channel|>, <|message|>, <|start|> and <|end|> are user-defined tokens and
// are rendered, while <|return|> (control) ends generation and is not. E.g.
//   <|channel|>analysis<|message|>Add them.<|end|><|start|>assistant
//   <|channel|>final<|message|>4
// The gpt-oss chat template refuses such text as an assistant message's
// content (it wants the analysis in "thinking" and the final answer in
// "content"), so a conversation's next turn could not be rendered.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace colibri {

struct HarmonyReply {
  std::string analysis;  // the analysis channel's messages, joined by "\n"
  std::string final;     // the final channel's messages, joined by "\n"
};

// Parses a reply made only of analysis and final messages. nullopt when the
// text has no harmony markers, or holds anything else (a tool call, the
// commentary channel, text outside a message): such a reply is left as it is.
std::optional<HarmonyReply> parse_harmony_reply(std::string_view text);

// `messages` with every assistant message whose string content is such a
// reply (and that has no "thinking" of its own) split into "thinking" and
// "content", as the gpt-oss template expects. Other messages are unchanged.
nlohmann::ordered_json split_harmony_replies(const nlohmann::ordered_json& messages);

}  // namespace colibri
