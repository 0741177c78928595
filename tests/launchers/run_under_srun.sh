#!/usr/bin/env bash
# usage: run_under_srun.sh PATH/TO/init_probe
#
# Proves an unchanged ouro program runs under Slurm's srun. The test brings up a private one-node
# cluster (munged, slurmctld, slurmd; see slurm.sh), then runs three jobs of 4 tasks (srun
# --overcommit, as there are fewer CPUs than tasks):
#   world-tcp   MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port>: ranks 0..3 once each, size 4,
#               local ranks 0..3, local count 4, each ouro rank equal to SLURM_PROCID (srun --label)
#   split-tcp   the same plus ouroCommSplit with a different color/key per task (--multi-prog)
#   world-file  OURO_INIT=file://<fresh dir> and no MASTER_*
# The daemons' PIDs are known exactly (slurm.sh); the EXIT trap always stops them by PID (TERM,
# up to 5 s, then KILL), stops any process of this run still alive (slurmstepd, ranks) and
# removes the temp dir. Every wait is bounded.
# Exit: 0 pass, 1 fail (with the job's output or the daemon's log), 77 Slurm or munge not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROBE=${1:-}
TEST_NAME="srun"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=slurm.sh
source "$HERE/slurm.sh"

# srun --label prefixes each line with the task id ("0: ", padded for wider task counts).
normalize_output() {
  sed -E 's/^ *([0-9]+): /\1 /;t;s/^/? /'
}

# Common srun options: one node, NRANKS tasks on 2 CPUs (--overcommit), labelled output, the
# whole step killed if one task fails, and the caller's environment (MASTER_*, OURO_INIT).
srun_args() {
  printf '%s\n' --nodes=1 --ntasks="$NRANKS" --overcommit --label --kill-on-bad-exit=1 --export=ALL
}

launch_world() {
  local name=$1
  local -a args
  mapfile -t args < <(srun_args)
  run_job "$name" srun --job-name="ouro-$name" "${args[@]}" "$PROBE"
}

# --multi-prog gives each task its own command line, so each gets its own --split COLOR KEY.
launch_split() {
  local name=$1 r
  local -a args
  mapfile -t args < <(srun_args)
  : >"$WORK/$name.conf"
  for ((r = 0; r < NRANKS; r++)); do
    echo "$r $PROBE --split ${SPLIT_ARGS[r]}" >>"$WORK/$name.conf"
  done
  run_job "$name" srun --job-name="ouro-$name" "${args[@]}" --multi-prog "$WORK/$name.conf"
}

cleanup() {
  local rc=$?
  set +e
  # An interrupted srun first, while the controller can still cancel its step; then the daemons.
  stop_pid "$JOB_PID"
  stop_slurm
  # A slurmstepd or task that outlived slurmd (e.g. after a timeout): found by this run's tag or
  # by a file it holds open in WORK.
  stop_stragglers
  remove_workdir
  exit "$rc"
}

main() {
  require_slurm
  require_probe "$PROBE"
  # slurmd starts tasks from its own working directory view; give it an absolute path.
  PROBE=$(realpath "$PROBE")
  scrub_launcher_env
  make_workdir ouro-launch-srun
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE

  start_private_slurm

  export MASTER_ADDR=127.0.0.1
  MASTER_PORT=$(free_port)
  export MASTER_PORT
  launch_world world-tcp
  check_world_job world-tcp

  MASTER_PORT=$(free_port)
  launch_split split-tcp
  check_split_job split-tcp

  # The file store alone must be enough: no MASTER_* in sight.
  unset MASTER_ADDR MASTER_PORT
  mkdir "$WORK/store"
  export OURO_INIT="file://$WORK/store"
  launch_world world-file
  check_world_job world-file

  echo "PASS ($TEST_NAME): $NRANKS tasks under srun (private slurmctld/slurmd/munged) via MASTER_ADDR/MASTER_PORT, with a split, and via OURO_INIT=file://"
}

main "$@"
