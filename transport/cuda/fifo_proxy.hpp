// The CUDA executor's proxy to the ranks on other hosts (docs/CUDA.md "Across hosts"), after NCCL's
// proxy thread and net transport: a kernel cannot reach another host's memory, so it writes its
// messages to such a rank into an outbox in pinned host memory and reads theirs from an inbox
// there (staging_layout.hpp), and this thread carries them over one link per remote peer (TCP or
// InfiniBand, made for the proxy alone: comm/exec/device_remote.hpp).
//
// Per FIFO (channel, protocol, peer):
//   out: when the kernel has published message m (its tail, after its size), and the peer's inbox
//        has room for it (m - acked < slot_count: credits), the message is copied into a link slot
//        and posted; the outbox's head then frees the slot for the kernel.
//   in:  a data frame is written into inbox slot m (simple: the payload, then the tail with
//        release order; LL: the lines rebuilt from the data and the frame's flag, each one 8-byte
//        store, and the LL clean-up when due); when the kernel's head moves, a credit frame tells
//        the sender.
// Credits are per FIFO, so one channel's full inbox never holds up another's messages, and a
// receiver always has room for what arrives: it drains its link at every pass, whatever its
// kernels do. The wire format is proxy_wire.hpp's.
//
// Stopping: this rank's kernels set a peer's abort request word (a failure, or the host's abort)
// and the proxy sends that peer an abort frame, whose proxy sets its rank's abort word; a link that
// fails sets this rank's abort word and sends the other peers an abort. failure() says why, for
// the message of a kernel that ended aborted. At the end (the destructor) the proxy first carries
// what the outboxes still hold (the kernels ended, but their last messages may not have left),
// then closes each link with a close frame both ways, so neither end takes the other's going for
// a failure.
//
// CUDA-free: the executor gives it the staging block's host address; the emulated tests
// (tests/cuda_kernels) run it against the emulated kernels.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common/fifo.hpp"
#include "transport/cuda/proxy_wire.hpp"
#include "transport/cuda/staging_layout.hpp"
#include "transport/link.hpp"

namespace ouro::transport::cuda {

class FifoProxy {
 public:
  struct Peer {
    int rank = -1;
    std::string name;  // "rank 3 on host-b", for messages
    std::unique_ptr<Link> link;
  };
  struct Options {
    int rank = 0;
    StagingLayout layout;
    std::byte* staging = nullptr;    // the block (layout.totalBytes(), zeroed) as this process's host code addresses it
    uint32_t* abort_word = nullptr;  // this rank's abort word (host address): a peer's abort or a failed link sets it
    std::vector<Peer> peers;         // layout.npeers, in the layout's peer order
    double drain_s = 30;             // at the end: how long the outboxes may take to empty
    bool thread = true;              // false: the caller drives pass() (tests)
  };

  // Checks the links' slots against the layout (Error kInvalidArgument) and starts the thread.
  explicit FifoProxy(Options options);
  // Carries what the outboxes hold, closes every link and stops (bounded by drain_s).
  ~FifoProxy();
  FifoProxy(const FifoProxy&) = delete;
  FifoProxy& operator=(const FifoProxy&) = delete;

  // One pass over every peer: receives, credits, sends. True when anything moved. The thread's
  // loop; only for the caller when Options::thread is false.
  bool pass();
  // Wakes the thread from its idle wait: a kernel was just launched.
  void kick();
  // Why the proxy stopped a peer's or this rank's device work ("" while nothing failed): the first
  // reason, prefixed with the peer.
  std::string failure() const;

 private:
  struct Out {
    kernels::FifoView view;  // host addresses
    uint32_t sent = 0;       // messages handed to the link (the outbox's head)
    uint32_t acked = 0;      // the peer's inbox head, as its last credit said
  };
  struct In {
    kernels::FifoView view;
    uint32_t received = 0;  // messages written into the inbox (its tail)
    uint32_t credited = 0;  // the head value last sent to the peer
  };
  struct PeerState {
    Peer peer;
    std::vector<Out> out;  // [channel * 2 + ll]
    std::vector<In> in;
    uint32_t* abort_request = nullptr;
    size_t next_fifo = 0;  // round robin over out
    bool abort_sent = false;
    bool close_sent = false;
    bool closed_by_peer = false;
    bool dead = false;
    int64_t checked_ns = 0;  // last look at the link's liveness
  };

  bool pump(PeerState& p);
  bool receive(PeerState& p);
  bool sendCredits(PeerState& p);
  bool sendData(PeerState& p);
  // 1: a message went; 0: none to send (or no credit); -1: the link is full.
  int sendOne(PeerState& p, Out& o, bool ll, int channel);
  void onFrame(PeerState& p, const MessageHeader& header, const std::byte* data);
  bool sendFrame(PeerState& p, const ProxyFrame& frame, const void* payload);
  // Outboxes still holding messages for live peers.
  bool outboxesPending() const;
  void peerFailed(PeerState& p, const std::string& why);
  void noteFailure(const std::string& why);
  void setOwnAbort();
  void run();
  void finish();
  void idleWait(int64_t timeout_ns);

  const int rank_;
  const StagingLayout layout_;
  uint32_t* const abort_word_;
  const double drain_s_;
  std::vector<PeerState> peers_;
  std::vector<std::byte> pack_;  // an LL message's data, packed from its lines
  int wake_fd_ = -1;             // eventfd: kick()
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::string failure_;
};

}  // namespace ouro::transport::cuda
