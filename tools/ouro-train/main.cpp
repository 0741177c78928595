// ouro-train: trains the reference MLP on Fashion-MNIST, or a GPT on a text corpus (task.hpp), on
// one process or on every rank of an ouro job (DDP, ZeRO-1/2/3, HSDP), with PyTorch's data order,
// sharded checkpoints and resumption, and the reports docs/TRAINING.md describes. The command
// line is in options.hpp; a run's work in run.hpp.
//
// Order of work, so that bad input costs nothing and writes nothing: parse the command line
// (exit 2), join the job, read and check every input and probe every output on every rank, agree
// across ranks (one message, from the lowest failing rank), then train, then write.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/blas_kernels.hpp"
#include "run.hpp"

namespace ouro::train {
namespace {

int runMain(const Options& options) {
  if (trainer::modeTraits(options.mode).one_process) {
    std::string source;
    const int world = launcherWorldSize(&source);
    if (world > 1) {
      complain(nullptr, "--mode single trains in one process, but the launcher started " + std::to_string(world) +
                            " (" + source + "): pass --mode ddp, zero1, zero2, zero3 or hsdp to use them, or start one process");
      return kBadInput;
    }
  }
  std::unique_ptr<Job> job;
  try {
    job = std::make_unique<Job>(options.mode);
  } catch (const std::exception& e) {
    complain(nullptr, e.what());
    return kRunFailed;
  }
  Run run(options, *job);
  int code = 0;
  std::string error;
  try {
    run.setUp();
  } catch (const BadInput& e) {
    code = kBadInput;
    error = e.what();
  } catch (const std::invalid_argument& e) {
    code = kBadInput;
    error = e.what();
  } catch (const std::exception& e) {
    code = kRunFailed;
    error = e.what();
  }
  int reporter = 0;
  try {
    code = job->agreeOnFailure(code, &reporter);
  } catch (const std::exception& e) {
    complain(job.get(), std::string("ranks could not agree that setting up succeeded: ") + e.what());
    return kRunFailed;
  }
  if (code != 0) {
    if (reporter == job->rank()) complain(job.get(), error);
    // No rank leaves before the message is out: a launcher stops the others as soon as one exits.
    try {
      job->barrier();
    } catch (const std::exception&) {
    }
    return code;
  }
  try {
    run.execute();
  } catch (const std::exception& e) {
    complain(job.get(), e.what());
    return kRunFailed;
  }
  return 0;
}

}  // namespace
}  // namespace ouro::train

int main(int argc, char** argv) {
  using namespace ouro::train;
  // Before anything else: OpenBLAS's kernels are the same on every CPU (this may start the
  // program again with OPENBLAS_CORETYPE set).
  try {
    ouro::trainer::pinBlasKernels(argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-train: %s\n", e.what());
    return kRunFailed;
  }
  Options options;
  try {
    options = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ouro-train: %s\n", e.what());
    return kBadInput;
  }
  if (options.show_help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  return runMain(options);
}
