// NEON kernels go here; until then ARM runs the scalar table.
#include "tensor/kernels/kernel_table.h"

namespace colibri {

void add_neon_kernels(KernelTable&) {}

}  // namespace colibri
