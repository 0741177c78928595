#include "comm/plan/collective.hpp"

#include "core/strings.hpp"

namespace ouro {

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

std::string disagreementMessage(int me, const std::string& where, uint64_t number, const CallSide& first,
                                const CallSide& second) {
  auto side = [&](const CallSide& s) {
    std::string text = strprintf("rank %d called %s", s.rank, s.call.c_str());
    if (s.number != number) text += strprintf(" as its call #%llu", (unsigned long long)s.number);
    return text;
  };
  return strprintf("rank %d: %s: ranks disagree on this call: %s but %s; every rank must make the same collective "
                   "calls in the same order, with the same count, type, op and root",
                   me, where.c_str(), side(first).c_str(), side(second).c_str());
}

}  // namespace ouro
