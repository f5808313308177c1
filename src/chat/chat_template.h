// Chat prompts from a model's `tokenizer.chat_template`.
//
// Renders the template the way Hugging Face transformers does
// (apply_chat_template): trim_blocks and lstrip_blocks on, tojson as
// json.dumps(ensure_ascii=False), and the globals raise_exception(msg) and
// strftime_now(fmt). Messages and tools are JSON as the OpenAI chat API
// sends them; ordered_json keeps the client's key order, which tojson prints.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace colibri::jinja {
class Template;
}

namespace colibri {

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools (the template sees tools = none)
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // More template variables: enable_thinking, reasoning_effort,
  // builtin_tools, model_identity, ... (an object; null for none).
  nlohmann::ordered_json extra_context;
  // The local time strftime_now() formats; unset: the current time.
  std::optional<std::tm> now;
};

// A parsed chat template, rendered once per request.
class ChatTemplate {
 public:
  // Throws colibri::Error (with line and column) on a syntax error.
  explicit ChatTemplate(const std::string& source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Throws colibri::Error when the template fails or raises (raise_exception).
  std::string render(const ChatRequest& request) const;

 private:
  std::unique_ptr<jinja::Template> template_;
};

// One-shot form of ChatTemplate(tmpl).render(...).
std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra_context = {});

}  // namespace colibri
