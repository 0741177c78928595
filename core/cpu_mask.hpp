// A process's CPUs as the bootstrap record and the shared-memory control block carry them: CPU i
// is bit i % 64 of word i / 64, CPUs 0..1023. Ranks of one machine OR theirs together to learn
// which CPUs they share (comm/progress/progress.cpp, comm/setup/connect.cpp).
#pragma once

#include <sched.h>

#include <array>
#include <cstdint>

namespace ouro {

using CpuMask = std::array<uint64_t, 16>;

// The CPUs this process may run on now (sched_getaffinity; CPU 0 alone if the call fails).
inline CpuMask allowedCpuMask() {
  CpuMask mask{};
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) CPU_SET(0, &allowed);
  for (int cpu = 0; cpu < 1024 && cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &allowed)) mask[size_t(cpu / 64)] |= uint64_t(1) << (cpu % 64);
  return mask;
}

inline void addCpus(CpuMask* into, const CpuMask& more) {
  for (size_t i = 0; i < into->size(); i++) (*into)[i] |= more[i];
}

inline int cpuCount(const CpuMask& mask) {
  int n = 0;
  for (uint64_t word : mask) n += __builtin_popcountll(word);
  return n;
}

}  // namespace ouro
