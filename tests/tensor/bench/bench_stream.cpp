// Decode kernels streaming weights from DRAM on the thread pool, against the
// bandwidth probe's loads-only kernel (read_sum) on the same bytes split the
// same way: which share of the memory rate a job of a given size keeps, with
// the arithmetic and without. Not a test; run it by hand:
//   build/tests/tensor/bench_stream [types] [rows] [cols] [threads] [MiB, may be a fraction] [huge]
// e.g. `bench_stream q4_0,q6_K 1024 2048 2 512` (OLMoE's expert matrices):
// for each type MiB of such matrices, each read once per pass, in jobs of 1,
// 2, 8, 24 and 96 matrices (one matrix, ..., the gates and ups of a layer's 8
// experts, all three); with `huge` also a copy of each in 2 MiB pages
// (MADV_HUGEPAGE). Every type's (and page size's) kernel and loads-only
// passes alternate, so all of them see the same minutes of this machine's
// bandwidth; medians of 5.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/sys.h"
#include "base/thread_pool.h"
#include "bench_weights.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

DType parse_type(const std::string& s) {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4, DType::Q5_0})
    if (dtype_name(t) == s) return t;
  std::fprintf(stderr, "unknown type %s\n", s.c_str());
  std::exit(2);
}

// n_mat matrices of one type back to back, packed where the ISA packs it.
struct Set {
  DType type;
  bool huge;
  size_t mat_bytes;
  int64_t n_mat;
  AlignedBuffer<uint8_t> buf;
  uint8_t* base;
  std::vector<TensorView> views;
  std::vector<uint8_t> xq;
};

std::unique_ptr<Set> make_set(DType type, bool huge, int64_t rows, int64_t cols, size_t total) {
  auto s = std::make_unique<Set>();
  s->type = type;
  s->huge = huge;
  s->mat_bytes = row_bytes(type, cols) * static_cast<size_t>(rows);
  s->n_mat = static_cast<int64_t>(total / s->mat_bytes);
  const size_t bytes = s->mat_bytes * s->n_mat;
  constexpr size_t kHuge = size_t{2} << 20;
  s->buf.resize(bytes + (huge ? 2 * kHuge : 0));
  s->base = s->buf.data();
  if (huge) {  // aligned to 2 MiB, before the first touch
    s->base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(s->base) + kHuge - 1) /
                                         kHuge * kHuge);
    madvise(s->base, bytes / kHuge * kHuge, MADV_HUGEPAGE);
  }
  std::mt19937 rng(1);
  fill_bench_weights(type, s->base, bytes, rng);
  const bool packed = packs(type, rows);
  for (int64_t m = 0; m < s->n_mat; ++m) {
    if (packed) pack_rows(type, s->base + m * s->mat_bytes, rows, cols);
    TensorView v;
    v.data = s->base + m * s->mat_bytes;
    v.type = type;
    v.ne[0] = cols;
    v.ne[1] = rows;
    v.packed = packed;
    s->views.push_back(v);
  }
  std::vector<float> x(cols);
  std::normal_distribution<float> g;
  for (float& v : x) v = g(rng);
  s->xq.resize(activation_bytes(type, Precision::kNative, cols) + 64);
  quantize_activation(type, Precision::kNative, x.data(), s->xq.data(), cols);
  return s;
}

int run(int argc, char** argv) {
  std::vector<DType> types;
  std::stringstream list(argc > 1 ? argv[1] : "q4_0");
  for (std::string t; std::getline(list, t, ',');) types.push_back(parse_type(t));
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 1024,
                cols = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const size_t total = static_cast<size_t>((argc > 5 ? std::atof(argv[5]) : 512.0) * (1 << 20));
  const bool with_huge = argc > 6 && std::string(argv[6]) == "huge";
  std::vector<std::unique_ptr<Set>> sets;
  for (DType t : types)
    for (int h = 0; h < (with_huge ? 2 : 1); ++h)
      sets.push_back(make_set(t, h == 1, rows, cols, total));
  std::vector<float> y(static_cast<size_t>(rows));
  std::vector<float> scratch(static_cast<size_t>(threads) * (cols + 256));
  std::vector<uint64_t> sums(threads);
  ThreadPool pool(threads);

  std::printf("%lld x %lld matrices, %d threads, %zu MiB of each type\n",
              static_cast<long long>(rows), static_cast<long long>(cols), threads, total >> 20);
  std::printf(
      "| type | matrices a job | MB a job | pages | kernel GB/s | loads-only GB/s | kernel / loads "
      "|\n"
      "|---|---|---|---|---|---|---|\n");
  for (int per_job : {1, 2, 8, 24, 96}) {
    // One pass: every job of the set in turn, its matrices' rows split over
    // the pool in 16-row chunks as model/linear.h splits them.
    auto pass = [&](const Set& s, bool loads_only) {
      const int64_t jobs = s.n_mat / per_job;
      const size_t rb = row_bytes(s.type, cols);
      const double t0 = now_seconds();
      for (int64_t j = 0; j < jobs; ++j) {
        const TensorView* v = s.views.data() + j * per_job;
        pool.parallel_for(rows * per_job, 16, [&](int64_t b, int64_t e, int th) {
          for (int64_t r = b; r < e;) {
            const int64_t m = r / rows, r0 = r % rows, r1 = std::min(rows, r0 + (e - r));
            if (loads_only)  // whole 256-byte steps of the rows' bytes (read_sum's unit)
              sums[th] += read_sum(static_cast<const uint8_t*>(v[m].data) + r0 * rb,
                                   (r1 - r0) * rb / 256 * 256);
            else
              matvec_rows(v[m], Precision::kNative, s.xq.data(), y.data() + r0, r0, r1,
                          scratch.data() + th * (cols + 256));
            r += r1 - r0;
          }
        });
      }
      return static_cast<double>(jobs * per_job * s.mat_bytes) / (now_seconds() - t0) / 1e9;
    };
    std::vector<std::vector<double>> k(sets.size()), l(sets.size());
    for (int r = 0; r < 6; ++r)
      for (size_t i = 0; i < sets.size(); ++i) {
        if (per_job > sets[i]->n_mat) continue;
        const double kr = pass(*sets[i], false), lr = pass(*sets[i], true);
        if (r == 0) continue;  // warm-up
        k[i].push_back(kr);
        l[i].push_back(lr);
      }
    for (size_t i = 0; i < sets.size(); ++i) {
      if (k[i].empty()) continue;
      std::sort(k[i].begin(), k[i].end());
      std::sort(l[i].begin(), l[i].end());
      const double km = k[i][k[i].size() / 2], lm = l[i][l[i].size() / 2];
      std::printf("| %s | %d | %.2f | %s | %.1f | %.1f | %.1f%% |\n", dtype_name(sets[i]->type),
                  per_job, per_job * sets[i]->mat_bytes / 1e6, sets[i]->huge ? "2 MiB" : "4 KiB",
                  km, lm, 100.0 * km / lm);
    }
  }
  uint64_t s = 0;
  for (uint64_t v : sums) s += v;
  std::printf("(checksum %llu, y %g)\n", static_cast<unsigned long long>(s),
              static_cast<double>(y[0]));
  return 0;
}

}  // namespace
}  // namespace colibri

int main(int argc, char** argv) {
  return colibri::run(argc, argv);
}
