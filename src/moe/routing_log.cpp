#include "moe/routing_log.h"

#include <charconv>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "moe/cache_policy.h"

namespace colibri {

namespace {

constexpr const char* kHeader = "# colibri routing log: n_layer %d n_expert %d";
constexpr int kMaxKeys = 1 << 24;  // n_layer x n_expert (DeepSeek-V3: 61 x 256)

// Parses a decimal int in [0, max), the whole of `s`; false otherwise.
bool parse_index(std::string_view s, int max, int* out) {
  int v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0 || v >= max) return false;
  *out = v;
  return true;
}

}  // namespace

std::string routing_log_header(int n_layer, int n_expert) {
  return strprintf(kHeader, n_layer, n_expert) + "\n";
}

std::string routing_log_line(const int32_t* ids, int n_layer, int k) {
  std::string s;
  for (int l = 0; l < n_layer; ++l) {
    if (l) s += ' ';
    const int32_t* e = ids + static_cast<size_t>(l) * k;
    if (e[0] < 0) {
      s += '-';
      continue;
    }
    for (int j = 0; j < k && e[j] >= 0; ++j) {
      if (j) s += ',';
      s += std::to_string(e[j]);
    }
  }
  s += '\n';
  return s;
}

RoutingLog read_routing_log(const std::string& path, const RoutingProgress& progress) {
  std::ifstream in(path);
  if (!in) fail("cannot open routing log '%s'", path.c_str());
  std::error_code size_error;
  const uint64_t file_bytes = std::filesystem::file_size(path, size_error);
  RoutingLog log;
  std::string line;
  if (!std::getline(in, line) ||
      std::sscanf(line.c_str(), kHeader, &log.n_layer, &log.n_expert) != 2 || log.n_layer <= 0 ||
      log.n_expert <= 0 || log.n_layer > kMaxKeys / log.n_expert)
    fail("%s:1: not a routing log (expected \"# colibri routing log: n_layer L n_expert E\")", path.c_str());
  for (int64_t ln = 2; std::getline(in, line); ++ln) {
    if (progress && ln % 65536 == 0 && !size_error) progress(static_cast<uint64_t>(in.tellg()), file_bytes);
    if (line.empty()) continue;
    int layer = 0;
    size_t pos = 0;
    while (pos <= line.size()) {
      const size_t end = std::min(line.find(' ', pos), line.size());
      const std::string_view field(line.data() + pos, end - pos);
      if (layer >= log.n_layer)
        fail("%s:%lld: more than %d layers", path.c_str(), static_cast<long long>(ln), log.n_layer);
      if (field != "-") {
        size_t q = 0;
        while (q <= field.size()) {
          const size_t c = std::min(field.find(',', q), field.size());
          int e = 0;
          if (!parse_index(field.substr(q, c - q), log.n_expert, &e))
            fail("%s:%lld: layer %d: '%.*s' is not an expert in [0, %d)", path.c_str(),
                 static_cast<long long>(ln), layer, static_cast<int>(field.size()), field.data(), log.n_expert);
          log.keys.push_back(layer * log.n_expert + e);
          q = c + 1;
        }
      }
      ++layer;
      pos = end + 1;
    }
    if (layer != log.n_layer)
      fail("%s:%lld: %d layers, the header says %d", path.c_str(), static_cast<long long>(ln), layer,
           log.n_layer);
    ++log.n_tokens;
  }
  if (progress && !size_error) progress(file_bytes, file_bytes);
  return log;
}

Replay replay_policies(const RoutingLog& log, int n_slots, std::span<const int32_t> pinned,
                       std::span<const uint64_t> history, const RoutingProgress& progress) {
  const int n_keys = log.n_layer * log.n_expert;
  std::vector<char> is_pinned(static_cast<size_t>(n_keys), 0);
  for (int32_t k : pinned)
    if (k >= 0 && k < n_keys) is_pinned[static_cast<size_t>(k)] = 1;
  const std::span<const int32_t> all(log.keys);
  const size_t split = all.size() / 2;
  // The unpinned uses of keys[0, end): the policies' trace, and how many
  // uses the pinned keys served.
  auto unpinned = [&](size_t end, uint64_t* pinned_uses) {
    std::vector<int32_t> rest;
    rest.reserve(end);
    for (size_t i = 0; i < end; ++i)
      if (!is_pinned[static_cast<size_t>(all[i])]) rest.push_back(all[i]);
    *pinned_uses = end - rest.size();
    return rest;
  };
  uint64_t pinned_all = 0, pinned_early = 0;
  const std::vector<int32_t> rest = unpinned(all.size(), &pinned_all);
  const std::vector<int32_t> rest_early = unpinned(split, &pinned_early);
  const double uses = static_cast<double>(std::max<size_t>(all.size(), 1));
  const double late_uses = static_cast<double>(std::max<size_t>(all.size() - split, 1));
  const std::span<const int32_t> late = all.subspan(split);
  // Work in uses simulated: each policy over rest and rest_early, the bounds
  // over all and late, the learned set over all.
  const uint64_t work = 2 * (rest.size() + rest_early.size()) + 3 * all.size() + 2 * late.size();
  uint64_t done = 0;
  auto step = [&](size_t n) {
    done += n;
    if (progress) progress(done, work);
  };
  step(0);
  Replay out;
  for (const char* p : {"lru", "lfu-decay"}) {
    const uint64_t h = n_slots > 0 ? simulate_cache(p, n_slots, n_keys, rest, history) : 0;
    step(rest.size());
    const uint64_t h_early = n_slots > 0 ? simulate_cache(p, n_slots, n_keys, rest_early, history) : 0;
    step(rest_early.size());
    out.rows.push_back({p, static_cast<double>(pinned_all + h) / uses,
                        static_cast<double>(pinned_all - pinned_early + h - h_early) / late_uses});
  }
  const int total = n_slots + static_cast<int>(pinned.size());
  const double fixed_all = static_cast<double>(simulate_fixed_set(total, all)) / uses;
  step(all.size());
  out.rows.push_back({"best fixed set", fixed_all, static_cast<double>(simulate_fixed_set(total, late)) / late_uses});
  step(late.size());
  const double optimal_all = total > 0 ? static_cast<double>(simulate_optimal(total, all)) / uses : 0;
  step(all.size());
  out.rows.push_back({"optimal", optimal_all,
                      total > 0 ? static_cast<double>(simulate_optimal(total, late)) / late_uses : 0});
  step(late.size());
  out.learned_late = static_cast<double>(simulate_learned_set(total, all, split)) / late_uses;
  step(all.size());
  return out;
}

}  // namespace colibri
