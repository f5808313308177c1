// A decode step's attention from DRAM on the thread pool, against the
// bandwidth probe's loads-only kernel (read_sum) over the same cache bytes
// split the same way: which share of the memory rate attention keeps over
// each cache type. Not a test; run it by hand:
//   build/tests/tensor/bench_attend [types] [positions] [layers] [heads] [head_dim] [threads]
// e.g. `bench_attend q4_0,q8_0,f16 4096 16 16 128 2` (OLMoE after a 4096-token
// prompt: 9.4 MB of q4_0 keys and values a layer, 151 MB in all, so every
// pass reads the caches from DRAM). One pass is a step: for each layer the
// heads split over the pool as the engine splits them, each head one query
// over its head-major rows of keys and values. Kernel and loads-only passes
// alternate, type after type; medians of 7 after a warm-up.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/sys.h"
#include "base/thread_pool.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

// One cache type's keys and values for every layer and head: rows of
// head_dim elements in KV units (float, F16 bits, q8_0 or q4_0 blocks).
struct Cache {
  DType type;
  std::vector<uint8_t> k, v;
  size_t row_bytes = 0;
};

Cache make_cache(DType type, int64_t rows, int hd, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Cache c{type, {}, {}, 0};
  c.row_bytes = row_bytes(type, hd);
  std::vector<float> row(hd);
  for (std::vector<uint8_t>* kv : {&c.k, &c.v}) {
    kv->resize(static_cast<size_t>(rows) * c.row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = nd(rng);
      uint8_t* dst = kv->data() + r * c.row_bytes;
      if (type == DType::F16) {
        fp32_to_fp16_row(row.data(), reinterpret_cast<uint16_t*>(dst), hd);
      } else if (type == DType::Q8_0) {
        fp32_to_q8_0_row(row.data(), reinterpret_cast<block_q8_0*>(dst), hd);
      } else {
        fp32_to_q4_0_row(row.data(), reinterpret_cast<block_q4_0*>(dst), hd);
      }
    }
  }
  return c;
}

template <typename KV>
void attend_head(const Cache& c, size_t off, const float* q, int64_t n_pos, int hd, float* scores,
                 float* out) {
  const auto* k = reinterpret_cast<const KV*>(c.k.data() + off);
  const auto* v = reinterpret_cast<const KV*>(c.v.data() + off);
  const size_t stride = c.row_bytes / sizeof(KV);
  attend(q, k, stride, v, stride, n_pos, hd, hd, 1.0f / 11.3f, scores, out);
}

DType parse_type(const std::string& s) {
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0})
    if (dtype_name(t) == s) return t;
  std::fprintf(stderr, "unknown cache type %s (f16, q8_0, q4_0)\n", s.c_str());
  std::exit(2);
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  using namespace colibri;
  const std::string types = argc > 1 ? argv[1] : "q4_0,q8_0,f16";
  const int64_t n_pos = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int layers = argc > 3 ? std::atoi(argv[3]) : 16;
  const int heads = argc > 4 ? std::atoi(argv[4]) : 16;
  const int hd = argc > 5 ? std::atoi(argv[5]) : 128;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  if (n_pos < 1 || layers < 1 || heads < 1 || hd < 32 || hd % 32 != 0 || threads < 1) {
    std::fprintf(stderr, "positions, layers, heads, threads >= 1; head_dim a multiple of 32\n");
    return 2;
  }
  std::mt19937 rng(1);
  std::vector<Cache> caches;
  std::stringstream ss(types);
  for (std::string t; std::getline(ss, t, ',');)
    caches.push_back(make_cache(parse_type(t), n_pos * layers * heads, hd, rng));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(static_cast<size_t>(heads) * hd);
  for (float& x : q) x = nd(rng);
  std::vector<float> scores(static_cast<size_t>(threads) * n_pos), out(static_cast<size_t>(heads) * hd);
  std::vector<uint64_t> sums(threads);
  ThreadPool pool(threads);

  // One step over every layer, the kernel's or loads only, in GB/s of cache.
  auto pass = [&](const Cache& c, bool loads_only) {
    const size_t head_bytes = n_pos * c.row_bytes;
    const double t0 = now_seconds();
    for (int l = 0; l < layers; ++l) {
      pool.parallel_for(heads, 1, [&](int64_t b, int64_t e, int th) {
        for (int64_t h = b; h < e; ++h) {
          const size_t off = (static_cast<size_t>(l) * heads + h) * head_bytes;
          if (loads_only) {
            sums[th] += read_sum(c.k.data() + off, head_bytes / 256 * 256);
            sums[th] += read_sum(c.v.data() + off, head_bytes / 256 * 256);
            continue;
          }
          float* s = scores.data() + th * n_pos;
          float* o = out.data() + h * hd;
          if (c.type == DType::F16)
            attend_head<uint16_t>(c, off, q.data() + h * hd, n_pos, hd, s, o);
          else if (c.type == DType::Q8_0)
            attend_head<block_q8_0>(c, off, q.data() + h * hd, n_pos, hd, s, o);
          else
            attend_head<block_q4_0>(c, off, q.data() + h * hd, n_pos, hd, s, o);
        }
      });
    }
    return 2.0 * layers * heads * head_bytes / (now_seconds() - t0) / 1e9;
  };

  std::printf("%lld positions, %d layers x %d heads of %d, %d threads\n", static_cast<long long>(n_pos),
              layers, heads, hd, threads);
  std::printf("| cache | MB a layer | us a layer | kernel GB/s | loads-only GB/s | kernel / loads |\n"
              "|---|---|---|---|---|---|\n");
  std::vector<std::vector<double>> k(caches.size()), ld(caches.size());
  for (int r = 0; r < 8; ++r)
    for (size_t i = 0; i < caches.size(); ++i) {
      const double kr = pass(caches[i], false), lr = pass(caches[i], true);
      if (r == 0) continue;  // warm-up
      k[i].push_back(kr);
      ld[i].push_back(lr);
    }
  for (size_t i = 0; i < caches.size(); ++i) {
    std::sort(k[i].begin(), k[i].end());
    std::sort(ld[i].begin(), ld[i].end());
    const double km = k[i][k[i].size() / 2], lm = ld[i][ld[i].size() / 2];
    const double mb = 2.0 * heads * n_pos * caches[i].row_bytes / 1e6;
    std::printf("| %s | %.2f | %.1f | %.1f | %.1f | %.1f%% |\n", dtype_name(caches[i].type), mb,
                mb / km * 1e3, km, lm, 100.0 * km / lm);
  }
  uint64_t s = 0;
  for (uint64_t v : sums) s += v;
  std::printf("(checksum %llu, out %g)\n", static_cast<unsigned long long>(s), static_cast<double>(out[0]));
  return 0;
}
