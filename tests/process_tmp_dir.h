// A directory of this test process's own under the system's temporary one
// (prefix and pid), removed at exit with whatever a failed test left in it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace colibri {

struct ProcessTmpDir {
  std::filesystem::path path;
  explicit ProcessTmpDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~ProcessTmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ProcessTmpDir(const ProcessTmpDir&) = delete;
  ProcessTmpDir& operator=(const ProcessTmpDir&) = delete;
};

}  // namespace colibri
