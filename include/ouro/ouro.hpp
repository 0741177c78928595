// ouro C++ API: a thin, header-only layer over the C API in ouro.h (same core, same semantics).
//   ouro::Communicator comm = ouro::Communicator::fromEnv();
//   std::vector<float> grad(n);
//   comm.allReduce(std::span<float>(grad), ouroSum);          // in place
// Failures throw ouro::Exception carrying the result code and the full message.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "ouro/ouro.h"

namespace ouro {

class Exception : public std::runtime_error {
 public:
  Exception(ouroResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ouroResult_t code() const { return code_; }

 private:
  ouroResult_t code_;
};

// Throws ouro::Exception for anything but ouroSuccess, with ouroGetLastError's text.
inline void check(ouroResult_t rc, ouroComm_t comm = nullptr) {
  if (rc != ouroSuccess) throw Exception(rc, ouroGetLastError(comm));
}

// 16- and 8-bit floating types as storage, for spans of fp16 / bf16 / fp8 data (the bits; ouro
// widens them to fp32 to reduce, docs/API.md "Types and reductions").
struct half {
  uint16_t bits;
};
struct bfloat16 {
  uint16_t bits;
};
struct float8e4m3 {  // OCP FP8 E4M3 ("fn")
  uint8_t bits;
};
struct float8e5m2 {  // OCP FP8 E5M2
  uint8_t bits;
};

template <typename T>
constexpr ouroDataType_t dataTypeOf() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, int8_t> || std::is_same_v<U, char>) return ouroInt8;
  else if constexpr (std::is_same_v<U, uint8_t>) return ouroUint8;
  else if constexpr (std::is_same_v<U, int32_t>) return ouroInt32;
  else if constexpr (std::is_same_v<U, uint32_t>) return ouroUint32;
  else if constexpr (std::is_same_v<U, int64_t> || (std::is_same_v<U, long long> && sizeof(long long) == 8)) return ouroInt64;
  else if constexpr (std::is_same_v<U, uint64_t> || (std::is_same_v<U, unsigned long long> && sizeof(long long) == 8)) return ouroUint64;
  else if constexpr (std::is_same_v<U, half>) return ouroFloat16;
  else if constexpr (std::is_same_v<U, float>) return ouroFloat32;
  else if constexpr (std::is_same_v<U, double>) return ouroFloat64;
  else if constexpr (std::is_same_v<U, bfloat16>) return ouroBfloat16;
  else if constexpr (std::is_same_v<U, float8e4m3>) return ouroFloat8e4m3;
  else if constexpr (std::is_same_v<U, float8e5m2>) return ouroFloat8e5m2;
  else static_assert(sizeof(T) == 0, "no ouro data type for this element type");
}

class Communicator;

// A host work queue (ouroStreamCreate): operations given this stream return at once and run in
// issue order while the caller computes; synchronize() waits and throws the first failure.
class Stream {
 public:
  explicit Stream(const Communicator& comm);
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (stream_) ouroStreamDestroy(stream_);
  }
  void synchronize() { check(ouroStreamSynchronize(stream_)); }
  bool done() {
    ouroResult_t rc = ouroStreamQuery(stream_);
    if (rc == ouroInProgress) return false;
    check(rc);
    return true;
  }
  ouroStream_t handle() const { return stream_; }

 private:
  ouroStream_t stream_ = nullptr;
};

// RAII communicator: destroyed (after its queued work) when it goes out of scope.
class Communicator {
 public:
  Communicator() = default;
  Communicator(int nranks, int rank, const std::string& init_method) {
    check(ouroCommInitRank(&comm_, nranks, rank, init_method.c_str()));
  }
  static Communicator fromEnv() {
    Communicator c;
    check(ouroCommInitFromEnv(&c.comm_));
    return c;
  }
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&& other) noexcept {
    std::swap(comm_, other.comm_);
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() {
    if (comm_) ouroCommDestroy(comm_);
  }

  bool valid() const { return comm_ != nullptr; }
  explicit operator bool() const { return valid(); }
  ouroComm_t handle() const { return comm_; }

  int rank() const { return query(ouroCommUserRank); }
  int size() const { return query(ouroCommCount); }
  int localRank() const { return query(ouroCommLocalRank); }
  int localCount() const { return query(ouroCommLocalCount); }

  // Collective; ranks passing OURO_SPLIT_NOCOLOR get an empty (invalid) communicator.
  Communicator split(int color, int key) const {
    Communicator c;
    check(ouroCommSplit(comm_, color, key, &c.comm_), comm_);
    return c;
  }
  // ouroCommShrink: every remaining rank passes the same excluded ranks and gets the new
  // communicator of the others, in the same order; works after this communicator failed, which
  // is left as it was. An excluded rank that calls it gets an Exception (ouroInvalidUsage).
  Communicator shrink(std::span<const int> excluded) const {
    Communicator c;
    check(ouroCommShrink(comm_, int(excluded.size()), excluded.data(), &c.comm_), comm_);
    return c;
  }
  // Local and immediate; peers then fail with ouroRemoteError.
  void abort() {
    if (comm_) check(ouroCommAbort(std::exchange(comm_, nullptr)));
  }

  template <typename T>
  void allReduce(std::span<const T> send, std::span<T> recv, ouroRedOp_t op = ouroSum, Stream* s = nullptr) {
    sameSize(send.size(), recv.size(), "allReduce");
    check(ouroAllReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, comm_, streamOf(s)), comm_);
  }
  template <typename T>
  void allReduce(std::span<T> data, ouroRedOp_t op = ouroSum, Stream* s = nullptr) {
    check(ouroAllReduce(data.data(), data.data(), data.size(), dataTypeOf<T>(), op, comm_, streamOf(s)), comm_);
  }
  // send holds size() blocks of recv.size() elements; recv gets this rank's block, reduced.
  template <typename T>
  void reduceScatter(std::span<const T> send, std::span<T> recv, ouroRedOp_t op = ouroSum, Stream* s = nullptr) {
    sameSize(send.size(), recv.size() * size_t(size()), "reduceScatter (send must hold size() blocks of recv)");
    check(ouroReduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), op, comm_, streamOf(s)), comm_);
  }
  // recv gets size() blocks of send.size() elements, rank r's at r * send.size().
  template <typename T>
  void allGather(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    sameSize(send.size() * size_t(size()), recv.size(), "allGather (recv must hold size() blocks of send)");
    check(ouroAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), comm_, streamOf(s)), comm_);
  }
  template <typename T>
  void broadcast(std::span<T> data, int root, Stream* s = nullptr) {
    check(ouroBroadcast(data.data(), data.data(), data.size(), dataTypeOf<T>(), root, comm_, streamOf(s)), comm_);
  }
  template <typename T>
  void broadcast(std::span<const T> send, std::span<T> recv, int root, Stream* s = nullptr) {
    if (rank() == root) sameSize(send.size(), recv.size(), "broadcast");
    check(ouroBroadcast(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), root, comm_, streamOf(s)), comm_);
  }
  // recv is only written (and may be empty) on ranks other than root.
  template <typename T>
  void reduce(std::span<const T> send, std::span<T> recv, int root, ouroRedOp_t op = ouroSum, Stream* s = nullptr) {
    if (rank() == root) sameSize(send.size(), recv.size(), "reduce");
    check(ouroReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, root, comm_, streamOf(s)), comm_);
  }
  // send and recv hold size() blocks; block d of this rank goes to rank d.
  template <typename T>
  void allToAll(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    sameSize(send.size(), recv.size(), "allToAll");
    if (send.size() % size_t(size()) != 0)
      throw Exception(ouroInvalidArgument, "ouro::Communicator::allToAll: size is not a multiple of the rank count");
    check(ouroAllToAll(send.data(), recv.data(), send.size() / size_t(size()), dataTypeOf<T>(), comm_, streamOf(s)),
          comm_);
  }
  template <typename T>
  void send(std::span<const T> data, int peer, Stream* s = nullptr) {
    check(ouroSend(data.data(), data.size(), dataTypeOf<T>(), peer, comm_, streamOf(s)), comm_);
  }
  template <typename T>
  void recv(std::span<T> data, int peer, Stream* s = nullptr) {
    check(ouroRecv(data.data(), data.size(), dataTypeOf<T>(), peer, comm_, streamOf(s)), comm_);
  }
  void barrier() { check(ouroBarrier(comm_), comm_); }

 private:
  template <typename Query>
  int query(Query q) const {
    int v = 0;
    check(q(comm_, &v), comm_);
    return v;
  }
  static ouroStream_t streamOf(Stream* s) { return s ? s->handle() : nullptr; }
  static void sameSize(size_t a, size_t b, const char* what) {
    if (a != b)
      throw Exception(ouroInvalidArgument, std::string("ouro::Communicator::") + what + ": buffer sizes differ (" +
                                               std::to_string(a) + " vs " + std::to_string(b) + ")");
  }

  ouroComm_t comm_ = nullptr;
};

inline Stream::Stream(const Communicator& comm) { check(ouroStreamCreate(comm.handle(), &stream_), comm.handle()); }

// Runs body between ouroGroupStart and ouroGroupEnd, so the sends and receives it issues proceed
// together (both sides may send first): ouro::group([&] { c.send(a, 1); c.recv(b, 1); });
inline void group(const std::function<void()>& body) {
  check(ouroGroupStart());
  try {
    body();
  } catch (...) {
    ouroGroupEnd();
    throw;
  }
  check(ouroGroupEnd());
}

}  // namespace ouro
