// The AArch64 kernel levels: which one runs is the CPU's hwcaps' choice, each
// level is only reachable where the CPU has it, and every entry a level does
// not implement is the scalar reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "base/error.h"
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
    EXPECT_NE(k.silu_mul, nullptr);
    // The levels add what they name and nothing else: the tiles only where
    // i8mm is.
    if (isa != Isa::kNeonI8mm) {
      for (int s = 0; s < kTypeSlots; ++s)
        EXPECT_EQ(k.tile[s], nullptr) << isa_name(isa) << " slot " << s;
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

}  // namespace
}  // namespace colibri
