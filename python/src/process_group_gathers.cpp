// ProcessGroupOuro: all-gathers, gather, scatter and reduce-scatters. ouro has no gather or
// scatter: the root receives from (sends to) each rank inside one ouroGroupStart/End, which moves
// what gloo's gather and scatter move.
#include <stdexcept>

#include "process_group.hpp"

namespace ouro::torch_backend {
namespace {

void requireRoot(int64_t root, int size, const std::string& me) {
  if (root < 0 || root >= size)
    throw std::runtime_error(me + ": root rank " + std::to_string(root) + " is out of range for " +
                             std::to_string(size) + " ranks");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::allgather(TensorLists& outputs, TensorList& inputs,
                                                           const c10d::AllgatherOptions&) {
  const std::string me = who("allgather");
  // gloo's shape: k inputs; every output list holds size*k tensors, rank r's input j at r*k + j.
  if (inputs.empty()) throw std::runtime_error(me + ": the input list is empty");
  requireCount(outputs.size(), inputs.size(), me, "the list of output lists");
  for (size_t j = 0; j < inputs.size(); j++) requireLike(inputs[j], inputs[0], me, "input " + std::to_string(j));
  for (size_t i = 0; i < outputs.size(); i++) {
    requireCount(outputs[i].size(), inputs.size() * size_t(getSize()), me, "output list " + std::to_string(i));
    for (size_t j = 0; j < outputs[i].size(); j++)
      requireLike(outputs[i][j], inputs[0], me, "output " + std::to_string(i) + "[" + std::to_string(j) + "]");
  }
  at::Tensor in = inputs.size() == 1 ? stage(inputs[0]) : flatten(inputs);
  at::Tensor out = at::empty({in.numel() * getSize()}, in.options());
  const Wire w = movementWire(in.scalar_type());
  std::vector<at::Tensor> flat_outputs;
  for (auto& list : outputs) flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
  Pending p{{in, out}, flat_outputs, [out, outputs]() mutable {
              for (auto& list : outputs) unflatten(out, list);
            }};
  return issue(c10d::OpType::ALLGATHER, "ouro:all_gather", inputs, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroAllGather(in.data_ptr(), out.data_ptr(), wireCount(in, w), w.dtype, comm_, s));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions&) {
  const std::string me = who("_allgather_base");
  requireCpuDense(input, me, "the input");
  requireCpuDense(output, me, "the output");
  if (output.scalar_type() != input.scalar_type())
    throw std::runtime_error(me + ": the output is " + dtypeName(output.scalar_type()) + " and the input " +
                             dtypeName(input.scalar_type()) + "; they must match");
  if (output.numel() != input.numel() * getSize())
    throw std::runtime_error(me + ": the output has " + std::to_string(output.numel()) + " elements; world size " +
                             std::to_string(getSize()) + " x input " + std::to_string(input.numel()) +
                             " were expected");
  at::Tensor in = stage(input), out = stage(output);
  const Wire w = movementWire(in.scalar_type());
  Pending p{{in, out}, {output}, [out, output]() mutable { copyBack(out, output); }};
  return issue(c10d::OpType::_ALLGATHER_BASE, "ouro:all_gather_into_tensor", {input}, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroAllGather(in.data_ptr(), out.data_ptr(), wireCount(in, w), w.dtype, comm_, s));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::allgather_coalesced(TensorLists& output_lists, TensorList& inputs,
                                                                     const c10d::AllgatherOptions&) {
  const std::string me = who("allgather_coalesced");
  // Inputs of any shapes (one dtype); output_lists[r] mirrors the inputs and receives rank r's.
  if (inputs.empty()) throw std::runtime_error(me + ": the input list is empty");
  requireCount(output_lists.size(), size_t(getSize()), me, "the list of output lists");
  for (size_t j = 0; j < inputs.size(); j++) {
    requireCpuDense(inputs[j], me, "input " + std::to_string(j));
    if (inputs[j].scalar_type() != inputs[0].scalar_type())
      throw std::runtime_error(me + ": input " + std::to_string(j) + " is " + dtypeName(inputs[j].scalar_type()) +
                               " and input 0 is " + dtypeName(inputs[0].scalar_type()) + "; they must share one dtype");
  }
  for (size_t r = 0; r < output_lists.size(); r++) {
    requireCount(output_lists[r].size(), inputs.size(), me, "output list " + std::to_string(r));
    for (size_t j = 0; j < inputs.size(); j++)
      requireLike(output_lists[r][j], inputs[j], me, "output " + std::to_string(r) + "[" + std::to_string(j) + "]");
  }
  at::Tensor in = flatten(inputs);
  at::Tensor out = at::empty({in.numel() * getSize()}, in.options());
  const Wire w = movementWire(in.scalar_type());
  std::vector<at::Tensor> flat_outputs;
  for (auto& list : output_lists) flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
  Pending p{{in, out}, flat_outputs, [out, flat_outputs]() mutable { unflatten(out, flat_outputs); }};
  return issue(c10d::OpType::ALLGATHER_COALESCED, "ouro:all_gather", inputs, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroAllGather(in.data_ptr(), out.data_ptr(), wireCount(in, w), w.dtype, comm_, s));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::gather(TensorLists& outputs, TensorList& inputs,
                                                        const c10d::GatherOptions& opts) {
  const std::string me = who("gather");
  requireRoot(opts.rootRank, getSize(), me);
  requireCount(inputs.size(), 1, me, "the input list");
  requireCpuDense(inputs[0], me, "the input");
  const int root = int(opts.rootRank);
  const bool is_root = root == getRank();
  at::Tensor in = stage(inputs[0]);
  const Wire w = movementWire(in.scalar_type());
  std::vector<at::Tensor> staged;  // the root's receive buffers, by rank
  TensorList results;
  if (is_root) {
    requireCount(outputs.size(), 1, me, "the list of output lists (at the root)");
    requireCount(outputs[0].size(), size_t(getSize()), me, "the output list");
    for (size_t r = 0; r < outputs[0].size(); r++) requireLike(outputs[0][r], in, me, "output " + std::to_string(r));
    for (auto& t : outputs[0]) staged.push_back(stage(t));
    results = outputs[0];
  } else if (!outputs.empty()) {
    throw std::runtime_error(me + ": only the root (rank " + std::to_string(root) +
                             ") passes output tensors; pass gather_list=None on the other ranks");
  }
  std::vector<at::Tensor> keep = staged;
  keep.push_back(in);
  Pending p{keep, results, [in, staged, results, is_root, this]() mutable {
              if (!is_root) return;
              results[size_t(getRank())].copy_(in.view(results[size_t(getRank())].sizes()));
              for (size_t r = 0; r < results.size(); r++)
                if (int(r) != getRank()) copyBack(staged[r], results[r]);
            }};
  return issue(c10d::OpType::GATHER, "ouro:gather", inputs, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroGroupStart());
    try {
      if (is_root) {
        for (int r = 0; r < getSize(); r++)
          if (r != root) checkOuro(ouroRecv(staged[size_t(r)].data_ptr(), wireCount(in, w), w.dtype, r, comm_, s));
      } else {
        checkOuro(ouroSend(in.data_ptr(), wireCount(in, w), w.dtype, root, comm_, s));
      }
    } catch (...) {
      ouroGroupEnd();
      throw;
    }
    checkOuro(ouroGroupEnd());
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::scatter(TensorList& outputs, TensorLists& inputs,
                                                         const c10d::ScatterOptions& opts) {
  const std::string me = who("scatter");
  requireRoot(opts.rootRank, getSize(), me);
  requireCount(outputs.size(), 1, me, "the output list");
  requireCpuDense(outputs[0], me, "the output");
  const int root = int(opts.rootRank);
  const bool is_root = root == getRank();
  at::Tensor out = stage(outputs[0]);
  const Wire w = movementWire(out.scalar_type());
  std::vector<at::Tensor> staged;
  if (is_root) {
    requireCount(inputs.size(), 1, me, "the list of input lists (at the root)");
    requireCount(inputs[0].size(), size_t(getSize()), me, "the input list");
    for (size_t r = 0; r < inputs[0].size(); r++) {
      requireLike(inputs[0][r], outputs[0], me, "input " + std::to_string(r));
      staged.push_back(stage(inputs[0][r]));
    }
  } else if (!inputs.empty()) {
    throw std::runtime_error(me + ": only the root (rank " + std::to_string(root) +
                             ") passes input tensors; pass scatter_list=None on the other ranks");
  }
  std::vector<at::Tensor> keep = staged;
  keep.push_back(out);
  TensorList results = outputs;
  Pending p{keep, results, [out, staged, results, is_root, this]() mutable {
              if (is_root) out.copy_(staged[size_t(getRank())].view(out.sizes()));
              copyBack(out, results[0]);
            }};
  return issue(c10d::OpType::SCATTER, "ouro:scatter", is_root ? inputs[0] : TensorList{}, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroGroupStart());
    try {
      if (is_root) {
        for (int r = 0; r < getSize(); r++)
          if (r != root) checkOuro(ouroSend(staged[size_t(r)].data_ptr(), wireCount(out, w), w.dtype, r, comm_, s));
      } else {
        checkOuro(ouroRecv(out.data_ptr(), wireCount(out, w), w.dtype, root, comm_, s));
      }
    } catch (...) {
      ouroGroupEnd();
      throw;
    }
    checkOuro(ouroGroupEnd());
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::reduce_scatter(TensorList& outputs, TensorLists& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  const std::string me = who("reduce_scatter");
  requireCount(outputs.size(), 1, me, "the output list");
  requireCount(inputs.size(), 1, me, "the list of input lists");
  requireCount(inputs[0].size(), size_t(getSize()), me, "the input list");
  requireCpuDense(outputs[0], me, "the output");
  for (size_t r = 0; r < inputs[0].size(); r++) requireLike(inputs[0][r], outputs[0], me, "input " + std::to_string(r));
  const Reduction red = reductionFor(outputs[0].scalar_type(), opts.reduceOp, me);
  at::Tensor in = flatten(inputs[0]);
  at::Tensor out = stage(outputs[0]);
  TensorList results = outputs;
  Pending p{{in, out}, results, [out, results]() mutable { copyBack(out, results[0]); }};
  return issue(c10d::OpType::REDUCE_SCATTER, "ouro:reduce_scatter", inputs[0], std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroReduceScatter(in.data_ptr(), out.data_ptr(), wireCount(out, red.wire), red.wire.dtype, red.op,
                                comm_, s));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  const std::string me = who("_reduce_scatter_base");
  requireCpuDense(input, me, "the input");
  requireCpuDense(output, me, "the output");
  if (output.scalar_type() != input.scalar_type())
    throw std::runtime_error(me + ": the output is " + dtypeName(output.scalar_type()) + " and the input " +
                             dtypeName(input.scalar_type()) + "; they must match");
  if (input.numel() != output.numel() * getSize())
    throw std::runtime_error(me + ": the input has " + std::to_string(input.numel()) + " elements; world size " +
                             std::to_string(getSize()) + " x output " + std::to_string(output.numel()) +
                             " were expected");
  const Reduction red = reductionFor(output.scalar_type(), opts.reduceOp, me);
  at::Tensor in = stage(input), out = stage(output);
  Pending p{{in, out}, {output}, [out, output]() mutable { copyBack(out, output); }};
  return issue(c10d::OpType::_REDUCE_SCATTER_BASE, "ouro:reduce_scatter_tensor", {input}, std::move(p), [&](ouroStream_t s) {
    checkOuro(ouroReduceScatter(in.data_ptr(), out.data_ptr(), wireCount(out, red.wire), red.wire.dtype, red.op,
                                comm_, s));
  });
}

}  // namespace ouro::torch_backend
