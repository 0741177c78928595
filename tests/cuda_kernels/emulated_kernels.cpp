// The real kernel source (kernels/cuda/collective_kernels.cu, with device_prims.cuh and the
// collective driver) compiled as C++ against the host emulation (cuda_emulation.hpp, found
// through this folder on the include path). Built twice: as is, and with
// OURO_TEST_PLANT_EARLY_TAIL for the planted-bug test.
#include "kernels/cuda/collective_kernels.cu"
