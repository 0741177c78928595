#include "transport/cuda/fifo_proxy.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "kernels/common/ll_lines.hpp"

namespace ouro::transport::cuda {
namespace {

// After anything moved (or a kick), the thread keeps looking, yielding between passes, for this
// long before it waits in poll(2): a kernel publishes its messages without a word to the host, so
// only looking finds them. Then it waits at most kIdleWaitNs at a time (woken at once by a TCP
// peer's bytes or a kick); links without descriptors (InfiniBand) are looked at every
// kPolledWaitNs. While a message is in flight (sent and not yet credited, received and not yet
// consumed) it never waits: its answer is due.
constexpr int64_t kSpinNs = 5'000'000;
constexpr int64_t kIdleWaitNs = 1'000'000;
constexpr int64_t kPolledWaitNs = 50'000;
constexpr int64_t kLivenessEveryNs = 100'000'000;  // Link::peerAlive / hostReachable, per peer
constexpr double kCloseWaitS = 5;                   // for the peers' close frames, at the end

uint32_t loadAcquire(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
}
void storeRelease(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release); }
uint64_t loadLine(const uint64_t* p) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_relaxed);
}
void storeLine(uint64_t* p, uint64_t v) { std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed); }

uint64_t* linesOf(const kernels::FifoView& f, uint32_t message) {
  return reinterpret_cast<uint64_t*>(f.payload(message));
}

constexpr size_t kGroupBytes = 8;  // an LL group: two lines of 4 data bytes each

// The flag an LL message `message` may carry: data's, or a hello's (the call check).
bool validLlFlag(uint32_t flag, uint32_t message) {
  return flag == kernels::dataFlag(message) || flag == kernels::helloFlag(message);
}

}  // namespace

FifoProxy::FifoProxy(Options o)
    : rank_(o.rank), layout_(o.layout), abort_word_(o.abort_word), drain_s_(o.drain_s) {
  if (!o.staging || int(o.peers.size()) != layout_.npeers)
    raise(Result::kInternalError, "rank %d: CUDA proxy: %zu peers for a staging block of %d", rank_, o.peers.size(),
          layout_.npeers);
  const uint32_t need = proxyPayloadLimit(layout_);
  for (int i = 0; i < layout_.npeers; i++) {
    Peer& peer = o.peers[size_t(i)];
    if (!peer.link || peer.link->slotBytes() < need)
      raise(Result::kInvalidArgument, "rank %d: CUDA proxy: the link to %s carries %zu bytes a message, %u needed",
            rank_, peer.name.c_str(), peer.link ? peer.link->slotBytes() : size_t(0), need);
    PeerState p;
    p.abort_request = layout_.abortRequest(o.staging, i);
    for (int c = 0; c < layout_.nchannels; c++)
      for (bool ll : {false, true}) {
        Out out;
        out.view = layout_.view(o.staging, c, i, true, ll);
        out.sent = out.acked = loadAcquire(out.view.head);
        p.out.push_back(out);
        In in;
        in.view = layout_.view(o.staging, c, i, false, ll);
        in.received = loadAcquire(in.view.tail);
        in.credited = loadAcquire(in.view.head);
        p.in.push_back(in);
      }
    p.peer = std::move(peer);
    peers_.push_back(std::move(p));
  }
  pack_.resize(need);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) raise(Result::kSystemError, "rank %d: CUDA proxy: eventfd: %s", rank_, std::strerror(errno));
  if (o.thread) thread_ = std::thread([this] { run(); });
}

FifoProxy::~FifoProxy() {
  if (thread_.joinable()) {
    stop_.store(true, std::memory_order_release);
    kick();
    thread_.join();
  } else {
    finish();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void FifoProxy::kick() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::write(wake_fd_, &one, sizeof one);  // a full counter is still a wake
}

std::string FifoProxy::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

void FifoProxy::noteFailure(const std::string& why) {
  std::lock_guard lock(mu_);
  if (!failure_.empty()) return;
  failure_ = why;
  OURO_INFO("rank %d: CUDA proxy: %s", rank_, why.c_str());
}

void FifoProxy::setOwnAbort() {
  if (abort_word_) storeRelease(abort_word_, 1);
}

void FifoProxy::peerFailed(PeerState& p, const std::string& why) {
  p.dead = true;
  // Its end sees the connection go and stops too (or, at its own end, stops waiting for a close).
  p.peer.link.reset();
  if (stop_.load(std::memory_order_acquire) && !outboxesPending()) {
    OURO_INFO("rank %d: CUDA proxy: at the end, the link to %s: %s", rank_, p.peer.name.c_str(), why.c_str());
    return;
  }
  noteFailure(strprintf("the link to %s failed: %s", p.peer.name.c_str(), why.c_str()));
  // This rank's kernels stop, and so do the other remote peers' (their proxies are told).
  setOwnAbort();
  for (PeerState& other : peers_)
    if (!other.dead) storeRelease(other.abort_request, 1);
}

bool FifoProxy::pass() {
  bool moved = false;
  for (PeerState& p : peers_) {
    if (p.dead) continue;
    try {
      moved |= pump(p);
    } catch (const Error& e) {
      // The peer's end after both close frames (its process may exit at once) is no failure.
      if (p.closed_by_peer && p.close_sent) {
        p.dead = true;
        p.peer.link.reset();
      } else {
        peerFailed(p, e.message());
      }
      moved = true;
    }
  }
  return moved;
}

bool FifoProxy::pump(PeerState& p) {
  Link& link = *p.peer.link;
  bool moved = link.progress();
  moved |= receive(p);
  if (p.dead) return moved;
  if (!p.abort_sent && loadAcquire(p.abort_request) != 0) {
    const std::string why = strprintf("rank %d's device work failed or was aborted (see its log)", rank_);
    ProxyFrame f;
    f.type = ProxyFrameType::kAbort;
    f.bytes = uint32_t(std::min<size_t>(why.size(), kMaxAbortReasonBytes));
    if (sendFrame(p, f, why.data())) p.abort_sent = moved = true;
  }
  if (p.closed_by_peer && !p.close_sent) {
    // The peer has carried all its messages and destroyed its communicator: this rank's kernels
    // must need nothing more of it, nor have anything more for it.
    for (const Out& o : p.out)
      if (loadAcquire(o.view.tail) != o.sent)
        throw Error(Result::kInvalidUsage,
                    strprintf("%s destroyed its communicator while this rank's kernels still had messages for it; every "
                              "rank must make the same device calls",
                              p.peer.name.c_str()));
    ProxyFrame f;
    f.type = ProxyFrameType::kClose;
    if (sendFrame(p, f, nullptr)) p.close_sent = moved = true;
  }
  if (!p.close_sent && !p.closed_by_peer) {
    moved |= sendCredits(p);
    moved |= sendData(p);
  }
  const int64_t now = nowNs();
  if (now - p.checked_ns > kLivenessEveryNs) {
    p.checked_ns = now;
    if (!link.peerAlive() || !link.hostReachable()) throw Error(Result::kRemoteError, link.peerFailure());
  }
  moved |= link.progress();
  return moved;
}

bool FifoProxy::receive(PeerState& p) {
  bool moved = false;
  ReceivedMessage m;
  while (p.peer.link->tryRecv(&m)) {
    onFrame(p, m.header, m.data);
    p.peer.link->releaseRecv();
    moved = true;
  }
  return moved;
}

void FifoProxy::onFrame(PeerState& p, const MessageHeader& header, const std::byte* data) {
  std::string why;
  const std::optional<ProxyFrame> frame = decodeProxyFrame(header, layout_, &why);
  if (!frame) throw Error(Result::kInternalError, strprintf("a malformed frame from %s: %s", p.peer.name.c_str(), why.c_str()));
  const ProxyFrame& f = *frame;
  const size_t fifo = size_t(f.channel) * 2 + (f.ll ? 1 : 0);
  switch (f.type) {
    case ProxyFrameType::kData: {
      In& in = p.in[fifo];
      if (f.counter != in.received)
        raise(Result::kInternalError, "%s sent message %u of channel %d (%s) where %u was due", p.peer.name.c_str(),
              f.counter, f.channel, f.ll ? "LL" : "simple", in.received);
      if (in.received - loadAcquire(in.view.head) >= in.view.slot_count)
        raise(Result::kInternalError, "%s sent message %u of channel %d (%s) into a full inbox (past its credits)",
              p.peer.name.c_str(), f.counter, f.channel, f.ll ? "LL" : "simple");
      if (!f.ll) {
        if (f.bytes) std::memcpy(in.view.payload(in.received), data, f.bytes);
      } else {
        if (!validLlFlag(f.flag, in.received))
          raise(Result::kInternalError, "%s sent LL message %u of channel %d with flag %#x", p.peer.name.c_str(),
                f.counter, f.channel, f.flag);
        uint64_t* lines = linesOf(in.view, in.received);
        const size_t groups = (size_t(f.bytes) + kGroupBytes - 1) / kGroupBytes;
        for (size_t g = 0; g < groups; g++) {
          uint64_t v = 0;
          std::memcpy(&v, data + g * kGroupBytes, std::min(kGroupBytes, size_t(f.bytes) - g * kGroupBytes));
          storeLine(lines + 2 * g, kernels::makeLine(uint32_t(v), f.flag));
          storeLine(lines + 2 * g + 1, kernels::makeLine(uint32_t(v >> 32), f.flag));
        }
        // The LL clean-up the sending kernel made in its outbox, made again here (ll_lines.hpp).
        if (kernels::llCleanDue(in.received, in.view.slot_count))
          for (size_t i = 2 * groups; i < in.view.slot_bytes / sizeof(uint64_t); i++)
            storeLine(lines + i, kernels::makeLine(0, f.flag));
      }
      storeRelease(in.view.tail, ++in.received);
      return;
    }
    case ProxyFrameType::kCredit: {
      Out& out = p.out[fifo];
      if (f.counter - out.acked > out.sent - out.acked)
        raise(Result::kInternalError, "%s credited message %u of channel %d (%s), but only %u were sent",
              p.peer.name.c_str(), f.counter, f.channel, f.ll ? "LL" : "simple", out.sent);
      out.acked = f.counter;
      return;
    }
    case ProxyFrameType::kClose: p.closed_by_peer = true; return;
    case ProxyFrameType::kAbort: {
      setOwnAbort();
      noteFailure(strprintf("%s stopped: %s", p.peer.name.c_str(),
                            std::string(reinterpret_cast<const char*>(data), f.bytes).c_str()));
      return;
    }
  }
}

bool FifoProxy::sendFrame(PeerState& p, const ProxyFrame& frame, const void* payload) {
  std::byte* slot = p.peer.link->trySendSlot();
  if (!slot) return false;
  if (frame.bytes) std::memcpy(slot, payload, frame.bytes);
  p.peer.link->postSend(encodeProxyFrame(frame));
  return true;
}

bool FifoProxy::sendCredits(PeerState& p) {
  bool moved = false;
  for (size_t i = 0; i < p.in.size(); i++) {
    In& in = p.in[i];
    const uint32_t head = loadAcquire(in.view.head);
    if (head == in.credited) continue;
    if (head - in.credited > in.received - in.credited)
      raise(Result::kInternalError, "rank %d's kernel freed message %u of its inbox from %s, which holds %u", rank_,
            head, p.peer.name.c_str(), in.received);
    ProxyFrame f;
    f.type = ProxyFrameType::kCredit;
    f.channel = int(i / 2);
    f.ll = i % 2 == 1;
    f.counter = head;
    if (!sendFrame(p, f, nullptr)) break;
    in.credited = head;
    moved = true;
  }
  return moved;
}

bool FifoProxy::sendData(PeerState& p) {
  bool moved = false;
  const size_t n = p.out.size();
  for (bool again = true; again;) {
    again = false;
    for (size_t k = 0; k < n; k++) {
      const size_t i = (p.next_fifo + k) % n;
      const int sent = sendOne(p, p.out[i], i % 2 == 1, int(i / 2));
      if (sent < 0) return moved;
      if (sent) again = moved = true;
    }
    p.next_fifo = (p.next_fifo + 1) % n;  // one message per FIFO per round, starting elsewhere each time
  }
  return moved;
}

int FifoProxy::sendOne(PeerState& p, Out& o, bool ll, int channel) {
  if (loadAcquire(o.view.tail) == o.sent) return 0;      // nothing published
  if (o.sent - o.acked >= o.view.slot_count) return 0;  // the peer's inbox is full: await its credit
  Link& link = *p.peer.link;
  std::byte* slot = link.trySendSlot();
  if (!slot) return -1;  // the link is full; the next pass tries again
  const uint32_t bytes = std::atomic_ref<uint32_t>(o.view.sizes[o.sent % o.view.slot_count]).load(std::memory_order_relaxed);
  const uint32_t limit = ll ? o.view.slot_bytes / 2 : o.view.slot_bytes;
  if (bytes > limit)
    raise(Result::kInternalError, "rank %d's kernel published a message of %u bytes for %s (channel %d, %s), larger than "
          "a slot's %u", rank_, bytes, p.peer.name.c_str(), channel, ll ? "LL" : "simple", limit);
  ProxyFrame f;
  f.type = ProxyFrameType::kData;
  f.channel = channel;
  f.ll = ll;
  f.counter = o.sent;
  f.bytes = bytes;
  if (!ll) {
    if (bytes) std::memcpy(slot, o.view.payload(o.sent), bytes);
  } else {
    // The lines' data, packed: half the bytes on the wire, and the receiving proxy writes the
    // lines again with the one flag every line of the message carries.
    const uint64_t* lines = linesOf(o.view, o.sent);
    const size_t groups = (size_t(bytes) + kGroupBytes - 1) / kGroupBytes;
    f.flag = groups ? kernels::lineFlag(loadLine(lines)) : kernels::dataFlag(o.sent);
    if (!validLlFlag(f.flag, o.sent))
      raise(Result::kInternalError, "rank %d's LL message %u for %s (channel %d) carries flag %#x", rank_, o.sent,
            p.peer.name.c_str(), channel, f.flag);
    for (size_t g = 0; g < groups; g++) {
      const uint64_t lo = loadLine(lines + 2 * g), hi = loadLine(lines + 2 * g + 1);
      if (kernels::lineFlag(lo) != f.flag || kernels::lineFlag(hi) != f.flag)
        raise(Result::kInternalError, "rank %d's LL message %u for %s (channel %d) was published with lines of other "
              "flags (group %zu)", rank_, o.sent, p.peer.name.c_str(), channel, g);
      const uint64_t v = uint64_t(uint32_t(lo)) | uint64_t(uint32_t(hi)) << 32;
      std::memcpy(slot + g * kGroupBytes, &v, std::min(kGroupBytes, size_t(bytes) - g * kGroupBytes));
    }
  }
  link.postSend(encodeProxyFrame(f));
  storeRelease(o.view.head, ++o.sent);  // the slot is the kernel's again
  return 1;
}

bool FifoProxy::outboxesPending() const {
  for (const PeerState& p : peers_) {
    if (p.dead || p.closed_by_peer) continue;
    for (const Out& o : p.out)
      if (loadAcquire(o.view.tail) != o.sent) return true;
  }
  return false;
}

void FifoProxy::idleWait(int64_t timeout_ns) {
  std::vector<pollfd> fds;
  bool polled = false;
  for (const PeerState& p : peers_) {
    if (p.dead) continue;
    p.peer.link->pollFds(&fds);
    polled |= p.peer.link->needsPolledProgress();
  }
  fds.push_back(pollfd{wake_fd_, POLLIN, 0});
  if (polled) timeout_ns = std::min(timeout_ns, kPolledWaitNs);
  const timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
  ::ppoll(fds.data(), nfds_t(fds.size()), &ts, nullptr);
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
}

void FifoProxy::run() {
  int64_t last = nowNs();
  while (!stop_.load(std::memory_order_acquire)) {
    if (pass()) {
      last = nowNs();
      continue;
    }
    // In flight: a credit or a consumption is due (unless this rank's device work was stopped:
    // then nothing of it will come).
    bool busy = false;
    if (!abort_word_ || loadAcquire(abort_word_) == 0)
      for (const PeerState& p : peers_) {
        if (p.dead) continue;
        for (const Out& o : p.out) busy |= o.sent != o.acked;
        for (const In& in : p.in) busy |= in.received != in.credited;
      }
    if (busy || nowNs() - last < kSpinNs) {
      std::this_thread::yield();
      continue;
    }
    idleWait(kIdleWaitNs);
    last = nowNs();  // woken: by bytes, a kick, or the timeout; look again for a while
  }
  finish();
}

// The end: carry what the outboxes hold (the kernels have ended, their last messages may not have
// left), then a close frame each way with every peer.
void FifoProxy::finish() {
  stop_.store(true, std::memory_order_release);
  // After a failure or an abort no kernel will take what is left: nothing to wait for.
  const bool aborted = abort_word_ && loadAcquire(abort_word_) != 0;
  const Deadline drain = Deadline::afterSeconds(drain_s_ > 0 ? drain_s_ : 1);
  while (!aborted && outboxesPending() && !drain.expired())
    if (!pass()) idleWait(kPolledWaitNs);
  if (!aborted && outboxesPending())
    OURO_WARN("rank %d: CUDA proxy: messages for ranks on other hosts were still waiting after %.0f s at the "
              "communicator's end (a peer is stuck or made other calls); dropping them",
              rank_, drain_s_);
  const Deadline bye = Deadline::afterSeconds(std::min(kCloseWaitS, drain_s_ > 0 ? drain_s_ : kCloseWaitS));
  for (;;) {
    bool done = true;
    for (PeerState& p : peers_) {
      if (p.dead) continue;
      try {
        if (!p.close_sent) {
          ProxyFrame f;
          f.type = ProxyFrameType::kClose;
          if (sendFrame(p, f, nullptr)) p.close_sent = true;
        }
        p.peer.link->progress();
        receive(p);
        p.peer.link->progress();
      } catch (const Error& e) {
        if (!p.closed_by_peer) OURO_INFO("rank %d: CUDA proxy: closing the link to %s: %s", rank_, p.peer.name.c_str(),
                                         e.message().c_str());
        p.dead = true;
        p.peer.link.reset();
        continue;
      }
      if (!p.close_sent || !p.closed_by_peer || p.peer.link->sendsPending()) done = false;
    }
    if (done || bye.expired()) break;
    idleWait(kPolledWaitNs);
  }
}

}  // namespace ouro::transport::cuda
