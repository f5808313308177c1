#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "chat/harmony.h"
#include "engine/engine.h"

namespace colibri::server {

const char* const kChatMLTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] %}{{ message['content'] }}{% endif %}"
    "{{ '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

ChatFormatter::ChatFormatter(const Engine& engine, const std::string& override_path) {
  std::string source;
  if (!override_path.empty()) {
    std::ifstream f(override_path, std::ios::binary);
    CLB_CHECK(f, "cannot read the chat template file %s", override_path.c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    source = ss.str();
    origin_ = override_path;
  } else if (auto t = engine.file().get_string("tokenizer.chat_template"); t && !t->empty()) {
    source = std::string(*t);
    origin_ = "the model's tokenizer.chat_template";
  } else {
    source = kChatMLTemplate;
    origin_ = "ChatML (the model has no tokenizer.chat_template)";
  }
  template_ = std::make_unique<ChatTemplate>(source);
  const Tokenizer& tok = engine.tokenizer();
  if (tok.bos() >= 0) bos_ = std::string(tok.token_text(tok.bos()));
  if (tok.eos() >= 0) eos_ = std::string(tok.token_text(tok.eos()));
}

std::string ChatFormatter::render(const nlohmann::ordered_json& messages,
                                  const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt) const {
  ChatRequest r;
  // A gpt-oss reply sent back as generated carries its harmony channels,
  // which the gpt-oss template refuses as content (chat/harmony.h).
  r.messages = split_harmony_replies(messages);
  r.tools = tools;
  r.add_generation_prompt = add_generation_prompt;
  r.bos_token = bos_;
  r.eos_token = eos_;
  std::lock_guard<std::mutex> lock(mu_);
  return template_->render(r);
}

std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, true, true);
  if (ids.size() >= 2 && tok.bos() >= 0 && ids[0] == tok.bos() && ids[1] == tok.bos())
    ids.erase(ids.begin());
  if (ids.empty() && tok.bos() >= 0) ids.push_back(tok.bos());
  return ids;
}

}  // namespace colibri::server
