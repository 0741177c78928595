// Pure decoding of the TCP transport's handshake and frames; see tcp_wire.hpp.
#include "transport/tcp/tcp_wire.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace ouro::transport::tcp {

std::string encodeHandshake(uint64_t comm_key, int rank, int socket_index, std::string_view token, uint32_t flags) {
  Handshake h{kHandshakeMagic, kHandshakeVersion, comm_key, rank, socket_index, uint32_t(token.size()), flags};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(token);
  return out;
}

std::string checkHandshakeHeader(const Handshake& h) {
  if (h.magic != kHandshakeMagic) return "not an ouro transport handshake";
  if (h.version != kHandshakeVersion) return strprintf("handshake version %u, this build speaks %u", h.version, kHandshakeVersion);
  if (h.token_bytes > kMaxTokenBytes)
    return strprintf("it claims a %u-byte job token (limit %zu)", h.token_bytes, kMaxTokenBytes);
  return "";
}

Decode decodeHandshake(std::string_view in, Handshake* h, std::string* token, size_t* consumed, std::string* why) {
  if (in.size() < sizeof(Handshake)) return Decode::kNeedMore;
  std::memcpy(h, in.data(), sizeof(*h));
  *why = checkHandshakeHeader(*h);
  if (!why->empty()) return Decode::kMalformed;
  if (in.size() - sizeof(Handshake) < h->token_bytes) return Decode::kNeedMore;
  token->assign(in.substr(sizeof(Handshake), h->token_bytes));
  *consumed = sizeof(Handshake) + h->token_bytes;
  return Decode::kOk;
}

size_t handshakeBytesWanted(std::string_view in) {
  if (in.size() < sizeof(Handshake)) return sizeof(Handshake) - in.size();
  Handshake h;
  std::memcpy(&h, in.data(), sizeof(h));
  if (!checkHandshakeHeader(h).empty()) return 0;
  const size_t total = sizeof(Handshake) + h.token_bytes;
  return in.size() < total ? total - in.size() : 0;
}

std::string checkMessageHeader(const MessageHeader& h, size_t max_payload) {
  if (h.magic != kMessageMagic || h.kind < 1 || h.kind > 3 || h.bytes > max_payload)
    return strprintf("magic %#x, kind %u, %u bytes, limit %zu", h.magic, h.kind, h.bytes, max_payload);
  return "";
}

std::byte* FrameDecoder::next() {
  if (got_ < sizeof(MessageHeader)) return reinterpret_cast<std::byte*>(&header_) + got_;
  return target_ + (got_ - sizeof(MessageHeader));
}

size_t FrameDecoder::wanted() const {
  if (got_ < sizeof(MessageHeader)) return sizeof(MessageHeader) - got_;
  return sizeof(MessageHeader) + header_.bytes - got_;
}

bool FrameDecoder::received(size_t n, std::byte* dst, size_t capacity, std::string* why) {
  OURO_ASSERT(n <= wanted());
  const bool header_was_partial = got_ < sizeof(MessageHeader);
  got_ += n;
  if (header_was_partial && got_ == sizeof(MessageHeader)) {
    // Checked before a single payload byte is trusted or buffered.
    *why = checkMessageHeader(header_, max_payload_);
    if (!why->empty()) return false;
    // Data the caller has room for lands in its memory: one copy fewer than via the buffer.
    const bool direct = dst && header_.kind == uint32_t(MessageKind::kData) && header_.bytes <= capacity;
    target_ = direct ? dst : buffer_;
  }
  return true;
}

}  // namespace ouro::transport::tcp
