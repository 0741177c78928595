// The collective cases of coll_rank: buffers with guard zones, the NCCL layouts and in-place
// rules (API.md "Collectives"), and the expected output of every collective computed from the
// inputs every rank feeds (reference.hpp).
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <optional>

#include "rank_common.hpp"

namespace coll {
namespace {

constexpr size_t kGuardElements = 16;
constexpr unsigned char kJunk = 0xa5;  // fills guard zones and not-yet-written outputs

// count elements with guard zones either side; `shift` moves the start by whole elements so some
// cases use buffers that are naturally aligned for T but not for wider vectors.
template <typename T>
class Buf {
 public:
  Buf() = default;
  Buf(size_t count, size_t shift) : count_(count), lead_(kGuardElements + shift) {
    storage_.resize(lead_ + count + kGuardElements);
    std::memset(static_cast<void*>(storage_.data()), kJunk, storage_.size() * sizeof(T));
  }
  T* data() { return storage_.data() + lead_; }
  const T* data() const { return storage_.data() + lead_; }
  size_t count() const { return count_; }
  bool guardsIntact() const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(storage_.data());
    const size_t lead = lead_ * sizeof(T), tail = (lead_ + count_) * sizeof(T), end = storage_.size() * sizeof(T);
    for (size_t i = 0; i < lead; i++)
      if (bytes[i] != kJunk) return false;
    for (size_t i = tail; i < end; i++)
      if (bytes[i] != kJunk) return false;
    return true;
  }
  bool allocated() const { return !storage_.empty(); }

 private:
  size_t count_ = 0, lead_ = 0;
  std::vector<T> storage_;
};

template <typename T>
constexpr double unitRoundoff() {
  if constexpr (std::is_same_v<T, double>) return 1.0 / 9007199254740992.0;  // 2^-53
  else if constexpr (std::is_same_v<T, float>) return 1.0 / 16777216.0;     // 2^-24
  else if constexpr (std::is_same_v<T, Half>) return 1.0 / 2048.0;          // 2^-11
  else if constexpr (std::is_same_v<T, Fp8E4m3>) return 1.0 / 16.0;         // 2^-4
  else if constexpr (std::is_same_v<T, Fp8E5m2>) return 1.0 / 8.0;          // 2^-3
  else return 1.0 / 256.0;                                                  // bf16: 2^-8
}

// Half the smallest subnormal: the absolute error of rounding a tiny result (fp8's subnormals
// are coarse enough for sums of inputs in [-1, 1) to land among them).
template <typename T>
constexpr double subnormalRoundoff() {
  if constexpr (std::is_same_v<T, Fp8E4m3>) return 1.0 / 1024.0;   // 2^-10
  else if constexpr (std::is_same_v<T, Fp8E5m2>) return 1.0 / 131072.0;  // 2^-17
  else return 0;
}

template <typename T>
class CaseT final : public Case {
 public:
  CaseT(const CaseSpec& spec, const CommView& view) : s_(spec), v_(view) {
    name_ = describe(spec, view);
    const size_t n = size_t(view.size), c = spec.count, me = size_t(view.rank);
    send_count_ = recv_count_ = c;
    if (s_.coll == kReduceScatter) send_count_ = n * c;
    if (s_.coll == kAllGather) recv_count_ = n * c;
    if (s_.coll == kAllToAll || s_.coll == kAllPairs) send_count_ = recv_count_ = n * c;
    const size_t shift = spec.id & 1;
    if (s_.inplace) {
      recv_ = Buf<T>(std::max(send_count_, recv_count_), shift);
      T* base = recv_.data();
      if (s_.coll == kAllGather) {
        for (size_t i = 0; i < c; i++) base[me * c + i] = input(myId(), i);
        send_ptr_ = base + me * c;
        recv_ptr_ = base;
      } else if (s_.coll == kReduceScatter) {
        for (size_t i = 0; i < n * c; i++) base[i] = input(myId(), i);
        send_ptr_ = base;
        recv_ptr_ = base + me * c;
      } else {
        for (size_t i = 0; i < c; i++) base[i] = input(myId(), i);
        send_ptr_ = recv_ptr_ = base;
      }
    } else {
      send_ = Buf<T>(send_count_, shift);
      recv_ = Buf<T>(recv_count_, shift ^ 1);
      for (size_t i = 0; i < send_count_; i++) send_.data()[i] = input(myId(), i);
      send_ptr_ = send_.data();
      recv_ptr_ = recv_.data();
    }
  }

  ouroResult_t issue(ouroStream_t stream) override {
    const size_t c = s_.count;
    const auto dt = ouroDataType_t(s_.dtype);
    const auto op = ouroRedOp_t(s_.op);
    ouroComm_t comm = v_.comm;
    const int n = v_.size, me = v_.rank;
    switch (s_.coll) {
      case kAllReduce: return ouroAllReduce(send_ptr_, recv_ptr_, c, dt, op, comm, stream);
      case kReduceScatter: return ouroReduceScatter(send_ptr_, recv_ptr_, c, dt, op, comm, stream);
      case kAllGather: return ouroAllGather(send_ptr_, recv_ptr_, c, dt, comm, stream);
      case kBroadcast: return ouroBroadcast(send_ptr_, recv_ptr_, c, dt, s_.root, comm, stream);
      case kReduce: return ouroReduce(send_ptr_, recv_ptr_, c, dt, op, s_.root, comm, stream);
      case kAllToAll: return ouroAllToAll(send_ptr_, recv_ptr_, c, dt, comm, stream);
      case kRingExchange: {
        ouroResult_t rc = ouroGroupStart();
        if (rc != ouroSuccess) return rc;
        rc = ouroSend(send_ptr_, c, dt, (me + 1) % n, comm, stream);
        if (rc == ouroSuccess) rc = ouroRecv(recv_ptr_, c, dt, (me + n - 1) % n, comm, stream);
        ouroResult_t end = ouroGroupEnd();
        return rc != ouroSuccess ? rc : end;
      }
      case kPairExchange: {
        const int partner = me ^ 1;
        if (partner >= n) return ouroSuccess;
        ouroResult_t rc = ouroGroupStart();
        if (rc != ouroSuccess) return rc;
        rc = ouroSend(send_ptr_, c, dt, partner, comm, stream);
        if (rc == ouroSuccess) rc = ouroRecv(recv_ptr_, c, dt, partner, comm, stream);
        ouroResult_t end = ouroGroupEnd();
        return rc != ouroSuccess ? rc : end;
      }
      case kPairBlocking: {
        const int partner = me ^ 1;
        if (partner >= n) return ouroSuccess;
        if (me % 2 == 0) {
          ouroResult_t rc = ouroSend(send_ptr_, c, dt, partner, comm, stream);
          return rc != ouroSuccess ? rc : ouroRecv(recv_ptr_, c, dt, partner, comm, stream);
        }
        ouroResult_t rc = ouroRecv(recv_ptr_, c, dt, partner, comm, stream);
        return rc != ouroSuccess ? rc : ouroSend(send_ptr_, c, dt, partner, comm, stream);
      }
      case kAllPairs: {
        ouroResult_t rc = ouroGroupStart();
        if (rc != ouroSuccess) return rc;
        for (int p = 0; p < n && rc == ouroSuccess; p++)
          if (p != me) rc = ouroSend(send_ptr_ + size_t(p) * c, c, dt, p, comm, stream);
        for (int p = 0; p < n && rc == ouroSuccess; p++)
          if (p != me) rc = ouroRecv(recv_ptr_ + size_t(p) * c, c, dt, p, comm, stream);
        ouroResult_t end = ouroGroupEnd();
        return rc != ouroSuccess ? rc : end;
      }
    }
    return ouroInternalError;
  }

  void verify(Rank& rank) override {
    const size_t c = s_.count;
    const int n = v_.size, me = v_.rank;
    const T* out = recv_ptr_;
    switch (s_.coll) {
      case kAllReduce:
        checkReduced(rank, out, c, 0);
        break;
      case kReduce:
        if (me == s_.root) checkReduced(rank, out, c, 0);
        break;
      case kReduceScatter:
        checkReduced(rank, out, c, size_t(me) * c);
        break;
      case kAllGather:
        check(rank, "output", out, size_t(n) * c,
              [&](size_t j) -> std::optional<T> { return input(v_.ids[j / c], j % c); });
        break;
      case kBroadcast:
        check(rank, "output", out, c, [&](size_t i) -> std::optional<T> { return input(v_.ids[s_.root], i); });
        break;
      case kAllToAll:
      case kAllPairs:
        check(rank, "output", out, size_t(n) * c, [&](size_t j) -> std::optional<T> {
          const int from = int(j / c);
          if (s_.coll == kAllPairs && from == me) return std::nullopt;  // nothing sent to self
          return input(v_.ids[from], size_t(me) * c + j % c);
        });
        break;
      case kRingExchange:
        check(rank, "output", out, c,
              [&](size_t i) -> std::optional<T> { return input(v_.ids[(me + n - 1) % n], i); });
        break;
      case kPairExchange:
      case kPairBlocking:
        if ((me ^ 1) < n)
          check(rank, "output", out, c, [&](size_t i) -> std::optional<T> { return input(v_.ids[me ^ 1], i); });
        break;
    }
    if (!s_.inplace) {
      check(rank, "send buffer (must stay untouched)", send_.data(), send_count_,
            [&](size_t i) -> std::optional<T> { return input(myId(), i); });
      rank.expect(send_.guardsIntact(), "%s: wrote outside the send buffer", name_.c_str());
    }
    rank.expect(recv_.guardsIntact(), "%s: wrote outside the receive buffer (%zu elements)", name_.c_str(),
                recv_.count());
  }

  uint64_t outputHash() const override {
    size_t count = s_.count;
    if (s_.coll == kAllGather || s_.coll == kAllToAll || s_.coll == kAllPairs) count *= size_t(v_.size);
    if (s_.coll == kReduce && v_.rank != s_.root) count = 0;
    return fnv1a(recv_ptr_, count * sizeof(T));
  }
  bool outputShared() const override {
    return s_.coll == kAllReduce || s_.coll == kAllGather || s_.coll == kBroadcast;
  }

 private:
  int myId() const { return v_.ids[size_t(v_.rank)]; }

  T input(int id, size_t index) const {
    const uint64_t h = seedOf(s_.id, uint64_t(id), index);
    if constexpr (Traits<T>::kFloat) {
      if (s_.inputs == kRoundingInputs) return roundingInput<T>(h);
    }
    if (reduces(s_.coll)) return reductionInput<T>(s_.op, h);
    return movementInput<T>(h);
  }

  // out[i] must be the reduction over every rank's input at index offset + i.
  void checkReduced(Rank& rank, const T* out, size_t count, size_t offset) {
    const int n = v_.size;
    if constexpr (Traits<T>::kFloat) {
      if (s_.inputs == kRoundingInputs) {
        checkRounded(rank, out, count, offset);
        return;
      }
    }
    std::vector<T> in(static_cast<size_t>(n));
    check(rank, "output", out, count, [&](size_t i) -> std::optional<T> {
      for (int r = 0; r < n; r++) in[size_t(r)] = input(v_.ids[size_t(r)], offset + i);
      return reduceExact(in.data(), n, s_.op);
    });
  }

  // Inputs whose sum rounds: the result must lie within the rounding error any order can make.
  void checkRounded(Rank& rank, const T* out, size_t count, size_t offset) {
    rank.countCheck();
    const int n = v_.size;
    size_t bad = 0, first = 0;
    double first_want = 0, first_tol = 0;
    for (size_t i = 0; i < count; i++) {
      double sum = 0, magnitude = 0;
      for (int r = 0; r < n; r++) {
        const double x = Traits<T>::toDouble(input(v_.ids[size_t(r)], offset + i));
        sum += x;
        magnitude += std::fabs(x);
      }
      double want = sum, tol = 2.0 * n * unitRoundoff<T>() * magnitude;
      if (s_.op == kAvg) want /= n, tol = tol / n + 2 * unitRoundoff<T>() * std::fabs(want);
      tol += 2 * unitRoundoff<T>() * std::fabs(want) + 2.0 * n * subnormalRoundoff<T>() + 1e-300;
      if (!(std::fabs(Traits<T>::toDouble(out[i]) - want) <= tol)) {
        if (bad++ == 0) first = i, first_want = want, first_tol = tol;
      }
    }
    if (bad)
      rank.fail("%s: %zu of %zu elements outside the rounding bound; first at %zu: got %s, exact %.9g, bound %.3g",
                name_.c_str(), bad, count, first, showValue(out[first]).c_str(), first_want, first_tol);
  }

  template <typename Expected>
  void check(Rank& rank, const char* what, const T* got, size_t count, Expected&& expected) {
    rank.countCheck();
    size_t bad = 0, first = 0;
    T want_first{};
    for (size_t i = 0; i < count; i++) {
      std::optional<T> want = expected(i);
      if (!want || sameBits(got[i], *want)) continue;
      if (bad++ == 0) first = i, want_first = *want;
    }
    if (!bad) return;
    std::string inputs;
    if (reduces(s_.coll) && got == recv_ptr_) {
      const size_t index = (s_.coll == kReduceScatter ? size_t(v_.rank) * s_.count : 0) + first;
      inputs = "; inputs at that index:";
      for (int r = 0; r < v_.size; r++)
        inputs += " " + showValue(input(v_.ids[size_t(r)], index));
    }
    rank.fail("%s: %s: %zu of %zu elements wrong; first at index %zu: got %s, expected %s%s", name_.c_str(), what,
              bad, count, first, showValue(got[first]).c_str(), showValue(want_first).c_str(), inputs.c_str());
  }

  CaseSpec s_;
  CommView v_;
  size_t send_count_ = 0, recv_count_ = 0;
  Buf<T> send_, recv_;
  const T* send_ptr_ = nullptr;
  T* recv_ptr_ = nullptr;
};

}  // namespace

const char* collName(Coll c) {
  switch (c) {
    case kAllReduce: return "allreduce";
    case kReduceScatter: return "reducescatter";
    case kAllGather: return "allgather";
    case kBroadcast: return "broadcast";
    case kReduce: return "reduce";
    case kAllToAll: return "alltoall";
    case kRingExchange: return "sendrecv-ring";
    case kPairExchange: return "sendrecv-pair-grouped";
    case kPairBlocking: return "sendrecv-pair-blocking";
    case kAllPairs: return "sendrecv-all-pairs";
  }
  return "?";
}

bool reduces(Coll c) { return c == kAllReduce || c == kReduceScatter || c == kReduce; }

std::string describe(const CaseSpec& s, const CommView& v) {
  std::string out = std::string(collName(s.coll)) + " " + dtypeName(s.dtype);
  if (reduces(s.coll)) out += std::string(" ") + opName(s.op);
  out += " count=" + std::to_string(s.count);
  if (s.inplace) out += " in-place";
  if (s.coll == kBroadcast || s.coll == kReduce) out += " root=" + std::to_string(s.root);
  if (s.inputs == kRoundingInputs) out += " (rounding inputs)";
  out += " on " + v.name + " (rank " + std::to_string(v.rank) + " of " + std::to_string(v.size) + ")";
  return out;
}

std::unique_ptr<Case> makeCase(const CaseSpec& spec, const CommView& view) {
  return withType(spec.dtype, [&](auto zero) -> std::unique_ptr<Case> {
    return std::make_unique<CaseT<decltype(zero)>>(spec, view);
  });
}

void runBlocking(Rank& rank, const CaseSpec& spec, const CommView& view, uint64_t* shared_hash) {
  auto c = makeCase(spec, view);
  mustSucceed(c->issue(nullptr), c->name(), view.comm);
  c->verify(rank);
  if (shared_hash && c->outputShared()) {
    const uint64_t h = c->outputHash();
    *shared_hash = fnv1a(&h, sizeof h, *shared_hash);
  }
}

CommView worldView(const Rank& rank) {
  CommView v;
  v.comm = rank.comm;
  v.rank = rank.rank;
  v.size = rank.n;
  for (int r = 0; r < rank.n; r++) v.ids.push_back(r);
  return v;
}

}  // namespace coll
