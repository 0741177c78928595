# shellcheck shell=bash
# Shared pieces of the namespace-host tests (sourced, not run): 3 hosts made by hosts.sh, 2 ranks
# each, coll_rank (the collective suite's rank program) started by a launcher across them, and the
# checks every test applies to the ranks' reports. Builds on tests/launchers/lib.sh (fail, skip,
# stop_pids, make_workdir, scrub_launcher_env, ...).
#
# Each rank runs through rank.sh, which names its output files by the LAUNCHER's rank variable:
# WORK/out/rank-R.out (coll_rank's report) and rank-R.err (ouro's OURO_DEBUG=info lines). The
# checks then hold ouro's idea of each rank (rank, local rank, host) against the launcher's.
# Exit codes: 0 pass, 1 fail, 77 skip (not root, or a tool or launcher missing).

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../launchers/lib.sh
source "$HERE/../launchers/lib.sh"

readonly HOSTS=$HERE/hosts.sh
# shellcheck disable=SC2034  # used by the test scripts
readonly RANK_WRAPPER=$HERE/rank.sh
readonly NHOSTS=3 PER_HOST=2
readonly NRANKS_NS=$((NHOSTS * PER_HOST))
# Ports inside the namespaces: each test's hosts have their own port space, so fixed ports are safe.
# shellcheck disable=SC2034
readonly STORE_PORT=29500
PREFIX=""  # set by hosts_up; hosts.sh down PREFIX in the EXIT trap
COLL_RANK=""
# How much slower than a plain build the ranks run: sanitized builds take 3x (ASan) to 6x (TSan)
# (run-tests.sh --sanitize stretches meson's timeouts as much), so every bound on ranks grows with
# it. Set by require_coll_rank from what coll_rank is linked with.
TIME_SCALE=1
JOB_LIMIT_S=$JOB_TIMEOUT_S

# Skip unless this can really run: root, the namespace tools, and whatever else the test names.
# shellcheck disable=SC2120  # the extra tools are optional
require_netns() {
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
  require_command ip nsenter unshare hostname "$@"
  ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
}

require_coll_rank() {
  COLL_RANK=${1:-}
  [[ -n "$COLL_RANK" && -x "$COLL_RANK" ]] || fail "usage: pass the path of the coll_rank executable (got '${COLL_RANK}')"
  COLL_RANK=$(realpath "$COLL_RANK")
  local libs
  libs=$(ldd "$COLL_RANK" 2>/dev/null || true)
  if [[ "$libs" == *libtsan* ]]; then
    TIME_SCALE=6
  elif [[ "$libs" == *libasan* ]]; then
    TIME_SCALE=3
  fi
  # shellcheck disable=SC2034  # used by the test scripts
  JOB_LIMIT_S=$((JOB_TIMEOUT_S * TIME_SCALE))
}

# hosts_up SHORT: 3 hosts under a prefix unique to this test run (the PID keeps parallel runs apart).
hosts_up() {
  PREFIX="ns-$1-$$"
  "$HOSTS" up "$PREFIX" "$NHOSTS" >"$WORK/hosts-up.log" 2>&1 || {
    cat "$WORK/hosts-up.log" >&2
    fail "could not build the namespace hosts (hosts.sh up $PREFIX $NHOSTS)"
  }
  mkdir -p "$WORK/out"
}

hosts_down() {
  [[ -n "$PREFIX" ]] && "$HOSTS" down "$PREFIX"
  PREFIX=""
}

addr() { "$HOSTS" addr "$PREFIX" "$1"; }
host_name() { "$HOSTS" name "$PREFIX" "$1"; }

# The environment every rank gets: small ouro waits (a broken run reports ouro's error well before
# the test's own bound), info lines for the placement checks, a job token as a real multi-host job
# has (every connection between hosts presents it), no leftovers from the caller.
rank_env() {
  scrub_launcher_env
  export OURO_TIMEOUT_S=${NETNS_OURO_TIMEOUT_S:-$((30 * TIME_SCALE))}
  export OURO_DEBUG=info
  export NETNS_OUT=$WORK/out
  OURO_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export OURO_TOKEN
}

# Standard EXIT trap body: the job first, then everything in the namespaces, then the files.
netns_cleanup() {
  local rc=$?
  set +e
  stop_pid "$JOB_PID"
  hosts_down
  stop_stragglers
  if ((rc != 0)) && [[ -n "${NETNS_KEEP:-}" && -n "$WORK" ]]; then
    echo "note: NETNS_KEEP set; leaving $WORK" >&2
  else
    remove_workdir
  fi
  exit "$rc"
}

# coll_rank's arguments for one of the suite's modes (exact inputs: every result is checked bit for
# bit against the reference, and outputs that must agree are hashed into the SHARED line):
#   matrix  every collective x dtype x op x count (0 .. 65537) x placement x root, plus barriers
#   split   every collective (barrier, send/recv included) in turns on the world and on three
#           communicators split from it, so each also runs between subsets of the hosts
# NETNS_MODE overrides the mode, MATRIX_COLLS the matrix's list (to try things by hand).
readonly MATRIX_COLLS_DEFAULT="allreduce,reducescatter,allgather,broadcast,reduce,alltoall,sendrecv,barrier"
coll_args() {
  local mode=${NETNS_MODE:-$1}
  case "$mode" in
    matrix) printf '%s\n' --mode matrix --colls "${MATRIX_COLLS:-$MATRIX_COLLS_DEFAULT}" --dir "$WORK/out" ;;
    split) printf '%s\n' --mode split --dir "$WORK/out" ;;
    *) fail "coll_args: unknown mode '$mode'" ;;
  esac
}

show_ranks() {
  local r
  for ((r = 0; r < NRANKS_NS; r++)); do
    for f in "$WORK/out/rank-$r.out" "$WORK/out/rank-$r.err"; do
      [[ -e "$f" ]] || continue
      echo "---- $(basename "$f") (last 30 lines) ----" >&2
      tail -n 30 "$f" >&2
    done
  done
}

ranks_fail() {
  show_ranks
  fail "$*"
}

# check_placement: every rank's ouro info line agrees with the launcher: rank R (the launcher's
# rank, from the file name) reports "rank R of 6 ready (local rank R%2 of 2 on PREFIX-hH)" with
# H = R/2 + 1 (every launcher here fills host 1 first), and uses shared memory with its host
# mate and TCP with the 4 ranks elsewhere.
check_placement() {
  local r line host mate want_tcp
  for ((r = 0; r < NRANKS_NS; r++)); do
    host=$(host_name $((r / PER_HOST + 1)))
    line=$(grep -o "rank $r of $NRANKS_NS ready (local rank [0-9]* of [0-9]* on [^)]*)" "$WORK/out/rank-$r.err" | head -n1 || true)
    [[ -n "$line" ]] || ranks_fail "rank $r: no 'rank $r of $NRANKS_NS ready' info line (ouro's rank differs from the launcher's, or init failed)"
    [[ "$line" == "rank $r of $NRANKS_NS ready (local rank $((r % PER_HOST)) of $PER_HOST on $host)" ]] ||
      ranks_fail "rank $r: ouro says '$line', expected local rank $((r % PER_HOST)) of $PER_HOST on $host"
    mate=$((r ^ 1))
    want_tcp=$(seq 0 $((NRANKS_NS - 1)) | grep -vx -e "$r" -e "$mate" | paste -sd, -)
    line=$(grep -o "rank $r: shared memory with ranks [^;]*;" "$WORK/out/rank-$r.err" | head -n1 || true)
    [[ "$line" == "rank $r: shared memory with ranks $mate, TCP with ranks $want_tcp;" ]] ||
      ranks_fail "rank $r: transports '${line:-<no info line>}', expected shared memory with $mate and TCP with $want_tcp"
  done
}

# check_results MODE: every rank checked something, nothing failed, and (matrix) the outputs that
# must be bit-identical everywhere hash the same on all 6 ranks.
check_results() {
  local r summary shared first_shared=""
  for ((r = 0; r < NRANKS_NS; r++)); do
    local out=$WORK/out/rank-$r.out
    [[ -s "$out" ]] || ranks_fail "rank $r wrote no report ($out)"
    if grep -q -e '^FAIL' -e '^ERROR' "$out"; then
      ranks_fail "rank $r reported failures: $(grep -m3 -e '^FAIL' -e '^ERROR' "$out" | tr '\n' ' ')"
    fi
    summary=$(grep '^SUMMARY ' "$out" || true)
    if ! [[ "$summary" =~ ^SUMMARY\ checks=([0-9]+)\ failures=0$ ]] || ((BASH_REMATCH[1] == 0)); then
      ranks_fail "rank $r: summary '${summary:-<none>}', expected checks>0 failures=0"
    fi
    shared=$(grep '^SHARED ' "$out" || true)
    [[ -n "$shared" || "$1" != matrix ]] || ranks_fail "rank $r: no SHARED line"
    [[ -z "$first_shared" ]] && first_shared=$shared
    [[ "$shared" == "$first_shared" ]] || ranks_fail "rank $r: '$shared' differs from rank 0's '$first_shared'"
  done
}

# One line of the collectives' times (TIME lines of rank 0) for the log.
report_times() {
  grep -q '^TIME ' "$WORK/out/rank-0.out" || return 0
  echo "seconds per collective (rank 0): $(grep '^TIME ' "$WORK/out/rank-0.out" | cut -d' ' -f2- | paste -sd, -)"
}

# wait_job PID NAME DEADLINE: waits for a background job started by the test until $SECONDS
# reaches DEADLINE (one deadline for all the jobs of a run, so a run is bounded as a whole); fails
# with the ranks' output when the job exits non-zero or is still running then.
wait_job() {
  local pid=$1 name=$2 deadline=$3 rc=0
  while pid_alive "$pid" && ((SECONDS < deadline)); do
    sleep 0.1
  done
  if pid_alive "$pid"; then
    stop_pid "$pid"
    ranks_fail "$name still running at the test's deadline (hang?)"
  fi
  wait "$pid" || rc=$?
  ((rc == 0)) || {
    [[ -e "$WORK/$name.log" ]] && { echo "---- $name.log ----" >&2; tail -n 40 "$WORK/$name.log" >&2; }
    ranks_fail "$name exited with status $rc"
  }
}

# run_job_on_hosts NAME OURO_RUN ARGS...: one `ouro-run --nnodes NHOSTS` per host (inside it), each
# starting PER_HOST ranks of COLL_RANK ARGS through the rank wrapper, all with the same token
# (rank_env); waits for all of them, bounded by JOB_LIMIT_S from now (a caller may raise it first),
# and fails with the ranks' output if one fails or hangs. Logs: WORK/NAME-hI.log.
run_job_on_hosts() {
  local name=$1 ouro_run=$2 i
  shift 2
  local -a pids=()
  local deadline=$((SECONDS + JOB_LIMIT_S))
  for ((i = 1; i <= NHOSTS; i++)); do
    "$HOSTS" exec "$PREFIX" "$i" "$ouro_run" --nnodes "$NHOSTS" --node-rank $((i - 1)) --nproc-per-node "$PER_HOST" \
      --master "$(addr 1):$STORE_PORT" "$RANK_WRAPPER" "$COLL_RANK" "$@" >"$WORK/$name-h$i.log" 2>&1 </dev/null &
    pids+=($!)
  done
  for ((i = 1; i <= NHOSTS; i++)); do
    wait_job "${pids[i - 1]}" "$name-h$i" "$deadline"
  done
}
