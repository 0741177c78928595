// The pure pieces of the device path across hosts (docs/CUDA.md "Across hosts"): the staging
// block's layout (outboxes and inboxes disjoint, every counter on its own line, an outbox's sizes
// and only an outbox's), a host's FIFOs indexed by local index into a table indexed by rank (the
// ranks of other hosts left alone), the ring joined from each host's part, and the GPUDirect RDMA
// decision.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "comm/exec/device_remote.hpp"
#include "core/error.hpp"
#include "kernels/cuda/device_call.hpp"
#include "transport/cuda/arena_layout.hpp"
#include "transport/cuda/gpudirect.hpp"
#include "transport/cuda/staging_layout.hpp"

using namespace ouro;
using namespace ouro::transport::cuda;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("staging layout: FIFOs disjoint, counters on their own lines, sizes in outboxes only", "[cuda][remote]") {
  for (int npeers : {1, 3, 14})
    for (int nchannels : {1, 4})
      for (uint32_t slots : {2u, 8u, 64u}) {
        StagingLayout l;
        l.nchannels = nchannels;
        l.npeers = npeers;
        l.slot_count = slots;
        l.slot_bytes = 4096;
        l.ll_slot_bytes = 1024;
        std::vector<std::byte> block(l.totalBytes());
        std::byte* base = block.data();
        std::set<const void*> lines;
        size_t covered = l.abortBytes();
        for (int p = 0; p < npeers; p++) {
          const auto* word = reinterpret_cast<const std::byte*>(l.abortRequest(base, p));
          CHECK(size_t(word - base) + 4 <= l.abortBytes());
        }
        for (int c = 0; c < nchannels; c++)
          for (int p = 0; p < npeers; p++)
            for (bool outbox : {true, false})
              for (bool ll : {false, true}) {
                const kernels::FifoView f = l.view(base, c, p, outbox, ll);
                INFO("channel " << c << " peer " << p << (outbox ? " outbox" : " inbox") << (ll ? " LL" : ""));
                CHECK(reinterpret_cast<std::byte*>(f.tail) - base == ptrdiff_t(l.fifoOffset(c, p, outbox, ll)));
                CHECK((reinterpret_cast<std::byte*>(f.head) - reinterpret_cast<std::byte*>(f.tail)) == 128);
                CHECK(uintptr_t(f.slots - base) % 128 == 0);
                CHECK((f.sizes != nullptr) == outbox);
                if (f.sizes) CHECK(reinterpret_cast<std::byte*>(f.sizes + slots) <= f.slots);
                CHECK(f.slot_bytes == (ll ? 1024u : 4096u));
                CHECK(f.slot_count == slots);
                CHECK(lines.insert(f.tail).second);
                CHECK(lines.insert(f.head).second);
                CHECK(f.slots + size_t(slots) * f.slot_stride <= base + l.totalBytes());
                covered += l.fifoBytes(ll);
              }
        CHECK(covered == l.totalBytes());  // back to back, nothing overlaps
      }
}

TEST_CASE("local channels: this host's arenas by local index, the table by rank", "[cuda][remote]") {
  ArenaLayout l{2, 2, 4, 256, 64};  // two ranks on this host
  std::vector<std::byte> a(l.totalBytes()), b(l.totalBytes());
  const std::vector<int> local = {3, 5};  // ranks 3 and 5 of a world of 6
  std::vector<kernels::cuda::DeviceChannel> table(2);
  kernels::FifoView remote;
  remote.slot_count = 99;  // a rank on another host's entry, set before: left as it is
  table[1].to[0] = remote;
  fillLocalChannels(l, local, 0, {a.data(), b.data()}, table);  // this rank is 3
  for (int c = 0; c < 2; c++) {
    CHECK(table[size_t(c)].to[5].slots == l.linkView(b.data(), a.data(), c, 0, 1).slots);
    CHECK(table[size_t(c)].to[5].head == l.linkView(b.data(), a.data(), c, 0, 1).head);
    CHECK(table[size_t(c)].from[5].tail == l.linkView(a.data(), b.data(), c, 1, 0).tail);
    CHECK(table[size_t(c)].ll_from[5].slots == l.llLinkView(a.data(), b.data(), c, 1, 0).slots);
    CHECK(table[size_t(c)].to[3].slots == nullptr);  // itself
    CHECK(table[size_t(c)].to[1].slots == nullptr);  // another host's
  }
  CHECK(table[1].to[0].slot_count == 99);
}

TEST_CASE("GPUDirect RDMA: InfiniBand, the GPU, and a way to register its memory", "[cuda][remote]") {
  GpuDirectFacts f;
  CHECK_FALSE(gpuDirectSupport(f).possible);
  CHECK(contains(gpuDirectSupport(f).how, "TCP"));
  f.ib_links = true;
  CHECK(contains(gpuDirectSupport(f).how, "cudaDevAttrGPUDirectRDMASupported"));
  f.gpu_rdma = true;
  CHECK_FALSE(gpuDirectSupport(f).possible);
  CHECK(contains(gpuDirectSupport(f).how, "modprobe nvidia_peermem"));
  f.peermem = true;
  CHECK(gpuDirectSupport(f).how == "nvidia_peermem");
  f.gpu_dmabuf = true;
  CHECK(gpuDirectSupport(f).how == "nvidia_peermem");  // dma-buf needs libibverbs' registration too
  f.verbs_dmabuf = true;
  CHECK(gpuDirectSupport(f).how == "dma-buf");
  CHECK(contains(describeGpuDirect(f), "possible (dma-buf; the NIC's writes would need a flush) but not used yet"));
  f.writes_ordered = true;
  CHECK(contains(describeGpuDirect(f), "possible (dma-buf) but not used yet: staged through pinned host memory"));
  f.ib_links = false;
  CHECK(contains(describeGpuDirect(f), "not possible (the links to other hosts are TCP"));
}
