// The decisions the InfiniBand verbs layer makes, factored into pure functions so they run without
// an RDMA device (this machine has none): which operation a failed completion was (from wr_id
// only), which GID to use from a port's GID table, which asynchronous events fail which links,
// when on-demand paging falls back to the slots, whether the locked-memory limit fits the links.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "transport/ib/ib_hca.hpp"
#include "transport/ib/ib_protocol.hpp"

using namespace ouro;
using namespace ouro::transport::ib;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

// ---- failed completions: described from wr_id only ----

TEST_CASE("ib wr_id: every posted kind round-trips and is described without the opcode", "[ib]") {
  const uint64_t msg = encodeWrId(WrKind::kMessage, 2, 7);
  CHECK(wrIdKind(msg) == WrKind::kMessage);
  CHECK(wrIdEntries(msg) == 2);
  CHECK(wrIdSlot(msg) == 7);
  CHECK(describeWorkRequest(msg) == "RDMA write of a message (slot 7)");
  CHECK(describeWorkRequest(encodeWrId(WrKind::kCredit, 1, 0)) == "RDMA write of credits");
  CHECK(describeWorkRequest(encodeWrId(WrKind::kAnnounce, 1, 0)) == "RDMA write of a receive destination");
  CHECK(contains(describeWorkRequest(encodeWrId(WrKind::kProbe, 1, 0)), "liveness probe"));
  // Receives carry their own kind: a receive posted with wr_id 0 (as before) could not be told
  // from an unknown request, and reading wc.opcode of a failed completion is undefined.
  CHECK(wrIdKind(encodeWrId(WrKind::kReceive, 0, 0)) == WrKind::kReceive);
  CHECK(describeWorkRequest(encodeWrId(WrKind::kReceive, 0, 0)) == "receive of a message");
  CHECK(wrIdKind(0) == WrKind::kUnknown);
  CHECK(describeWorkRequest(0) == "work request with unknown wr_id 0");
  CHECK(wrIdKind(uint64_t(0x77) << 56) == WrKind::kUnknown);
}

TEST_CASE("ib completions: the batch's first real error is reported, not a flush after it", "[ib]") {
  constexpr int kOk = 0, kFlush = 5, kRetryExceeded = 12;  // IBV_WC_SUCCESS, _WR_FLUSH_ERR, _RETRY_EXC_ERR
  const int all_ok[] = {kOk, kOk, kOk};
  CHECK(firstFailedCompletion(all_ok, 3, kOk, kFlush) == -1);
  const int flush_first[] = {kOk, kFlush, kFlush, kRetryExceeded, kFlush};
  CHECK(firstFailedCompletion(flush_first, 5, kOk, kFlush) == 3);
  const int only_flushes[] = {kOk, kFlush, kFlush};
  CHECK(firstFailedCompletion(only_flushes, 3, kOk, kFlush) == 1);
  CHECK(firstFailedCompletion(nullptr, 0, kOk, kFlush) == -1);
}
