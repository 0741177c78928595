// Buffer registration and reduction operators of ouro's libnccl.so.2. ouro's transports need no
// registered memory, so registration is a successful no-op (docs/NCCL.md); a pre-multiplied sum is
// ouro's own (ouroRedOpCreatePreMulSum), folded in rank order like every sum.
#include "shim.hpp"

using namespace ouro::nccl;

namespace {
// What ncclCommWindowRegister hands out: a distinct non-NULL handle per window, never read.
struct WindowToken {};
}  // namespace

extern "C" {

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommRegister", &rc);
  if (!c) return rc;
  if (!handle) return failf(c, ncclInvalidArgument, "rank %d: ncclCommRegister: handle is NULL", c->rank);
  if (!buff && size) return failf(c, ncclInvalidArgument, "rank %d: ncclCommRegister: buff is NULL with size %zu", c->rank, size);
  *handle = buff ? buff : static_cast<void*>(c);
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommDeregister", &rc);
  if (!c) return rc;
  if (!handle) return failf(c, ncclInvalidArgument, "rank %d: ncclCommDeregister: handle is NULL", c->rank);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  (void)winFlags;
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommWindowRegister", &rc);
  if (!c) return rc;
  if (!win) return failf(c, ncclInvalidArgument, "rank %d: ncclCommWindowRegister: win is NULL", c->rank);
  if (!buff && size)
    return failf(c, ncclInvalidArgument, "rank %d: ncclCommWindowRegister: buff is NULL with size %zu", c->rank, size);
  *win = reinterpret_cast<ncclWindow_t>(new WindowToken());
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclCommWindowDeregister", &rc);
  if (!c) return rc;
  if (!win) return failf(c, ncclInvalidArgument, "rank %d: ncclCommWindowDeregister: win is NULL", c->rank);
  delete reinterpret_cast<WindowToken*>(win);
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclRedOpCreatePreMulSum", &rc);
  if (!c) return rc;
  if (!op) return failf(c, ncclInvalidArgument, "rank %d: ncclRedOpCreatePreMulSum: op is NULL", c->rank);
  ouroRedOp_t made = ouroSum;
  const ouroResult_t r = ouroRedOpCreatePreMulSum(&made, scalar, ouroDataType_t(datatype),
                                                  ouroScalarResidence_t(residence), c->ouro);
  if (r != ouroSuccess) return failFromOuro(c, r);
  *op = ncclRedOp_t(int(made));  // the same value names the op to ouro's collectives
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ncclResult_t rc;
  ncclComm* c = usable(comm, "ncclRedOpDestroy", &rc);
  if (!c) return rc;
  const ouroResult_t r = ouroRedOpDestroy(ouroRedOp_t(int(op)), c->ouro);
  return r == ouroSuccess ? ncclSuccess : failFromOuro(c, r);
}

}  // extern "C"
