#!/usr/bin/env bash
# usage: run_under_srun.sh PATH/TO/init_probe
#
# Proves an unchanged ouro program runs under Slurm's srun. There is no systemd here and the
# host's Slurm (if any) must not be touched, so the test brings up a private one-node cluster:
#   munged      own key (root-owned, 0400), socket, pid and seed under a fresh temp dir
#   slurmctld   private port, state, pid and log; slurm.conf points at the private munge socket
#   slurmd      private port, spool, pid and log; node "ouro1" at 127.0.0.1 with this host's CPUs
# then runs three jobs of 4 tasks (srun --overcommit, as there are fewer CPUs than tasks):
#   world-tcp   MASTER_ADDR=127.0.0.1 MASTER_PORT=<free port>: ranks 0..3 once each, size 4,
#               local ranks 0..3, local count 4, each ouro rank equal to SLURM_PROCID (srun --label)
#   split-tcp   the same plus ouroCommSplit with a different color/key per task (--multi-prog)
#   world-file  OURO_INIT=file://<fresh dir> and no MASTER_*
# The daemons run in the foreground of background jobs, so their PIDs are known exactly; the
# EXIT trap always stops them by PID (TERM, up to 5 s, then KILL), stops any process of this run
# still alive (slurmstepd, ranks) and removes the temp dir. Every wait is bounded.
# Exit: 0 pass, 1 fail (with the job's output or the daemon's log), 77 Slurm or munge not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROBE=${1:-}
TEST_NAME="srun"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

readonly READY_TIMEOUT_S=20
readonly NODE=ouro1
MUNGED_PID=""
SLURMCTLD_PID=""
SLURMD_PID=""

# srun --label prefixes each line with the task id ("0: ", padded for wider task counts).
normalize_output() {
  sed -E 's/^ *([0-9]+): /\1 /;t;s/^/? /'
}

# Shows a daemon's log (its own log file and its stderr) and fails.
daemon_fail() {
  local what=$1
  shift
  local f
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    echo "---- $f ----" >&2
    tail -n 60 "$f" >&2
  done
  fail "$what"
}

start_munged() {
  local dir=$WORK/munge
  # munged insists that every directory above its socket is searchable by all, so WORK (0700
  # from mktemp) is opened to 0755; its key stays private: root-owned, mode 0400.
  chmod 0755 "$WORK"
  mkdir -m 0755 "$dir"
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 0400 "$dir/munge.key"
  munged --foreground --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" --log-file="$dir/munged.log" \
    >"$dir/munged.out" 2>&1 &
  MUNGED_PID=$!
  local i
  for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
    munge --socket="$dir/munge.sock" --no-input >/dev/null 2>&1 && return 0
    pid_alive "$MUNGED_PID" || daemon_fail "munged exited during start-up" "$dir/munged.out" "$dir/munged.log"
    sleep 0.1
  done
  daemon_fail "munged not answering on $dir/munge.sock after ${READY_TIMEOUT_S} s" "$dir/munged.out" "$dir/munged.log"
}

write_slurm_conf() {
  local dir=$WORK/slurm ctld_port slurmd_port host cpus user
  mkdir -p "$dir/state" "$dir/tmp"
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  [[ "$ctld_port" != "$slurmd_port" ]] || slurmd_port=$(free_port)
  # slurmctld only runs on the host SlurmctldHost names, by its short hostname; the address
  # keeps all traffic on loopback.
  host=$(hostname -s)
  cpus=$(nproc)
  # The daemons run as whoever runs the test: root in CI (SlurmUser=root), which also lets
  # slurmd start the tasks as that user.
  user=$(id -un)
  export SLURM_CONF=$dir/slurm.conf
  cat >"$SLURM_CONF" <<EOF
# Private single-host cluster for ouro's launcher test; nothing here touches the host's Slurm.
ClusterName=ourotest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$WORK/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd or cgroup delegation here: track processes through /proc, no task confinement.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node's real layout (sockets, threads, memory) may differ from this line; trust the line.
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ourotest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start_slurm() {
  local dir=$WORK/slurm i state=""
  # -D: stay in the foreground, so $! is the daemon itself; -c: start from empty state.
  slurmctld -D -c -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
  SLURMCTLD_PID=$!
  slurmd -D -N "$NODE" -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
  SLURMD_PID=$!
  # Ready when the controller answers and the node has registered as idle.
  for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
    pid_alive "$SLURMCTLD_PID" || daemon_fail "slurmctld exited during start-up" "$dir/slurmctld.out" "$dir/slurmctld.log"
    pid_alive "$SLURMD_PID" || daemon_fail "slurmd exited during start-up" "$dir/slurmd.out" "$dir/slurmd-$NODE.log"
    state=$(timeout 5 sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
    [[ "$state" == idle ]] && return 0
    sleep 0.1
  done
  timeout 5 scontrol show node "$NODE" >&2 || true
  daemon_fail "node $NODE not idle after ${READY_TIMEOUT_S} s (sinfo state: '${state:-no answer}')" \
    "$dir/slurmctld.out" "$dir/slurmctld.log" "$dir/slurmd.out" "$dir/slurmd-$NODE.log"
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
  # An interrupted srun first, while the controller can still cancel its step; then the node
  # daemon (it owns the job steps), the controller, and munge last (the others talk through it).
  stop_pid "$JOB_PID"
  stop_pid "$SLURMD_PID"
  stop_pid "$SLURMCTLD_PID"
  stop_pid "$MUNGED_PID"
  # A slurmstepd or task that outlived slurmd (e.g. after a timeout): found by this run's tag or
  # by a file it holds open in WORK.
  stop_stragglers
  remove_workdir
  exit "$rc"
}

main() {
  require_command srun sinfo slurmctld slurmd munged munge
  require_probe "$PROBE"
  # slurmd starts tasks from its own working directory view; give it an absolute path.
  PROBE=$(realpath "$PROBE")
  scrub_launcher_env
  make_workdir ouro-launch-srun
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE

  start_munged
  write_slurm_conf
  start_slurm

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
