// A fixed amount of kernel work for instruction counting under emulation
// (tools/arm64-insns.sh): REPS products of ROWS weight rows of 4096 elements
// of TYPE with N_TOK tokens, on ISA. Counting REPS = 1 and REPS = 3 and
// taking the difference leaves twice the products alone: setup (random
// weights, quantizing the activations) cancels. Not a test.
//   kernel_insns TYPE ISA ROWS N_TOK REPS
// TYPE attend_f32 / attend_f16: N_TOK query heads of 128 dimensions against a
// cache of that type holding ROWS * 4096 / 256 positions: as many
// multiply-accumulates (q.k and the weighted sum of v) as the products.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/kernels/kernel_table.h"
#include "tensor/ops.h"

using namespace colibri;

namespace {

int attend_work(bool f16, int64_t rows, int64_t n_tok, int64_t reps) {
  constexpr int kHeadDim = 128;
  const int64_t n_pos = rows * 4096 / (2 * kHeadDim);
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> q(kHeadDim * n_tok), k(kHeadDim * n_pos), v(kHeadDim * n_pos);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = g(rng);
  std::vector<uint16_t> kh(k.size()), vh(v.size());
  quantize_activation(DType::F16, Precision::kNative, k.data(), kh.data(), kHeadDim * n_pos);
  quantize_activation(DType::F16, Precision::kNative, v.data(), vh.data(), kHeadDim * n_pos);
  std::vector<int32_t> n_positions(n_tok, static_cast<int32_t>(n_pos));
  std::vector<float> scores(n_tok * n_pos), out(kHeadDim * n_tok);
  for (int64_t r = 0; r < reps; ++r) {
    if (f16)
      attend_batch(q.data(), kHeadDim, static_cast<int>(n_tok), n_positions.data(), kh.data(),
                   kHeadDim, vh.data(), kHeadDim, kHeadDim, kHeadDim, 0.088f, scores.data(),
                   out.data(), kHeadDim);
    else
      attend_batch(q.data(), kHeadDim, static_cast<int>(n_tok), n_positions.data(), k.data(),
                   kHeadDim, v.data(), kHeadDim, kHeadDim, kHeadDim, 0.088f, scores.data(),
                   out.data(), kHeadDim);
  }
  std::printf("%g\n", out[0]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: kernel_insns TYPE ISA ROWS N_TOK REPS\n");
    return 2;
  }
  const std::string type_name = argv[1], isa_arg = argv[2];
  const int64_t rows = std::atoll(argv[3]), n_tok = std::atoll(argv[4]), reps = std::atoll(argv[5]);
  DType t = DType::F32;
  const bool attention = type_name == "attend_f32" || type_name == "attend_f16";
  bool found = attention;
  for (uint32_t i = 0; i < kTypeSlots; ++i) {
    const DTypeInfo* d = dtype_info(i);
    if (d != nullptr && d->weight && type_name == d->name) {
      t = d->type;
      found = true;
    }
  }
  Isa isa = Isa::kScalar;
  bool isa_found = false;
  for (Isa i : kAllIsas)
    if (isa_arg == isa_name(i)) {
      isa = i;
      isa_found = true;
    }
  if (!found || !isa_found || !isa_supported(isa)) {
    std::fprintf(stderr, "unknown type %s or unsupported ISA %s\n", argv[1], argv[2]);
    return 2;
  }
  set_kernel_isa(isa);
  if (attention) return attend_work(type_name == "attend_f16", rows, n_tok, reps);
  constexpr int64_t n = 4096;
  // Random bytes with small fp16 scales (the count does not depend on values).
  std::vector<uint8_t> w(row_bytes(t, n) * rows);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng() & 0x3B);
  TensorView v;
  v.data = w.data();
  v.type = t;
  v.ne[0] = n;
  v.ne[1] = rows;
  std::normal_distribution<float> g;
  std::vector<float> x(n * n_tok);
  for (auto& e : x) e = g(rng);
  const size_t xs = activation_bytes(t, Precision::kNative, n);
  std::vector<uint8_t> xq(xs * n_tok);
  for (int64_t k = 0; k < n_tok; ++k)
    quantize_activation(t, Precision::kNative, x.data() + k * n, xq.data() + k * xs, n);
  std::vector<float> y(rows * n_tok), scratch(n);
  for (int64_t r = 0; r < reps; ++r) {
    if (n_tok == 1)
      matvec_rows(v, Precision::kNative, xq.data(), y.data(), 0, rows, scratch.data());
    else
      matmul_rows(v, Precision::kNative, xq.data(), xs, n_tok, y.data(), rows, 0, rows,
                  scratch.data());
  }
  std::printf("%g\n", y[0]);
  return 0;
}
