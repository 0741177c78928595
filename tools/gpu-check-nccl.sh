#!/usr/bin/env bash
# tools/gpu-check-nccl.sh BUILD: ouro's libnccl.so.2 on a machine with a GPU (#32, docs/NCCL.md);
# tools/gpu-check runs it after the CUDA suites. Each step prints what it checked; the script exits
# non-zero if any failed, 77 without a GPU.
#   1. which nccl* symbols PyTorch's libtorch_cuda.so imports that this library does not export;
#   2. the NCCL-API test program compiled against NVIDIA's nccl.h (the nvidia nccl Python package's,
#      else /usr/local/cuda's), its reductions on device buffers compared digest for digest with
#      ouro's host path at 2 ranks (ouro_twin_rank), and its feature checks;
#   3. PyTorch's init_process_group("nccl") with ouro's library preloaded, 2 and 4 ranks on GPU 0:
#      collectives exact / bit-identical to the host path, a 50-step DDP GPT with the same SHA-256
#      for bucket_cap_mb 1 and 25 on every rank, a CUDA-graph all_reduce replayed 1,000 times
#      (tests/nccl/torch_nccl_check.py).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tools/gpu-check-nccl.sh BUILD_DIR}" && pwd)
lib=$build/nccl/libnccl.so.2
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check-nccl: skipped: no NVIDIA GPU (nvidia-smi -L found none)"
  exit 77
fi
[[ -e $lib ]] || { echo "gpu-check-nccl: $lib is not built"; exit 1; }
python=${PYTHON:-python3}
failed=0
step() { echo; echo "== nccl: $*"; }
fail() { echo "gpu-check-nccl: FAILED: $*"; failed=1; }

step "1. nccl* symbols libtorch_cuda.so imports, against $lib's exports"
torch_lib=$($python -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
if [[ -n $torch_lib && -e $torch_lib ]]; then
  nm -D --undefined-only "$torch_lib" | awk '{print $2}' | sed 's/@.*//' | grep '^nccl' | sort -u >/tmp/ouro-torch-nccl.txt
  nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >/tmp/ouro-libnccl.txt
  echo "libtorch_cuda.so imports $(wc -l </tmp/ouro-torch-nccl.txt): $(tr '\n' ' ' </tmp/ouro-torch-nccl.txt)"
  missing=$(comm -23 /tmp/ouro-torch-nccl.txt /tmp/ouro-libnccl.txt | tr '\n' ' ')
  if [[ -n $missing ]]; then fail "libnccl.so.2 lacks what PyTorch imports: $missing"; else echo "all exported"; fi
else
  fail "no PyTorch with CUDA for $python (libtorch_cuda.so not found)"
fi

step "2. the NCCL-API program against NVIDIA's nccl.h, on device buffers"
nvidia_inc=$($python -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null)
[[ -e $nvidia_inc/nccl.h ]] || nvidia_inc=/usr/local/cuda/include
echo "NVIDIA's header: $nvidia_inc/nccl.h"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if g++ -std=c++20 -O2 -DEXPECT_NVIDIA_NCCL_H -DNCCL_TEST_DEVICE_BUFFERS -I"$here" -isystem "$nvidia_inc" \
     -isystem /usr/local/cuda/include "$here/tests/nccl/nccl_api_rank.cpp" -o "$work/nccl_api_rank" \
     -L"$build/nccl" -l:libnccl.so.2 -Wl,-rpath,"$build/nccl" -L/usr/local/cuda/lib64 -lcudart -ldl -lpthread; then
  mkdir -p "$work/sweep"
  "$build/tools/ouro-run/ouro-run" -n 2 "$build/tests/nccl/ouro_twin_rank" "$work/sweep" >/dev/null || fail "ouro_twin_rank"
  pids=()
  for r in 0 1; do
    "$work/nccl_api_rank" --rank $r --nranks 2 --dir "$work/sweep" --part sweep --buffers device \
      >"$work/sweep/out$r.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  head -3 "$work/sweep/out0.txt"
  for r in 0 1; do
    if cmp -s "$work/sweep/nccl-rank$r.digests" "$work/sweep/ouro-rank$r.digests"; then
      echo "rank $r: $(wc -l <"$work/sweep/nccl-rank$r.digests") device results bit-identical to ouro's host path"
    else
      fail "rank $r: device digests differ from the host path's:"
      diff "$work/sweep/nccl-rank$r.digests" "$work/sweep/ouro-rank$r.digests" | head -10
      grep FAILED "$work/sweep/out$r.txt" | head -10
    fi
  done
  mkdir -p "$work/features"
  pids=()
  for r in 0 1; do
    "$work/nccl_api_rank" --rank $r --nranks 2 --dir "$work/features" --part features >"$work/features/out$r.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { failed=1; cat "$work"/features/out*.txt | grep FAILED | head; }; done
else
  fail "tests/nccl/nccl_api_rank.cpp does not compile against $nvidia_inc/nccl.h"
fi

step "3. PyTorch's ProcessGroupNCCL on ouro's libnccl.so.2 (LD_PRELOAD), ranks on GPU 0"
for world in 2 4; do
  timeout 300 $python "$here/tests/nccl/torch_nccl_check.py" --libnccl "$lib" --world $world --part all ||
    fail "torch_nccl_check.py at $world ranks"
done

echo
if ((failed)); then echo "gpu-check-nccl: FAILED (above)"; exit 1; fi
echo "gpu-check-nccl: every check passed"
