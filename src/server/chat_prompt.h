// Chat messages -> prompt text -> tokens.
//
// The template is, in order of preference: a file given with
// --chat-template, the model's `tokenizer.chat_template`, or ChatML
// (<|im_start|>role\ncontent<|im_end|>) for models that carry none.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"

namespace colibri {
class Engine;
class Tokenizer;
}  // namespace colibri

namespace colibri::server {

class ChatFormatter {
 public:
  // `override_path`: a template file, or "" for the model's own.
  ChatFormatter(const Engine& engine, const std::string& override_path);

  // Throws Error when the template fails on these messages.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt = true) const;

  // Where the template came from, for the startup log and the docs.
  const std::string& origin() const { return origin_; }

 private:
  std::unique_ptr<ChatTemplate> template_;
  std::string origin_;
  std::string bos_, eos_;
  mutable std::mutex mu_;  // rendering is not promised to be thread-safe
};

// Prompt text -> tokens, with BOS where the vocabulary adds one and special
// tokens parsed (a rendered chat template spells them as text). A template
// that writes the BOS text itself would give two BOS tokens: one is dropped.
std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, const std::string& text);

extern const char* const kChatMLTemplate;

}  // namespace colibri::server
