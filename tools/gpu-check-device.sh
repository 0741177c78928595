#!/usr/bin/env bash
# tools/gpu-check-device.sh BUILD: issue #33's checks on a machine with an NVIDIA GPU, on a build
# made with -Dcuda=enabled (tools/gpu-check builds one and calls this). About 4 minutes on one
# H200; every step has its own time limit, and the script goes on after a failed step.
#   1. the GPU tests (the kernels on the GPU; meson's gpu suite: ranks as processes and as threads,
#      graphs replayed);
#   2. compute-sanitizer memcheck, racecheck and synccheck on 2 ranks as threads (short counts)
#      and memcheck on 2 ranks as processes;
#   3. ranks on one GPU get device-memory FIFOs, as processes (CUDA IPC) and as threads (pointers);
#      a host-only job makes no CUDA context (no process of it in nvidia-smi's compute apps);
#   4. 8-byte all-reduce latency, eager and replayed from a graph, 2/4/8 ranks as threads;
#   5. all-reduce, reduce-scatter and all-gather from 8 B to 1 GiB at 2/4/8 ranks as threads on
#      GPU 0, with the device's own copy rate, and each size's share of the one-GPU ceiling
#      (docs/CUDA.md "Ranks on one GPU: the ceiling"; target >= 70% from 256 MiB);
#   6. ranks as processes on GPU 0: time-sliced (small sizes), and under MPS when the machine has
#      nvidia-cuda-mps-control (started here with private directories, stopped at the end);
#   7. ranks on other hosts: two processes on GPU 0 playing two hosts (OURO_HOSTID) through the
#      proxy over loopback TCP, every collective exact, the set-up's report (GPUDirect RDMA found
#      or not), and the all-reduce's time through the proxy.
# Writes every step's output under $OUT (the device tool's output folder) or BUILD/gpu-check-device,
# and a summary. Without a GPU: one line, exit 77.
set -uo pipefail

build=$(cd "${1:?usage: tools/gpu-check-device.sh BUILD}" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
out="${OUT:-$build/gpu-check-device}"
mkdir -p "$out"
if ! command -v nvidia-smi >/dev/null 2>&1 || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -eq 0 ]; then
  echo "gpu-check-device: skipped: no NVIDIA GPU on this machine (nvidia-smi -L found none)"
  exit 77
fi
export PATH="/usr/local/cuda/bin:$PATH"
ouro_run="$build/tools/ouro-run/ouro-run"
bench="$build/bench/ouro-bench"
threads="$build/tests/cuda_executor/cuda_gpu_threads"
rank="$build/tests/cuda_executor/cuda_gpu_rank"
summary="$out/summary.txt"
: > "$summary"
failed=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"

# step NAME SECONDS CMD...: runs CMD with a time limit, its output to $out/NAME.log and the terminal.
step() {
  local name=$1 limit=$2
  shift 2
  echo
  echo "== $name (at most ${limit}s)"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  local verdict=ok
  [ $rc -eq 0 ] || { verdict="FAILED (exit $rc)"; failed=1; }
  printf '%-34s %-18s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$summary"
  return $rc
}

# The GPU's tests (the emulated ones need no GPU and ran where the build was made).
step gpu-kernels 90 meson test -C "$build" --no-rebuild --print-errorlogs "cuda kernels on a GPU"
step gpu-suite 120 meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 1 --suite gpu

sanitizer=$(command -v compute-sanitizer || true)
if [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-$tool-threads" 60 "$sanitizer" --tool "$tool" --error-exitcode 3 "$threads" --ranks 2 --quick
  done
  step sanitizer-memcheck-processes 60 env OURO_CUDA_DEVICE=0 "$ouro_run" -n 2 \
    "$sanitizer" --tool memcheck --error-exitcode 3 "$rank" --quick
else
  echo "compute-sanitizer not found: sanitizer steps skipped" | tee -a "$summary"
fi

# Device-memory FIFOs for ranks on one GPU (item 2): the set-up's info line says where they went.
step fifos-processes 60 env OURO_DEBUG=info OURO_CUDA_DEVICE=0 "$ouro_run" -n 2 "$rank" --quick
grep -q "FIFOs in device memory" "$out/fifos-processes.log" ||
  { echo "fifos-processes: no 'FIFOs in device memory' in the info log" | tee -a "$summary"; failed=1; }
step fifos-threads 60 env OURO_DEBUG=info "$threads" --ranks 2 --quick
grep -q "reached by pointer" "$out/fifos-threads.log" ||
  { echo "fifos-threads: no 'reached by pointer' in the info log" | tee -a "$summary"; failed=1; }

# Ranks on other hosts (docs/CUDA.md "Across hosts"): two processes on GPU 0 playing two hosts
# (OURO_HOSTID) reach each other through the proxy over loopback TCP, staged through pinned host
# memory, every collective exact against the host path; the set-up says so, and what it found of
# GPUDirect RDMA. Then the all-reduce's time through the proxy (time-sliced: two processes, one GPU).
step across-hosts 90 env OURO_DEBUG=info OURO_CUDA_DEVICE=0 TEST_RANKS_PER_HOST=1 "$ouro_run" -n 2 "$rank" --quick
grep -q "ranks on other hosts through the proxy thread: TCP with ranks" "$out/across-hosts.log" ||
  { echo "across-hosts: no 'through the proxy thread' in the info log" | tee -a "$summary"; failed=1; }
grep -o "GPUDirect RDMA [^;]*" "$out/across-hosts.log" | sort -u | tee -a "$summary"
step across-hosts-bench 60 env OURO_CUDA_DEVICE=0 "$ouro_run" -n 2 sh -c \
  'OURO_HOSTID=gpu-check-host-$OURO_RANK exec "$0" all_reduce -D -b 8 -e 64M -f 8 -w 2 -n 10 -c 1 --no-progress' "$bench"

# A host-only job must make no CUDA context (item 6): none of its processes in nvidia-smi.
echo
echo "== host-only job: no CUDA context"
"$ouro_run" -n 2 "$bench" all_reduce --host -b 64M -e 64M -n 400 -w 1 -c 0 > "$out/host-only.log" 2>&1 &
job=$!
sleep 3
apps=$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | grep -c ouro-bench || true)
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null
if [ "$apps" -eq 0 ]; then verdict=ok; else verdict="FAILED ($apps ouro-bench processes hold a context)"; failed=1; fi
printf '%-34s %s\n' host-only-no-context "$verdict" | tee -a "$summary"

for n in 2 4 8; do
  step "latency-threads-$n" 30 "$threads" --ranks "$n" --latency
done

for n in 2 4 8; do
  step "bench-threads-$n" 60 "$threads" --ranks "$n" --bench --max $((1 << 30)) --iters 10
done

# The ceiling (docs/CUDA.md "Ranks on one GPU: the ceiling"): on one GPU every byte an algorithm
# moves goes through the same HBM. Per byte of bus bandwidth the all-reduce moves n(6n-3)/(2(n-1))
# bytes of device memory (reads + writes), reduce-scatter and all-gather n(3n-1)/(n-1); a
# cudaMemcpy of C GB/s moves 2C. Ceiling = 2C / that.
python3 - "$out" <<'PY' | tee -a "$summary"
import sys, os
out = sys.argv[1]
def traffic(kind, n):
    return n * (6 * n - 3) / (2 * (n - 1)) if kind == "allreduce" else n * (3 * n - 1) / (n - 1)
worst = None
print("%-14s %3s %12s %10s %10s %10s %7s" % ("collective", "n", "bytes", "busbw", "copy", "ceiling", "share"))
for n in (2, 4, 8):
    path = os.path.join(out, "bench-threads-%d.log" % n)
    if not os.path.exists(path):
        continue
    for line in open(path):
        f = line.split()
        if len(f) != 6 or f[0] not in ("allreduce", "reducescatter", "allgather") or not f[1].isdigit():
            continue
        size, busbw, copy = int(f[1]), float(f[4]), float(f[5])
        if size < (256 << 20) or copy <= 0:
            continue
        ceiling = 2 * copy / traffic(f[0], n)
        share = busbw / ceiling
        worst = share if worst is None else min(worst, share)
        print("%-14s %3d %12d %10.1f %10.1f %10.1f %6.0f%%" % (f[0], n, size, busbw, copy, ceiling, 100 * share))
if worst is None:
    print("ceiling: no rows of 256 MiB or more")
else:
    print("ceiling: %.0f%% of the one-GPU ceiling at worst from 256 MiB (target >= 70%%): %s"
          % (100 * worst, "met" if worst >= 0.7 else "NOT met"))
PY

# Ranks as processes on GPU 0, time-sliced without MPS: small sizes only (each call waits for the
# slices to switch).
step processes-time-sliced 45 env OURO_CUDA_DEVICE=0 "$ouro_run" -n 2 "$bench" all_reduce -D -b 8 -e 64K -f 8 \
  -w 2 -n 10 -c 1 --no-progress

mps=$(command -v nvidia-cuda-mps-control || true)
if [ -n "$mps" ]; then
  mps_dir=$(mktemp -d /tmp/ouro-mps.XXXXXX)
  export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  stop_mps() {
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
    sleep 1
    rm -rf "$mps_dir"
  }
  trap stop_mps EXIT
  if nvidia-cuda-mps-control -d; then
    for n in 2 4 8; do
      for coll in all_reduce reduce_scatter all_gather; do
        step "mps-$coll-$n" 40 env OURO_CUDA_DEVICE=0 "$ouro_run" -n "$n" "$bench" "$coll" -D -b 8 -e 1G -f 16 -w 2 \
          -n 5 -c 1 --no-progress
      done
    done
  else
    echo "nvidia-cuda-mps-control -d failed: MPS steps skipped" | tee -a "$summary"
  fi
  stop_mps
  trap - EXIT
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "nvidia-cuda-mps-control not found: MPS steps skipped" | tee -a "$summary"
fi

echo
echo "== summary ($out/summary.txt)"
cat "$summary"
exit $failed
