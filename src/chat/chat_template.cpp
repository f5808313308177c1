#include "chat/chat_template.h"

#include "base/error.h"
#include "chat/jinja.h"
#include "chat/jinja_builtins.h"

namespace colibri {

ChatTemplate::ChatTemplate(const std::string& source)
    : template_(std::make_unique<jinja::Template>(
          source, jinja::Options{.trim_blocks = true, .lstrip_blocks = true})) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const ChatRequest& req) const {
  using jinja::Value;
  Value vars = Value::dict();
  jinja::Dict& d = vars.dict_ref();
  if (req.extra_context.is_object())
    for (const auto& [k, v] : req.extra_context.items()) d.set(k, jinja::from_json(v));
  else
    CLB_CHECK(req.extra_context.is_null(), "chat template: extra_context must be an object");
  d.set("messages", jinja::from_json(req.messages));
  d.set("tools", jinja::from_json(req.tools));
  d.set("add_generation_prompt", Value(req.add_generation_prompt));
  d.set("bos_token", Value(req.bos_token));
  d.set("eos_token", Value(req.eos_token));
  d.set("raise_exception", Value::function("raise_exception", [](jinja::Args& args) -> Value {
          auto a = jinja::bind_args("raise_exception", args, {"message"}, 1);
          fail("template raised an error: %s", jinja::to_str(a[0]).c_str());
        }));
  std::optional<std::tm> now = req.now;
  d.set("strftime_now", Value::function("strftime_now", [now](jinja::Args& args) {
          auto a = jinja::bind_args("strftime_now", args, {"format"}, 1);
          std::tm tm{};
          if (now) {
            tm = *now;
          } else {
            std::time_t t = std::time(nullptr);
            localtime_r(&t, &tm);
          }
          char buf[256];
          size_t n = std::strftime(buf, sizeof buf, jinja::to_str(a[0]).c_str(), &tm);
          return Value(std::string(buf, n));
        }));
  return template_->render(vars);
}

std::string render_chat(const std::string& tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra_context) {
  ChatRequest req;
  req.messages = messages;
  req.tools = tools;
  req.add_generation_prompt = add_generation_prompt;
  req.bos_token = bos_token;
  req.eos_token = eos_token;
  req.extra_context = extra_context;
  return ChatTemplate(tmpl).render(req);
}

}  // namespace colibri
