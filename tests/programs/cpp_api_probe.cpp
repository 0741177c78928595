// Exercises the C++ API (ouro/ouro.hpp) from a rank: every wrapper once, results checked, errors
// surfacing as ouro::Exception with their code. Prints "cpp api ok" on success.
#include <cstdio>
#include <numeric>
#include <vector>

#include "ouro/ouro.hpp"

#define EXPECT(cond)                                                                 \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "cpp_api_probe: %s failed at line %d\n", #cond, __LINE__); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main() {
  auto comm = ouro::Communicator::fromEnv();
  const int r = comm.rank(), n = comm.size();
  EXPECT(comm.localCount() == n && comm.localRank() == r);

  std::vector<int32_t> v(100, r + 1);
  comm.allReduce(std::span<int32_t>(v));
  for (int32_t x : v) EXPECT(x == n * (n + 1) / 2);

  // fp8 spans: ouro::float8e4m3 names ouroFloat8e4m3. Every rank adds E4M3 1.0 (0x38): n in E4M3
  // is exact up to 16 (1, 2, 3: 0x38, 0x40, 0x44); E5M2 max takes the largest.
  std::vector<ouro::float8e4m3> f8(5, ouro::float8e4m3{0x38});
  comm.allReduce(std::span<ouro::float8e4m3>(f8));
  const uint8_t e4m3_of[] = {0, 0x38, 0x40, 0x44, 0x48};
  for (ouro::float8e4m3 x : f8) EXPECT(n > 4 || x.bits == e4m3_of[n]);
  std::vector<ouro::float8e5m2> e5(3, ouro::float8e5m2{uint8_t(0x3c + r)});  // 1, 1.25, 1.5, ...
  comm.allReduce(std::span<ouro::float8e5m2>(e5), ouroMax);
  for (ouro::float8e5m2 x : e5) EXPECT(x.bits == uint8_t(0x3c + n - 1));

  std::vector<double> in(size_t(n) * 3), out(3);
  std::iota(in.begin(), in.end(), double(r));
  comm.reduceScatter(std::span<const double>(in), std::span<double>(out), ouroMax);
  EXPECT(out[0] == double(n - 1 + 3 * r));

  std::vector<float> mine(2, float(r)), all(size_t(n) * 2);
  comm.allGather(std::span<const float>(mine), std::span<float>(all));
  for (int p = 0; p < n; p++) EXPECT(all[size_t(p) * 2] == float(p));

  std::vector<uint8_t> b(10, uint8_t(r == 0 ? 7 : 0));
  comm.broadcast(std::span<uint8_t>(b), 0);
  EXPECT(b[9] == 7);

  std::vector<int64_t> send(static_cast<size_t>(n), int64_t{r}), recv(static_cast<size_t>(n));
  comm.allToAll(std::span<const int64_t>(send), std::span<int64_t>(recv));
  for (int p = 0; p < n; p++) EXPECT(recv[size_t(p)] == p);

  if (n > 1) {
    std::vector<int32_t> to(4, r), from(4, -1);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    ouro::group([&] {
      comm.send(std::span<const int32_t>(to), next);
      comm.recv(std::span<int32_t>(from), prev);
    });
    EXPECT(from[3] == prev);
  }

  {
    ouro::Stream s(comm);
    std::vector<float> q(1000, 1.0f);
    comm.allReduce(std::span<float>(q), ouroSum, &s);
    s.synchronize();
    EXPECT(q[999] == float(n));
  }

  try {
    std::vector<float> a(3), c(4);
    comm.allReduce(std::span<const float>(a), std::span<float>(c));
    EXPECT(false);
  } catch (const ouro::Exception& e) {
    EXPECT(e.code() == ouroInvalidArgument);
  }
  try {
    comm.broadcast(std::span<float>(), n + 5);
    EXPECT(false);
  } catch (const ouro::Exception& e) {
    EXPECT(e.code() == ouroInvalidArgument);
    EXPECT(std::string(e.what()).find("root") != std::string::npos);
  }

  auto half = comm.split(r % 2, r);
  EXPECT(half.valid() && half.size() == (n + 1 - r % 2) / 2);
  comm.barrier();
  std::printf("cpp api ok rank %d\n", r);
  return 0;
}
