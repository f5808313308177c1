// colibri's subcommands. Each registers its flags on a CLI11 subcommand and
// returns the function that runs it (exit code; Error is caught in main).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "engine/engine.h"
#include "engine/sampler.h"

namespace colibri::cli {

using Runner = std::function<int()>;

// Flags every model-loading command shares: -m, -c, -t, --batch, --precision.
void add_engine_flags(CLI::App* app, EngineOptions* o);
// --kv-type f16|f32|q8_0|q4_0 (part of add_engine_flags; plan adds it alone).
void add_kv_type_flag(CLI::App* app, DType* t);
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed.
void add_sampling_flags(CLI::App* app, SamplerParams* s);

// Each command file registers itself at static-initialisation time:
//   COLIBRI_COMMAND(add_run);
// where add_run(app) adds a subcommand to app and returns its runner. The
// CLI's sources are linked into the executable directly, so every file's
// registration is kept. Commands are listed in registration order.
using CommandFactory = Runner (*)(CLI::App& app);
bool register_command(CommandFactory f);

#define COLIBRI_COMMAND(factory) \
  static const bool colibri_command_##factory = ::colibri::cli::register_command(factory)

}  // namespace colibri::cli
