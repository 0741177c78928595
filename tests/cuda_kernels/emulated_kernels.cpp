// The real kernel source (kernels/cuda/collective_kernels.cu, with device_prims.cuh and the
// collective driver) compiled as C++ against the host emulation (cuda_emulation.hpp, found
// through this folder on the include path). The harness launches the shipped kernels through the
// shipped entry points; planted_*.cpp build the same source with a planted protocol bug instead.
#include "kernels/cuda/collective_kernels.cu"

#include "harness.hpp"

namespace ouro::kernels::cuda::test {

int launchCollectiveUnderTest(const DeviceCall& call, void* stream) { return launchCollective(call, stream); }
int launchPointToPointUnderTest(const DevicePointToPoint& p2p, void* stream) { return launchPointToPoint(p2p, stream); }

}  // namespace ouro::kernels::cuda::test
