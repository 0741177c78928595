// The sweep of nccl_api_rank.cpp (sweep.hpp), run through ouro.h directly: its digests are what
// libnccl.so.2 must reproduce bit for bit. Started by ouro-run; writes DIR/ouro-rankR.digests.
//   ouro-run -n N ouro_twin_rank DIR
#include <ouro/ouro.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "sweep.hpp"

namespace {

struct OuroBackend : sweep::Backend {
  ouroComm_t comm = nullptr;
  bool reduceCase(sweep::Kind k, int t, int op, bool in_place, size_t count, const std::vector<unsigned char>& in,
                  std::vector<unsigned char>& out, std::string* why) override {
    const size_t es = sweep::typeSize(t);
    const ouroDataType_t dt = ouroDataType_t(t);
    ouroRedOp_t oop = ouroRedOp_t(op);
    std::vector<unsigned char> scalar = sweep::scalar(t, rank);
    if (op >= sweep::kPreMulHost &&
        ouroRedOpCreatePreMulSum(&oop, scalar.data(), dt,
                                 op == sweep::kPreMulHost ? ouroScalarHostImmediate : ouroScalarDevice,
                                 comm) != ouroSuccess)
      return *why = ouroGetLastError(nullptr), false;
    std::vector<unsigned char> buf = in;
    out.assign(count * es, 0);
    ouroResult_t rc = ouroSuccess;
    switch (k) {
      case sweep::kAllReduce:
        rc = in_place ? ouroAllReduce(buf.data(), buf.data(), count, dt, oop, comm, nullptr)
                      : ouroAllReduce(in.data(), out.data(), count, dt, oop, comm, nullptr);
        if (in_place) out = buf;
        break;
      case sweep::kReduceScatter:
        rc = in_place ? ouroReduceScatter(buf.data(), buf.data() + size_t(rank) * count * es, count, dt, oop, comm, nullptr)
                      : ouroReduceScatter(in.data(), out.data(), count, dt, oop, comm, nullptr);
        if (in_place) out.assign(buf.begin() + long(size_t(rank) * count * es), buf.begin() + long(size_t(rank + 1) * count * es));
        break;
      case sweep::kReduce:
        rc = in_place ? ouroReduce(buf.data(), buf.data(), count, dt, oop, 0, comm, nullptr)
                      : ouroReduce(in.data(), out.data(), count, dt, oop, 0, comm, nullptr);
        if (in_place) out = buf;
        break;
    }
    if (op >= sweep::kPreMulHost) ouroRedOpDestroy(oop, comm);
    if (rc != ouroSuccess) return *why = ouroGetLastError(nullptr), false;
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ouro-run -n N ouro_twin_rank DIR\n");
    return 2;
  }
  OuroBackend b;
  if (ouroCommInitFromEnv(&b.comm) != ouroSuccess) {
    std::fprintf(stderr, "ouroCommInitFromEnv: %s\n", ouroGetLastError(nullptr));
    return 1;
  }
  ouroCommUserRank(b.comm, &b.rank);
  ouroCommCount(b.comm, &b.nranks);
  std::string lines, errors;
  sweep::runAll(b, &lines, &errors);
  std::ofstream(std::string(argv[1]) + "/ouro-rank" + std::to_string(b.rank) + ".digests") << lines;
  ouroCommDestroy(b.comm);
  if (!errors.empty()) {
    std::fprintf(stderr, "rank %d: FAILED:\n%s", b.rank, errors.c_str());
    return 1;
  }
  std::printf("rank %d: OK\n", b.rank);
  return 0;
}
