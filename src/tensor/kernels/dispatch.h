// The kernel table in use (see kernel_table.h, ops.h's set_kernel_isa).
#pragma once

#include "tensor/kernels/kernel_table.h"
#include "tensor/ops.h"

namespace colibri {

const KernelTable& active_kernel_table();
// The table of a supported ISA, whichever is active (tests compare them).
const KernelTable& kernel_table(Isa isa);

}  // namespace colibri
