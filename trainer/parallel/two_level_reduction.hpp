// When hsdp may reduce its gradients in two levels -- a sum within each shard group, then a sum of
// those partial sums across the groups, then the average's division -- and still give ddp's and
// zero3's bits, which come from one reduction over all W ranks (docs/API.md "Reproducible
// reductions"). Pure: decided by the world size, the shard group size and ouro's reduction order.
//
// Why it can: ouro reduces every element along one fixed tree over the W ranks, rounding to the
// dtype at every node, and an Avg is that sum divided by W once at the end. Under the canonical
// tree (OURO_ORDER=tree, the default), when every group is L consecutive ranks and L is a power of
// two, each group's ranks are one subtree, and the tree over the groups' subtrees is the canonical
// tree over G = W / L: so a sum over the group (ouro's tree over L) followed by a sum over the G
// groups (ouro's tree over G) computes every node of the tree over W, in the dtype, and the
// division done afterwards as ouro's Avg does it gives the same bits. (With P_W = P_G L and
// r_W = r_G L, the first 2 r_W ranks, paired, are exactly the first 2 r_G groups', paired, and
// every later group is an aligned block of L leaves.)
// Why it sometimes cannot: for L not a power of two a group straddles subtrees (3 hosts x 3: ranks
// 3-5 are not one subtree of the tree over 9), and under OURO_ORDER=rank the left fold over W is
// never a fold of group sums unless one level is trivial (L = 1 or G = 1).
#pragma once

#include <cstddef>
#include <string>

namespace ouro::trainer {

// The order ouro's reductions follow (OURO_ORDER; every rank of a communicator agrees, init refuses
// differing values).
enum class ReductionOrder { kTree, kRank };

// OURO_ORDER as ouro reads it: unset or empty is the default, tree. Any other value than tree or
// rank never gets here: ouro's init refused it before the trainer had a communicator.
ReductionOrder reductionOrderSetting();

// Empty when summing within each group of `shard` consecutive ranks and then across the
// world / shard groups gives, for every element, the same bits as ouro's one reduction over the
// `world` ranks in `order` (the sum; an average then divides once, as ouroAvg does). Otherwise the
// reason, in words a log line can carry. world >= 1; shard >= 1 must divide world.
std::string whyNotTwoLevel(int world, int shard, ReductionOrder order);

// An ouroAvg's last step on a sum the trainer reduced itself, bit for bit as ouro does it
// (docs/API.md: divided by n once at the end; bf16 in fp32, rounded once to nearest even; a NaN
// becomes the canonical quiet NaN). values: count fp32 floats, or bf16 bits when bf16.
void divideLikeAvg(void* values, size_t count, bool bf16, int nranks);

}  // namespace ouro::trainer
