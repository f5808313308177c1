#include "moe/history.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "formats/gguf.h"

namespace colibri {

namespace {
constexpr char kMagic[4] = {'C', 'L', 'B', 'H'};
constexpr uint32_t kVersion = 1;
}  // namespace

std::string history_key(const GgufFile& f) {
  // The mapping starts at byte 0: any tensor's data minus its absolute offset.
  uint64_t h = 1469598103934665603ull;
  if (!f.tensors().empty()) {
    const GgufTensor& t = f.tensors().front();
    const uint8_t* base = f.tensor_data(t) - t.offset;
    for (size_t i = 0; i < f.data_offset(); ++i) h = (h ^ base[i]) * 1099511628211ull;
  }
  return strprintf("%llx-%016llx", static_cast<unsigned long long>(f.file_size()),
                   static_cast<unsigned long long>(h));
}

std::string default_history_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/colibri";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/colibri";
  return "";
}

std::string history_file(const std::string& dir, const std::string& key) {
  return dir + "/" + key + ".counts";
}

std::vector<uint64_t> load_history(const std::string& path, int n_layer, int n_expert) {
  std::vector<uint64_t> counts;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return counts;
  char magic[4];
  uint32_t head[3];
  const size_t n = static_cast<size_t>(n_layer) * n_expert;
  if (std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, kMagic, 4) == 0 &&
      std::fread(head, sizeof head, 1, f) == 1 && head[0] == kVersion &&
      head[1] == static_cast<uint32_t>(n_layer) && head[2] == static_cast<uint32_t>(n_expert)) {
    counts.resize(n);
    if (std::fread(counts.data(), sizeof(uint64_t), n, f) != n) counts.clear();
  }
  std::fclose(f);
  return counts;
}

void save_history(const std::string& path, int n_layer, int n_expert,
                  const std::vector<uint64_t>& counts) {
  const size_t n = static_cast<size_t>(n_layer) * n_expert;
  CLB_ASSERT(counts.size() == n);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  CLB_CHECK(!ec, "routing history %s: cannot create its directory: %s", path.c_str(),
            ec.message().c_str());
  const std::string tmp = strprintf("%s.%d.tmp", path.c_str(), static_cast<int>(getpid()));
  FILE* f = std::fopen(tmp.c_str(), "wb");
  CLB_CHECK(f, "routing history %s: %s", tmp.c_str(), std::strerror(errno));
  const uint32_t head[3] = {kVersion, static_cast<uint32_t>(n_layer), static_cast<uint32_t>(n_expert)};
  bool ok = std::fwrite(kMagic, 1, 4, f) == 4 && std::fwrite(head, sizeof head, 1, f) == 1 &&
            std::fwrite(counts.data(), sizeof(uint64_t), n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("routing history %s: cannot write it", path.c_str());
  }
}

}  // namespace colibri
