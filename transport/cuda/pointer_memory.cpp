#include "transport/cuda/pointer_memory.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ouro::transport::cuda {
namespace {

using PointerGetAttributes = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

// The driver's entry point, found once through the runtime (which loads the driver and calls
// cuInit, neither of which makes a context); null without a driver.
PointerGetAttributes driverEntry() {
  static const PointerGetAttributes entry = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &fn, 7000, cudaEnableDefault, &status) !=
            cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return PointerGetAttributes(nullptr);
    }
    return reinterpret_cast<PointerGetAttributes>(fn);
  }();
  return entry;
}

}  // namespace

PointerMemory pointerMemory(const void* p, int* device) {
  if (device) *device = -1;
  const PointerGetAttributes get = driverEntry();
  if (!get || !p) return PointerMemory::kHost;
  unsigned int type = 0;  // CUmemorytype; 0 for memory the driver does not know (plain host memory)
  unsigned int managed = 0;
  int ordinal = -1;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* values[] = {&type, &managed, &ordinal};
  // Unlike cuPointerGetAttribute, an unknown pointer is no error here: its attributes come back 0.
  if (get(3, attributes, values, CUdeviceptr(reinterpret_cast<uintptr_t>(p))) != CUDA_SUCCESS) return PointerMemory::kHost;
  if (managed) {
    if (device) *device = ordinal;
    return PointerMemory::kManaged;
  }
  if (type != CU_MEMORYTYPE_DEVICE) return PointerMemory::kHost;
  if (device) *device = ordinal;
  return PointerMemory::kDevice;
}

}  // namespace ouro::transport::cuda
