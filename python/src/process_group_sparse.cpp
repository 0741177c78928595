// ProcessGroupOuro: all_reduce of sparse COO tensors, the way ProcessGroupGloo's
// AsyncSparseAllreduceWork does it. The (locally summed, then coalesced) input's metadata goes to
// every rank first: nnz, the sparse and dense dimensions, the dtype and the sizes. Then every
// rank's indices and values, padded to the largest nnz so that ouro's all-gather moves one count
// from each. Every rank rebuilds all ranks' sparse tensors and adds them in rank order (each
// element is the left fold over the ranks, as ouro's dense reductions are), so every rank ends
// with the same bits; the coalesced sum is copied into every tensor of the call (gloo's
// inputs[i].copy_(output)), and the work's result is those tensors. Only SUM, as gloo.
//
// The all-gather of the data needs the largest nnz, which only the metadata tells: the metadata
// exchange therefore completes inside the call (the caller waits until every rank has made it),
// and the data all-gathers are queued on the same stream and finish asynchronously like every
// other work (the sum is built on the completion thread). Shape, dimension or dtype mismatches
// between ranks are found after the metadata exchange, on every rank alike, so each raises the
// same error instead of one rank waiting for data the others never send.
#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "process_group.hpp"

namespace ouro::torch_backend {
namespace {

// One rank's metadata row: fixed length, so that every rank all-gathers the same count.
constexpr int64_t kMaxDims = 64;
enum Field : int64_t { kNnz, kSparseDim, kDenseDim, kDims, kDtype, kSizes, kFields = kSizes + kMaxDims };

at::Tensor describe(const at::Tensor& t) {
  at::Tensor row = at::full({kFields}, -1, at::kLong);
  int64_t* d = row.data_ptr<int64_t>();
  d[kNnz] = t._nnz();
  d[kSparseDim] = t.sparse_dim();
  d[kDenseDim] = t.dense_dim();
  d[kDims] = t.dim();
  d[kDtype] = int64_t(t.scalar_type());
  for (int64_t i = 0; i < std::min<int64_t>(t.dim(), kMaxDims); i++) d[kSizes + i] = t.size(i);
  return row;
}

// "a float32 tensor of shape [4, 2] (1 sparse, 1 dense dimensions)", from a metadata row.
std::string described(const int64_t* d) {
  std::string s = "a " + dtypeName(at::ScalarType(d[kDtype])) + " tensor of ";
  if (d[kDims] > kMaxDims) return s + std::to_string(d[kDims]) + " dimensions";
  s += "shape [";
  for (int64_t i = 0; i < d[kDims]; i++) s += (i ? ", " : "") + std::to_string(d[kSizes + i]);
  return s + "] (" + std::to_string(d[kSparseDim]) + " sparse, " + std::to_string(d[kDenseDim]) +
         " dense dimensions)";
}

// What the metadata exchange leaves for the data exchange and the finishing step.
struct SparseState {
  at::Tensor input;  // this rank's contribution, coalesced
  at::Tensor rows;   // [size, kFields]: every rank's metadata
  at::Tensor indices_all, values_all;  // [size, sparse_dim, max_nnz], [size, max_nnz, dense sizes...]
  at::Tensor indices_pad, values_pad;  // this rank's, padded to max_nnz
  bool ready = false;  // both data all-gathers are queued; else the finishing step does nothing
};

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::allreduceSparse(TensorList& tensors,
                                                                 const c10d::AllreduceOptions& opts) {
  const std::string me = who("allreduce");
  if (opts.reduceOp != c10d::ReduceOp::SUM)
    throw std::runtime_error(me + ": ReduceOp." + opName(opts.reduceOp) +
                             " is not supported for sparse tensors: the all-reduce of a sparse COO tensor only sums "
                             "(as gloo's); use ReduceOp.SUM, or convert with .to_dense()");
  for (size_t i = 0; i < tensors.size(); i++) {
    const at::Tensor& t = tensors[i];
    const std::string what = "tensor " + std::to_string(i);
    if (!t.defined()) throw std::runtime_error(me + ": " + what + " is an undefined tensor");
    if (t.layout() != at::kSparse)
      throw std::runtime_error(me + ": " + what + " is " + (t.layout() == at::kStrided ? "dense" : "not COO") +
                               " but tensor 0 is a sparse COO tensor; every tensor of the call has one layout");
    if (!t.device().is_cpu())
      throw std::runtime_error(me + ": " + what + " is on " + t.device().str() +
                               "; this build of the ouro backend takes CPU tensors (move it with .cpu())");
    if (t.scalar_type() != tensors[0].scalar_type())
      throw std::runtime_error(me + ": " + what + " is " + dtypeName(t.scalar_type()) + " but " +
                               dtypeName(tensors[0].scalar_type()) +
                               " was expected; every tensor of the call has one dtype");
    if (t.sizes() != tensors[0].sizes() || t.sparse_dim() != tensors[0].sparse_dim())
      throw std::runtime_error(me + ": " + what + " has shape " + c10::str(t.sizes()) + " with " +
                               std::to_string(t.sparse_dim()) + " sparse dimensions but " +
                               c10::str(tensors[0].sizes()) + " with " + std::to_string(tensors[0].sparse_dim()) +
                               " was expected");
  }

  auto st = std::make_shared<SparseState>();
  {
    // As gloo: these are buffers, not autograd's business.
    at::AutoDispatchBelowAutograd guard;
    at::Tensor input = tensors[0];
    for (size_t i = 1; i < tensors.size(); i++) input = input + tensors[i];  // gloo's local fold
    st->input = input.coalesce();
  }
  const int size = getSize();
  const int rank = getRank();

  Pending p{{}, tensors, [st, tensors, size]() mutable {
              if (!st->ready) return;  // the call itself failed and raised
              at::AutoDispatchBelowAutograd guard;
              const int64_t* rows = st->rows.data_ptr<int64_t>();
              at::Tensor sum;
              for (int r = 0; r < size; r++) {
                const int64_t nnz = rows[r * kFields + kNnz];
                at::Tensor part = at::sparse_coo_tensor(st->indices_all[r].narrow(1, 0, nnz),
                                                        st->values_all[r].narrow(0, 0, nnz), st->input.sizes(),
                                                        st->input.options());
                // Each rank's part came from a coalesced tensor (sorted, unique indices): adding
                // coalesced tensors merges them, element by element, in this (rank) order.
                part._coalesced_(true);
                sum = r == 0 ? part : sum + part;
              }
              sum = sum.coalesce();
              for (auto& t : tensors) t.copy_(sum);
            }};

  return issue(c10d::OpType::ALLREDUCE, "ouro:sparse_all_reduce", tensors, std::move(p), [&](ouroStream_t s) {
    const at::Tensor& input = st->input;
    at::Tensor mine = describe(input);
    st->rows = at::empty({size, kFields}, at::kLong);
    checkOuro(ouroAllGather(mine.data_ptr(), st->rows.data_ptr(), size_t(kFields), ouroInt64, comm_, s));
    checkOuro(ouroStreamSynchronize(s));  // the data's counts depend on every rank's nnz

    const int64_t* rows = st->rows.data_ptr<int64_t>();
    const int64_t* own = rows + rank * kFields;
    int64_t max_nnz = 0;
    for (int r = 0; r < size; r++) {
      const int64_t* row = rows + r * kFields;
      if (row[kDims] > kMaxDims)
        throw std::runtime_error(me + ": rank " + std::to_string(r) + " passed " + described(row) +
                                 "; the sparse all-reduce takes at most " + std::to_string(kMaxDims));
      if (!std::equal(row + kSparseDim, row + kFields, own + kSparseDim))
        throw std::runtime_error(me + ": rank " + std::to_string(r) + " passed " + described(row) + " but rank " +
                                 std::to_string(rank) + " passed " + described(own) +
                                 "; every rank's sparse tensor must have the same shape, layout and dtype");
      max_nnz = std::max(max_nnz, row[kNnz]);
    }

    // Padded to max_nnz: ouro's all-gather moves the same count from every rank. The padding's
    // contents are never read (each rank's part is narrowed to its own nnz).
    at::AutoDispatchBelowAutograd guard;
    const int64_t nnz = input._nnz();
    const int64_t sparse_dim = input.sparse_dim();
    std::vector<int64_t> value_shape{max_nnz};
    for (int64_t d = sparse_dim; d < input.dim(); d++) value_shape.push_back(input.size(d));
    st->indices_pad = at::zeros({sparse_dim, max_nnz}, at::kLong);
    st->indices_pad.narrow(1, 0, nnz).copy_(input._indices());
    st->values_pad = at::zeros(value_shape, input.options().layout(at::kStrided));
    st->values_pad.narrow(0, 0, nnz).copy_(input._values());
    st->indices_all = at::empty({size, sparse_dim, max_nnz}, at::kLong);
    std::vector<int64_t> all_shape{size};
    all_shape.insert(all_shape.end(), value_shape.begin(), value_shape.end());
    st->values_all = at::empty(all_shape, st->values_pad.options());

    const Wire w = movementWire(st->values_pad.scalar_type());
    checkOuro(ouroAllGather(st->indices_pad.data_ptr(), st->indices_all.data_ptr(), size_t(st->indices_pad.numel()),
                            ouroInt64, comm_, s));
    checkOuro(ouroAllGather(st->values_pad.data_ptr(), st->values_all.data_ptr(), wireCount(st->values_pad, w),
                            w.dtype, comm_, s));
    st->ready = true;
  });
}

}  // namespace ouro::torch_backend
