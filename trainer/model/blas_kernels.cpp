// One set of OpenBLAS kernels for every CPU (see blas_kernels.hpp).
#include "model/blas_kernels.hpp"

#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ouro::trainer {

namespace {

std::string coreName() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace

bool cpuRunsPinnedBlas() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void pinBlasKernels(char** argv) {
  if (!cpuRunsPinnedBlas()) return;
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set && std::strcmp(set, kPinnedBlasCore) == 0) return;
  // OpenBLAS chose its kernels as it loaded, before main: start again with the variable set.
  if (setenv("OPENBLAS_CORETYPE", kPinnedBlasCore, 1) != 0)
    throw std::runtime_error(std::string("cannot set OPENBLAS_CORETYPE: ") + std::strerror(errno));
  execv("/proc/self/exe", argv);
  throw std::runtime_error(std::string("cannot start again with OPENBLAS_CORETYPE=") + kPinnedBlasCore +
                           " (execv /proc/self/exe: " + std::strerror(errno) +
                           "): set OPENBLAS_CORETYPE=" + kPinnedBlasCore + " in the environment yourself");
}

bool blasKernelsPinned() { return coreName() == kPinnedBlasCore; }

std::string blasKernels() {
  const std::string name = coreName();
  if (name == kPinnedBlasCore) return name + " (pinned)";
  if (!cpuRunsPinnedBlas()) return name + " (this CPU's own: it has no AVX2 and FMA for the pinned " + kPinnedBlasCore + ")";
  throw std::runtime_error("OpenBLAS runs its " + name + " kernels, not the pinned " + kPinnedBlasCore +
                           " ones, so the weights' bits would depend on the CPU: start ouro-train with "
                           "OPENBLAS_CORETYPE=" + kPinnedBlasCore + " or unset (docs/TRAINING.md)");
}

void setBlasThreads(int threads) {
  if (threads < 1) {
    throw std::invalid_argument("OpenBLAS threads: need at least 1, got " + std::to_string(threads));
  }
  openblas_set_num_threads(threads);
}

}  // namespace ouro::trainer
