// The AArch64 kernel levels: which one runs is the CPU's hwcaps' choice, each
// level is only reachable where the CPU has it, and every entry a level does
// not implement is the scalar reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/half.h"
#include "tensor/kernels/dispatch.h"
#include "tensor_test_util.h"

namespace colibri {
namespace {

constexpr Isa kArmIsas[] = {Isa::kNeon, Isa::kNeonDot, Isa::kNeonI8mm};

TEST(ArmDispatch, LevelsFollowTheCpu) {
#if !defined(__aarch64__)
  for (Isa isa : kArmIsas) EXPECT_FALSE(isa_supported(isa)) << isa_name(isa);
  GTEST_SKIP() << "not an AArch64 build";
#else
  EXPECT_TRUE(isa_supported(Isa::kNeon));
  // Each level includes the one before it.
  if (isa_supported(Isa::kNeonI8mm)) {
    EXPECT_TRUE(isa_supported(Isa::kNeonDot));
  }
  // tools/test-arm64.sh names the level the emulated CPU must get (qemu
  // -cpu cortex-a53: neon; -cpu max: neon-i8mm), so a level chosen on a CPU
  // without its instructions fails here before it could fault elsewhere.
  const char* want = std::getenv("COLIBRI_EXPECT_ISA");
  if (want == nullptr)
    GTEST_SKIP() << "COLIBRI_EXPECT_ISA not set: best is " << isa_name(best_isa());
  EXPECT_EQ(std::string(isa_name(best_isa())), want);
  for (Isa isa : kArmIsas)
    if (!isa_supported(isa)) {
      EXPECT_THROW(set_kernel_isa(isa), Error) << isa_name(isa);
    }
#endif
}

// A type or op a level has no kernel for runs the scalar reference's; none is
// ever left null (a new type, such as one added to kernels/ref only, works on
// every level the day it is added).
TEST(ArmDispatch, MissingKernelsFallBackToTheReference) {
  const KernelTable& ref = ref_kernel_table();
  bool any = false;
  for (Isa isa : kArmIsas) {
    if (!isa_supported(isa)) continue;
    any = true;
    const KernelTable& k = kernel_table(isa);
    for (int s = 0; s < kTypeSlots; ++s) {
      if (ref.dot[s] != nullptr) {
        EXPECT_NE(k.dot[s], nullptr) << isa_name(isa) << " slot " << s;
      }
      if (ref.quantize[s] != nullptr) {
        EXPECT_NE(k.quantize[s], nullptr) << isa_name(isa) << " slot " << s;
      }
      // No packed kernels on ARM: products never take the packed path.
      EXPECT_EQ(k.packed[s], nullptr) << isa_name(isa) << " slot " << s;
    }
    EXPECT_NE(k.attend, nullptr);
    EXPECT_NE(k.attend_f16, nullptr);
    EXPECT_NE(k.attend_q8_0, ref.attend_q8_0);  // NEON's, not the scalar loop
    EXPECT_NE(k.attend_batch_q8_0, ref.attend_batch_q8_0);
    EXPECT_NE(k.attend_q4_0, ref.attend_q4_0);
    EXPECT_NE(k.attend_batch_q4_0, ref.attend_batch_q4_0);
    EXPECT_NE(k.silu_mul, nullptr);
    // Every level has a prompt tile for every quantized type (the integer
    // dot's tiles below i8mm, smmla's with it) and none for the float types.
    for (DType t : testing::kWeightTypes) {
      const bool quantized = dtype_info(t).block_size > 1;
      EXPECT_EQ(k.tile[slot(t)] != nullptr, quantized) << isa_name(isa) << " " << dtype_name(t);
    }
  }
  if (!any) GTEST_SKIP() << "not an AArch64 CPU";
}

// A product of every weight type gives the reference's values (within float
// summation order) on every level the CPU has, through the active table, as
// the forward pass calls it.
TEST(ArmDispatch, ForcedLevelsMatchTheScalarPath) {
  std::mt19937 rng(7);
  const Isa saved = active_isa();
  bool any = false;
  for (Isa isa : kArmIsas) {
    if (!isa_supported(isa)) continue;
    any = true;
    for (DType t : testing::kWeightTypes) {
      const int64_t n = 4 * 256, rows = 5;
      const auto w = testing::random_weights(t, n * rows, rng);
      TensorView v;
      v.data = w.data();
      v.type = t;
      v.ne[0] = n;
      v.ne[1] = rows;
      const auto x = testing::random_activations(n, rng);
      std::vector<uint8_t> xq(activation_bytes(t, Precision::kNative, n));
      std::vector<float> want(rows), got(rows), scratch(n);
      set_kernel_isa(Isa::kScalar);
      quantize_activation(t, Precision::kNative, x.data(), xq.data(), n);
      matvec_rows(v, Precision::kNative, xq.data(), want.data(), 0, rows, scratch.data());
      set_kernel_isa(isa);
      EXPECT_EQ(active_isa(), isa);
      quantize_activation(t, Precision::kNative, x.data(), xq.data(), n);
      matvec_rows(v, Precision::kNative, xq.data(), got.data(), 0, rows, scratch.data());
      // Rows of one distribution have one magnitude; summation order moves
      // a sum of 1024 products by far less than 1e-4 of it.
      float scale = 1;
      for (float y : want) scale = std::max(scale, std::fabs(y));
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_NEAR(got[r], want[r], 1e-4 * scale) << isa_name(isa) << " " << dtype_name(t);
    }
  }
  set_kernel_isa(saved);
  if (!any) GTEST_SKIP() << "not an AArch64 CPU";
}

#if defined(__aarch64__)
bool same_bits(float a, float b) {
  return f32_bits(a) == f32_bits(b) || (std::isnan(a) && std::isnan(b));
}

// 16-bit floats of one kind: ordinary values (scaled by `scale`, which moves
// them into fp16's subnormals or toward its largest values), or any finite bit
// pattern (bf16: any pattern, infinities and NaNs among them).
std::vector<uint16_t> halves(DType t, int64_t n, float scale, bool any_bits, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& h : v) {
    if (any_bits) {
      do h = static_cast<uint16_t>(bits(rng));
      while (t == DType::F16 && (h & 0x7C00) == 0x7C00);
    } else {
      h = t == DType::F16 ? float_to_half(g(rng) * scale) : float_to_bf16(g(rng) * scale);
    }
  }
  return v;
}

// `fast` gives `plain`'s bits (NaN for NaN) on every length and kind of value.
void expect_same_dot(DType t, DotFn plain, DotFn fast) {
  std::mt19937 rng(31);
  const float big = t == DType::F16 ? 300.0f : 1e18f;
  for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 33, 70, 4096})
    for (float scale : {1.0f, 1e-6f, big})
      for (bool any_bits : {false, true}) {
        const auto w = halves(t, n, scale, any_bits, rng);
        const auto x = halves(t, n, any_bits ? 1.0f : scale, false, rng);
        const float want = plain(w.data(), x.data(), n), got = fast(w.data(), x.data(), n);
        EXPECT_TRUE(same_bits(got, want))
            << dtype_name(t) << " n=" << n << " scale " << scale << (any_bits ? " any bits" : "")
            << ": " << got << ", plain " << want;
      }
}
#endif

// The F16 and BF16 dots on fmlal (FEAT_FHM) and bfmlalb / bfmlalt
// (FEAT_BF16) are on every level where the CPU reports them, only there, and
// give the plain level's values to the bit. tools/test-arm64.sh names what
// each emulated CPU must report (COLIBRI_EXPECT_FLOAT_EXT: -cpu max
// "fhm+bf16", cortex-a53 and cortex-a76 "none").
TEST(ArmDispatch, WideningFloatDotsFollowTheCpuAndEqualThePlainLevel) {
  const ArmFloatExtensions ext = arm_float_extensions();
#if !defined(__aarch64__)
  EXPECT_FALSE(ext.fhm);
  EXPECT_FALSE(ext.bf16);
  GTEST_SKIP() << "not an AArch64 build";
#else
  if (const char* want = std::getenv("COLIBRI_EXPECT_FLOAT_EXT")) {
    std::string got = ext.fhm && ext.bf16 ? "fhm+bf16"
                      : ext.fhm           ? "fhm"
                      : ext.bf16          ? "bf16"
                                          : "none";
    EXPECT_EQ(got, want);
  }
  KernelTable plain = ref_kernel_table();
  add_neon_kernels(plain);
  KernelTable fhm = plain, bf16 = plain;
  add_neon_fhm_kernels(fhm);
  add_neon_bf16_kernels(bf16);
  const int f16 = slot(DType::F16), b16 = slot(DType::BF16);
  EXPECT_NE(fhm.dot[f16], plain.dot[f16]);
  EXPECT_NE(bf16.dot[b16], plain.dot[b16]);
  for (Isa isa : kArmIsas) {
    if (!isa_supported(isa)) continue;
    const KernelTable& k = kernel_table(isa);
    EXPECT_EQ(k.dot[f16], ext.fhm ? fhm.dot[f16] : plain.dot[f16]) << isa_name(isa);
    EXPECT_EQ(k.dot[b16], ext.bf16 ? bf16.dot[b16] : plain.dot[b16]) << isa_name(isa);
  }
  // Called only where the CPU has the instructions.
  if (ext.fhm) expect_same_dot(DType::F16, plain.dot[f16], fhm.dot[f16]);
  if (ext.bf16) expect_same_dot(DType::BF16, plain.dot[b16], bf16.dot[b16]);
  if (!ext.fhm || !ext.bf16) GTEST_SKIP() << "fhm " << ext.fhm << ", bf16 " << ext.bf16;
#endif
}

}  // namespace
}  // namespace colibri
