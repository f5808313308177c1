// Routing history: per-model counts of (layer, expert) acquires, kept in a
// small file between runs and used to pin the hottest experts at start.
//
// File: "CLBH", u32 version (1), u32 n_layer, u32 n_expert, then n_layer *
// n_expert u64 counts, little-endian. Named by the model's key so that a
// re-quantized or edited file starts afresh.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace colibri {

class GgufFile;

// "<file size in hex>-<FNV-1a 64 of the header, metadata and tensor table>".
std::string history_key(const GgufFile& f);
// $XDG_CACHE_HOME/colibri, else $HOME/.cache/colibri, else "" (no history).
std::string default_history_dir();
std::string history_file(const std::string& dir, const std::string& key);

// The counts, or empty when the file is absent, unreadable or made for
// another shape (a history is a hint: it never stops a run).
std::vector<uint64_t> load_history(const std::string& path, int n_layer, int n_expert);
// Creates the directory; writes a temporary and renames it. Throws Error.
void save_history(const std::string& path, int n_layer, int n_expert,
                  const std::vector<uint64_t>& counts);

}  // namespace colibri
