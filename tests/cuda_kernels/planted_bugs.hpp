// Planted protocol bugs (test code only): policies for the kernels' `Bug` parameter
// (kernels/cuda/device_prims_common.cuh's NoPlantedBug is the shipped one, whose hooks do
// nothing), and kernels that run the shipped kernel bodies with one of them. A test program built
// with one (planted_*.cpp) must see wrong results: proof that the emulation's scheduling and the
// bit-exact comparison can see a protocol bug.
// Include after kernels/cuda/collective_kernels.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "harness.hpp"

namespace ouro::kernels::cuda::test {

// Simple protocol: the tail is published before the payload is written, then the block pauses
// to give the receiver time to read the stale slot.
struct EarlyTail : NoPlantedBug {
  static void beforePayload(uint32_t* tail, uint32_t published) {
    if (dm::threadIndex() == 0) dm::storeRelease(tail, published);
    for (int i = 0; i < 16; i++) dm::spinTurn();
  }
};

// LL protocol: each line's flag is stored before its data, as two 32-bit stores instead of one
// 64-bit store, with a pause between them.
struct FlagBeforeData : NoPlantedBug {
  static constexpr bool kReplacesLineStores = true;
  static void storeLines(uint64_t* lines, uint64_t data, uint32_t flag) {
    for (size_t half = 0; half < 2; half++) {
      auto* words = reinterpret_cast<uint32_t*>(lines + half);
      dm::storeRelease(words + 1, flag);
      for (int i = 0; i < 4; i++) dm::spinTurn();
      dm::storeRelease(words, uint32_t(data >> (32 * half)));
    }
  }
};

template <typename T, class Bug>
void plantedCollectiveKernel(const DeviceCall call) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  runCollectiveBlock<T, Bug>(call, shared);
}

template <class Bug>
void plantedPointToPointKernel(const DevicePointToPoint p2p) {
  OURO_BLOCK_SHARED(KernelShared, shared);
  runPointToPointBlock<Bug>(p2p, shared);
}

// For launchCollectiveWith / launchPointToPointWith (collective_kernels.cu).
template <class Bug>
struct PlantedKernels {
  template <typename T>
  static int collective(dim3 grid, dim3 block, void* stream, const DeviceCall& call) {
    return OURO_LAUNCH_KERNEL((plantedCollectiveKernel<T, Bug>), grid, block, stream, call);
  }
  static int pointToPoint(dim3 grid, dim3 block, void* stream, const DevicePointToPoint& p2p) {
    return OURO_LAUNCH_KERNEL(plantedPointToPointKernel<Bug>, grid, block, stream, p2p);
  }
};

}  // namespace ouro::kernels::cuda::test
