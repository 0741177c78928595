// The fixed-point gradient sum of --virtual-ranks (fixed_point_gradients.hpp), reduced while
// backward goes on, as ddp reduces its buckets.
//
// The flat parameter vector is cut into chunks of whole blocks (FixedPointGradients::kBlock) at
// unit boundaries, rounded up to a block, each at least kMinChunk elements where the units allow
// (the reference GPT: one chunk per transformer block, the embeddings, ln_f with the last block).
// Backward writes the units from the last to the first, so once unit k of the last micro-batch is
// done every element from units[k].offset up is final on this rank, and every chunk that starts
// there or above can be reduced: its blocks' largest values exchanged, its int64 sums
// reduce-scattered, its fp32 means all-gathered (FixedPointGradients::reduceChunk).
//
// That chain needs work between its collectives (the scales after the max, the quantisation, the
// mean after the sums), which an ouro stream cannot run: a worker thread runs it, chunk after
// chunk in the order backward completes them (the same order on every rank), with blocking calls
// on a communicator of its own split from the world's, so that it never waits behind, or holds
// up, the step's other calls (ZeRO-3's gathers, the loss's sum). The bits are those of one
// reduction over every element: blocks are independent and every chunk is whole blocks.
//
// A failed call in the worker (a lost rank) is rethrown by finish() as it was (an ouro::Exception,
// which --on-failure shrink recovers from); a NaN or an infinity stops every rank alike, as the
// one-piece sum does (nonfinite_gradients.hpp). In a world of one there is no worker: each chunk is
// reduced on the caller's thread as it completes.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "parallel/comm_ops.hpp"
#include "parallel/fixed_point_gradients.hpp"

namespace ouro::trainer {

class FixedPointPipeline {
 public:
  static constexpr size_t kMinChunk = size_t(1) << 16;

  // sums and world must outlive this object. Collective over world (it splits a communicator).
  FixedPointPipeline(FixedPointGradients& sums, const std::vector<ParamUnit>& units, CommOps& world, Mode mode);
  // Stops the worker; one still inside a call (a step that threw) has its communicator aborted.
  ~FixedPointPipeline();
  FixedPointPipeline(const FixedPointPipeline&) = delete;
  FixedPointPipeline& operator=(const FixedPointPipeline&) = delete;

  // A step's reduction starts: nothing of it is done yet.
  void beginStep();
  // Backward of unit k of this rank's last micro-batch is done: every chunk now final goes to the
  // worker (or, in a world of one, is reduced now).
  void unitDone(size_t unit_offset);
  // Every chunk handed over, waits until all are reduced (the time goes to world's wait
  // accounting). Rethrows the worker's failure; after a NaN or an infinity, agrees over world
  // which one and throws NonFiniteGradient on every rank.
  void finish();

  size_t chunkCount() const { return chunks_.size(); }

 private:
  void work();

  FixedPointGradients& sums_;
  CommOps& world_;
  std::vector<std::pair<size_t, size_t>> chunks_;  // [begin, end), the highest first
  std::unique_ptr<ouro::Communicator> own_comm_;   // the worker's, split from world's
  std::unique_ptr<CommOps> own_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t handed_ = 0;      // chunks handed to the worker this step
  size_t reduced_ = 0;     // chunks the worker finished (or skipped after a failure)
  bool busy_ = false;      // the worker is inside reduceChunk
  bool stop_ = false;      // the destructor asks the worker to end
  bool nonfinite_ = false; // a chunk held a NaN or an infinity (every rank sees it in the same one)
  std::exception_ptr error_;
};

}  // namespace ouro::trainer
