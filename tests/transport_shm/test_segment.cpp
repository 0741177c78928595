// Shared-memory segments (transport/shm/segment.hpp), which the shm transport and the CUDA
// executor's host FIFOs and abort words use (issue #33: the CUDA arena sized its segment with
// ftruncate alone, so a /dev/shm too small for it failed later, at cudaHostRegister or first touch,
// and its "is /dev/shm full?" hint could never show).
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "transport/shm/segment.hpp"

namespace ouro::transport::shm {

TEST_CASE("segment: more than /dev/shm holds is refused at creation, naming the settings", "[shm][segment]") {
  const size_t too_much = size_t(1) << 44;  // 16 TiB: no /dev/shm holds it; refused before any page is taken
  try {
    Segment s = Segment::create(newSegmentName(), too_much, "OURO_CUDA_CHANNELS / OURO_CUDA_SLOTS / OURO_CUDA_SLOT_BYTES");
    FAIL("a 16 TiB segment was created");
  } catch (const Error& e) {
    INFO(e.message());
    CHECK(e.code() == Result::kSystemError);
    CHECK(e.message().find("/dev/shm is too small") != std::string::npos);
    CHECK(e.message().find("lower OURO_CUDA_CHANNELS / OURO_CUDA_SLOTS / OURO_CUDA_SLOT_BYTES)") != std::string::npos);
    CHECK(e.message().find("OURO_TRANSPORT=tcp") == std::string::npos);  // not a transport's
  }
}

TEST_CASE("segment: created zeroed, mapped again by name, name unlinked", "[shm][segment]") {
  Segment own = Segment::create(newSegmentName(), 4096, "OURO_CUDA_SLOTS");
  for (size_t i = 0; i < 4096; i++) REQUIRE(own.data()[i] == std::byte{0});
  own.data()[7] = std::byte{42};
  Segment peer = Segment::open(own.name(), 4096);
  CHECK(peer.data()[7] == std::byte{42});
  own.unlinkName();
  CHECK_THROWS_AS(Segment::open(own.name(), 4096), Error);
}

}  // namespace ouro::transport::shm
