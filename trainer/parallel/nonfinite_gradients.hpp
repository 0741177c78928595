// A gradient that is not finite (NaN, +Inf or -Inf) stops the step on every rank, before the
// optimizer touches anything, with the step, the tensor and where it came from named.
//
// Why stop rather than propagate: the default path's sums would carry NaN and Inf on as IEEE sums
// do, but the fixed-point sum of --virtual-ranks has no integer for them, and an update with a
// NaN or Inf in it leaves weights that every later step keeps (NaN) or turns into NaN: the run
// is over either way. Stopping says so at the step where it happened, identically in every mode,
// with and without virtual ranks, at every world size.
//
// How the ranks agree: each rank looks at the gradients it computed (its local gradient before
// any reduction; with virtual ranks each micro-batch's) and, in the default path, at its piece of
// the reduced gradient (a sum of finite values can overflow). It encodes the first non-finite
// value it saw as one int64 key, ordered by (origin, element), and a MIN all-reduce gives every
// rank the same key: the lowest origin, then the lowest element. The origin is the rank (default
// path; the world size W for an overflow of the sum) or the virtual rank (fixed point), so with
// virtual ranks the report names the same micro-batch and element at every world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "parallel/comm_ops.hpp"
#include "parallel/trainer.hpp"

namespace ouro::trainer {

// Index of the first value of p[0 .. n) (fp32 floats or bf16 bits, by precision) that is NaN or
// infinite, or -1; *is_nan says which it was.
int64_t firstNonFinite(const void* p, size_t n, Precision precision, bool* is_nan);

// What is reported: where the first non-finite gradient value came from.
struct NonFiniteKey {
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  int64_t key = kNone;

  bool found() const { return key != kNone; }
  // Keeps the lower of this and (origin, element): element < count (the parameter count).
  void note(int64_t origin, int64_t element, bool is_nan, size_t count);
  int64_t origin(size_t count) const { return (key >> 1) / int64_t(count); }
  int64_t element(size_t count) const { return (key >> 1) % int64_t(count); }
  bool isNan() const { return (key & 1) == 0; }
  // The same key on every rank (MIN all-reduce over comm; nothing to do in a world of one).
  void agree(CommOps& comm);
};

// Thrown on every rank alike, with the agreed key decoded; not an ouro::Exception, so
// --on-failure shrink does not take it for a lost rank. The step (ModeTrainer) rethrows it with
// the tensor's name and the step number.
class NonFiniteGradient : public std::runtime_error {
 public:
  NonFiniteGradient(const std::string& message, int64_t origin, int64_t element, bool is_nan)
      : std::runtime_error(message), origin(origin), element(element), is_nan(is_nan) {}
  int64_t origin;   // the rank, the world size (an overflow of the sum) or the virtual rank
  int64_t element;  // in the flat parameter vector
  bool is_nan;      // else +Inf or -Inf
};

}  // namespace ouro::trainer
