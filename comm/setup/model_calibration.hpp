// The cost model's parameters for a communicator (issue #24, comm/plan/cost_model.hpp), the same on
// every rank so that every rank's planner picks the same algorithm for every call (ranks that
// picked differently would deadlock). The setting is agreed at the rendezvous with the other
// planning settings (PlanSettings, comm/setup/bootstrap.hpp: requireSameSetting, the one check that
// ranks agree on a setting); what it means:
//   OURO_MODEL=off      the planner keeps its fixed rules and plans carry no prediction;
//   OURO_MODEL=SPEC     the model's defaults with SPEC on top (parseParams: tcp=ALPHA_US,GBPS; ...);
//   OURO_MODEL=auto     (the default) measured: where the planner chooses by the model (links path,
//                       OURO_ALGO=auto), rank 0 probes its links once per host and world shape (16
//                       8-byte ping-pongs and 3-16 256 KiB transfers started within 20 ms per link kind, a
//                       fold timed locally) and caches the result in $XDG_CACHE_HOME/ouro (~/.cache/ouro);
//                       elsewhere the cached values if any, else the defaults.
// off and a spec need nothing more. Under auto each rank may hold another cache, so rank 0's
// parameters rule: it publishes them through the store as a spec string, and every rank, rank 0
// included, parses that same string.
#pragma once

#include <string>

#include "comm/plan/cost_model.hpp"
#include "comm/plan/planner.hpp"
#include "comm/progress/progress.hpp"
#include "comm/setup/store/store.hpp"
#include "core/clock.hpp"

namespace ouro {

// The parameters as a spec parseParams reads back to the same doubles on every rank.
std::string formatModelSpec(const model::Params& p);

// The cache file of one host, links and world shape: DIR/model-HOST-LINKS-HxL.txt, DIR being
// $XDG_CACHE_HOME/ouro or $HOME/.cache/ouro ("" when neither is set: no cache).
std::string modelCachePath(const std::string& host, const std::string& links, int hosts, int per_host);
// What a cache file holds: a version line, when it was written, its key, the parameters.
std::string modelCacheText(const std::string& key, const model::Params& p, int64_t unix_seconds);
// The parameters of a cache file, or false with *why set (missing, unreadable, another version or
// key, older than max_age_s or from the future, parameters that do not parse): never an error.
bool readModelCache(const std::string& path, const std::string& key, double max_age_s, model::Params* out,
                    std::string* why);
// Writes atomically (a temporary file renamed); false with *why on failure (then there is no cache).
bool writeModelCache(const std::string& path, const std::string& text, std::string* why);

// Rank 0's links probed (partners echo): fills the model's link kind between ranks of one host
// (`shm`, whatever transport carries it) and between hosts (tcp or ib, and between_hosts), and
// the fold's cost. Every rank of the world calls it; those not probed return at once.
struct ProbeFacts {
  int local_peer = -1;   // rank 0's partner on its own host (-1: none)
  int remote_peer = -1;  // rank 0's partner on another host (-1: none)
};
ProbeFacts probePartners(const PlannerWorld& world);
void probeLinks(Progress& progress, const ProbeFacts& facts, Deadline deadline, model::Params* params);

// At init, after the links exist and before the planner is built: sets world->model,
// model_params and model_source from the agreed setting (`setting` and `given`: PlanSettings::model
// and model_params), under auto to what rank 0 read or measured.
void agreeModel(store::Store& store, const std::string& prefix, Progress& progress, const std::string& setting,
                const model::Params& given, PlannerWorld* world, Deadline deadline);

}  // namespace ouro
