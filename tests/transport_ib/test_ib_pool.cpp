// The per-device slot pool (transport/ib/ib_pool.hpp) with a fake registration backend that
// counts regions: links carve one region instead of registering their own, carves never overlap,
// a region is unpinned when its last link goes, and a refused registration leaves the pool as it
// was. The fake backend is test-only code.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "transport/ib/ib_pool.hpp"
#include "transport/ib/ib_probe.hpp"

using namespace ouro;
using namespace ouro::transport::ib;

namespace {

struct FakeBackend final : SlotPool::Backend {
  std::vector<std::vector<std::byte>> memory;
  int registered = 0, released = 0;
  bool refuse = false;
  SlotPool::Region registerRegion(size_t bytes) override {
    if (refuse) raise(Result::kSystemError, "registering %zu bytes of link slots failed: Cannot allocate memory", bytes);
    memory.emplace_back(bytes);
    registered++;
    SlotPool::Region r;
    r.base = memory.back().data();
    r.bytes = bytes;
    r.lkey = uint32_t(100 + registered), r.rkey = uint32_t(200 + registered);
    return r;
  }
  void releaseRegion(const SlotPool::Region&) override { released++; }
};

constexpr size_t kPage = 4096;

}  // namespace

TEST_CASE("ib slot pool: a link's carve is page-aligned parts of linkPinnedBytes", "[ib]") {
  const LinkCarveLayout l = linkCarveLayout(4, 524288, kPage);
  CHECK(l.bytes == linkPinnedBytes(4, 524288, kPage));
  CHECK(l.recv_offset % kPage == 0);
  CHECK(l.send_offset % kPage == 0);
  CHECK(l.control_offset % kPage == 0);
  CHECK(l.send_offset >= l.recv_offset + 4 * (64 + 524288));
  CHECK(l.control_offset >= l.send_offset + 4 * (64 + 524288));
  CHECK(l.bytes >= l.control_offset + 384);
  CHECK(l.bytes == 2 * l.ring_bytes + kPage);
}

TEST_CASE("ib slot pool: links reserved together share one registered region", "[ib]") {
  FakeBackend backend;
  const size_t link = linkPinnedBytes(4, 524288, kPage);
  {
    SlotPool pool(backend, link);
    pool.reserve(8);
    CHECK(backend.registered == 1);
    CHECK(pool.pinnedBytes() == 8 * link);
    std::vector<SlotPool::Carve> carves;
    std::set<std::byte*> bases;
    for (int i = 0; i < 8; i++) {
      carves.push_back(pool.take());
      bases.insert(carves.back().base);
      CHECK(carves.back().lkey == 101);
      CHECK(carves.back().rkey == 201);
    }
    CHECK(backend.registered == 1);  // no region per link
    CHECK(bases.size() == 8);
    // Carves are link_bytes apart inside the region: none overlaps another.
    std::byte* lowest = *bases.begin();
    for (std::byte* b : bases) CHECK(size_t(b - lowest) % link == 0);
    CHECK(size_t(*bases.rbegin() - lowest) == 7 * link);
    // A ninth link without a reservation gets a region of its own.
    SlotPool::Carve ninth = pool.take();
    CHECK(backend.registered == 2);
    CHECK(pool.regions() == 2);
    // Giving back unpins a region only when its last link is gone.
    pool.give(ninth);
    CHECK(backend.released == 1);
    CHECK(pool.regions() == 1);
    for (size_t i = 0; i + 1 < carves.size(); i++) pool.give(carves[i]);
    CHECK(backend.released == 1);
    pool.give(carves.back());
    CHECK(backend.released == 2);
    CHECK(pool.pinnedBytes() == 0);
  }
  CHECK(backend.released == 2);  // nothing released twice by the destructor
}

TEST_CASE("ib slot pool: reserving registers only the shortfall; a refused registration changes nothing", "[ib]") {
  FakeBackend backend;
  SlotPool pool(backend, 3 * kPage);
  pool.reserve(2);
  SlotPool::Carve a = pool.take();
  CHECK(pool.freeCarves() == 1);
  pool.reserve(3);  // one free already: a region for two more
  CHECK(backend.registered == 2);
  CHECK(backend.memory.back().size() == 2 * 3 * kPage);
  CHECK(pool.freeCarves() == 3);
  pool.reserve(2);  // enough free: nothing registered
  CHECK(backend.registered == 2);
  backend.refuse = true;
  for (int i = 0; i < 3; i++) pool.take();
  CHECK_THROWS_WITH(pool.take(), Catch::Contains("link slots failed"));
  CHECK(pool.regions() == 2);
  CHECK(pool.freeCarves() == 0);
  pool.give(a);
  CHECK(pool.freeCarves() == 1);
  CHECK_NOTHROW(pool.take());  // a carve given back is reused without registering
  CHECK(backend.registered == 2);
}

TEST_CASE("ib memlock: the check for a pool of links names the count and the total", "[ib]") {
  MemlockState m;
  m.limit = 64ull << 20;
  const uint64_t link = linkPinnedBytes(4, 524288, kPage);
  CHECK(memlockProblem(m, link, 8).empty());  // 8 x 4.2 MB fit in 64 MiB
  const std::string sixteen = memlockProblem(m, link, 16);
  CHECK_THAT(sixteen, Catch::Contains("16 InfiniBand link(s)"));
  CHECK_THAT(sixteen, Catch::Contains("ulimit -l"));
}
