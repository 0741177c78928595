// What memory a pointer is in, asked of the CUDA driver (cuPointerGetAttributes) rather than the
// runtime. cudaPointerGetAttributes initializes the runtime's primary context of the calling
// thread's current device, which is device 0 on a thread that never set one: every host
// collective's buffer check, and the InfiniBand registration cache's worker thread, created a
// stray context (and hundreds of MiB of device memory) on GPU 0 in every process of a GPU machine
// (issue #33). The driver answers from its address map, with no context made current. CUDA
// builds only; a machine without a driver answers kHost for everything.
#pragma once

namespace ouro::transport::cuda {

enum class PointerMemory { kHost, kDevice, kManaged };

// `device`, when not null, gets the device ordinal of device and managed memory (-1 otherwise).
PointerMemory pointerMemory(const void* p, int* device = nullptr);

}  // namespace ouro::transport::cuda
