#include "comm/plan/collective.hpp"

#include "core/strings.hpp"

namespace ouro {

CallDescriptor describeCall(const CollArgs& args) {
  CallDescriptor d;
  d.collective = uint8_t(args.kind);
  d.dtype = args.kind == CollKind::kBarrier ? 0 : uint8_t(args.dtype);
  d.op = args.reduces() ? uint8_t(args.op) : 0;
  d.root = (args.kind == CollKind::kBroadcast || args.kind == CollKind::kReduce) ? args.root : -1;
  d.count = args.kind == CollKind::kBarrier ? 0 : args.count;
  return d;
}

std::string callText(const CallDescriptor& d) {
  auto kind = CollKind(d.collective);
  std::string s = collName(kind);
  if (kind == CollKind::kBarrier) return s + "()";
  s += strprintf("(count=%llu, %s", (unsigned long long)d.count, dataTypeName(DataType(d.dtype)));
  if (kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce)
    s += std::string(", ") + redOpName(RedOp(d.op));
  if (d.root >= 0) s += strprintf(", root=%d", d.root);
  return s + ")";
}

}  // namespace ouro
