// A Link moves messages to and from one peer: the narrow interface every transport implements
// (shared-memory FIFOs, TCP, InfiniBand verbs), so the collective algorithms in comm/
// are written once. Each direction is a FIFO of fixed-size slots:
//   sender:   buf = trySendSlot(); fill buf; postSend(header)     (slot owned by the link after)
//   receiver: tryRecv(&view); read view.data; releaseRecv()       (slot returned to the sender)
// Calls never block; comm/'s waiter decides how to wait (spin, yield, futex or poll) using
// waitHints(). At most one send slot and one received message are held at a time.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ouro::transport {

constexpr uint32_t kMessageMagic = 0x4f55524du;  // "OURM"
// Size of the call descriptor comm/ exchanges before a collective; transports carry it opaquely.
constexpr size_t kCallDescriptorBytes = 16;

enum class MessageKind : uint32_t {
  kData = 1,        // a slice of a collective or of a send/recv
  kDescriptor = 2,  // a call's descriptor (what the sender is calling), optional inline payload
  kAbort = 3,       // the sender's communicator failed or was aborted; payload is the reason
};

// Precedes every message. Checked by the receiver before anything in it is trusted.
struct MessageHeader {
  uint32_t magic = kMessageMagic;
  uint32_t kind = 0;
  uint32_t bytes = 0;     // payload bytes, <= slotBytes()
  uint32_t reserved = 0;
  uint64_t call = 0;      // the sender's call sequence number (collective or per-peer send/recv)
  uint64_t aux = 0;       // kind-specific (e.g. a descriptor word)
};
static_assert(sizeof(MessageHeader) == 32);

struct ReceivedMessage {
  MessageHeader header;
  const std::byte* data = nullptr;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual const char* transportName() const = 0;  // "shm", "tcp", "ib"
  virtual size_t slotBytes() const = 0;           // largest payload of one message

  virtual std::byte* trySendSlot() = 0;
  virtual void postSend(const MessageHeader& header) = 0;
  // Returns false when nothing has arrived yet. Throws ouro::Error(kRemoteError) when the peer
  // sent kAbort or its connection ended, and kInternalError for a malformed header.
  virtual bool tryRecv(ReceivedMessage* out) = 0;
  virtual void releaseRecv() = 0;
  // The header of the next message, left where it is (the next tryRecv returns it), for a
  // receive that has not chosen its sender yet (ouroRecvAny): kMessage with *out set, kNothing
  // when nothing has arrived, kUnsupported where the link cannot look without receiving
  // (InfiniBand). Only between messages: not while a received message is held.
  enum class Peek { kNothing, kMessage, kUnsupported };
  virtual Peek peekHeader(MessageHeader* out) {
    (void)out;
    return Peek::kUnsupported;
  }
  // As peekHeader, but never starts a connection (a lazy TCP link only takes one its peer made):
  // for looking at what arrived when the communicator ends.
  virtual Peek peekArrived(MessageHeader* out) { return peekHeader(out); }

  // Copy-saving variants (TCP, where every byte already costs two kernel copies):
  // - postSendFrom sends `data` itself rather than the slot trySendSlot returned (which must still
  //   be taken, for flow control); the caller leaves `data` unchanged until sendsPending() is false.
  // - tryRecvInto receives a kData payload of at most `capacity` bytes straight into `dst`
  //   (out->data == dst then; otherwise the message sits in a slot as with tryRecv). Every retry of
  //   one message must pass the same dst.
  virtual bool sendsFromCaller() const { return false; }
  virtual void postSendFrom(const MessageHeader& header, const std::byte* data) {
    (void)data;
    postSend(header);
  }
  virtual bool tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) {
    (void)dst;
    (void)capacity;
    return tryRecv(out);
  }

  // Pushes queued bytes toward the peer (TCP), or polls a completion queue (InfiniBand); true
  // when something moved.
  virtual bool progress() { return false; }
  // True for links that move only when progress() is called and have no descriptor to poll(2)
  // (InfiniBand: a completion queue is polled, not waited on). comm/'s waiter then calls
  // progress() on every pass and blocks only in short sleeps. TCP and shm: false.
  virtual bool needsPolledProgress() const { return false; }
  // True while posted messages are still queued in this process (TCP): an operation is only
  // complete once they are handed to the kernel, since nothing moves them between calls.
  virtual bool sendsPending() const { return false; }
  // Sends kAbort with the reason, best effort and without blocking (the link is dead after).
  virtual void sendAbort(const std::string& reason) = 0;
  // Descriptors to poll(2) while blocked waiting on this link (TCP sockets); none for shm.
  virtual void pollFds(std::vector<pollfd>* fds) const { (void)fds; }

  // Hint that [data, data + bytes) will be sent from or received into soon (a user buffer of a
  // call): an RDMA link registers it with the NIC (cached, reused by later calls) so it can be
  // written directly; shm and TCP ignore it. Never required for correctness.
  virtual void registerBuffer(const void* data, size_t bytes) {
    (void)data;
    (void)bytes;
  }
  // Receiver-chosen destination: names where the next kData message's payload should land (at
  // most `capacity` bytes), before it arrives, so an RDMA link can have the peer write it there
  // directly. The receive itself is still tryRecvInto(out, dst, capacity) with the same dst (it
  // announces on its first try too); out->data tells where the payload actually is. The default
  // does nothing: tryRecvInto behaves as it always did.
  virtual void announceRecv(std::byte* dst, size_t capacity) {
    (void)dst;
    (void)capacity;
  }
  // Whether the peer still looks alive from this link's own signals, checked by comm/'s waiter
  // while it waits (InfiniBand: no queue-pair error event; TCP and shm report failures through
  // tryRecv and their own checks, so true). When false, peerFailure() says why.
  virtual bool peerAlive() const { return true; }
  // Narrower than peerAlive, and checked for every peer of a collective, waited on or not: false
  // only when the peer's *host* cannot be reached (the network or the host failed), never because
  // the peer process ended or closed its connection, which a rank that finished its part of the
  // call may do while others still wait. TCP: keepalive and acknowledgements; the default: true.
  virtual bool hostReachable() const { return true; }
  // Why peerAlive or hostReachable said false.
  virtual std::string peerFailure() const { return {}; }
};

}  // namespace ouro::transport
