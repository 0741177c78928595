// The kernels with a planted bug: a tail published before its payload (planted_bugs.hpp: EarlyTail).
#include "kernels/cuda/collective_kernels.cu"

#include "planted_bugs.hpp"

namespace ouro::kernels::cuda::test {

int launchCollectiveUnderTest(const DeviceCall& call, void* stream) {
  return launchCollectiveWith<PlantedKernels<EarlyTail>>(call, stream);
}
int launchPointToPointUnderTest(const DevicePointToPoint& p2p, void* stream) {
  return launchPointToPointWith<PlantedKernels<EarlyTail>>(p2p, stream);
}
PlantedBug plantedBug() { return {Protocol::kSimple, "a tail published before its payload"}; }

}  // namespace ouro::kernels::cuda::test
