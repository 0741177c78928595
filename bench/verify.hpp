// Seeded inputs and the expected result of every collective, computed on each rank from the
// inputs every rank would have produced (no communication), and the #wrong count.
//
// Inputs are small integers, so every reduction is exact in any order and any precision the
// type has (bf16 included): a result can be checked at 0 ULP whatever algorithm or peer made
// it. Sums use |x| <= max(1, L / nranks) with L the largest integer the type holds exactly (256
// for bf16, 2048 for fp16, 16 and 8 for fp8 E4M3 and E5M2, ...); products are +-1 everywhere
// except one factor 2 per element; max/min use the same range. fp8 sums over more ranks than L
// round; they are checked against ouro's fold (CheckCase::order: the canonical tree, or the left
// fold in rank order under OURO_ORDER=rank), rounded after every step. Floating avg is allowed 2 ULP (the division rounds once in the
// implementation's precision); integer avg truncates toward zero as ouro and NCCL do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "kernels/common/canonical_order.hpp"

namespace ouro::bench {

struct CheckCase {
  Collective collective = Collective::kAllReduce;
  DType dtype = DType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  int nranks = 1;
  int rank = 0;
  uint32_t seed = 1;
  // The order ouro folds in (OURO_ORDER; kernels/common/canonical_order.hpp): what an fp8 sum that
  // rounds is checked against. Other sums are exact in any order.
  kernels::FoldOrder order = kernels::FoldOrder::kTree;
};

// The fold order of this process's ouro: OURO_ORDER as the library reads it ("rank" or the tree).
kernels::FoldOrder foldOrderOfEnvironment();

// The element that rank `rank` contributes at index i of its send buffer, as a double (every
// input is an integer the type represents exactly).
double inputValue(const CheckCase& c, int rank, size_t i);

// Writes `count` elements of this rank's input (elements [first, first + count) of the send
// buffer) into `buffer`, in the type's representation.
void fillInput(const CheckCase& c, void* buffer, size_t first, size_t count);

// Fills `count` elements with a value no correct result has here (so a collective that forgets
// to write an element is caught).
void fillPoison(DType dtype, void* buffer, size_t count);

// Counts the elements of `recv` (recv_count elements of this rank's output for a collective of
// `count`, as in backend.hpp) that differ from the expected result.
uint64_t countWrong(const CheckCase& c, const void* recv, size_t count);

// Bytes written past a result: `guard` bytes after the output are set to kGuardByte before the
// run and must still hold it after.
inline constexpr unsigned char kGuardByte = 0xA5;
inline constexpr size_t kGuardBytes = 256;
uint64_t countGuardDamage(const void* guard, size_t bytes);

}  // namespace ouro::bench
