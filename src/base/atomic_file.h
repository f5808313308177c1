// Files written whole or not at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace colibri {

using ByteSink = std::function<void(const uint8_t* p, size_t n)>;

// Writes path + ".tmp" through emit's sink, then renames it over path: a
// reader of path sees the old file or the whole new one. On any error (the
// sink's, or whatever emit throws) the temporary is removed and the error
// rethrown; Error names the temporary and what failed.
void write_file_atomically(const std::string& path,
                           const std::function<void(const ByteSink&)>& emit);

}  // namespace colibri
