// The call check of the links family (OURO_CHECK=1, and every barrier): every rank learns whether
// all ranks made the same call (collective, count, dtype, op, root, call number) before any data
// moves, in ceil(log2 n) rounds, so that it talks to O(log n) peers and, with lazily connected TCP
// (transport/tcp/tcp_lazy.hpp), opens at most 2 ceil(log2 n) connections (issue #24).
//
// Rounds follow the dissemination pattern that gather-fold's Bruck all-gather also uses: in round
// k (dist = 2^k) rank r sends rank r - dist one message and receives one from rank r + dist. A
// message carries what its sender knows of the ranks it has heard of (transitively r .. r + 2^k
// - 1 after round k-1): its own call, and one call that differs from it if it has seen one. After
// the last round every rank has heard of every rank, so if any two ranks disagree, every rank
// holds a call that differs from its own and reports it, in the words the all-to-all exchange
// used ("rank A called X but rank B called Y"). A barrier is the same rounds (the dissemination
// barrier): no rank leaves before every rank has arrived.
//
// Calls that disagree may have been planned differently, so a rank of this call may meet a rank
// that runs another algorithm. Their first messages are all kDescriptor messages that begin with
// the sender's descriptor, so a message of another algorithm still shows its sender's call:
//   - gather-fold sends in the same rounds to the same partners: every rank sends and receives
//     one message per round, and every message is consumed;
//   - one-shot sends every peer one message and waits for one from every peer. Its messages say
//     so (header aux kDescriptorAllToAll); ranks of the check pass on that they saw one, and when
//     any did, every rank of the check also sends (after its rounds) to each peer it has not sent
//     to and takes the message of each peer it has not heard from, so the one-shot rank gets one
//     message from every peer and every message sent is received.
// Either way the communicator stays usable after the error.
//
// A rank that stops calling: the ranks that wait for it directly name it at the timeout; a rank
// that waits for a relay (which may itself be waiting) names the relay, and the message adds the
// ranks whose calls that relay passes on, among them the one that stopped.
#pragma once

#include <cstdint>

namespace ouro {

struct HostCall;

// MessageHeader::aux of kDescriptor messages: which pattern the sender's call exchanges them in.
constexpr uint64_t kDescriptorAllToAll = 0x6f6e652d73686f74ull;  // one-shot: every peer, once
constexpr uint64_t kDescriptorCheck = 0x636865636b6c6f67ull;     // the check's rounds

// Runs the check (or the barrier) for the call; throws kInvalidUsage, naming both calls, when ranks
// disagree.
void checkCallAgreement(const HostCall& call);

// Rank `other` made the same call but sent a message of another algorithm (the ranks' settings
// differ, so they planned it differently): fails the communicator, which tells every peer (they
// may see no difference and wait for this rank's data), and throws kInvalidUsage.
[[noreturn]] void raisePlannedDifferently(const HostCall& call, int other);

}  // namespace ouro
