// The kernels with a planted bug: an LL flag stored before its data (planted_bugs.hpp: FlagBeforeData).
#include "kernels/cuda/collective_kernels.cu"

#include "planted_bugs.hpp"

namespace ouro::kernels::cuda::test {

int launchCollectiveUnderTest(const DeviceCall& call, void* stream) {
  return launchCollectiveWith<PlantedKernels<FlagBeforeData>>(call, stream);
}
int launchPointToPointUnderTest(const DevicePointToPoint& p2p, void* stream) {
  return launchPointToPointWith<PlantedKernels<FlagBeforeData>>(p2p, stream);
}
PlantedBug plantedBug() { return {Protocol::kLL, "an LL flag stored before its data"}; }

}  // namespace ouro::kernels::cuda::test
