#!/usr/bin/python3
"""Latency of small blocking calls through a torch.distributed backend (docs/PYTORCH.md "Small
calls"): N timed `dist.all_reduce(t)` of a 2-float tensor (8 B), each timed alone, after a
warm-up; rank 0 prints median, p99 and max in microseconds.

    PYTHONPATH=BUILD/python tests/python/launch.py 2 tests/python/torch_latency.py [--backend ouro|gloo]
        [--iters 10000] [--warmup 1000] [--async-wait] [--max-median-us X]

--async-wait times `dist.all_reduce(t, async_op=True).wait()` instead (the same path for ouro).
--max-median-us makes rank 0 exit 1 when the median is above X (a loose guard for tests; a
busy machine's tails say little, so no bound on p99). Rendezvous: tcp:// on launch.py's port.
"""

import argparse
import datetime
import sys
import time

from rank_common import PORT, RANK, WORLD, import_torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="ouro")
    parser.add_argument("--iters", type=int, default=10000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--elements", type=int, default=2)
    parser.add_argument("--async-wait", action="store_true")
    parser.add_argument("--max-median-us", type=float, default=0.0)
    args = parser.parse_args()
    import_torch()
    import torch
    import torch.distributed as dist

    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(args.elements)
    if args.async_wait:
        def call():
            dist.all_reduce(t, async_op=True).wait()
    else:
        def call():
            dist.all_reduce(t)
    for _ in range(args.warmup):
        call()
    dist.barrier()
    times = []
    clock = time.perf_counter_ns
    for _ in range(args.iters):
        start = clock()
        call()
        times.append(clock() - start)
    # Every rank added ones WORLD times per call, so the values stay exact powers of WORLD only
    # for a few calls; check one fresh call's sum instead.
    t.fill_(1.0)
    dist.all_reduce(t)
    if not bool((t == WORLD).all()):
        print(f"FAIL rank {RANK}: all_reduce of ones gave {t.tolist()}, not {WORLD}", flush=True)
        sys.exit(1)
    times.sort()
    us = [x / 1000.0 for x in times]
    def pct(q):
        return us[min(len(us) - 1, int(len(us) * q))]
    median, p90, p99, top = pct(0.5), pct(0.9), pct(0.99), us[-1]
    torch_threads = torch.get_num_threads()
    dist.barrier()
    dist.destroy_process_group()
    if RANK == 0:
        what = "all_reduce(async_op=True).wait()" if args.async_wait else "all_reduce"
        print(f"ok {args.backend} {what} {args.elements * 4} B at {WORLD} ranks, {args.iters} calls, "
              f"torch threads {torch_threads}: median {median:.1f} us, p90 {p90:.1f} us, p99 {p99:.1f} us, max {top:.1f} us",
              flush=True)
        if args.max_median_us and median > args.max_median_us:
            print(f"FAIL rank 0: median {median:.1f} us is above {args.max_median_us} us", flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
