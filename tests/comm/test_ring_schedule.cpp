// The ring all-gather schedule (kernels/common/ring_schedule.hpp) proven by simulation for 2..16
// ranks: what each rank sends at a step is what its successor receives at the next, only finished
// chunks travel, and every chunk reaches every rank's output; and the chunk and slice partitions
// cover every element exactly once for counts nranks does not divide.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "kernels/common/ring_schedule.hpp"

using namespace ouro::kernels;

namespace {

// Simulates one all-gather pass (one slice) for all ranks in lockstep, step by step.
void simulateAllGather(int n) {
  const size_t N = static_cast<size_t>(n);
  // held[r][c]: rank r holds chunk c (its own from the start).
  std::vector<std::vector<bool>> held(N, std::vector<bool>(N, false));
  for (size_t r = 0; r < N; r++) held[r][r] = true;
  std::vector<std::vector<bool>> output(N, std::vector<bool>(N, false));
  // in_flight[r]: the chunk rank r sent to r+1 at the previous step, or -1.
  std::vector<int> in_flight(N, -1);
  for (int s = 0; s < ringAllGatherSteps(n); s++) {
    std::vector<int> sent(N, -1);
    for (int r = 0; r < n; r++) {
      const RingStep st = ringAllGatherStep(r, n, s);
      const size_t me = size_t(r), chunk = size_t(st.chunk);
      INFO("n=" << n << " step " << s << " rank " << r);
      if (st.op != RingOp::kCopySend) {
        // What the predecessor sent one step earlier must be exactly this chunk.
        int& incoming = in_flight[size_t((r - 1 + n) % n)];
        REQUIRE(incoming == st.chunk);
        held[me][chunk] = true;
        incoming = -1;  // consumed
      }
      REQUIRE(held[me][chunk]);  // only a chunk this rank has is written out or forwarded
      output[me][chunk] = true;
      if (st.op != RingOp::kRecv) sent[me] = st.chunk;
    }
    for (size_t r = 0; r < N; r++) {
      REQUIRE(in_flight[r] == -1);  // every message was received at its step
      in_flight[r] = sent[r];
    }
  }
  for (size_t r = 0; r < N; r++) REQUIRE(in_flight[r] == -1);  // nothing left in flight
  for (size_t r = 0; r < N; r++)
    for (size_t c = 0; c < N; c++) {
      INFO("n=" << n << " rank " << r << " chunk " << c);
      CHECK(output[r][c]);  // every chunk reaches every rank's output
    }
}

}  // namespace

TEST_CASE("the ring all-gather moves every chunk to every rank for 2..16 ranks") {
  for (int n = 2; n <= 16; n++) simulateAllGather(n);
}

TEST_CASE("ring all-gather step counts and the first and last steps") {
  CHECK(ringAllGatherSteps(4) == 4);
  CHECK(ringAllGatherStep(1, 4, 0).op == RingOp::kCopySend);
  CHECK(ringAllGatherStep(1, 4, 0).chunk == 1);
  CHECK(ringAllGatherStep(1, 4, 1).op == RingOp::kRecvCopySend);
  CHECK(ringAllGatherStep(1, 4, 1).chunk == 0);
  CHECK(ringAllGatherStep(1, 4, 3).op == RingOp::kRecv);
  CHECK(ringAllGatherStep(1, 4, 3).chunk == 2);
}

TEST_CASE("chunk and slice partitions cover every element once") {
  for (int n = 1; n <= 16; n++) {
    for (size_t count : {size_t(0), size_t(1), size_t(n - 1), size_t(n), size_t(n + 1), size_t(1000),
                         size_t(65537), size_t(1) << 20 | 3}) {
      INFO("n=" << n << " count=" << count);
      size_t next = 0, largest = 0;
      for (int c = 0; c < n; c++) {
        ElementRange r = chunkRange(count, n, c);
        CHECK(r.offset == next);
        next += r.count;
        largest = std::max(largest, r.count);
        CHECK(r.count + 1 >= count / size_t(n));  // balanced: sizes differ by at most one
        for (size_t slice_elems : {size_t(1), size_t(7), size_t(4096)}) {
          if (slice_elems * 1000 < count) continue;  // keeps the loop short; 4096 covers big counts
          size_t covered = 0, at = r.offset;
          for (size_t j = 0; j < sliceCount(largest ? largest : 1, slice_elems) + 1; j++) {
            ElementRange s = sliceRange(r, slice_elems, j);
            if (s.count == 0) continue;
            CHECK(s.offset == at);
            CHECK(s.count <= slice_elems);
            at += s.count;
            covered += s.count;
          }
          CHECK(covered == r.count);
        }
      }
      CHECK(next == count);
    }
  }
}

// The collective driver's cut (issue #33): chunks in whole 16-byte units from the range's start,
// every element once, chunk 0 the longest, and a channel's part of a shorter chunk never longer
// than its part of chunk 0 (every rank walks chunk 0's slices).
TEST_CASE("aligned chunks cover every element once, in whole units") {
  for (size_t quantum : {size_t(1), size_t(2), size_t(4), size_t(8), size_t(16)})
    for (int n = 1; n <= 9; n++)
      for (size_t count : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(301), size_t(1000),
                           size_t(65537)}) {
        INFO("quantum=" << quantum << " n=" << n << " count=" << count);
        size_t next = 0;
        const ElementRange first = alignedChunkRange(count, n, 0, quantum);
        for (int c = 0; c < n; c++) {
          const ElementRange r = alignedChunkRange(count, n, c, quantum);
          CHECK(r.offset == next);
          if (r.count > 0 && r.offset + r.count < count) CHECK(r.count % quantum == 0);
          if (r.count > 0) CHECK(r.offset % quantum == 0);  // empty chunks sit at the end
          CHECK(r.count <= first.count);
          for (int parts : {1, 2, 3, 4})
            for (int p = 0; p < parts; p++)
              CHECK(alignedChunkRange(r.count, parts, p, quantum).count <=
                    alignedChunkRange(first.count, parts, p, quantum).count);
          next += r.count;
        }
        CHECK(next == count);
        if (quantum == 1)
          for (int c = 0; c < n; c++) CHECK(alignedChunkRange(count, n, c, 1).count == chunkRange(count, n, c).count);
      }
}
