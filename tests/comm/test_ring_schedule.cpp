// The ring schedule (kernels/common/ring_schedule.hpp) proven by simulation for 2..16 ranks: what
// each rank sends at a step is what its successor receives, every chunk of an all-reduce
// collects each rank's contribution exactly once and reaches everyone, reduce-scatter finishes
// chunk r on rank r, all-gather delivers every chunk everywhere; and the chunk and slice
// partitions cover every element exactly once for counts nranks does not divide.
#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "kernels/common/ring_schedule.hpp"

using namespace ouro::kernels;

namespace {

struct Held {
  std::set<int> contributions;  // ranks whose input is summed into this rank's copy of the chunk
  bool final = false;           // the fully reduced chunk (what the output must hold)
};

// Simulates one pass (one slice) for all ranks in lockstep, step by step.
void simulate(RingCollective coll, int n) {
  // state[r][c]: what rank r holds of chunk c after the steps so far.
  const size_t N = static_cast<size_t>(n);
  std::vector<std::vector<Held>> state(N, std::vector<Held>(N));
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) {
      if (coll == RingCollective::kAllGather) {
        if (c == r) state[size_t(r)][size_t(c)].final = true;  // own block is already final
      } else {
        state[size_t(r)][size_t(c)].contributions = {r};
      }
    }
  std::vector<std::vector<bool>> output(N, std::vector<bool>(N, false));
  // in_flight[r]: the message rank r sent to r+1 at the previous step (chunk, contents).
  std::vector<std::pair<int, Held>> in_flight(N, {-1, {}});
  for (int s = 0; s < ringStepCount(coll, n); s++) {
    std::vector<std::pair<int, Held>> sent(N, {-1, {}});
    for (int r = 0; r < n; r++) {
      RingStep st = ringStep(coll, r, n, s);
      const int prev = (r - 1 + n) % n;
      Held mine = state[size_t(r)][size_t(st.chunk)];
      INFO("n=" << n << " step " << s << " rank " << r);
      if (ringOpReceives(st.op)) {
        // What the predecessor sent one step earlier must be exactly this chunk.
        auto& [chunk, incoming] = in_flight[size_t(prev)];
        REQUIRE(chunk == st.chunk);
        bool reduces = st.op == RingOp::kRecvReduceSend || st.op == RingOp::kRecvReduceCopySend ||
                       st.op == RingOp::kRecvReduceCopy;
        if (reduces) {
          for (int x : incoming.contributions) REQUIRE(mine.contributions.insert(x).second);  // never twice
        } else {
          REQUIRE(incoming.final);
          mine = incoming;
        }
        chunk = -1;  // consumed
      }
      if (st.op == RingOp::kRecvReduceCopySend || st.op == RingOp::kRecvReduceCopy) {
        REQUIRE(int(mine.contributions.size()) == n);  // finished: every rank counted once
        mine.final = true;
      }
      bool writes_output = st.op != RingOp::kSend && st.op != RingOp::kRecvReduceSend;
      if (writes_output) {
        REQUIRE(mine.final);
        output[size_t(r)][size_t(st.chunk)] = true;
      }
      if (ringOpSends(st.op)) sent[size_t(r)] = {st.chunk, mine};
      state[size_t(r)][size_t(st.chunk)] = mine;
    }
    for (int r = 0; r < n; r++) {
      REQUIRE(in_flight[size_t(r)].first == -1);  // every message was received at its step
      in_flight[size_t(r)] = sent[size_t(r)];
    }
  }
  for (int r = 0; r < n; r++) REQUIRE(in_flight[size_t(r)].first == -1);  // nothing left in flight
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) {
      INFO("n=" << n << " rank " << r << " chunk " << c);
      if (coll == RingCollective::kReduceScatter)
        CHECK(output[size_t(r)][size_t(c)] == (c == r));  // only its own chunk, finished
      else
        CHECK(output[size_t(r)][size_t(c)]);  // every chunk reaches every rank's output
    }
}

}  // namespace

TEST_CASE("ring schedules move every chunk correctly for 2..16 ranks") {
  for (int n = 2; n <= 16; n++) {
    simulate(RingCollective::kAllReduce, n);
    simulate(RingCollective::kReduceScatter, n);
    simulate(RingCollective::kAllGather, n);
  }
}

TEST_CASE("ring step counts and the first and last steps") {
  CHECK(ringStepCount(RingCollective::kAllReduce, 4) == 7);
  CHECK(ringStepCount(RingCollective::kReduceScatter, 4) == 4);
  CHECK(ringStep(RingCollective::kAllReduce, 0, 4, 0).op == RingOp::kSend);
  CHECK(ringStep(RingCollective::kAllReduce, 0, 4, 3).op == RingOp::kRecvReduceCopySend);
  CHECK(ringStep(RingCollective::kAllReduce, 0, 4, 3).chunk == 0);  // rank r finishes chunk r
  CHECK(ringStep(RingCollective::kAllReduce, 0, 4, 6).op == RingOp::kRecv);
  CHECK(ringStep(RingCollective::kReduceScatter, 2, 4, 3).op == RingOp::kRecvReduceCopy);
  CHECK(ringStep(RingCollective::kReduceScatter, 2, 4, 3).chunk == 2);
  CHECK(ringStep(RingCollective::kAllGather, 1, 4, 0).op == RingOp::kCopySend);
  CHECK(ringStep(RingCollective::kAllGather, 1, 4, 0).chunk == 1);
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
