// Trainer collectives with wait accounting and errors that name the mode (see comm_ops.hpp).
#include "parallel/comm_ops.hpp"

#include <cstddef>

namespace ouro::trainer {

namespace {

size_t bytesOf(ouroDataType_t dtype) { return dtype == ouroBfloat16 ? 2 : 4; }

std::byte* plus(void* buf, size_t elements, ouroDataType_t dtype) {
  return static_cast<std::byte*>(buf) + elements * bytesOf(dtype);
}

}  // namespace

CommOps::CommOps(ouro::Communicator* comm, Mode mode) : comm_(comm), mode_(mode) {
  if (comm_) {
    rank_ = comm_->rank();
    world_ = comm_->size();
    stream_ = std::make_unique<ouro::Stream>(*comm_);
  }
}

std::unique_ptr<ouro::Communicator> CommOps::split(int color, int key) const {
  if (!comm_) return nullptr;
  try {
    return std::make_unique<ouro::Communicator>(comm_->split(color, key));
  } catch (const std::exception& e) {
    fail("splitting the communicator (color " + std::to_string(color) + ")", e);
  }
}

void CommOps::fail(const std::string& what, const std::exception& e) const {
  const std::string message = std::string("trainer (") + modeName(mode_) + ", rank " + std::to_string(rank_) + " of " +
                              std::to_string(world_) + "): " + what + " failed: " + e.what();
  if (const auto* oe = dynamic_cast<const ouro::Exception*>(&e)) throw ouro::Exception(oe->code(), message);
  throw std::runtime_error(message);
}

template <typename Call>
void CommOps::run(bool async, const std::string& what, Call call) {
  if (!comm_) return;
  Stopwatch watch;
  try {
    call(async ? stream_->handle() : nullptr);
  } catch (const std::exception& e) {
    fail(what, e);
  }
  if (async) last_queued_ = what;
  else wait_seconds_ += watch.seconds();
}

void CommOps::allReduce(void* buf, size_t count, ouroDataType_t dtype, ouroRedOp_t op, bool async,
                        const std::string& what) {
  run(async, what, [&](ouroStream_t s) {
    ouro::check(ouroAllReduce(buf, buf, count, dtype, op, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::allReduceSumInt64(int64_t* buf, size_t count, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroAllReduce(buf, buf, count, ouroInt64, ouroSum, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::allReduceMinInt64(int64_t* buf, size_t count, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroAllReduce(buf, buf, count, ouroInt64, ouroMin, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::reduceScatterSumInt64(int64_t* buf, size_t block, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroReduceScatter(buf, buf + size_t(rank_) * block, block, ouroInt64, ouroSum, comm_->handle(), s),
                comm_->handle());
  });
}

void CommOps::allReduceSumDouble(double* buf, size_t count, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroAllReduce(buf, buf, count, ouroFloat64, ouroSum, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::allReduceMaxFloat(float* buf, size_t count, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroAllReduce(buf, buf, count, ouroFloat32, ouroMax, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::reduceScatterInPlace(void* buf, size_t block, ouroDataType_t dtype, ouroRedOp_t op, bool async,
                                   const std::string& what) {
  run(async, what, [&](ouroStream_t s) {
    ouro::check(
        ouroReduceScatter(buf, plus(buf, size_t(rank_) * block, dtype), block, dtype, op, comm_->handle(), s),
        comm_->handle());
  });
}

void CommOps::allGatherInPlace(void* buf, size_t block, ouroDataType_t dtype, bool async, const std::string& what) {
  run(async, what, [&](ouroStream_t s) {
    ouro::check(ouroAllGather(plus(buf, size_t(rank_) * block, dtype), buf, block, dtype, comm_->handle(), s),
                comm_->handle());
  });
}

void CommOps::allGather(const void* send, void* recv, size_t block, ouroDataType_t dtype, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroAllGather(send, recv, block, dtype, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::broadcast(void* buf, size_t count, ouroDataType_t dtype, int root, const std::string& what) {
  run(false, what, [&](ouroStream_t s) {
    ouro::check(ouroBroadcast(buf, buf, count, dtype, root, comm_->handle(), s), comm_->handle());
  });
}

void CommOps::wait() {
  if (!comm_) return;
  Stopwatch watch;
  try {
    stream_->synchronize();
  } catch (const std::exception& e) {
    fail("queued communication (the newest: " + last_queued_ + ")", e);
  }
  wait_seconds_ += watch.seconds();
}

void CommOps::drain() noexcept {
  if (comm_) ouroStreamSynchronize(stream_->handle());
}

double CommOps::takeWaitSeconds() {
  const double s = wait_seconds_;
  wait_seconds_ = 0;
  return s;
}

}  // namespace ouro::trainer
