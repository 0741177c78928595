// libFuzzer target: bootstrap messages read back from the rendezvous store, which any process
// holding the job token could have written: PeerInfo records and the job-wide failure record.
// The first byte is the rank the record is expected to be for; decoding either succeeds and
// round-trips, or throws ouro::Error — never crashes, over-reads or allocates what it claims.
#include <cstdint>
#include <string_view>

#include "comm/setup/bootstrap.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int rank = data[0] % 8;
  std::string_view record(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    ouro::PeerInfo p = ouro::PeerInfo::decode(record, rank);
    if (p.rank != rank) __builtin_trap();
    ouro::PeerInfo again = ouro::PeerInfo::decode(p.encode(), rank);
    if (again.host_id != p.host_id || again.hostname != p.hostname || again.tcp_address != p.tcp_address ||
        again.pid != p.pid || again.cpu_mask != p.cpu_mask)
      __builtin_trap();
  } catch (const ouro::Error& e) {
    if (e.message().empty()) __builtin_trap();
  }
  ouro::JobError failure = ouro::decodeJobError(record);
  if (failure.code == ouro::Result::kSuccess) __builtin_trap();  // a failure record is never "success"
  ouro::JobError again = ouro::decodeJobError(ouro::encodeJobError(failure.code, failure.message));
  if (again.code != failure.code || again.message != failure.message) __builtin_trap();
  return 0;
}
