// ProcessGroupOuro: all-to-all and point-to-point. Equal splits use ouroAllToAll; given split
// sizes (possibly uneven) become one ouroSend and one ouroRecv per peer inside ouroGroupStart/End,
// so every pair's transfers run together without a send-first deadlock. Send/recv tags are not
// matched: ouro pairs the messages between two ranks in the order they are issued.
//
// send/recv (isend/irecv; dist.send/recv are these plus wait) are deferred, so that their order
// between two ranks does not matter, as under gloo: ouro runs one communicator's calls in issue
// order and a send waits for its receive, so a rank that issued "recv from 1, send to 1" beside a
// peer that issued the same would wait forever in its receive. Instead consecutive send/recv calls
// gather in a pending group, issued as one ouroGroupStart/End (whose sends and receives ouro runs
// together, in any order between peers) at the first of:
//   - wait(), is_completed(), is_success(), exception(), synchronize() or get_future() on any of
//     its works (a blocking send/recv therefore issues at once);
//   - any other call of the group (a collective, barrier, monitored_barrier), issued after it;
//   - the group's destruction.
// Deadlock-freedom: nothing ever waits on a deferred call (every way to wait issues it first), and
// when a rank waits, everything it posted has been issued, as under gloo, whose sends also wait
// for their receives; the k-th send from a to b meets b's k-th receive from a, as in gloo at one
// tag. What ouro adds: a group's works complete together (one stream), and groups and
// collectives run in issue order. So a program deadlocks here, where gloo would finish, if it
// waits on one call of a group before doing what another call of that group needs from a peer
// (rank 0: isend to 1, irecv from 2, wait for the send, only then a send rank 2 waits for
// before sending to 0), or if two ranks order a send/recv pair and a collective differently
// (rank 0: isend to 1, all_reduce; rank 1: all_reduce, irecv from 0). batch_isend_irecv and
// "post all, then wait all" are neither.
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "process_group.hpp"

namespace ouro::torch_backend {
namespace {

// Split sizes along dim 0, or equal ones when none are given.
std::vector<int64_t> splitsOrEqual(const std::vector<int64_t>& splits, const at::Tensor& t, int size,
                                   const std::string& me, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % size != 0)
      throw std::runtime_error(me + ": the " + what + " has " + std::to_string(rows) + " rows, which " +
                               std::to_string(size) + " ranks cannot split equally; give split sizes");
    return std::vector<int64_t>(size_t(size), rows / size);
  }
  requireCount(splits.size(), size_t(size), me, std::string(what) + " split sizes");
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) throw std::runtime_error(me + ": a " + what + " split size is negative (" + std::to_string(s) + ")");
    sum += s;
  }
  if (sum != rows)
    throw std::runtime_error(me + ": the " + what + " split sizes add up to " + std::to_string(sum) + " but the " +
                             what + " has " + std::to_string(rows) + " rows");
  return splits;
}

// Issues one send and one receive per peer (skipping empty ones, as the peer does) in a group.
struct PeerBlock {
  void* data;
  size_t count;
};
void exchange(const std::vector<PeerBlock>& sends, const std::vector<PeerBlock>& recvs, int me, ouroDataType_t dtype,
              ouroComm_t comm, ouroStream_t s) {
  checkOuro(ouroGroupStart());
  try {
    for (size_t r = 0; r < sends.size(); r++) {
      if (int(r) == me) continue;
      if (sends[r].count) checkOuro(ouroSend(sends[r].data, sends[r].count, dtype, int(r), comm, s));
      if (recvs[r].count) checkOuro(ouroRecv(recvs[r].data, recvs[r].count, dtype, int(r), comm, s));
    }
  } catch (...) {
    ouroGroupEnd();
    throw;
  }
  checkOuro(ouroGroupEnd());
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_splits,
                                                               std::vector<int64_t>& input_splits,
                                                               const c10d::AllToAllOptions&) {
  const std::string me = who("alltoall_base");
  requireCpuDense(input, me, "the input");
  requireCpuDense(output, me, "the output");
  if (output.scalar_type() != input.scalar_type())
    throw std::runtime_error(me + ": the output is " + dtypeName(output.scalar_type()) + " and the input " +
                             dtypeName(input.scalar_type()) + "; they must match");
  at::Tensor in = stage(input), out = stage(output);
  const Wire w = movementWire(in.scalar_type());
  if (output_splits.empty() && input_splits.empty()) {
    // Equal splits on every rank (torch passes none then): ouro's own all-to-all.
    if (in.numel() != out.numel() || in.numel() % getSize() != 0)
      throw std::runtime_error(me + ": without split sizes the input and output must have the same number of "
                               "elements, divisible by the world size (input " + std::to_string(in.numel()) +
                               ", output " + std::to_string(out.numel()) + ", " + std::to_string(getSize()) +
                               " ranks)");
    Pending p{{in, out}, {output}, [out, output]() mutable { copyBack(out, output); }};
    return issue(c10d::OpType::ALLTOALL_BASE, "ouro:all_to_all", {input}, std::move(p), [&](ouroStream_t s) {
      checkOuro(ouroAllToAll(in.data_ptr(), out.data_ptr(), wireCount(in, w) / size_t(getSize()), w.dtype, comm_, s));
    });
  }
  const auto in_splits = splitsOrEqual(input_splits, in, getSize(), me, "input");
  const auto out_splits = splitsOrEqual(output_splits, out, getSize(), me, "output");
  const size_t in_row = in.dim() == 0 || in.size(0) == 0 ? 0 : wireCount(in, w) / size_t(in.size(0));
  const size_t out_row = out.dim() == 0 || out.size(0) == 0 ? 0 : wireCount(out, w) / size_t(out.size(0));
  const size_t elem = c10::elementSize(in.scalar_type()) / w.per_element;  // bytes per wire element
  std::vector<PeerBlock> sends, recvs;
  size_t in_off = 0, out_off = 0;
  for (int r = 0; r < getSize(); r++) {
    sends.push_back({static_cast<char*>(in.data_ptr()) + in_off * elem, size_t(in_splits[size_t(r)]) * in_row});
    recvs.push_back({static_cast<char*>(out.data_ptr()) + out_off * elem, size_t(out_splits[size_t(r)]) * out_row});
    in_off += sends.back().count;
    out_off += recvs.back().count;
  }
  const PeerBlock self_in = sends[size_t(getRank())], self_out = recvs[size_t(getRank())];
  if (self_in.count != self_out.count)
    throw std::runtime_error(me + ": this rank sends itself " + std::to_string(in_splits[size_t(getRank())]) +
                             " rows but expects " + std::to_string(out_splits[size_t(getRank())]) +
                             "; its own input and output split sizes must match");
  Pending p{{in, out}, {output}, [in, out, output, self_in, self_out, elem]() mutable {
              std::memcpy(self_out.data, self_in.data, self_in.count * elem);  // this rank's own block
              copyBack(out, output);
            }};
  return issue(c10d::OpType::ALLTOALL_BASE, "ouro:all_to_all", {input}, std::move(p),
               [&](ouroStream_t s) { exchange(sends, recvs, getRank(), w.dtype, comm_, s); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::alltoall(TensorList& outputs, TensorList& inputs,
                                                          const c10d::AllToAllOptions&) {
  const std::string me = who("alltoall");
  requireCount(outputs.size(), size_t(getSize()), me, "the output list");
  requireCount(inputs.size(), size_t(getSize()), me, "the input list");
  for (size_t r = 0; r < inputs.size(); r++) {
    requireCpuDense(inputs[r], me, "input " + std::to_string(r));
    requireCpuDense(outputs[r], me, "output " + std::to_string(r));
    if (inputs[r].scalar_type() != inputs[0].scalar_type() || outputs[r].scalar_type() != inputs[0].scalar_type())
      throw std::runtime_error(me + ": every input and output must be " + dtypeName(inputs[0].scalar_type()) +
                               " (input 0's dtype); entry " + std::to_string(r) + " differs");
  }
  if (inputs[size_t(getRank())].numel() != outputs[size_t(getRank())].numel())
    throw std::runtime_error(me + ": this rank's own input and output (entry " + std::to_string(getRank()) +
                             ") differ in size");
  const Wire w = movementWire(inputs[0].scalar_type());
  std::vector<at::Tensor> in, out, keep;
  std::vector<PeerBlock> sends, recvs;
  for (size_t r = 0; r < inputs.size(); r++) {
    in.push_back(stage(inputs[r]));
    out.push_back(stage(outputs[r]));
    sends.push_back({in.back().data_ptr(), wireCount(in.back(), w)});
    recvs.push_back({out.back().data_ptr(), wireCount(out.back(), w)});
  }
  keep = in;
  keep.insert(keep.end(), out.begin(), out.end());
  const size_t self = size_t(getRank());
  Pending p{keep, outputs, [in, out, outputs, self]() mutable {
              out[self].copy_(in[self].view(out[self].sizes()));
              for (size_t r = 0; r < out.size(); r++) copyBack(out[r], outputs[r]);
            }};
  return issue(c10d::OpType::ALLTOALL, "ouro:all_to_all", inputs, std::move(p),
               [&](ouroStream_t s) { exchange(sends, recvs, getRank(), w.dtype, comm_, s); });
}

void ProcessGroupOuro::requirePeer(int peer, const std::string& me, const char* what) const {
  // Checked here, not left to ouro: a deferred call reaches ouro only when its group is issued.
  if (peer < 0 || peer >= getSize())
    throw std::runtime_error(me + ": " + what + " rank " + std::to_string(peer) + " is out of range for " +
                             std::to_string(getSize()) + " ranks");
  if (peer == getRank())
    throw std::runtime_error(me + ": " + what + " rank " + std::to_string(peer) +
                             " is this rank; ouro sends and receives between two different ranks");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::send(TensorList& tensors, int dst, int) {
  const std::string me = who("send");
  requireCount(tensors.size(), 1, me, "the tensor list");
  requireCpuDense(tensors[0], me, "the tensor");
  requirePeer(dst, me, "destination");
  at::Tensor buffer = stage(tensors[0]);
  const Wire w = movementWire(buffer.scalar_type());
  Pending p{{buffer}, tensors, nullptr};
  ouroComm_t comm = comm_;
  return defer(c10d::OpType::SEND, "ouro:send", tensors, std::move(p), [buffer, w, dst, comm](ouroStream_t s) {
    checkOuro(ouroSend(buffer.data_ptr(), wireCount(buffer, w), w.dtype, dst, comm, s));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOuro::recv(TensorList& tensors, int src, int) {
  const std::string me = who("recv");
  requireCount(tensors.size(), 1, me, "the tensor list");
  requireCpuDense(tensors[0], me, "the tensor");
  requirePeer(src, me, "source");
  at::Tensor buffer = stage(tensors[0]);
  const Wire w = movementWire(buffer.scalar_type());
  Pending p{{buffer}, tensors, [buffer, tensors]() mutable { copyBack(buffer, tensors[0]); }};
  ouroComm_t comm = comm_;
  return defer(
      c10d::OpType::RECV, "ouro:recv", tensors, std::move(p),
      [buffer, w, src, comm](ouroStream_t s) {
        checkOuro(ouroRecv(buffer.data_ptr(), wireCount(buffer, w), w.dtype, src, comm, s));
      },
      src);
}

}  // namespace ouro::torch_backend
