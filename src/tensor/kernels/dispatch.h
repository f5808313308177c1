// The kernel table in use (see kernel_table.h, ops.h's set_kernel_isa).
#pragma once

#include "tensor/kernels/kernel_table.h"
#include "tensor/ops.h"

namespace colibri {

const KernelTable& active_kernel_table();
// The table of a supported ISA, whichever is active (tests compare them).
const KernelTable& kernel_table(Isa isa);

// The AArch64 extensions every NEON level's table uses where the kernel
// reports them (both false elsewhere): FEAT_FHM with FEAT_FP16 (fmlal) for
// the F16 dots, FEAT_BF16 (bfmlalb / bfmlalt) for the BF16 dots. They change
// instructions, not values, so no level depends on them.
struct ArmFloatExtensions {
  bool fhm = false;
  bool bf16 = false;
};
ArmFloatExtensions arm_float_extensions();

}  // namespace colibri
