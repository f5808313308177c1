// libFuzzer target for the chat template interpreter (src/chat/jinja_*): a
// template comes with the model file, so any bytes must parse and render or
// throw Error, within the render's limits, with no crash, sanitizer report
// or hang. The render sees a small conversation with a tool call and a tool,
// as a chat request gives it.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "chat/jinja.h"

namespace {

const colibri::jinja::Value& conversation() {
  static const colibri::jinja::Value vars =
      colibri::jinja::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "What is 6 x 7?"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"type": "function", "function": {"name": "mul", "arguments": {"a": 6, "b": 7}}}]},
      {"role": "tool", "content": "42"},
      {"role": "assistant", "content": "42.", "reasoning_content": "6 x 7 = 42"}
    ],
    "tools": [{"type": "function", "function": {"name": "mul", "description": "a x b",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })"));
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    // A smaller step budget than a server's keeps each input fast; the
    // limits on what a render builds are the server's.
    const colibri::jinja::Template t(
        source, {.trim_blocks = true, .lstrip_blocks = true, .max_steps = 20000});
    (void)t.render(conversation());
  } catch (const colibri::Error& e) {
    // What the standard library threw, made an Error by Template's net
    // ("chat template: ... while parsing it"): a check the interpreter
    // lacks, so a finding (running out of memory aside).
    const std::string_view what = e.what();
    if (what.starts_with("chat template: ") && what.find("out of memory") == std::string_view::npos)
      __builtin_trap();
  }
  return 0;
}
