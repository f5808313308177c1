// Generation: prompt -> tokens -> prefill -> (sample -> decode)* -> text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"

namespace colibri {

struct GenerateOptions {
  int n_predict = 128;       // tokens to generate at most; < 0: until EOG or the context is full
  SamplerParams sampling;
  bool add_special = true;   // BOS as the vocabulary says
  bool parse_special = false;
  bool stop_at_eog = true;
  bool trace_routing = false;  // fill GenerateStep::routing
  std::vector<std::string> stop;  // stop strings (not included in the text)
};

struct GenerateStep {
  int32_t token = 0;
  std::string_view text;            // complete UTF-8 ready to print (may be empty)
  const RoutingTrace* routing = nullptr;  // this token's routing (trace_routing)
};

enum class FinishReason { kLength, kStop, kContext, kCancelled };

struct GenerateResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated
  std::string text;
  FinishReason finish = FinishReason::kLength;
  double prompt_s = 0, gen_s = 0;
};

// Called per generated token; return false to stop.
using StepCallback = std::function<bool(const GenerateStep&)>;

// Runs on sequence 0 from position 0.
GenerateResult generate(Engine& engine, std::string_view prompt, const GenerateOptions& o,
                        const StepCallback& on_step = {});

// "prompt 12 tok, 340.1 tok/s | generation 64 tok, 55.2 tok/s | peak RSS 120.4 MiB"
std::string format_summary(const GenerateResult& r, const EngineStats& s);

}  // namespace colibri
