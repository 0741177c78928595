// The planner's fixed thresholds and its margin for the cost model's pick, in one place: its rules
// (planner.cpp) are the only code that reads them; the simulation CLI (bench/model/ouro_model.cpp)
// runs the planner itself rather than a copy of its rules.
#pragma once

#include <cstddef>

namespace ouro::plan_limits {

// One-shot over links (the data inside the descriptor messages): while a call fits one link
// slot, at most 32 KiB per peer, among at most 16 ranks (each rank sends every peer its data).
constexpr size_t kOneShotMaxBytes = size_t(32) << 10;
constexpr int kOneShotMaxRanks = 16;
// Direct all-reduce: every rank reducing every staged chunk (one synchronisation) pays while the
// chunk is small or there are two ranks (then it reads no more than reduce-scatter + all-gather).
constexpr size_t kDirectSymmetricMaxBytes = size_t(64) << 10;
// Gather-fold across hosts (issue #24): while every rank's contribution together is at most this
// (their descriptors, 16 bytes a rank, come on top: counting them put a 2-rank 8 KiB call, 16 KiB
// of data, 32 bytes over, where one-shot measured 442-496 us against gather-fold's 269). Each rank
// receives the W-1 others' contributions, as one-shot does, but in ceil(log2 W) steps of one
// message each way instead of W-1 messages; past a few KiB per rank the pairwise reduce-scatter's
// 2(W-1)/W of the data wins on the host links (docs/ACROSS-HOSTS.md "Small all-reduce across hosts
// (#24)").
constexpr size_t kGatherFoldMaxBytes = size_t(16) << 10;
// The collective driver's lookahead on the host (Plan::lookahead): every host link has 2 slots or
// more, so a rank may send one slice ahead of its receives without a deadlock.
constexpr int kHostLookahead = 1;
// The cost model's pick replaces the rules' only when predicted at least this much faster: the
// model's own target accuracy (issue #24: within 25% of the measured time).
constexpr double kModelMargin = 1.25;

}  // namespace ouro::plan_limits
