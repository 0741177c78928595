// What the CUDA executor's proxies (fifo_proxy.hpp) say to each other over a link: every frame is
// a Link message of kind kData whose header carries the frame (the payload is only data or a
// reason), so any transport's link carries them unchanged. Pure: decodeProxyFrame checks a header
// that came off the network against this rank's FIFOs before anything trusts it (a fuzz target,
// fuzz/fuzz_proxy_wire.cpp, feeds it arbitrary headers).
//   header.call  bits 0-7: frame type; 8-15: channel; 16-23: protocol (0 simple, 1 LL); rest zero
//   header.aux   bits 0-31: counter; 32-63: the LL flag of a data frame's lines (else zero)
//   header.bytes payload bytes
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "transport/cuda/staging_layout.hpp"
#include "transport/link.hpp"

namespace ouro::transport::cuda {

enum class ProxyFrameType : uint8_t {
  kData = 1,    // message `counter` of the sender's outbox (channel, protocol): `bytes` of payload
  kCredit = 2,  // the receiver's kernel has freed its inbox (channel, protocol) up to `counter`
  kClose = 3,   // the sender's communicator is being destroyed: nothing follows
  kAbort = 4,   // the sender's device work failed or was aborted: stop this rank's (payload: why)
};

struct ProxyFrame {
  ProxyFrameType type = ProxyFrameType::kData;
  int channel = 0;
  bool ll = false;
  uint32_t counter = 0;
  uint32_t flag = 0;   // kData on an LL FIFO: the flag every line of the message carries
  uint32_t bytes = 0;
};

constexpr uint32_t kMaxAbortReasonBytes = 1024;

// The largest payload a frame may carry for this layout: a simple slot, or the data of an LL slot
// (half of its lines), or an abort's reason.
uint32_t proxyPayloadLimit(const StagingLayout& layout);

MessageHeader encodeProxyFrame(const ProxyFrame& frame);

// The frame a header carries, checked against `layout` (channel in range, a known type and
// protocol, payload within the FIFO's slot, no payload where none belongs, unused bits zero);
// nullopt with *why saying what was wrong otherwise.
std::optional<ProxyFrame> decodeProxyFrame(const MessageHeader& header, const StagingLayout& layout,
                                           std::string* why);

}  // namespace ouro::transport::cuda
