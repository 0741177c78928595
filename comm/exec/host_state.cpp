#include "comm/exec/host_state.hpp"

#include <cstring>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/buffer_kinds.hpp"
#include "comm/exec/replica_check.hpp"
#include "core/env.hpp"
#include "kernels/cpu/reduce.hpp"

namespace ouro {

HostState::HostState(Progress& progress, const Planner& planner)
    : progress_(progress),
      planner_(planner),
      sources_(size_t(progress.size()), nullptr),
      verify_every_(envInt("OURO_VERIFY")) {
  if (verify_every_ < 0)
    raise(Result::kInvalidArgument, "rank %d: OURO_VERIFY=%lld: give 0 (no checks) or N > 0 (check every Nth output)",
          progress.rank(), (long long)verify_every_);
}

HostState& HostState::of(Communicator& comm) {
  return comm.executorState<HostState>(ExecutorKind::kHost,
                                       [&] { return std::make_unique<HostState>(comm.progress(), comm.planner()); });
}

std::byte* HostState::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

std::byte* HostState::preMultiplied(size_t bytes) {
  if (premultiplied_.size() < bytes) premultiplied_.resize(bytes);
  return premultiplied_.data();
}

namespace {

// A pre-multiplied sum is a sum over this rank's input times its scalar (comm/plan/collective.hpp),
// the scalar read now when it lives in memory (ouroScalarDevice: read when the call runs).
CollArgs preMultiply(HostState& state, const CollArgs& args) {
  CollArgs sum = args;
  sum.premul = {};
  const size_t elements =
      args.kind == CollKind::kReduceScatter ? args.count * size_t(state.progress().size()) : args.count;
  if (elements == 0) return sum;
  alignas(8) unsigned char scalar[8] = {};
  if (args.premul.immediate)
    std::memcpy(scalar, args.premul.value, sizeof scalar);
  else
    copyToHost(scalar, args.premul.scalar, args.elementBytes());
  std::byte* scaled = state.preMultiplied(elements * args.elementBytes());
  kernels::premultiply(scaled, args.send, elements, args.dtype, scalar);
  sum.send = scaled;
  return sum;
}

}  // namespace

HostCall::HostCall(Progress& p, HostState& s, const Plan& pl, const CollArgs& a)
    : progress(p),
      state(s),
      plan(pl),
      args(a),
      rank(p.rank()),
      nranks(p.size()),
      number(p.call()),
      desc(describeCall(a)),
      elem_bytes(a.elementBytes()),
      in(static_cast<const std::byte*>(a.send)),
      out(static_cast<std::byte*>(a.recv)) {}

void runHostCollective(Communicator& comm, const CollArgs& args) { runHostCollective(HostState::of(comm), args); }

void runHostCollective(HostState& state, const CollArgs& given) {
  const CollArgs args = given.premul.active ? preMultiply(state, given) : given;
  const Plan plan = state.planner().planHost(args);
  Progress& progress = state.progress();
  progress.recorder().notePlan(algorithmShortName(plan.algorithm), nullptr, plan.channels);
  progress.runCall(args.kind, [&] {
    state.planner().note(plan, progress.call());
    const HostCall call(progress, state, plan, args);
    switch (plan.algorithm) {
      case Algorithm::kCopy: {
        // One rank: every collective is a copy (or nothing, in place).
        const size_t bytes = args.count * args.elementBytes();
        if (args.kind != CollKind::kBarrier && bytes && args.send != args.recv)
          std::memcpy(args.recv, args.send, bytes);
        return;
      }
      case Algorithm::kDirectInline:
      case Algorithm::kDirectSymmetric:
      case Algorithm::kDirectStaged: return runDirect(call);
      case Algorithm::kHierarchical:
      case Algorithm::kDoubling:
      case Algorithm::kHalvingDoubling:
      case Algorithm::kOneShot:
      case Algorithm::kPairwiseRing:
      case Algorithm::kPairwiseTransfers:
      case Algorithm::kDescriptorExchange: return runOverLinks(call);
      case Algorithm::kGatherFold: return runGatherFold(call);
      case Algorithm::kDeviceDriver: break;
    }
    raise(Result::kInternalError, "rank %d: the host executor was given a %s plan; please report this as a bug",
          progress.rank(), algorithmName(plan.algorithm));
  });
  // The replica check (replica_check.hpp) only where OURO_VERIFY asks for one: a call without
  // it never enters that file.
  if (state.verifyEvery() > 0) verifyOutput(state, args, progress.call());
}

void runHostTransfers(Communicator& comm, std::vector<Transfer>& transfers) {
  Progress& progress = comm.progress();
  progress.recorder().notePlan("transfers", nullptr, 1);
  progress.runCall(CollKind::kSendRecv, [&] { runTransfers(progress, transfers); });
}

int runHostRecvAny(Communicator& comm, std::byte* buffer, size_t bytes) {
  Progress& progress = comm.progress();
  int source = -1;
  progress.recorder().notePlan("receive-from-any", nullptr, 1);
  progress.runCall(CollKind::kSendRecv, [&] { source = receiveFromAny(progress, buffer, bytes); });
  return source;
}

}  // namespace ouro
