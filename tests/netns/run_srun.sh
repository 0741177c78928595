#!/usr/bin/env bash
# usage: run_srun.sh PATH/TO/coll_rank
#
# The collective suite across 3 namespace hosts under `srun -N3 -n6`, on a private Slurm whose
# daemons live inside the hosts: munged and slurmctld in host 1, one slurmd per host (NodeName =
# NodeHostname = the host's name, NodeAddr = its address); srun itself runs in host 1. Ports,
# state, spool, logs and the munge socket are private to the test (WORK). Rendezvous through
# MASTER_ADDR (host 1) / MASTER_PORT; ouro takes rank, size and local rank from SLURM_*.
# Two jobs, each checked as in run_ouro_run.sh: every collective on the world and on split
# communicators; then the all-reduce matrix with OURO_HIER_MIN_BYTES=1, so every all-reduce runs
# the hierarchical algorithm (inside each host, then between hosts), which the test also checks.
# Exit: 0 pass, 1 fail, 77 not root / no namespaces / Slurm or munge not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns srun"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=../launchers/slurm_conf.sh
source "$HERE/../launchers/slurm_conf.sh"
# Every collective, on the world and on split communicators (the full matrix runs under ouro-run).
MODE=${NETNS_MODE:-split}

readonly READY_TIMEOUT_S=20
readonly CTLD_PORT=6817 SLURMD_PORT=6818  # private: every host has its own port space
DAEMON_PIDS=()

on_host() {
  local i=$1
  shift
  "$HOSTS" exec "$PREFIX" "$i" "$@"
}

daemon_fail() {
  local what=$1 f
  shift
  for f in "$@"; do
    [[ -s "$f" ]] || continue
    echo "---- $f ----" >&2
    tail -n 40 "$f" >&2
  done
  fail "$what"
}

start_munged() {
  local dir=$WORK/munge i
  chmod 0755 "$WORK"  # munged wants every directory above its socket searchable by all
  mkdir -m 0755 "$dir"
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 0400 "$dir/munge.key"
  # The socket is a path, so every host (same file system, other network) reaches it.
  on_host 1 munged --foreground --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" --log-file="$dir/munged.log" \
    >"$dir/munged.out" 2>&1 &
  DAEMON_PIDS+=($!)
  for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
    munge --socket="$dir/munge.sock" --no-input >/dev/null 2>&1 && return 0
    pid_alive "${DAEMON_PIDS[-1]}" || daemon_fail "munged exited during start-up" "$dir/munged.out" "$dir/munged.log"
    sleep 0.1
  done
  daemon_fail "munged not answering after ${READY_TIMEOUT_S} s" "$dir/munged.out" "$dir/munged.log"
}

write_slurm_conf() {
  local dir=$WORK/slurm i
  mkdir -p "$dir/state"
  export SLURM_CONF=$dir/slurm.conf
  {
    slurm_conf_settings ouronetns "$(host_name 1)" "$(addr 1)" "$CTLD_PORT" "$SLURMD_PORT" "$dir" "$dir/tmp-%n" \
      "$WORK/munge/munge.sock"
    for ((i = 1; i <= NHOSTS; i++)); do
      mkdir -p "$dir/tmp-$(host_name "$i")"
      echo "NodeName=$(host_name "$i") NodeHostname=$(host_name "$i") NodeAddr=$(addr "$i") CPUs=$PER_HOST State=UNKNOWN"
    done
    echo "PartitionName=ouronetns Nodes=$(host_name 1),$(host_name 2),$(host_name 3) Default=YES MaxTime=INFINITE State=UP"
  } >"$SLURM_CONF"
}

start_slurm() {
  local dir=$WORK/slurm i idle=""
  on_host 1 slurmctld -D -c -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 </dev/null &
  DAEMON_PIDS+=($!)
  for ((i = 1; i <= NHOSTS; i++)); do
    on_host "$i" slurmd -D -N "$(host_name "$i")" -f "$SLURM_CONF" >"$dir/slurmd-h$i.out" 2>&1 </dev/null &
    DAEMON_PIDS+=($!)
  done
  # Ready when all three nodes registered as idle (sinfo runs in host 1: the controller's network).
  for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
    idle=$(on_host 1 timeout 5 sinfo -h -o '%T %D' -t idle 2>/dev/null || true)
    [[ "$idle" == "idle $NHOSTS" ]] && return 0
    local pid
    for pid in "${DAEMON_PIDS[@]}"; do
      pid_alive "$pid" || daemon_fail "a Slurm daemon (PID $pid) exited during start-up" "$dir"/*.out "$dir"/*.log
    done
    sleep 0.1
  done
  on_host 1 timeout 5 sinfo -N >&2 || true
  daemon_fail "not all $NHOSTS nodes idle after ${READY_TIMEOUT_S} s (sinfo: '${idle:-no answer}')" "$dir"/*.out "$dir"/*.log
}

cleanup() {
  local rc=$?
  set +e
  # srun first, while the controller can still cancel its step; then every daemon (hosts.sh down
  # stops whatever runs inside the namespaces, slurmstepd included).
  stop_pid "$JOB_PID"
  stop_pids "${DAEMON_PIDS[@]}"
  (exit "$rc")
  netns_cleanup
}

main() {
  require_netns
  require_command srun sinfo slurmctld slurmd munged munge
  require_coll_rank "${1:-}"
  make_workdir ouro-netns-srun
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  hosts_up srun
  local start=$SECONDS
  start_munged
  write_slurm_conf
  start_slurm
  echo "ran: private Slurm on 3 namespace hosts up in $((SECONDS - start)) s"

  export MASTER_ADDR MASTER_PORT=$STORE_PORT
  MASTER_ADDR=$(addr 1)
  local -a args
  mapfile -t args < <(coll_args "$MODE")
  start=$SECONDS
  run_srun srun "${args[@]}"
  check_results "$MODE"
  check_placement
  local t_first=$((SECONDS - start))

  # The all-reduce matrix once more (and its > 1 Mi-element cases), every call in two levels:
  # inside each host, then between hosts. By default only calls of at least OURO_HIER_MIN_BYTES
  # (1 MiB) go that way, which the matrix's counts never reach (the threshold is a rule of
  # OURO_MODEL=off; the cost model would weigh each size).
  mkdir -p "$WORK/out-$MODE" && mv "$WORK"/out/rank-* "$WORK/out-$MODE/"
  start=$SECONDS
  # The hierarchical chain folds in rank order: under the canonical tree (OURO_ORDER's default) the
  # same setting runs halving-doubling, so this job names the rank order.
  OURO_ORDER=rank OURO_MODEL=off OURO_HIER_MIN_BYTES=1 run_srun srun-hier --mode matrix --colls allreduce --big --dir "$WORK/out"
  check_results matrix
  check_placement
  local r
  for ((r = 0; r < NRANKS_NS; r++)); do
    grep -q "allreduce #[0-9]* uses the hierarchical" "$WORK/out/rank-$r.err" ||
      ranks_fail "rank $r: no all-reduce used the hierarchical algorithm although OURO_HIER_MIN_BYTES=1 (OURO_DEBUG=info lines in rank-$r.err)"
  done
  echo "PASS ($TEST_NAME): 6 tasks on 3 namespace hosts under srun -N3 (slurmctld/slurmd/munged in the hosts): every collective exact ($MODE, ${t_first} s), and the all-reduce matrix exact in two levels (hierarchical, $((SECONDS - start)) s)"
}

# run_srun NAME COLL_RANK_ARGS...: one srun job of 6 tasks, 2 per host, bounded by JOB_LIMIT_S.
run_srun() {
  local name=$1 start=$SECONDS
  shift
  on_host 1 srun --job-name="ouro-$name" -N "$NHOSTS" -n "$NRANKS_NS" --ntasks-per-node="$PER_HOST" --overcommit \
    --kill-on-bad-exit=1 --export=ALL "$RANK_WRAPPER" "$COLL_RANK" "$@" >"$WORK/$name.log" 2>&1 </dev/null &
  JOB_PID=$!
  wait_job "$JOB_PID" "$name" $((start + JOB_LIMIT_S))
  JOB_PID=""
}

main "$@"
