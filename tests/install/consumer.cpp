// An outside program as users write one: built only through pkg-config, run under ouro-run.
#include <cstdio>
#include <vector>

#include <ouro/ouro.hpp>

int main() {
  auto comm = ouro::Communicator::fromEnv();
  std::vector<int> v(8, comm.rank() + 1);
  comm.allReduce(std::span<int>(v));
  int n = comm.size();
  bool ok = v[7] == n * (n + 1) / 2;
  std::printf("consumer rank %d: %s\n", comm.rank(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
