#!/usr/bin/env bash
# usage: run_under_mpirun.sh openmpi|mpich PATH/TO/init_probe
#
# Proves an unchanged ouro program runs under Debian's mpirun (Open MPI 4.1 or MPICH/Hydra 4.0):
# init_probe calls ouroCommInitFromEnv, which must take rank, size and local rank from the
# engine's own variables (OMPI_COMM_WORLD_* or PMI_RANK/PMI_SIZE/MPI_LOCALRANKID) and rendezvous
# through MASTER_ADDR/MASTER_PORT or OURO_INIT. Three jobs of 4 ranks on this host:
#   world-tcp   MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port>: ranks 0..3 once each, size 4,
#               local ranks 0..3, local count 4, and each ouro rank equals the engine's rank
#   split-tcp   the same, plus ouroCommSplit with a different color/key per rank (MPMD command
#               line, since init_probe takes its color from argv)
#   world-file  OURO_INIT=file://<fresh dir> and no MASTER_*
# Ranks are matched to the engine's rank through the engine's own output labels
# (Open MPI --tag-output, Hydra -prepend-rank), never through what ouro printed.
# Exit: 0 pass, 1 fail (with the job's output), 77 the engine is not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENGINE=${1:-}
PROBE=${2:-}
TEST_NAME="mpirun.${ENGINE:-?}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

case "$ENGINE" in
  openmpi)
    MPIRUN=mpirun.openmpi
    # Open MPI refuses root without --allow-run-as-root and more ranks than cores (2 here)
    # without --oversubscribe. --tag-output labels each line "[JOB,RANK]<stdout>:".
    ENGINE_ARGS=(--allow-run-as-root --oversubscribe --tag-output)
    ;;
  mpich)
    MPIRUN=mpirun.mpich
    # Hydra has no root restriction and oversubscribes freely; -prepend-rank labels "[RANK] ".
    ENGINE_ARGS=(-prepend-rank)
    ;;
  *) fail "usage: $0 openmpi|mpich PATH/TO/init_probe (got engine '$ENGINE')" ;;
esac

# Reads the engine's raw stdout, writes "RANK TEXT"; unlabelled lines become "? LINE".
normalize_output() {
  case "$ENGINE" in
    openmpi) sed -E 's/^\[[0-9]+,([0-9]+)\]<stdout>:/\1 /;t;s/^/? /' ;;
    mpich) sed -E 's/^\[([0-9]+)\] /\1 /;t;s/^/? /' ;;
  esac
}

# Forwards the named variables to the ranks the way a multi-host job must: Open MPI passes only
# what -x names to remote ranks; Hydra passes the whole environment, -genvlist makes it explicit.
forward_env_args() {
  local name
  case "$ENGINE" in
    openmpi) for name in "$@"; do printf '%s\n' -x "$name"; done ;;
    mpich) printf '%s\n' -genvlist "$(IFS=,; echo "$*")" ;;
  esac
}

# mpirun [forwarded variables] -- 4 ranks of init_probe with the same arguments.
launch_world() {
  local name=$1
  shift
  local -a fwd
  mapfile -t fwd < <(forward_env_args "$@")
  run_job "$name" "$MPIRUN" "${ENGINE_ARGS[@]}" "${fwd[@]}" -n "$NRANKS" "$PROBE"
}

# One app context per rank (MPMD, "A : B : ..."; both engines accept it) so each rank gets its
# own --split COLOR KEY; the engine numbers the contexts' ranks in order.
launch_split() {
  local name=$1
  shift
  local -a fwd cmd=() color_key
  local r
  mapfile -t fwd < <(forward_env_args "$@")
  for ((r = 0; r < NRANKS; r++)); do
    ((r == 0)) || cmd+=(:)
    read -r -a color_key <<<"${SPLIT_ARGS[r]}"
    cmd+=(-n 1 "$PROBE" --split "${color_key[@]}")
  done
  run_job "$name" "$MPIRUN" "${ENGINE_ARGS[@]}" "${fwd[@]}" "${cmd[@]}"
}

cleanup() {
  local rc=$?
  set +e
  # An interrupted job first (mpirun then stops its ranks), then any rank that outlived it.
  stop_pid "$JOB_PID"
  stop_stragglers
  remove_workdir
  exit "$rc"
}

main() {
  require_command "$MPIRUN"
  require_probe "$PROBE"
  scrub_launcher_env
  make_workdir "ouro-launch-$ENGINE"
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE

  export MASTER_ADDR=127.0.0.1
  MASTER_PORT=$(free_port)
  export MASTER_PORT
  launch_world world-tcp MASTER_ADDR MASTER_PORT OURO_TIMEOUT_S
  check_world_job world-tcp

  MASTER_PORT=$(free_port)
  launch_split split-tcp MASTER_ADDR MASTER_PORT OURO_TIMEOUT_S
  check_split_job split-tcp

  # The file store alone must be enough: no MASTER_* in sight.
  unset MASTER_ADDR MASTER_PORT
  mkdir "$WORK/store"
  export OURO_INIT="file://$WORK/store"
  launch_world world-file OURO_INIT OURO_TIMEOUT_S
  check_world_job world-file

  echo "PASS ($TEST_NAME): $NRANKS ranks under $MPIRUN via MASTER_ADDR/MASTER_PORT, with a split, and via OURO_INIT=file://"
}

main "$@"
