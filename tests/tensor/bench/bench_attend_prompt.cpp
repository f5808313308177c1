// A prompt's attention on one head, one thread, the cache in L2/L3: every
// query t of a P-token prompt sees positions 0..t, and the queries go to
// attend_batch in blocks of 8 (on AVX-512 the group kernels, head dims in the
// lanes) or 16 (the lanes kernel, one query a lane), the two alternating pass
// by pass. Multiply-adds counted as the work: (t + 1) x (head_dim +
// head_dim_v) for query t. Not a test; run it by hand:
//   build/tests/tensor/bench_attend_prompt [types] [positions] [head_dim] [head_dim_v]
// e.g. `bench_attend_prompt f16,q8_0 512,2048 128 128` (OLMoE's heads) or
// `bench_attend_prompt f16 1024 576 512` (MLA's latent heads). Medians of 7
// passes after a warm-up.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/sys.h"
#include "tensor/kv_row.h"
#include "tensor/ops.h"
#include "tensor/quant_blocks.h"

namespace colibri {
namespace {

// P rows of `n` elements of type t (F32, F16, q8_0 or q4_0), as raw bytes.
std::vector<uint8_t> make_rows(DType t, int64_t P, int n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> bytes(P * rb);
  std::vector<float> row(n);
  for (int64_t p = 0; p < P; ++p) {
    for (float& x : row) x = nd(rng);
    uint8_t* dst = bytes.data() + p * rb;
    if (t == DType::F32)
      std::copy(row.begin(), row.end(), reinterpret_cast<float*>(dst));
    else if (t == DType::F16)
      fp32_to_fp16_row(row.data(), reinterpret_cast<uint16_t*>(dst), n);
    else if (t == DType::Q8_0)
      fp32_to_q8_0_row(row.data(), reinterpret_cast<block_q8_0*>(dst), n);
    else
      fp32_to_q4_0_row(row.data(), reinterpret_cast<block_q4_0*>(dst), n);
  }
  return bytes;
}

template <typename KV>
void prompt(const std::vector<float>& q, int hd, int hdv, const std::vector<uint8_t>& k,
            const std::vector<uint8_t>& v, int64_t P, int block, const std::vector<int32_t>& n_pos,
            std::vector<float>& scores, std::vector<float>& out) {
  const auto* kr = reinterpret_cast<const KV*>(k.data());
  const auto* vr = reinterpret_cast<const KV*>(v.data());
  const size_t ks = kv_row_bytes<KV>(hd) / sizeof(KV), vs = kv_row_bytes<KV>(hdv) / sizeof(KV);
  for (int64_t t = 0; t < P; t += block) {
    const int m = static_cast<int>(std::min<int64_t>(block, P - t));
    attend_batch(q.data() + t * hd, hd, m, n_pos.data() + t, kr, ks, vr, vs, hd, hdv, 1.0f / 11.3f,
                 scores.data(), out.data() + t * hdv, hdv);
  }
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  using namespace colibri;
  const std::string types = argc > 1 ? argv[1] : "f16";
  const std::string lengths = argc > 2 ? argv[2] : "512,2048";
  const int hd = argc > 3 ? std::atoi(argv[3]) : 128;
  const int hdv = argc > 4 ? std::atoi(argv[4]) : hd;
  if (hd < 32 || hd % 32 != 0 || hdv < 32 || hdv % 32 != 0) {
    std::fprintf(stderr, "head dims: multiples of 32\n");
    return 2;
  }
  std::printf("| cache | positions | queries a call | ms | GFMA/s |\n|---|---|---|---|---|\n");
  std::stringstream ls(lengths);
  for (std::string len; std::getline(ls, len, ',');) {
    const int64_t P = std::atoll(len.c_str());
    if (P < 1) return 2;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> q(P * hd), scores(16 * P), out(P * hdv);
    for (float& x : q) x = nd(rng);
    std::vector<int32_t> n_pos(P);
    double work = 0;
    for (int64_t t = 0; t < P; ++t) {
      n_pos[t] = static_cast<int32_t>(t + 1);
      work += static_cast<double>(t + 1) * (hd + hdv);
    }
    std::stringstream ts(types);
    for (std::string name; std::getline(ts, name, ',');) {
      DType t = DType::F32;
      bool found = false;
      for (DType c : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0})
        if (dtype_name(c) == name) t = c, found = true;
      if (!found) {
        std::fprintf(stderr, "unknown cache type %s (f32, f16, q8_0, q4_0)\n", name.c_str());
        return 2;
      }
      const auto k = make_rows(t, P, hd, rng), v = make_rows(t, P, hdv, rng);
      std::vector<double> ms[2];
      for (int r = 0; r < 8; ++r)
        for (int b = 0; b < 2; ++b) {
          const int block = b == 0 ? 8 : 16;
          const double t0 = now_seconds();
          if (t == DType::F32)
            prompt<float>(q, hd, hdv, k, v, P, block, n_pos, scores, out);
          else if (t == DType::F16)
            prompt<uint16_t>(q, hd, hdv, k, v, P, block, n_pos, scores, out);
          else if (t == DType::Q8_0)
            prompt<block_q8_0>(q, hd, hdv, k, v, P, block, n_pos, scores, out);
          else
            prompt<block_q4_0>(q, hd, hdv, k, v, P, block, n_pos, scores, out);
          if (r > 0) ms[b].push_back((now_seconds() - t0) * 1e3);  // the first pass warms up
        }
      for (int b = 0; b < 2; ++b) {
        std::sort(ms[b].begin(), ms[b].end());
        const double m = ms[b][ms[b].size() / 2];
        std::printf("| %s | %lld | %d | %.3f | %.1f |\n", name.c_str(), static_cast<long long>(P), b == 0 ? 8 : 16,
                    m, work / m / 1e6);
      }
    }
  }
  return 0;
}
