// What the TCP transport reads from the network, as pure code (no sockets): the connection
// handshake (job token, communicator key, rank, socket index) and the stream of frames
// (MessageHeader + payload) a TcpLink receives. tcp_mesh.cpp and tcp_link.cpp move the bytes;
// these decide whether to trust them. fuzz/fuzz_tcp.cpp feeds them arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "transport/link.hpp"

namespace ouro::transport::tcp {

constexpr uint32_t kHandshakeMagic = 0x4f555248;  // "OURH"
constexpr uint32_t kHandshakeVersion = 1;
// OURO_TOKEN longer than this is refused (the rendezvous store has the same limit).
constexpr size_t kMaxTokenBytes = 1024;
// Handshake::flags of a rank that connects lazily (tcp_lazy.hpp), which awaits no acknowledgement.
constexpr uint32_t kHandshakeLazy = 1;

struct Handshake {
  uint32_t magic;
  uint32_t version;
  uint64_t comm_key;
  int32_t rank;
  int32_t socket_index;
  uint32_t token_bytes;
  uint32_t flags;  // kHandshakeLazy (tcp_lazy.hpp): the dialer awaits no acknowledgement
};
static_assert(sizeof(Handshake) == 32);

// The bytes a connecting rank sends: the header, then the token.
std::string encodeHandshake(uint64_t comm_key, int rank, int socket_index, std::string_view token, uint32_t flags = 0);

// Checks the fixed part before the token is read: "" when it may be an ouro handshake, else why
// not (for the log line). The token length is bounded here, before anything is allocated for it.
std::string checkHandshakeHeader(const Handshake& h);

enum class Decode { kOk, kNeedMore, kMalformed };
// Decodes a whole handshake (header + token) from `in`; *consumed is its size.
Decode decodeHandshake(std::string_view in, Handshake* h, std::string* token, size_t* consumed, std::string* why);

// How many more bytes the handshake whose start is `in` needs (0: complete, or malformed, which
// decodeHandshake then reports). Lets the reader take exactly the handshake and nothing after it.
size_t handshakeBytesWanted(std::string_view in);

// Checks the payload-independent fields of a frame header: "" when valid, else why not.
std::string checkMessageHeader(const MessageHeader& h, size_t max_payload);

// Assembles one frame at a time from a byte stream arriving in pieces of any size. The header is
// checked the moment it is complete, before any payload byte is accepted; the payload then lands
// in `buffer` (max_payload bytes, owned by the caller) or, for a kData frame that fits, in the
// memory the caller offers when receiving.
class FrameDecoder {
 public:
  FrameDecoder(std::byte* buffer, size_t max_payload) : buffer_(buffer), max_payload_(max_payload) {}

  // Where the next received bytes go and how many are wanted; 0 once the frame is complete.
  std::byte* next();
  size_t wanted() const;
  // Counts n (<= wanted()) bytes written at next(). When they complete the header, it is checked
  // (false, *why set: the stream is unusable) and the payload's destination chosen: `dst` when it
  // is a kData frame of at most `capacity` bytes, else the buffer.
  bool received(size_t n, std::byte* dst, size_t capacity, std::string* why);
  bool complete() const { return got_ >= sizeof(MessageHeader) && wanted() == 0; }
  const MessageHeader& header() const { return header_; }
  // Header bytes received so far (the first of them are in header()).
  size_t headerBytes() const { return got_ < sizeof(MessageHeader) ? got_ : sizeof(MessageHeader); }
  std::byte* payload() const { return target_; }
  // Starts the next frame.
  void reset() { got_ = 0; target_ = nullptr; }

 private:
  std::byte* buffer_;
  size_t max_payload_;
  MessageHeader header_{};
  size_t got_ = 0;  // header + payload bytes received for the current frame
  std::byte* target_ = nullptr;
};

}  // namespace ouro::transport::tcp
