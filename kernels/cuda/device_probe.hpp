// What cudaGetDeviceCount's answer means, for the GPU tests (skip or fail) and the CUDA executor's
// set-up (its message): a pure function of the numbers, so the host tests check it with every
// cudaError_t value on machines without a GPU (tests/cuda_executor/test_cuda_units.cpp).
//
// Only "there is no GPU here" may skip a GPU test. CUDA 13's static runtime needs an R580 or later
// driver; on an older one cudaGetDeviceCount fails with cudaErrorInsufficientDriver, and a test
// that read every failure as "no device" would pass (exit 77) on a GPU machine without testing
// anything. But the same error is also what the runtime returns when no NVIDIA driver is installed
// at all (no libcuda: a machine without a GPU), so that error skips only when the NVIDIA kernel
// driver is absent (/proc/driver/nvidia/version: driverInstalled()).
#pragma once

#include <unistd.h>

#include <string>

namespace ouro::kernels::cuda {

// cudaError_t values (driver_types.h; checked against the header where it is available).
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorStubLibrary = 34;         // the stub libcuda (no real driver) was loaded
constexpr int kCudaErrorInsufficientDriver = 35;  // driver older than the runtime, or none at all
constexpr int kCudaErrorNoDevice = 100;

enum class DeviceProbe {
  kDevices,   // use the GPUs
  kNoDevice,  // no GPU on this machine: a GPU test skips (77)
  kBroken,    // a GPU or driver is there but unusable: a GPU test fails with the reason
};

// `error`: cudaGetDeviceCount's result; `count`: the count it gave (when it succeeded);
// `driver_installed`: whether the NVIDIA kernel driver is loaded on this machine.
constexpr DeviceProbe classifyDeviceProbe(int error, int count, bool driver_installed) {
  if (error == kCudaSuccess) return count > 0 ? DeviceProbe::kDevices : DeviceProbe::kNoDevice;
  if (error == kCudaErrorNoDevice) return DeviceProbe::kNoDevice;
  if ((error == kCudaErrorInsufficientDriver || error == kCudaErrorStubLibrary) && !driver_installed)
    return DeviceProbe::kNoDevice;
  return DeviceProbe::kBroken;
}

// The NVIDIA kernel driver is loaded (also inside containers that were given GPUs).
inline bool driverInstalled() { return ::access("/proc/driver/nvidia/version", F_OK) == 0; }

// What a broken probe means, for the message (after the CUDA error's own text).
inline std::string probeAdvice(int error) {
  if (error == kCudaErrorInsufficientDriver)
    return "the NVIDIA driver is older than this build's CUDA runtime needs (CUDA 13: R580 or later; nvidia-smi "
           "shows the driver version): update the driver";
  return "the GPU or its driver is unusable: nvidia-smi should list it";
}

}  // namespace ouro::kernels::cuda
