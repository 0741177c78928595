#!/usr/bin/env bash
# usage: run_mpirun.sh openmpi|mpich PATH/TO/coll_rank
#
# The collective suite across 3 namespace hosts under mpirun, as on a cluster reached by ssh:
# mpirun runs in host 1 with a host file naming the 3 hosts (2 slots each), and its ssh agent is
# rsh_agent.sh, which enters the named host. Open MPI: --mca plm_rsh_agent; MPICH (Hydra):
# -launcher ssh -launcher-exec, and -iface eth0 (Hydra would otherwise tell its proxies to call
# back to mpirun's host NAME, which no resolver here knows). Rendezvous: Open MPI through
# MASTER_ADDR (host 1) / MASTER_PORT, MPICH through OURO_INIT=file:// (a directory every host
# sees). ouro takes rank, size and local rank from the engine's variables.
# The checks are those of run_ouro_run.sh. Exit: 0 pass, 1 fail, 77 not root / no namespaces /
# the engine is not installed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENGINE=${1:-}
TEST_NAME="netns mpirun.${ENGINE:-?}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# Every collective, on the world and on split communicators (the full matrix runs under ouro-run).
MODE=${NETNS_MODE:-split}

main() {
  local mpirun hostfile=""
  local -a engine_args
  case "$ENGINE" in
    openmpi) mpirun=mpirun.openmpi ;;
    mpich) mpirun=mpirun.mpich ;;
    *) fail "usage: $0 openmpi|mpich PATH/TO/coll_rank (got engine '$ENGINE')" ;;
  esac
  require_netns
  require_command "$mpirun"
  require_coll_rank "${2:-}"
  make_workdir "ouro-netns-$ENGINE"
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  hosts_up "mpi$ENGINE"
  export NETNS_PREFIX=$PREFIX  # for rsh_agent.sh, through mpirun
  # Open MPI meets at rank 0's TCP store (each rank then advertises the address its connection to
  # the store left from); MPICH at a file store, as on a cluster's shared file system (each rank
  # then advertises its host's first non-loopback address). Both must be the hosts' own.
  local rendezvous
  case "$ENGINE" in
    openmpi)
      export MASTER_ADDR MASTER_PORT=$STORE_PORT
      MASTER_ADDR=$(addr 1)
      rendezvous="MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT" ;;
    mpich)
      mkdir "$WORK/store"
      export OURO_INIT=file://$WORK/store
      rendezvous="OURO_INIT=$OURO_INIT" ;;
  esac

  local i
  hostfile=$WORK/hostfile
  for ((i = 1; i <= NHOSTS; i++)); do
    case "$ENGINE" in
      openmpi) echo "$(host_name "$i") slots=$PER_HOST" ;;
      mpich) echo "$(host_name "$i"):$PER_HOST" ;;
    esac
  done >"$hostfile"
  case "$ENGINE" in
    # Root needs --allow-run-as-root; -x forwards ouro's and the test's variables to the ranks
    # on other hosts (Open MPI passes only what -x names).
    openmpi)
      engine_args=(--allow-run-as-root --hostfile "$hostfile" --mca plm_rsh_agent "$HERE/rsh_agent.sh"
        --mca oob_tcp_if_include eth0 -x MASTER_ADDR -x MASTER_PORT -x OURO_TIMEOUT_S -x OURO_DEBUG -x OURO_TOKEN -x NETNS_OUT) ;;
    mpich)
      # shellcheck disable=SC2054  # -genvlist takes a comma-separated list
      engine_args=(-f "$hostfile" -launcher ssh -launcher-exec "$HERE/rsh_agent.sh" -iface eth0
        -genvlist OURO_INIT,OURO_TIMEOUT_S,OURO_DEBUG,OURO_TOKEN,NETNS_OUT) ;;
  esac

  local -a args
  mapfile -t args < <(coll_args "$MODE")
  local start=$SECONDS
  "$HOSTS" exec "$PREFIX" 1 "$mpirun" "${engine_args[@]}" -n "$NRANKS_NS" "$RANK_WRAPPER" "$COLL_RANK" "${args[@]}" \
    >"$WORK/mpirun.log" 2>&1 </dev/null &
  JOB_PID=$!
  wait_job "$JOB_PID" mpirun $((start + JOB_LIMIT_S))
  JOB_PID=""
  check_results "$MODE"
  check_placement
  report_times
  echo "PASS ($TEST_NAME): 6 ranks on 3 namespace hosts under $mpirun (ssh agent entering the hosts), $rendezvous, every collective exact, in $((SECONDS - start)) s"
}

main "$@"
