// One set of OpenBLAS kernels for every CPU, so that the trainer's bits do not depend on the CPU.
//
// Debian's OpenBLAS is built for many CPUs at once (DYNAMIC_ARCH) and picks its sgemm kernels for
// the CPU it finds when it loads: Haswell's (AVX2, FMA) on an Intel Haswell..Ice Lake or an AMD
// Zen, SkylakeX's (AVX-512) on Intel's AVX-512 parts, Cooperlake's on a Zen 4, ... Each kernel
// sums a dot product in its own order (register tile, K blocking), so the same product has other
// last bits on another CPU, and so does everything trained with it: a job whose hosts have
// different CPUs would break world-size invariance and elastic bit-exactness as soon as a
// micro-batch moved to another CPU kind, and the documented reference run could not be
// reproduced elsewhere.
//
// So ouro-train always runs Haswell's kernels: the least common kernel of every x86-64 CPU with
// AVX2 and FMA (Intel since 2013, AMD since Zen; Zen's kernels are Haswell's). OpenBLAS reads
// OPENBLAS_CORETYPE only as it loads, before main, so pinBlasKernels sets it and starts the
// program again (execv of /proc/self/exe, the same process id, arguments and descriptors) when
// it is not already "Haswell"; setting it in the environment avoids the second start. A CPU
// without AVX2 or FMA cannot run those kernels: there OpenBLAS keeps its own choice, and
// blasKernels() says so (its bits are that CPU kind's).
//
// The rest of the trainer's arithmetic does not depend on the CPU either: its own kernels are
// compiled without floating-point contraction (-ffp-contract=off: the same operations whatever
// -march) with fixed-lane sums, and ouro's reductions give the same bits anywhere. What stays
// outside: glibc's libm (exp, log, pow, cos: its FMA variants run on every AVX2 CPU), which must
// be the same library on every host, as OpenBLAS must be 0.3.21 (Debian 12); GPUs and other
// instruction sets are not covered (docs/TRAINING.md, "Bits that do not depend on the CPU").
#pragma once

#include <string>

namespace ouro::trainer {

// The OpenBLAS core type every AVX2 + FMA CPU is pinned to.
constexpr const char* kPinnedBlasCore = "Haswell";

// True when this CPU has AVX2 and FMA, so it can run the pinned kernels.
bool cpuRunsPinnedBlas();

// Call first thing in main: on a CPU that can run them, makes sure OpenBLAS runs the pinned
// kernels, starting the program again with OPENBLAS_CORETYPE set when needed (returns only when
// nothing needs doing; throws std::runtime_error if the program cannot be started again).
void pinBlasKernels(char** argv);

// What OpenBLAS runs, for reports: "Haswell (pinned)", or "Cooperlake (this CPU's own: no AVX2/FMA)".
// Throws std::runtime_error when the CPU could run the pinned kernels but OpenBLAS runs others
// (an OPENBLAS_CORETYPE pinBlasKernels did not set, or an OpenBLAS without them).
std::string blasKernels();
// True when OpenBLAS runs the pinned kernels.
bool blasKernelsPinned();

// Limits OpenBLAS to `threads` threads (1 per rank by default: ranks are processes). The bits
// depend on it (OpenBLAS splits a product over its threads in its own way).
void setBlasThreads(int threads);

}  // namespace ouro::trainer
