// Connects a communicator's transports once its membership is known: shared memory with the ranks
// on this host, InfiniBand or TCP with the others (OURO_TRANSPORT overrides; the transports are
// one table, comm/setup/transports.hpp), and gathers what the planner needs (comm/plan/planner.hpp).
#pragma once

#include <memory>
#include <string>

#include "comm/setup/bootstrap.hpp"
#include "comm/plan/planner.hpp"
#include "comm/progress/progress.hpp"
#include "comm/setup/store/store.hpp"
#include "transport/tcp/tcp_mesh.hpp"

namespace ouro {

// What connecting yields: the links and shared-memory world for the progress service, and the
// world facts the planner decides from.
struct Connection {
  Progress::Setup progress;
  PlannerWorld world;
};

Connection connectTransports(store::Store& store, const std::string& prefix, int rank, int nranks,
                                          const Membership& membership, transport::tcp::Listener& listener,
                                          Deadline deadline);

// The host this rank's TCP listener advertises (see transport::tcp::advertisedHost).
std::string listenerHost(const store::Store& store);

}  // namespace ouro
