#include "transport/ib/ib_link.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace ouro::transport::ib {
namespace {

// wr_id (ib_protocol.hpp): what completed, how many send-queue entries it retires, the slot.
constexpr WrKind kWrMessage = WrKind::kMessage, kWrCredit = WrKind::kCredit, kWrAnnounce = WrKind::kAnnounce,
                 kWrProbe = WrKind::kProbe;
uint64_t wrId(WrKind kind, uint32_t entries, uint32_t slot) { return encodeWrId(kind, entries, slot); }
const uint64_t kRecvWrId = encodeWrId(WrKind::kReceive, 0, 0);

// Control buffer layout (ib_protocol.hpp): what the peer writes, then what we send from.
constexpr size_t kCreditIn = kControlCreditIn, kAnnounceIn = kControlAnnounceIn, kCreditOut = kControlCreditOut,
                 kAnnounceOut = kControlAnnounceOut;

uint64_t readWord(const std::byte* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE); }

}  // namespace

IbLink::IbLink(std::shared_ptr<IbDevice> device, int self_rank, int peer_rank, const IbLinkOptions& options)
    : device_(std::move(device)),
      self_(self_rank),
      peer_(peer_rank),
      options_(options),
      sender_(peer_rank, options.slots, options.slot_bytes, 0),
      receiver_(peer_rank, options.slots, options.slot_bytes, 0),
      close_(peer_rank) {
  const LinkCarveLayout layout = linkCarveLayout(options_.slots, options_.slot_bytes, size_t(::sysconf(_SC_PAGESIZE)));
  try {
    carve_ = device_->slotPool(layout.bytes).take();
  } catch (Error& e) {
    e.addContext(strprintf("rank %d: InfiniBand link to rank %d", self_, peer_));
    throw;
  }
  recv_slots_ = {carve_.base + layout.recv_offset, carve_.lkey, carve_.rkey};
  send_slots_ = {carve_.base + layout.send_offset, carve_.lkey, carve_.rkey};
  control_ = {carve_.base + layout.control_offset, carve_.lkey, carve_.rkey};
  // A carve given back by an earlier link holds its old words: this link starts from zero.
  std::memset(carve_.base, 0, layout.bytes);
  // Each message takes up to 2 entries (payload to the announced destination, then the header);
  // credits and announcements one each, at most one of each per slot in flight.
  max_send_wr_ = 4 * options_.slots + 8;
  const int cq_entries = int(max_send_wr_ + options_.slots + 4);
  cq_ = ibv_create_cq(device_->context(), cq_entries, nullptr, nullptr, 0);
  if (!cq_)
    raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d: ibv_create_cq(%d) on %s failed: %s", self_, peer_,
          cq_entries, device_->name().c_str(), std::strerror(errno));
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = max_send_wr_;
  init.cap.max_recv_wr = options_.slots;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(device_->pd(), &init);
  if (!qp_)
    raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d: ibv_create_qp on %s failed: %s", self_, peer_,
          device_->name().c_str(), std::strerror(errno));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = options_.pkey_index;
  attr.port_num = device_->port();
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d: queue pair to INIT failed: %s", self_, peer_,
          std::strerror(rc));
  psn_ = std::random_device()() & 0xffffff;
}

IbLink::~IbLink() {
  // Writes still in flight would be dropped with the QP: give them a moment to complete.
  const int64_t until = nowNs() + 200'000'000;
  while (failure_.empty() && connected_ && sender_.localBusy() && !close_.peerClosed() && nowNs() < until) {
    try {
      progress();
    } catch (const Error&) {
      break;
    }
  }
  closeHandshake();
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
  device_->slotPool(linkCarveLayout(options_.slots, options_.slot_bytes, size_t(::sysconf(_SC_PAGESIZE))).bytes)
      .give(carve_);
}

std::string IbLink::localEndpoint() const {
  EndpointInfo e;
  e.qpn = qp_->qp_num;
  e.psn = psn_;
  e.lid = device_->portAttr().lid;
  std::memcpy(e.gid, device_->gid().raw, 16);
  e.gid_type = uint32_t(device_->gidType());
  e.link_layer = device_->ethernet() ? kLinkEthernet : kLinkInfiniBand;
  e.mtu = uint32_t(device_->portAttr().active_mtu);
  e.slots = options_.slots;
  e.slot_payload = options_.slot_bytes;
  e.slots_addr = reinterpret_cast<uint64_t>(recv_slots_.data);
  e.slots_rkey = recv_slots_.rkey;
  e.credit_addr = reinterpret_cast<uint64_t>(control_.data + kCreditIn);
  e.credit_rkey = control_.rkey;
  e.announce_addr = reinterpret_cast<uint64_t>(control_.data + kAnnounceIn);
  e.announce_rkey = control_.rkey;
  return encodeEndpoint(e);
}

void IbLink::connect(const std::string& remote_endpoint) {
  EndpointResult r = decodeEndpoint(remote_endpoint);
  if (!r.ok) raise(Result::kRemoteError, "rank %d: InfiniBand link to rank %d: %s", self_, peer_, r.error.c_str());
  if (r.value.slots != options_.slots || r.value.slot_payload != options_.slot_bytes)
    raise(Result::kInvalidUsage,
          "rank %d: rank %d uses %u InfiniBand slots of %llu bytes, this rank %u of %zu; set the same OURO_IB_SLOTS "
          "and OURO_IB_SLOT_BYTES on every rank",
          self_, peer_, r.value.slots, (unsigned long long)r.value.slot_payload, options_.slots, options_.slot_bytes);
  remote_ = r.value;
  EndpointResult mine = decodeEndpoint(localEndpoint());
  const PeerPath path = checkPeerEndpoint(mine.value, remote_, peer_);
  if (!path.error.empty())
    raise(Result::kInvalidUsage, "rank %d: InfiniBand link to rank %d (via %s): %s", self_, peer_,
          device_->describe().c_str(), path.error.c_str());

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = ibv_mtu(std::min<uint32_t>(remote_.mtu, uint32_t(device_->portAttr().active_mtu)));
  attr.dest_qp_num = remote_.qpn;
  attr.rq_psn = remote_.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = device_->port();
  attr.ah_attr.sl = options_.service_level;
  if (path.global) {
    // RoCE, and InfiniBand to a peer without a LID or in another subnet: address by GID.
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote_.gid, 16);
    attr.ah_attr.grh.sgid_index = uint8_t(device_->gidIndex());
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = options_.traffic_class;
  } else {
    attr.ah_attr.dlid = uint16_t(remote_.lid);
  }
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    raise(Result::kSystemError,
          "rank %d: InfiniBand link to rank %d: queue pair to RTR failed: %s (remote QP %u, LID %u); check that both "
          "ports are on one fabric (and OURO_IB_GID_INDEX on RoCE)",
          self_, peer_, std::strerror(rc), remote_.qpn, remote_.lid);
  // Receives first: a write with immediate that finds none would be refused (RNR).
  for (uint32_t i = 0; i < options_.slots; i++) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kRecvWrId;
    if (int rc = ibv_post_recv(qp_, &wr, &bad))
      raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d: ibv_post_recv failed: %s", self_, peer_,
            std::strerror(rc));
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = options_.timeout;
  attr.retry_cnt = options_.retry_count;
  attr.rnr_retry = 7;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp_, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    raise(Result::kSystemError, "rank %d: InfiniBand link to rank %d: queue pair to RTS failed: %s", self_, peer_,
          std::strerror(rc));
  connected_ = true;
}

void IbLink::fail(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  raise(Result::kRemoteError,
        "InfiniBand link to rank %d failed: %s; the peer exited, crashed or its network path failed", peer_,
        failure_.c_str());
}

void IbLink::checkFailed() const {
  if (!failure_.empty())
    raise(Result::kRemoteError, "InfiniBand link to rank %d failed earlier: %s", peer_, failure_.c_str());
}

bool IbLink::progress() {
  if (!failure_.empty() || !connected_) return false;
  bool moved = false;
  ibv_wc wc[16];
  int n = ibv_poll_cq(cq_, 16, wc);
  if (n < 0) fail("ibv_poll_cq failed");
  // A failed completion's opcode is undefined: what it was about comes from its wr_id alone, and
  // the batch's first real error is reported rather than a flush that followed it.
  // The peer's close notice is read before failures are judged: it landed before the peer's
  // queue pair went, so every failure the peer's teardown causes finds it here (ib_close.hpp).
  close_.onCloseWord(readWord(control_.data + kControlCloseIn));
  int statuses[16];
  for (int i = 0; i < n; i++) {
    statuses[i] = int(wc[i].status);
    if (wc[i].status != IBV_WC_SUCCESS &&
        close_.onFailedCompletion(wrIdKind(wc[i].wr_id)) == CloseHandshake::Verdict::kIgnore)
      statuses[i] = IBV_WC_SUCCESS;  // the expected end of the link after a close notice
  }
  if (int bad = firstFailedCompletion(statuses, n, IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR); bad >= 0) {
    const ibv_wc& c = wc[bad];
    fail(strprintf("a %s completed with %s (vendor error %#x)%s", describeWorkRequest(c.wr_id).c_str(),
                   ibv_wc_status_str(c.status), c.vendor_err,
                   close_.peerClosed() ? ("; " + close_.peerClosedReason()).c_str() : ""));
  }
  for (int i = 0; i < n; i++) {
    const ibv_wc& c = wc[i];
    moved = true;
    if (wrIdKind(c.wr_id) == WrKind::kClose) close_.onCloseCompleted(c.status == IBV_WC_SUCCESS);
    if (c.status != IBV_WC_SUCCESS) {
      // Ignored above (the link is ending): retire what it held, post nothing in its place.
      if (wrIdKind(c.wr_id) != WrKind::kReceive) send_wr_used_ -= std::min(send_wr_used_, wrIdEntries(c.wr_id));
      if (wrIdKind(c.wr_id) == kWrProbe) probe_outstanding_ = false;
      if (wrIdKind(c.wr_id) == kWrAnnounce) announce_outstanding_ = false;
      continue;
    }
    if (wrIdKind(c.wr_id) == WrKind::kReceive) {
      try {
        receiver_.onImmediate(ntohl(c.imm_data));
      } catch (const Error& e) {
        failure_ = e.message();  // the peer broke the protocol: nothing after it can be trusted
        throw;
      }
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = kRecvWrId;
      if (int rc = ibv_post_recv(qp_, &wr, &bad)) fail(strprintf("ibv_post_recv failed: %s", std::strerror(rc)));
      continue;
    }
    send_wr_used_ -= std::min(send_wr_used_, wrIdEntries(c.wr_id));
    if (wrIdKind(c.wr_id) == kWrMessage) sender_.onLocalCompletion(wrIdSlot(c.wr_id));
    if (wrIdKind(c.wr_id) == kWrProbe) probe_outstanding_ = false;
    if (wrIdKind(c.wr_id) == kWrAnnounce) announce_outstanding_ = false;
  }
  // The credit word the peer writes (RDMA, no completion here): read it as the NIC left it.
  const uint64_t credit = __atomic_load_n(reinterpret_cast<uint64_t*>(control_.data + kCreditIn), __ATOMIC_ACQUIRE);
  const uint64_t before = sender_.credited();
  sender_.onCreditWord(credit);
  moved = moved || sender_.credited() != before;
  if (credit_pending_) postCredit();
  return moved;
}

std::byte* IbLink::trySendSlot() {
  OURO_ASSERT(acquired_ < 0);
  checkFailed();
  if (close_.peerClosed()) raise(Result::kRemoteError, "InfiniBand link to rank %d: %s", peer_, close_.peerClosedReason().c_str());
  if (sender_.acquire() < 0 || send_wr_used_ + 2 > max_send_wr_) progress();
  if (sender_.acquire() < 0 || send_wr_used_ + 2 > max_send_wr_) return nullptr;
  acquired_ = sender_.acquire();
  return send_slots_.data + size_t(acquired_) * stride() + sizeof(MessageHeader);
}

void IbLink::postWrite(ibv_send_wr* first, const char* what) {
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, first, &bad)) fail(strprintf("posting the %s failed: %s", what, std::strerror(rc)));
}

void IbLink::postSend(const MessageHeader& header) {
  OURO_ASSERT(acquired_ >= 0);
  // Has the receiver named where this message's payload should go? (It wrote that into our
  // control buffer; read it word by word, as the NIC may be writing a newer one.)
  uint64_t words[sizeof(Announcement) / 8];
  for (size_t i = 0; i < std::size(words); i++)
    words[i] = __atomic_load_n(reinterpret_cast<uint64_t*>(control_.data + kAnnounceIn) + i, __ATOMIC_ACQUIRE);
  AnnouncementResult ann = decodeAnnouncement(words, sizeof(words), sender_.nextSeq());
  if (!ann.error.empty()) fail(strprintf("rank %d announced a bad destination: %s", peer_, ann.error.c_str()));
  const SendPlan plan = sender_.post(header, ann.ok ? &ann.value : nullptr);
  acquired_ = -1;
  std::byte* slot = send_slots_.data + size_t(plan.slot) * stride();
  std::memcpy(slot, &header, sizeof(header));

  ibv_sge payload{reinterpret_cast<uint64_t>(slot + sizeof(header)), header.bytes, send_slots_.lkey};
  ibv_sge whole{reinterpret_cast<uint64_t>(slot), uint32_t(plan.slot_write_bytes), send_slots_.lkey};
  ibv_send_wr data{}, message{};
  message.wr_id = wrId(kWrMessage, plan.direct ? 2 : 1, plan.slot);
  message.sg_list = &whole;
  message.num_sge = 1;
  message.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  message.send_flags = IBV_SEND_SIGNALED;
  message.imm_data = htonl(plan.imm);
  message.wr.rdma.remote_addr = remote_.slots_addr + uint64_t(plan.slot) * stride();
  message.wr.rdma.rkey = remote_.slots_rkey;
  ibv_send_wr* first = &message;
  if (plan.direct) {
    // Payload to the receiver's buffer, then the header: RC places them in this order.
    data.wr_id = payloadWrId(plan.slot);
    data.sg_list = &payload;
    data.num_sge = 1;
    data.opcode = IBV_WR_RDMA_WRITE;
    data.wr.rdma.remote_addr = plan.dst_addr;
    data.wr.rdma.rkey = plan.dst_rkey;
    data.next = &message;
    first = &data;
  }
  send_wr_used_ += plan.direct ? 2 : 1;
  postWrite(first, "message");
}

void IbLink::announceRecv(std::byte* dst, size_t capacity) {
  if (!connected_ || !failure_.empty() || !dst || capacity == 0 || receiver_.announcedNext()) return;
  // One announcement write at a time: its source must not change while the NIC reads it.
  if (announce_outstanding_ || send_wr_used_ + 1 > max_send_wr_ || !close_.mayPost(kWrAnnounce)) return;
  // Only memory whose registration stays true: buffers the caller named, or on-demand paging
  // (one implicit region, the destination prefetched). Anything else, or any failure there,
  // leaves this receive to the slots.
  MrCache& cache = device_->mrCache();
  ibv_mr* mr = cache.find(dst, capacity);
  if (!mr) mr = cache.onDemand(dst, capacity);
  if (!mr) return;
  Announcement a;
  if (!receiver_.announce(reinterpret_cast<uint64_t>(dst), mr->rkey, capacity, &a)) return;
  std::memcpy(control_.data + kAnnounceOut, &a, sizeof(a));
  announced_dst_ = dst;
  announce_outstanding_ = true;
  writeControl(kAnnounceOut, sizeof(a), remote_.announce_addr, remote_.announce_rkey, kWrAnnounce,
               "receive destination");
}

bool IbLink::tryRecvInto(ReceivedMessage* out, std::byte* dst, size_t capacity) {
  OURO_ASSERT(!held_);
  checkFailed();
  if (dst && capacity) announceRecv(dst, capacity);
  uint32_t slot;
  bool direct;
  if (!receiver_.next(&slot, &direct)) {
    progress();
    if (!receiver_.next(&slot, &direct)) return false;
  }
  std::atomic_thread_fence(std::memory_order_acquire);  // the completion was seen: so is the data
  std::byte* base = recv_slots_.data + size_t(slot) * stride();
  const MessageHeader h = receiver_.accept(base, stride());
  if (h.kind == uint32_t(MessageKind::kAbort)) {
    std::string reason(reinterpret_cast<const char*>(base + sizeof(h)), h.bytes);
    failure_ = "it failed: " + reason;
    raise(Result::kRemoteError, "rank %d failed: %s", peer_, reason.c_str());
  }
  out->header = h;
  out->data = direct ? announced_dst_ : base + sizeof(h);
  held_ = true;
  return true;
}

void IbLink::releaseRecv() {
  OURO_ASSERT(held_);
  held_ = false;
  receiver_.release();
  uint64_t word;
  if (receiver_.creditToReturn(&word)) {
    credit_to_send_ = word;
    credit_pending_ = true;
    postCredit();
  }
}

void IbLink::postCredit() {
  if (!close_.mayPost(kWrCredit)) {
    credit_pending_ = false;  // the peer closed (or this side is closing): nobody needs it
    return;
  }
  if (!failure_.empty() || send_wr_used_ + 1 > max_send_wr_) return;  // retried by progress()
  credit_pending_ = false;
  std::memcpy(control_.data + kCreditOut, &credit_to_send_, sizeof(credit_to_send_));
  writeControl(kCreditOut, sizeof(uint64_t), remote_.credit_addr, remote_.credit_rkey, kWrCredit, "credit return");
}

// One signalled RDMA write of `bytes` at `offset` of this link's control area to the peer's.
void IbLink::writeControl(size_t offset, size_t bytes, uint64_t remote_addr, uint32_t rkey, WrKind kind,
                          const char* what) {
  ibv_sge sge{reinterpret_cast<uint64_t>(control_.data + offset), uint32_t(bytes), control_.lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId(kind, 1, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  send_wr_used_ += 1;
  postWrite(&wr, what);
}

bool IbLink::sendsPending() const {
  // A write still in flight is lost if the process exits and its QP goes with it.
  return failure_.empty() && connected_ && !close_.peerClosed() && (sender_.localBusy() || credit_pending_);
}

void IbLink::sendAbort(const std::string& reason) {
  if (!failure_.empty() || !connected_ || close_.peerClosed()) return;
  try {
    if (acquired_ < 0 && trySendSlot()) {
      std::byte* slot = send_slots_.data + size_t(acquired_) * stride() + sizeof(MessageHeader);
      const size_t bytes = std::min(reason.size(), options_.slot_bytes);
      std::memcpy(slot, reason.data(), bytes);
      MessageHeader h;
      h.kind = uint32_t(MessageKind::kAbort);
      h.bytes = uint32_t(bytes);
      postSend(h);
    }
  } catch (const Error&) {
    // Best effort: without a free slot or a working QP, the peer sees the QP fail instead.
  }
  if (failure_.empty()) failure_ = "this rank aborted the communicator";
}

void IbLink::registerBuffer(const void* data, size_t bytes) {
  if (!data || bytes == 0) return;
  try {
    device_->mrCache().get(data, bytes);
  } catch (const Error& e) {
    OURO_INFO("rank %d: %s; payloads for this buffer go through the link's slots", self_, e.message().c_str());
  }
}

bool IbLink::peerAlive() const {
  if (!failure_.empty() || !device_->qpFailed(qp_->qp_num, cq_).empty()) return false;
  if (close_.peerClosed()) {
    // Messages it sent before its notice are still delivered; after them, nothing will come.
    uint32_t slot;
    bool direct;
    return receiver_.holding() || receiver_.next(&slot, &direct);
  }
  // A peer killed outright sends nothing and its QP is gone: only a write of ours finds out (its
  // retries run out, a failed completion that progress() reports). Probe now and then while idle.
  const_cast<IbLink*>(this)->probe();
  return true;
}

void IbLink::probe() {
  const int64_t now = nowNs();
  if (!connected_ || probe_outstanding_ || now - last_probe_ns_ < 1'000'000'000 || send_wr_used_ + 1 > max_send_wr_ ||
      !close_.mayPost(kWrProbe))
    return;
  last_probe_ns_ = now;
  ibv_send_wr wr{};
  wr.wr_id = wrId(kWrProbe, 1, 0);
  wr.opcode = IBV_WR_RDMA_WRITE;  // no data: nothing in the peer's memory changes
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_.credit_addr;
  wr.wr.rdma.rkey = remote_.credit_rkey;
  send_wr_used_ += 1;
  probe_outstanding_ = true;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp_, &wr, &bad) != 0) {
    send_wr_used_ -= 1;
    probe_outstanding_ = false;
  }
}

std::string IbLink::peerFailure() const {
  if (!failure_.empty()) return failure_;
  if (close_.peerClosed()) return close_.peerClosedReason();
  return device_->qpFailed(qp_->qp_num, cq_);
}

}  // namespace ouro::transport::ib

namespace ouro::transport::ib {

// ib_close.hpp: tell the peer this side is going (one RDMA write of the close word into its close
// line), then wait, bounded by a deadline shared by every link of the device, until that write
// has completed and the peer's own notice has arrived. Never throws: a failing peer only ends
// the wait sooner.
void IbLink::closeHandshake() {
  const bool usable = connected_ && failure_.empty() && send_wr_used_ + 1 <= max_send_wr_;
  if (!close_.beginClose(usable)) return;
  try {
    std::memcpy(control_.data + kControlCloseOut, &kCloseWord, sizeof(kCloseWord));
    writeControl(kControlCloseOut, sizeof(kCloseWord), remote_.credit_addr + (kControlCloseIn - kControlCreditIn),
                 remote_.credit_rkey, WrKind::kClose, "close notice");
  } catch (const Error&) {
    close_.onCloseCompleted(false);
    return;
  }
  const int64_t deadline = device_->closeDeadline(nowNs(), kCloseWaitNs);
  while (!close_.closeDone(nowNs(), deadline)) {
    try {
      if (!progress()) ::usleep(50);
    } catch (const Error&) {
      return;
    }
  }
}

}  // namespace ouro::transport::ib
