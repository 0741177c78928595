// The collective driver (kernels/common/collective_driver.hpp), the one schedule both executors
// run, over n simulated ranks in this process: one thread per rank and channel, every link a
// kernels::FifoView in ordinary memory with 1..3 slots of a few bytes (so a call spans many slices
// and every flow-control wait happens), the reductions by kernels::reduceMany / finishAvg as on the
// host. Every output must equal, bit for bit, the reference of reference.hpp: the left fold over
// the ranks in rank order rounded to the dtype after every step, Avg divided once at the end.
// A deadlock shows as a timeout naming the rank and channel that waited.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/common/collective_driver.hpp"
#include "kernels/common/fifo.hpp"
#include "kernels/cpu/reduce.hpp"
#include "reference.hpp"

namespace ouro::kernels {
namespace {

using test::hex;
using test::kAllDataTypes;
using test::kAllRedOps;
using Kind = CollKind;

constexpr Kind kAllKinds[] = {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather,
                              Kind::kBroadcast, Kind::kReduce,        Kind::kAllToAll};
constexpr uint32_t kSlotBytes = 24;     // 24 int8, 12 fp16, 6 fp32 or 3 fp64 elements a slice
constexpr uint32_t kHeaderBytes = 8;    // the message's element count, checked by the receiver
constexpr auto kWaitLimit = std::chrono::seconds(20);  // per batch of calls

const char* kindName(Kind k) { return collName(k); }
bool reduces(Kind k) { return collReduces(k); }
// Buffers count n blocks of count (else count elements).
bool blocksIn(Kind k) { return k == Kind::kReduceScatter || k == Kind::kAllToAll; }
bool blocksOut(Kind k) { return k == Kind::kAllGather || k == Kind::kAllToAll; }

struct Stopped {};  // a thread leaving because the case already failed

// Every link of every channel: fifo(c, from, to) carries from -> to on channel c.
class World {
 public:
  // `start`: every counter's first value (test only: the 32-bit wrap without 2^32 messages).
  World(int n, int nchannels, uint32_t slots, uint32_t start = 0) : n_(n), links_(size_t(nchannels * n * n)) {
    for (Link& l : links_) {
      l.tail.value = start;
      l.head.value = start;
      l.storage.resize(size_t(slots) * (kHeaderBytes + kSlotBytes));
      l.view.tail = &l.tail.value;
      l.view.head = &l.head.value;
      l.view.slots = l.storage.data();
      l.view.slot_count = slots;
      l.view.slot_stride = kHeaderBytes + kSlotBytes;
      l.view.header_bytes = kHeaderBytes;
      l.view.slot_bytes = kSlotBytes;
    }
    deadline_ = std::chrono::steady_clock::now() + kWaitLimit;
  }
  const FifoView& fifo(int channel, int from, int to) const {
    return links_[size_t((channel * n_ + from) * n_ + to)].view;
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  bool expired() const { return std::chrono::steady_clock::now() > deadline_; }
  void fail(const std::string& why) {
    std::lock_guard lock(mu_);
    if (error_.empty()) error_ = why;
    failed_.store(true, std::memory_order_relaxed);
  }
  std::string error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  struct alignas(128) Counter {
    uint32_t value = 0;
  };
  struct Link {
    Counter tail, head;
    std::vector<std::byte> storage;
    FifoView view;
  };
  int n_;
  std::vector<Link> links_;
  std::chrono::steady_clock::time_point deadline_;
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::string error_;
};

uint32_t acquire(uint32_t* counter) { return std::atomic_ref<uint32_t>(*counter).load(std::memory_order_acquire); }
void release(uint32_t* counter, uint32_t value) {
  std::atomic_ref<uint32_t>(*counter).store(value, std::memory_order_release);
}
// A counter only this thread writes (the sender's tail, the receiver's head).
uint32_t own(uint32_t* counter) { return std::atomic_ref<uint32_t>(*counter).load(std::memory_order_relaxed); }

// The vocabulary over the world's FIFOs (fifo.hpp's protocol), for one rank and channel.
class TestPrims {
 public:
  TestPrims(World& world, int rank, int nranks, int channel, DataType t, RedOp op, FoldOrder order,
            const std::string& label)
      : w_(world), label_(label), me_(rank), n_(nranks), channel_(channel), t_(t), op_(op), order_(order),
        es_(dataTypeSize(t)), srcs_(size_t(nranks)) {}

  void send(int peer, const std::byte* src, size_t count) {
    std::byte* slot = sendSlot(peer);
    std::memcpy(slot, src, count * es_);
    post(peer, count);
  }
  void copySend(int peer, const std::byte* src, std::byte* dst, size_t count) {
    if (dst != src) std::memcpy(dst, src, count * es_);
    send(peer, src, count);
  }
  void recv(int peer, std::byte* dst, size_t count) {
    std::memcpy(dst, receive(peer, count), count * es_);
    releaseRecv(peer);
  }
  void recvCopySend(int from, int to, std::byte* dst, size_t count) {
    recv(from, dst, count);
    send(to, dst, count);
  }
  void recvReduceCopy(const std::byte* own, std::byte* dst, size_t count) {
    receiveAll(own, count);
    fold(dst, count);
    releaseAll();
  }
  void recvReduceSend(const std::byte* own, int peer, size_t count) {
    std::byte* slot = sendSlot(peer);
    receiveAll(own, count);
    fold(slot, count);
    releaseAll();
    post(peer, count);
  }
  void copy(const std::byte* src, std::byte* dst, size_t count) {
    if (dst != src) std::memcpy(dst, src, count * es_);
  }

 private:
  template <class Ready>
  void waitFor(Ready&& ready, const char* what, int peer) {
    for (uint32_t i = 1; !ready(); i++) {
      if (i % 64 == 0) {
        if (w_.failed()) throw Stopped{};
        if (w_.expired()) {
          w_.fail(label_ + ": rank " + std::to_string(me_) + " channel " + std::to_string(channel_) + " timed out waiting to " +
                  what + " rank " + std::to_string(peer) + " (a deadlock in the schedule?)");
          throw Stopped{};
        }
      }
      std::this_thread::yield();
    }
  }
  std::byte* sendSlot(int peer) {
    const FifoView& f = w_.fifo(channel_, me_, peer);
    const uint32_t tail = own(f.tail);
    waitFor([&] { return tail - acquire(f.head) < f.slot_count; }, "send to", peer);
    return f.payload(tail);
  }
  void post(int peer, size_t count) {
    const FifoView& f = w_.fifo(channel_, me_, peer);
    const uint32_t tail = own(f.tail);
    const uint64_t header = count;
    std::memcpy(f.slot(tail), &header, sizeof header);
    if (count * es_ > f.slot_bytes) w_.fail(label_ + ": a message of " + std::to_string(count) + " elements overflows a slot");
    release(f.tail, tail + 1);
  }
  const std::byte* receive(int peer, size_t count) {
    const FifoView& f = w_.fifo(channel_, peer, me_);
    const uint32_t head = own(f.head);
    waitFor([&] { return acquire(f.tail) != head; }, "receive from", peer);
    uint64_t sent = 0;
    std::memcpy(&sent, f.slot(head), sizeof sent);
    if (sent != count) {
      w_.fail(label_ + ": rank " + std::to_string(me_) + " channel " + std::to_string(channel_) + " received " +
              std::to_string(sent) + " elements from rank " + std::to_string(peer) + " but expected " +
              std::to_string(count) + " (the two sides walk different schedules)");
      throw Stopped{};
    }
    return f.payload(head);
  }
  void releaseRecv(int peer) {
    const FifoView& f = w_.fifo(channel_, peer, me_);
    release(f.head, own(f.head) + 1);
  }
  // As the host executor: a message from every other rank (waited for in rank order here; any
  // order gives the same sources), folded in the call's order.
  void receiveAll(const std::byte* own, size_t count) {
    for (int p = 0; p < n_; p++) srcs_[size_t(p)] = p == me_ ? own : receive(p, count);
  }
  void releaseAll() {
    for (int p = 0; p < n_; p++)
      if (p != me_) releaseRecv(p);
  }
  void fold(std::byte* dst, size_t count) {
    reduceRanks(dst, srcs_.data(), n_, count, t_, op_, order_);
    if (op_ == RedOp::kAvg) finishAvg(dst, count, t_, n_);
  }

  World& w_;
  const std::string& label_;  // the case, for messages
  const int me_, n_, channel_;
  const DataType t_;
  const RedOp op_;
  const FoldOrder order_;
  const size_t es_;
  std::vector<const void*> srcs_;
};

struct Case {
  Kind kind = Kind::kAllReduce;
  int n = 2;
  int nchannels = 1;
  uint32_t slots = 1;
  DataType t = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  size_t count = 0;
  bool in_place = false;
  int root = 0;
  std::vector<int> ring;  // ring order for the all-gather ring and broadcast chain; empty: rank order
  int lookahead = 0;      // DriverCall::lookahead (needs 2 slots)
  uint32_t counter_start = 0;  // every FIFO counter's first value (the batch's first case decides)
  FoldOrder order = FoldOrder::kTree;  // DriverCall::order: the owners' fold

  std::string text() const {
    std::string order;
    for (int r : ring) order += (order.empty() ? " ring " : ",") + std::to_string(r);
    return std::string(kindName(kind)) + " n " + std::to_string(n) + " channels " + std::to_string(nchannels) +
           " slots " + std::to_string(slots) + " " + dataTypeName(t) + (reduces(kind) ? std::string(" ") + redOpName(op) : "") +
           " count " + std::to_string(count) + (in_place ? " in place" : " out of place") +
           (kind == Kind::kBroadcast || kind == Kind::kReduce ? " root " + std::to_string(root) : "") + order +
           (lookahead ? " lookahead " + std::to_string(lookahead) : "") +
           (counter_start ? " counters from " + std::to_string(counter_start) : "") +
           (this->order == FoldOrder::kRank ? " rank order" : "");
  }
};

// The counts every matrix covers: 0, 1, n-1, n+1, and one whose every channel part of every chunk
// is more slices than a FIFO holds (so senders wait for slots and slices wrap the ring).
std::vector<size_t> countsFor(Kind kind, int n, int nchannels, uint32_t slots, DataType t) {
  const size_t slice = std::max<size_t>(1, kSlotBytes / dataTypeSize(t));
  const size_t part = (slots + 1) * slice + 1;
  const size_t large = blocksIn(kind) || blocksOut(kind) ? size_t(nchannels) * part + 1
                                                         : size_t(n * nchannels) * part + size_t(n / 2);
  return {0, 1, size_t(n - 1), size_t(n + 1), large};
}

// Inputs for reductions: the reference's random elements (specials, NaN payloads, raw bits,
// moderate values whose sums round), and for fp16/bf16/fp8 every fourth element a column where the
// rounding points show: one rank holds 1 and the others half an ulp of 1 each, so every step's
// sum is a tie (rounded to even: back to 1) while one rounding at the end, or a fold that adds
// the halves first, gives more than 1.
std::vector<std::vector<uint64_t>> reductionInputs(DataType t, int n, size_t elems, std::mt19937_64& rng) {
  std::vector<std::vector<uint64_t>> in;
  for (int r = 0; r < n; r++) in.push_back(test::randomElements(t, elems, rng));
  if (test::isNarrowFloat(t)) {
    const uint64_t one = test::encodeFloat(t, 1.0);
    const uint64_t half_ulp = test::encodeFloat(t, std::ldexp(1.0, -(test::narrowMantissaBits(t) + 1)));
    for (size_t i = 0; i < elems; i += 4)
      for (int r = 0; r < n; r++) in[size_t(r)][i] = r == int(i / 4 % size_t(n)) ? one : half_ulp;
  }
  return in;
}

uint64_t getElem(const std::byte* buffer, size_t i, size_t es) {
  uint64_t v = 0;
  std::memcpy(&v, buffer + i * es, es);
  return v;
}
void setElem(std::byte* buffer, size_t i, size_t es, uint64_t v) { std::memcpy(buffer + i * es, &v, es); }

uint64_t canonical(DataType t, RedOp op, FoldOrder order, const std::vector<uint64_t>& column) {
  const uint64_t folded = test::refReduceRanks(t, op, column.data(), column.size(), order);
  return op == RedOp::kAvg ? test::refFinishAvg(t, folded, int(column.size())) : folded;
}

// One case's buffers, laid out as the C API asks: one buffer in place (all-gather's input and
// reduce-scatter's output at the rank's block), else two; outputs prefilled with a pattern.
struct Prepared {
  Case c;
  std::vector<std::vector<uint64_t>> inputs;  // per rank
  std::vector<std::vector<std::byte>> in_buf, out_buf;
  std::vector<const std::byte*> in;
  std::vector<std::byte*> out;
};
constexpr uint64_t kUntouched = 0xa5a5a5a5a5a5a5a5ull;

size_t inElems(const Case& c) { return blocksIn(c.kind) ? size_t(c.n) * c.count : c.count; }
size_t outElems(const Case& c) { return blocksOut(c.kind) ? size_t(c.n) * c.count : c.count; }

void prepare(Prepared& p, std::mt19937_64& rng) {
  const Case& c = p.c;
  const size_t ranks = size_t(c.n), es = dataTypeSize(c.t);
  const size_t in_elems = inElems(c), buffer_elems = std::max(in_elems, outElems(c));
  if (reduces(c.kind)) {
    p.inputs = reductionInputs(c.t, c.n, in_elems, rng);
  } else {
    for (size_t r = 0; r < ranks; r++) {  // any bits, NaN payloads included, must arrive unchanged
      p.inputs.emplace_back(in_elems);
      for (uint64_t& v : p.inputs.back()) v = rng() & test::widthMask(c.t);
    }
  }
  p.in_buf.resize(ranks);
  p.out_buf.resize(ranks);
  p.in.resize(ranks);
  p.out.resize(ranks);
  for (size_t r = 0; r < ranks; r++) {
    std::vector<std::byte>& ob = p.out_buf[r];
    ob.resize(buffer_elems * es + 1);
    for (size_t i = 0; i < buffer_elems; i++) setElem(ob.data(), i, es, kUntouched);
    p.out[r] = ob.data();
    std::byte* in = nullptr;
    if (c.in_place) {
      in = ob.data() + (c.kind == Kind::kAllGather ? r * c.count * es : 0);
      if (c.kind == Kind::kReduceScatter) p.out[r] = ob.data() + r * c.count * es;
    } else {
      p.in_buf[r].resize(in_elems * es + 1);
      in = p.in_buf[r].data();
    }
    for (size_t i = 0; i < in_elems; i++) setElem(in, i, es, p.inputs[r][i]);
    p.in[r] = in;
  }
}

// "" or the first output element that differs from the reference.
std::string check(const Prepared& p) {
  const Case& c = p.c;
  const size_t es = dataTypeSize(c.t);
  std::vector<uint64_t> column(static_cast<size_t>(c.n));
  auto fold = [&](size_t i) {
    for (int r = 0; r < c.n; r++) column[size_t(r)] = p.inputs[size_t(r)][i];
    return canonical(c.t, c.op, c.order, column);
  };
  for (int r = 0; r < c.n; r++) {
    auto expected = [&](size_t i) -> uint64_t {
      switch (c.kind) {
        case Kind::kAllReduce: return fold(i);
        case Kind::kReduceScatter: return fold(size_t(r) * c.count + i);
        case Kind::kAllGather: return p.inputs[i / c.count][i % c.count];
        case Kind::kBroadcast: return p.inputs[size_t(c.root)][i];
        case Kind::kReduce:  // only the root's output is written
          return r == c.root ? fold(i) : c.in_place ? p.inputs[size_t(r)][i] : kUntouched & test::widthMask(c.t);
        case Kind::kAllToAll: return p.inputs[i / c.count][size_t(r) * c.count + i % c.count];
        case Kind::kBarrier:
        case Kind::kSendRecv: break;  // no driver schedule
      }
      return 0;
    };
    for (size_t i = 0; i < outElems(c); i++) {
      const uint64_t got = getElem(p.out[size_t(r)], i, es), want = expected(i);
      if (got != want)
        return c.text() + ": rank " + std::to_string(r) + " element " + std::to_string(i) + " is " + hex(got) +
               ", expected " + hex(want);
    }
  }
  return "";
}

// Runs cases of one world shape (n, channels, slots) back to back, as an application makes calls:
// one thread per rank and channel for the whole batch, no barrier between calls (a rank may start
// the next call while its peers finish this one; the FIFOs keep the calls apart by order alone).
// Returns "" or what went wrong first.
std::string runBatch(const std::vector<Case>& cases, std::mt19937_64& rng) {
  if (cases.empty()) return "";
  const Case& shape = cases.front();
  std::vector<Prepared> prepared(cases.size());
  for (size_t k = 0; k < cases.size(); k++) {
    prepared[k].c = cases[k];
    prepare(prepared[k], rng);
  }
  World world(shape.n, shape.nchannels, shape.slots, shape.counter_start);
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.n; r++)
    for (int ch = 0; ch < shape.nchannels; ch++)
      threads.emplace_back([&, r, ch] {
        for (const Prepared& p : prepared) {
          const Case& c = p.c;
          DriverCall call;
          call.kind = c.kind;
          call.rank = r;
          call.nranks = c.n;
          call.root = c.root;
          call.count = c.count;
          call.elem_bytes = dataTypeSize(c.t);
          call.slice_elems = std::max<size_t>(1, kSlotBytes / call.elem_bytes);
          call.in = p.in[size_t(r)];
          call.out = p.out[size_t(r)];
          call.channel = ch;
          call.nchannels = c.nchannels;
          call.ring = c.ring.empty() ? nullptr : c.ring.data();
          call.lookahead = c.lookahead;
          call.order = c.order;
          const std::string label = c.text();
          TestPrims prims(world, r, c.n, ch, c.t, c.op, c.order, label);
          try {
            runCollective(prims, call);
          } catch (const Stopped&) {
            return;
          }
        }
      });
  for (std::thread& th : threads) th.join();
  if (world.failed()) return world.error();
  for (const Prepared& p : prepared) {
    std::string mismatch = check(p);
    if (!mismatch.empty()) return mismatch;
  }
  return "";
}

// Every count of countsFor, in place and out of place (the API has both forms for every kind),
// for each dtype x op (ops only for reducing kinds), as one batch.
std::vector<Case> matrix(Case c, const std::vector<DataType>& types, const std::vector<RedOp>& ops) {
  std::vector<Case> cases;
  for (DataType t : types)
    for (RedOp op : reduces(c.kind) ? ops : std::vector<RedOp>{RedOp::kSum}) {
      c.t = t;
      c.op = op;
      for (size_t count : countsFor(c.kind, c.n, c.nchannels, c.slots, t))
        for (bool in_place : {false, true}) {
          c.count = count;
          c.in_place = in_place;
          cases.push_back(c);
        }
    }
  return cases;
}

TEST_CASE("the fp16/bf16/fp8 inputs make the rounding points and the fold order visible", "[driver]") {
  std::mt19937_64 rng(11);
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2})
    for (int n = 3; n <= 8; n++) {
      const auto in = reductionInputs(t, n, 400, rng);
      size_t once_differs = 0, order_differs = 0;
      for (size_t i = 0; i < 400; i++) {
        std::vector<uint64_t> column, reversed;
        double exact = 0;
        for (int r = 0; r < n; r++) {
          column.push_back(in[size_t(r)][i]);
          reversed.insert(reversed.begin(), in[size_t(r)][i]);
          exact += test::decodeFloat(t, in[size_t(r)][i]);  // exact: n <= 8 half-width values
        }
        const uint64_t folded = test::refReduce(t, RedOp::kSum, column.data(), column.size());
        if (!std::isnan(exact) && folded != test::encodeFloat(t, exact)) once_differs++;
        if (folded != test::refReduce(t, RedOp::kSum, reversed.data(), reversed.size())) order_differs++;
      }
      INFO(dataTypeName(t) << " n " << n);
      CHECK(once_differs >= 100);   // at least the tie columns
      CHECK(order_differs >= 100);
    }
}

TEST_CASE("the driver gives the canonical result for every dtype x op", "[driver]") {
  std::mt19937_64 rng(1);
  const std::vector<DataType> types(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  const std::vector<RedOp> ops(std::begin(kAllRedOps), std::end(kAllRedOps));
  size_t cases = 0, index = 0;
  for (int n : {3, 8})
    for (int nchannels = 1; nchannels <= 4; nchannels++)
      for (Kind kind : kAllKinds) {
        Case c;
        c.kind = kind;
        c.n = n;
        c.nchannels = nchannels;
        c.slots = 1 + uint32_t(index % 3);
        c.root = int(index % size_t(n));
        index++;
        const std::vector<Case> batch = matrix(c, types, ops);
        cases += batch.size();
        const std::string mismatch = runBatch(batch, rng);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
      }
  INFO(cases << " cases");
  CHECK(cases > 0);
}

TEST_CASE("the driver gives the canonical result for n = 2..8 ranks x 1..4 channels x 1..3 slots x ring orders",
          "[driver]") {
  std::mt19937_64 rng(2);
  size_t cases = 0, index = 0;
  for (int n = 2; n <= 8; n++)
    for (int nchannels = 1; nchannels <= 4; nchannels++)
      for (uint32_t slots = 1; slots <= 3; slots++)
        for (Kind kind : kAllKinds) {
          Case c;
          c.kind = kind;
          c.n = n;
          c.nchannels = nchannels;
          c.slots = slots;
          c.root = int(index % size_t(n));
          // With 2 slots or more, half the shapes send the reduce-scatter's next slice ahead of
          // the fold, as the host executor does: the same bits, and no deadlock.
          c.lookahead = slots >= 2 && (n + nchannels) % 2 == 0 ? 1 : 0;
          // Both reduction orders (OURO_ORDER), the owners folding every rank's slice in it.
          c.order = (n + slots) % 2 == 0 ? FoldOrder::kTree : FoldOrder::kRank;
          // Half the shapes run every kind with the ring in a shuffled order (as the CUDA
          // executor's NVLink order would): the results must not change.
          if ((nchannels + slots) % 2 == 1) {
            c.ring.resize(size_t(n));
            std::iota(c.ring.begin(), c.ring.end(), 0);
            std::shuffle(c.ring.begin(), c.ring.end(), rng);
          }
          // bf16 (rounding visible) and int32 (wrapping), the ops in turn.
          const RedOp op = kAllRedOps[index++ % 5];
          const std::vector<Case> batch = matrix(c, {DataType::kBfloat16, DataType::kInt32}, {op});
          cases += batch.size();
          const std::string mismatch = runBatch(batch, rng);
          if (!mismatch.empty()) FAIL_CHECK(mismatch);
        }
  INFO(cases << " cases");
  CHECK(cases > 0);
}

// The host path's FIFO protocol across the counters' wrap (issue #33): every counter starts just
// below 2^32 and each batch sends several times 2^0..2^2 slots' worth of messages per link, so
// every FIFO wraps inside it. The slot counts are powers of two, as the settings require
// (kernels/common/fifo.hpp: with 3 slots messages 2^32 - 1 and 2^32 would share a slot).
TEST_CASE("the driver gives the canonical result across the 32-bit counters' wrap", "[driver][wrap]") {
  std::mt19937_64 rng(3);
  size_t cases = 0, index = 0;
  for (int n : {2, 3, 5})
    for (uint32_t slots : {1u, 2u, 4u})
      for (Kind kind : kAllKinds) {
        Case c;
        c.kind = kind;
        c.n = n;
        c.nchannels = 1 + int(index % 2);
        c.slots = slots;
        c.root = int(index % size_t(n));
        c.lookahead = slots >= 2 && index % 2 == 0 ? 1 : 0;
        c.counter_start = 0xffffffffu - uint32_t(index % 7);
        const RedOp op = kAllRedOps[index++ % 5];
        const std::vector<Case> batch = matrix(c, {DataType::kBfloat16, DataType::kInt32}, {op});
        cases += batch.size();
        const std::string mismatch = runBatch(batch, rng);
        if (!mismatch.empty()) FAIL_CHECK(mismatch);
      }
  INFO(cases << " cases");
  CHECK(cases > 0);
}

}  // namespace
}  // namespace ouro::kernels
