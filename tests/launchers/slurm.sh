# shellcheck shell=bash
# A private single-host Slurm for the launcher tests (sourced after lib.sh, not run). There is no
# systemd here and the host's Slurm (if any) must not be touched, so each test brings up its own:
#   munged      own key (root-owned, 0400), socket, pid and seed under WORK/munge
#   slurmctld   private port, state, pid and log; slurm.conf points at the private munge socket
#   slurmd      private port, spool, pid and log; node "ouro1" at 127.0.0.1 with this host's CPUs
# The daemons run in the foreground of background jobs, so their PIDs are known exactly and
# stop_slurm stops them by PID (TERM, up to 5 s, then KILL). Every wait is bounded.
#
# Use: require_slurm; make_workdir ...; start_munged; write_slurm_conf; start_slurm; ... srun ...;
# and in the EXIT trap: stop_pid "$JOB_PID"; stop_slurm; stop_stragglers; remove_workdir.

readonly READY_TIMEOUT_S=20
readonly NODE=ouro1
MUNGED_PID=""
SLURMCTLD_PID=""
SLURMD_PID=""

# shellcheck source=slurm_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm_conf.sh"

# Skip (77) when Slurm or munge is not installed; everything else that goes wrong is a failure.
require_slurm() {
  require_command srun sinfo slurmctld slurmd munged munge
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
  local dir=$WORK/slurm ctld_port slurmd_port host cpus
  mkdir -p "$dir/state" "$dir/tmp"
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  [[ "$ctld_port" != "$slurmd_port" ]] || slurmd_port=$(free_port)
  # slurmctld only runs on the host SlurmctldHost names, by its short hostname; the address
  # keeps all traffic on loopback.
  host=$(hostname -s)
  cpus=$(nproc)
  export SLURM_CONF=$dir/slurm.conf
  {
    slurm_conf_settings ourotest "$host" 127.0.0.1 "$ctld_port" "$slurmd_port" "$dir" "$dir/tmp" "$WORK/munge/munge.sock"
    echo "NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
    echo "PartitionName=ourotest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
  } >"$SLURM_CONF"
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

# Brings up the whole private cluster: munge, slurm.conf (exported as SLURM_CONF), both daemons.
start_private_slurm() {
  start_munged
  write_slurm_conf
  start_slurm
}

# The node daemon first (it owns the job steps), then the controller, and munge last (the others
# talk through it). The caller stops an interrupted srun before this, while the controller can
# still cancel its step, and calls stop_stragglers after it for a slurmstepd that outlived slurmd.
stop_slurm() {
  stop_pid "$SLURMD_PID"
  stop_pid "$SLURMCTLD_PID"
  stop_pid "$MUNGED_PID"
  SLURMD_PID=""
  SLURMCTLD_PID=""
  MUNGED_PID=""
}
