// The progress service with links that move only when progress() is called and have no descriptor
// to poll (as InfiniBand's completion queues): two ranks on two threads in one process, joined by
// an in-memory fake link pair (test-only), each with its progress service, planner and host
// algorithm state. Collectives complete only because the waits call progress(); a link whose peerAlive() turns false ends a wait with kRemoteError
// naming the peer instead of waiting for the timeout. A receive from any rank (ouroRecvAny) is
// refused over such a link, which cannot show a waiting message without receiving it.
#include <catch2/catch.hpp>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "comm/exec/algorithms.hpp"
#include "comm/exec/host_state.hpp"
#include "core/error.hpp"

using namespace ouro;
using namespace ouro::transport;

namespace {

struct FakeMessage {
  MessageHeader header;
  std::vector<std::byte> payload;
};

// What two fake links share: the messages on their way to each rank, and who is "dead".
struct Wire {
  std::mutex mu;
  std::deque<FakeMessage> to[2];
  std::atomic<bool> dead[2] = {false, false};
};

class PolledLink final : public Link {
 public:
  PolledLink(std::shared_ptr<Wire> wire, int self, int peer, size_t slot_bytes, size_t slots)
      : wire_(std::move(wire)), self_(self), peer_(peer), slot_bytes_(slot_bytes), slots_(slots),
        slot_(slot_bytes) {}
  const char* transportName() const override { return "fake-polled"; }
  size_t slotBytes() const override { return slot_bytes_; }
  std::byte* trySendSlot() override {
    std::lock_guard lock(wire_->mu);
    return outbox_.size() + wire_->to[peer_].size() >= slots_ ? nullptr : slot_.data();
  }
  void postSend(const MessageHeader& header) override {
    outbox_.push_back({header, std::vector<std::byte>(slot_.begin(), slot_.begin() + header.bytes)});
  }
  // Nothing reaches the peer until here.
  bool progress() override {
    progress_calls++;
    if (outbox_.empty()) return false;
    std::lock_guard lock(wire_->mu);
    for (auto& m : outbox_) wire_->to[peer_].push_back(std::move(m));
    outbox_.clear();
    return true;
  }
  bool needsPolledProgress() const override { return true; }
  bool sendsPending() const override { return !outbox_.empty(); }
  bool tryRecv(ReceivedMessage* out) override {
    std::lock_guard lock(wire_->mu);
    if (wire_->to[self_].empty()) return false;
    held_ = std::move(wire_->to[self_].front());
    wire_->to[self_].pop_front();
    if (held_.header.kind == uint32_t(MessageKind::kAbort))
      raise(Result::kRemoteError, "rank %d failed: %.*s", peer_, int(held_.payload.size()),
            reinterpret_cast<const char*>(held_.payload.data()));
    out->header = held_.header;
    out->data = held_.payload.data();
    return true;
  }
  void releaseRecv() override {}
  void sendAbort(const std::string&) override {}
  bool peerAlive() const override { return !wire_->dead[peer_].load(); }
  std::string peerFailure() const override { return "fake queue pair error event"; }

  std::atomic<uint64_t> progress_calls{0};

 private:
  std::shared_ptr<Wire> wire_;
  int self_, peer_;
  size_t slot_bytes_, slots_;
  std::vector<std::byte> slot_;
  std::vector<FakeMessage> outbox_;
  FakeMessage held_;
};

// One rank of the fake world: what a communicator holds for host calls, without the bootstrap.
struct FakeRank {
  std::unique_ptr<Progress> progress;
  std::unique_ptr<Planner> planner;
  std::unique_ptr<HostState> state;
  void collective(const CollArgs& a) { runHostCollective(*state, a); }
};

std::unique_ptr<FakeRank> makeEngine(int rank, std::shared_ptr<Wire> wire, PolledLink** link) {
  Progress::Setup s;
  s.rank = rank;
  s.nranks = 2;
  s.shm_local_index.assign(2, -1);
  s.host_of = {0, 1};
  s.hostnames = {"fake-a", "fake-b"};
  s.links.resize(2);
  auto l = std::make_unique<PolledLink>(wire, rank, 1 - rank, 4096, 2);
  *link = l.get();
  s.links[size_t(1 - rank)] = std::move(l);
  PlannerWorld world;
  world.rank = rank;
  world.nranks = 2;
  world.setting = AlgoSetting::kPairwise;
  world.slice_bytes = 4096;
  world.host_of = {0, 1};
  auto r = std::make_unique<FakeRank>();
  r->progress = std::make_unique<Progress>(std::move(s));
  r->progress->setTimeoutNs(20'000'000'000);
  r->planner = std::make_unique<Planner>(std::move(world));
  r->state = std::make_unique<HostState>(*r->progress, *r->planner);
  return r;
}

}  // namespace

TEST_CASE("links without descriptors are progressed by the waits of the progress service", "[ib]") {
  auto wire = std::make_shared<Wire>();
  PolledLink* links[2];
  std::unique_ptr<FakeRank> engines[2] = {makeEngine(0, wire, &links[0]), makeEngine(1, wire, &links[1])};
  const size_t count = 100'000;  // many 4 KiB slices through 2 slots: only moves if progressed
  std::vector<float> in[2], out[2];
  std::string errors[2];
  std::thread threads[2];
  for (int r = 0; r < 2; r++) {
    in[r].assign(count, float(r + 1));
    out[r].assign(count, -1.0f);
    threads[r] = std::thread([&, r] {
      try {
        for (int call = 0; call < 3; call++) {
          CollArgs a;
          a.kind = CollKind::kAllReduce;
          a.send = in[r].data();
          a.recv = out[r].data();
          a.count = count;
          engines[r]->collective(a);
        }
      } catch (const Error& e) {
        errors[r] = e.message();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; r++) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
    CHECK(out[r][0] == 3.0f);
    CHECK(out[r][count - 1] == 3.0f);
    CHECK(links[r]->progress_calls.load() > 0);
  }
}

TEST_CASE("a link whose peer is no longer alive ends the wait with kRemoteError naming the peer", "[ib]") {
  auto wire = std::make_shared<Wire>();
  PolledLink* link;
  auto engine = makeEngine(0, wire, &link);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    wire->dead[1] = true;  // as an IBV_EVENT_QP_FATAL on the QP to rank 1
  });
  std::vector<float> buf(1024, 1.0f);
  CollArgs a;
  a.kind = CollKind::kAllReduce;
  a.send = buf.data();
  a.recv = buf.data();
  a.count = buf.size();
  std::string message;
  Result code = Result::kSuccess;
  const auto start = std::chrono::steady_clock::now();
  try {
    engine->collective(a);  // rank 1 never joins
  } catch (const Error& e) {
    message = e.message();
    code = e.code();
  }
  killer.join();
  INFO(message);
  CHECK(code == Result::kRemoteError);
  CHECK(message.find("link to rank 1") != std::string::npos);
  CHECK(message.find("failed: fake queue pair error event") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // well before the 20 s limit
}

TEST_CASE("a receive from any rank is refused over a link that cannot show a waiting message", "[ib]") {
  // InfiniBand's links (as this fake) cannot look at a message without receiving it
  // (Link::peekHeader: kUnsupported): ouroRecvAny says so instead of taking a message blindly.
  auto wire = std::make_shared<Wire>();
  PolledLink* link = nullptr;
  std::unique_ptr<FakeRank> rank = makeEngine(0, wire, &link);
  float x = 0;
  try {
    receiveFromAny(*rank->progress, reinterpret_cast<std::byte*>(&x), sizeof x);
    FAIL("receiveFromAny did not refuse");
  } catch (const Error& e) {
    CHECK(e.code() == Result::kInvalidUsage);
    CHECK(e.message().find("rank 1 (fake-polled) cannot show a waiting message") != std::string::npos);
  }
}
