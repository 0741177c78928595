#!/usr/bin/env bash
# usage: run_cuda_remote.sh PATH/TO/cuda_remote_rank PATH/TO/ouro-run [--quick]
#
# The device path across hosts (docs/CUDA.md "Across hosts"), with the kernels run by the CUDA
# emulation: 3 namespace hosts x 2 ranks under ouro-run --nnodes 3, each rank making its FIFOs with
# its host mate in shared memory and with the 4 ranks of the other hosts through the executor's
# own proxy set-up (links made through the rendezvous store, over the namespaces' network, with
# the job token), then every collective x dtype x op under and over OURO_CUDA_LL_MAX_BYTES (both
# protocols), each rank's output compared bit for bit with the host path's rank-order fold
# (tests/cuda_kernels/remote_rank.cpp). Small slots, so every call takes several messages per
# channel. Exit: 0 pass, 1 fail, 77 not root / namespaces unavailable.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns CUDA ranks across hosts (emulated)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# 432 calls per rank (216 collective x dtype x op, 2 counts each): 3-4 s on the shared 2-core
# development machine; past this bound it counts as a hang.
readonly LIMIT_S=150

main() {
  require_netns
  require_coll_rank "${1:-}"  # the rank program (sets TIME_SCALE for sanitized builds)
  local ouro_run=${2:-}
  [[ -x "$ouro_run" ]] || fail "usage: $0 cuda_remote_rank ouro-run [--quick] (ouro-run not found: '$ouro_run')"
  ouro_run=$(realpath "$ouro_run")
  local -a args=()
  [[ "${3:-}" == --quick ]] && args+=(--quick)
  make_workdir ouro-netns-cuda
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  export OURO_CUDA_CHANNELS=2 OURO_CUDA_SLOTS=2 OURO_CUDA_SLOT_BYTES=1024 OURO_CUDA_LL_MAX_BYTES=512
  hosts_up cuda

  local start=$SECONDS
  JOB_LIMIT_S=$((LIMIT_S * TIME_SCALE))
  run_job_on_hosts ouro-run "$ouro_run" "${args[@]}"
  check_results remote
  # Every rank reached the 4 ranks of the other hosts through the proxy, over TCP.
  local r want
  for ((r = 0; r < NRANKS_NS; r++)); do
    want=$(seq 0 $((NRANKS_NS - 1)) | grep -vx -e "$((r / PER_HOST * PER_HOST))" -e "$((r / PER_HOST * PER_HOST + 1))" | paste -sd, -)
    grep -qx "PROXY rank $r: TCP with ranks $want" "$WORK/out/rank-$r.out" ||
      ranks_fail "rank $r: expected 'PROXY rank $r: TCP with ranks $want', got '$(grep '^PROXY' "$WORK/out/rank-$r.out" || true)'"
  done
  echo "PASS ($TEST_NAME): 6 ranks on 3 namespace hosts, $(grep -o 'checks=[0-9]*' "$WORK/out/rank-0.out") calls each, every output exact, in $((SECONDS - start)) s"
}

main "$@"
