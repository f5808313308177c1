#include "tensor/kernels/kernel_table.h"
namespace colibri {
void add_avx2_kernels(KernelTable&) {}
}  // namespace colibri
