// colibri's subcommands. Each registers its flags on a CLI11 subcommand and
// returns the function that runs it (exit code; Error is caught in main).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "engine/engine.h"

namespace colibri::cli {

using Runner = std::function<int()>;

// Flags every model-loading command shares: -m, -c, -t, --batch, --precision.
void add_engine_flags(CLI::App* app, EngineOptions* o);

Runner add_run(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_inspect(CLI::App& app);

}  // namespace colibri::cli
