// What the CUDA executor's proxy (transport/cuda/fifo_proxy.hpp) carries between two ranks with no
// GPU in the way: one thread stands for the sending kernel (publishes simple-protocol messages into
// the outboxes of every channel as fast as slots free up), another for the receiving kernel (takes
// them from the inboxes), the two proxies between them over TCP on loopback (or a socket pair).
// Prints the message rate and GB/s per message size: the ceiling of the staged path on this
// machine's CPUs, before any PCIe. A meson benchmark (meson test --benchmark), not a test.
//   bench_fifo_proxy [--seconds S] [--channels C]
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/cuda/fifo_proxy.hpp"
#include "transport/cuda/proxy_wire.hpp"
#include "transport/cuda/staging_layout.hpp"
#include "transport/tcp/tcp_link.hpp"

using namespace ouro::transport;
using namespace ouro::transport::cuda;

namespace {

uint32_t load(const uint32_t* p) { return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire); }
void store(uint32_t* p, uint32_t v) { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release); }

struct Side {
  StagingLayout layout;
  std::vector<std::byte> memory;
  std::byte* block = nullptr;
  uint32_t abort_word = 0;
  explicit Side(const StagingLayout& l) : layout(l), memory(l.totalBytes() + 128) {
    block = memory.data() + (128 - uintptr_t(memory.data()) % 128) % 128;
  }
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int channels = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--channels") == 0) channels = std::atoi(argv[i + 1]);
  }
  std::printf("%10s %12s %10s\n", "bytes", "messages/s", "GB/s");
  for (uint32_t bytes : {256u, 4096u, 32768u, 131072u}) {
    StagingLayout l;
    l.nchannels = channels;
    l.npeers = 1;
    l.slot_count = 4;
    l.slot_bytes = 131072;
    l.ll_slot_bytes = 16384;
    Side a(l), b(l);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
    auto make = [&](int rank, Side& side, int fd) {
      std::vector<tcp::Fd> fds;
      fds.emplace_back(fd);
      FifoProxy::Options o;
      o.rank = rank;
      o.layout = l;
      o.staging = side.block;
      o.abort_word = &side.abort_word;
      o.peers.push_back({1 - rank, "peer", std::make_unique<tcp::TcpLink>(1 - rank, std::move(fds), proxyPayloadLimit(l), 8)});
      return std::make_unique<FifoProxy>(std::move(o));
    };
    auto pa = make(0, a, sv[0]);
    auto pb = make(1, b, sv[1]);
    std::atomic<bool> stop{false}, stop_receiver{false};
    std::atomic<uint64_t> received{0};
    std::thread sender([&] {
      std::vector<std::byte> data(bytes, std::byte{7});
      while (!stop.load(std::memory_order_relaxed)) {
        bool moved = false;
        for (int c = 0; c < channels; c++) {
          const ouro::kernels::FifoView f = l.view(a.block, c, 0, true, false);
          const uint32_t m = load(f.tail);
          if (m - load(f.head) >= f.slot_count) continue;
          std::memcpy(f.payload(m), data.data(), bytes);
          f.sizes[m % f.slot_count] = bytes;
          store(f.tail, m + 1);
          moved = true;
        }
        if (!moved) std::this_thread::yield();  // the proxies need the CPU more
      }
    });
    std::thread receiver([&] {
      std::vector<std::byte> out(bytes);
      while (!stop_receiver.load(std::memory_order_relaxed)) {
        bool moved = false;
        for (int c = 0; c < channels; c++) {
          const ouro::kernels::FifoView f = l.view(b.block, c, 0, false, false);
          const uint32_t m = load(f.head);
          if (load(f.tail) == m) continue;
          std::memcpy(out.data(), f.payload(m), bytes);
          store(f.head, m + 1);
          received.fetch_add(1, std::memory_order_relaxed);
          moved = true;
        }
        if (!moved) std::this_thread::yield();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // warm up
    const uint64_t first = received.load();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const uint64_t count = received.load() - first;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stop = true;
    sender.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the receiver takes what is on its way
    stop_receiver = true;
    receiver.join();
    std::printf("%10u %12.0f %10.3f\n", bytes, double(count) / s, double(count) * bytes / s / 1e9);
    std::fflush(stdout);
    pa.reset();
    pb.reset();
  }
  return 0;
}
