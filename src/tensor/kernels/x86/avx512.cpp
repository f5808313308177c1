#include "tensor/kernels/kernel_table.h"
namespace colibri {
void add_avx512_kernels(KernelTable&) {}
}  // namespace colibri
