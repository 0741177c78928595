// libFuzzer target: the frames the CUDA executor's proxies exchange (transport/cuda/proxy_wire.hpp),
// a link message's header as the receiving proxy decodes it. The first 4 bytes shape the
// receiver's FIFOs (channels, simple slot bytes / 16, LL slot bytes / 16; slots), the next 32 are
// the header. A decoded frame must name a FIFO this receiver has, carry no more payload than its
// slot holds, and encode back to the same header.
#include <cstdint>
#include <cstring>
#include <string>

#include "transport/cuda/proxy_wire.hpp"

using namespace ouro::transport;
using namespace ouro::transport::cuda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4 + sizeof(MessageHeader)) return 0;
  StagingLayout layout;
  layout.nchannels = 1 + data[0] % 8;
  layout.slot_bytes = 16u * (1 + data[1]);
  layout.ll_slot_bytes = 16u * (3 + data[2]);
  layout.slot_count = 1u << (data[3] % 8);
  layout.npeers = 1;
  MessageHeader h;
  std::memcpy(&h, data + 4, sizeof h);
  std::string why;
  const auto f = decodeProxyFrame(h, layout, &why);
  if (!f) {
    if (why.empty()) __builtin_trap();
    return 0;
  }
  if (f->bytes > proxyPayloadLimit(layout)) __builtin_trap();
  const bool fifo = f->type == ProxyFrameType::kData || f->type == ProxyFrameType::kCredit;
  if (fifo && (f->channel < 0 || f->channel >= layout.nchannels)) __builtin_trap();
  if (f->type == ProxyFrameType::kData && f->bytes > (f->ll ? layout.ll_slot_bytes / 2 : layout.slot_bytes))
    __builtin_trap();
  const MessageHeader back = encodeProxyFrame(*f);
  if (back.kind != h.kind || back.bytes != h.bytes || back.call != h.call || back.aux != h.aux) __builtin_trap();
  return 0;
}
