#!/usr/bin/env bash
# usage: run_ouro_run.sh PATH/TO/coll_rank PATH/TO/ouro-run
#
# The collective suite across 3 namespace hosts under ouro-run: one `ouro-run --nnodes 3
# --node-rank I-1 --nproc-per-node 2 --master HOST1:PORT` per host, each started inside its host
# (hosts.sh exec), all with the same OURO_TOKEN (rank_env). Every collective's results are
# checked exactly (coll_rank matrix mode), outputs that must agree hash the same on all 6 ranks,
# and each rank's own view (rank, local rank, host, shared memory with its host mate, TCP with the
# others) matches the launcher's. Exit: 0 pass, 1 fail, 77 not root / namespaces unavailable.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns ouro-run"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# The full matrix: every collective, dtype, op, count, placement and root.
MODE=${NETNS_MODE:-matrix}
# The matrix is ~3000 calls; with ~15 other processes competing for 2 cores it took 76-95 s
# (36 s of CPU time, so far less on an idle machine). Past this bound it counts as a hang.
readonly MATRIX_LIMIT_S=150

main() {
  require_netns
  require_coll_rank "${1:-}"
  local ouro_run=${2:-}
  [[ -x "$ouro_run" ]] || fail "usage: $0 coll_rank ouro-run (ouro-run not found: '$ouro_run')"
  ouro_run=$(realpath "$ouro_run")
  make_workdir ouro-netns-run
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  hosts_up run

  local -a args
  mapfile -t args < <(coll_args "$MODE")
  local start=$SECONDS
  JOB_LIMIT_S=$((MATRIX_LIMIT_S * TIME_SCALE))
  run_job_on_hosts ouro-run "$ouro_run" "${args[@]}"
  check_results "$MODE"
  check_placement
  report_times
  echo "PASS ($TEST_NAME): 6 ranks on 3 namespace hosts under ouro-run --nnodes 3, every collective exact, in $((SECONDS - start)) s"
}

main "$@"
