#include "transport/cuda/proxy_wire.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace ouro::transport::cuda {

uint32_t proxyPayloadLimit(const StagingLayout& layout) {
  return std::max({layout.slot_bytes, layout.ll_slot_bytes / 2, kMaxAbortReasonBytes});
}

MessageHeader encodeProxyFrame(const ProxyFrame& f) {
  MessageHeader h;
  h.kind = uint32_t(MessageKind::kData);
  h.bytes = f.bytes;
  h.call = uint64_t(f.type) | uint64_t(uint8_t(f.channel)) << 8 | uint64_t(f.ll ? 1 : 0) << 16;
  h.aux = uint64_t(f.counter) | uint64_t(f.flag) << 32;
  return h;
}

std::optional<ProxyFrame> decodeProxyFrame(const MessageHeader& h, const StagingLayout& layout, std::string* why) {
  auto bad = [&](std::string text) -> std::optional<ProxyFrame> {
    *why = std::move(text);
    return std::nullopt;
  };
  if (h.kind != uint32_t(MessageKind::kData)) return bad(strprintf("message kind %u, not a proxy frame", h.kind));
  if (h.call >> 24 != 0) return bad(strprintf("frame word %#llx has bits set past the protocol", (unsigned long long)h.call));
  ProxyFrame f;
  const unsigned type = unsigned(h.call & 0xff), proto = unsigned(h.call >> 16 & 0xff);
  f.channel = int(h.call >> 8 & 0xff);
  f.counter = uint32_t(h.aux);
  f.flag = uint32_t(h.aux >> 32);
  f.bytes = h.bytes;
  if (type < 1 || type > 4) return bad(strprintf("unknown frame type %u", type));
  f.type = ProxyFrameType(type);
  if (proto > 1) return bad(strprintf("unknown protocol %u", proto));
  f.ll = proto == 1;
  const bool fifo = f.type == ProxyFrameType::kData || f.type == ProxyFrameType::kCredit;
  if (fifo && f.channel >= layout.nchannels)
    return bad(strprintf("channel %d, but this rank has %d", f.channel, layout.nchannels));
  if (!fifo && (f.channel != 0 || f.ll || f.counter != 0))
    return bad("a close or abort frame that names a FIFO");
  if (f.flag != 0 && !(f.type == ProxyFrameType::kData && f.ll)) return bad("a flag on a frame that carries no lines");
  switch (f.type) {
    case ProxyFrameType::kData: {
      const uint32_t limit = f.ll ? layout.ll_slot_bytes / 2 : layout.slot_bytes;
      if (f.bytes > limit)
        return bad(strprintf("a %s message of %u bytes, but a slot holds %u", f.ll ? "LL" : "simple", f.bytes, limit));
      break;
    }
    case ProxyFrameType::kAbort:
      if (f.bytes > kMaxAbortReasonBytes) return bad(strprintf("an abort reason of %u bytes", f.bytes));
      break;
    default:
      if (f.bytes != 0) return bad(strprintf("%u bytes of payload on a frame that has none", f.bytes));
  }
  return f;
}

}  // namespace ouro::transport::cuda
