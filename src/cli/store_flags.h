// Flags of the expert store and its memory budget, shared by every command
// that loads a model: --mem, --cache-policy, --prefetch, --o-direct, --io,
// --io-depth, --history-dir, --no-history, --slots-per-layer.
#pragma once

#include <CLI/CLI.hpp>

#include "moe/placement.h"

namespace colibri::cli {

void add_store_flags(CLI::App* app, ExpertStoreOptions* o);

}  // namespace colibri::cli
