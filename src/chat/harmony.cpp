#include "chat/harmony.h"

namespace colibri {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
// A message ends at <|end|>, or at the reply's end (<|return|> or <|call|>
// where the text kept them).
constexpr std::string_view kEnds[] = {"<|end|>", "<|return|>", "<|call|>"};

bool consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

void append(std::string& to, std::string_view text) {
  if (!to.empty()) to += '\n';
  to += text;
}

}  // namespace

std::optional<HarmonyReply> parse_harmony_reply(std::string_view text) {
  if (text.find(kChannel) == std::string_view::npos) return std::nullopt;
  HarmonyReply reply;
  std::string_view s = text;
  bool first = true;
  while (!s.empty()) {
    // The generation prompt wrote the first header's "<|start|>assistant".
    if (!first) {
      if (!consume(s, kStart) || !consume(s, "assistant")) return std::nullopt;
    }
    first = false;
    if (!consume(s, kChannel)) return std::nullopt;
    const size_t header_end = s.find(kMessage);
    if (header_end == std::string_view::npos) return std::nullopt;
    const std::string_view channel = s.substr(0, header_end);
    s.remove_prefix(header_end + kMessage.size());
    size_t body_end = s.size(), marker = 0;
    for (std::string_view end : kEnds) {
      const size_t at = s.find(end);
      if (at < body_end) {
        body_end = at;
        marker = end.size();
      }
    }
    const std::string_view body = s.substr(0, body_end);
    // Only a bare channel name: "commentary", "analysis to=..." and the like
    // are tool traffic that content and thinking cannot carry.
    if (channel == "analysis") append(reply.analysis, body);
    else if (channel == "final") append(reply.final, body);
    else return std::nullopt;
    s.remove_prefix(body_end + marker);
  }
  return reply;
}

nlohmann::ordered_json split_harmony_replies(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  if (!out.is_array()) return out;
  for (auto& m : out) {
    if (!m.is_object() || m.value("role", "") != "assistant" || m.contains("thinking")) continue;
    const auto content = m.find("content");
    if (content == m.end() || !content->is_string()) continue;
    const auto reply = parse_harmony_reply(content->get_ref<const std::string&>());
    if (!reply) continue;
    if (!reply->analysis.empty()) m["thinking"] = reply->analysis;
    m["content"] = reply->final;
  }
  return out;
}

}  // namespace colibri
