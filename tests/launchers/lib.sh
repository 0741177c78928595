# shellcheck shell=bash
# Shared helpers for the launcher tests (sourced, not run). They prove that an unchanged ouro
# program (tests/programs/init_probe) runs under the engines clusters already use: every helper
# here is engine-neutral; the engine scripts only say how to launch and how their labels look.
#
# Exit codes follow the meson/automake convention: 0 pass, 1 fail, 77 skip.

# Every job in these tests is bounded by this (seconds); a job that needs longer is broken.
# (LAUNCHER_JOB_TIMEOUT_S shortens it to try the timeout path by hand.)
readonly JOB_TIMEOUT_S=${LAUNCHER_JOB_TIMEOUT_S:-60}
# ouro's own waits fail well before JOB_TIMEOUT_S, so a broken rendezvous reports ouro's error
# instead of being killed silently by timeout(1).
readonly OURO_WAIT_S=30
readonly NRANKS=4

# The split every engine runs, one "COLOR KEY" per world rank. Rank 3 opts out
# (OURO_SPLIT_NOCOLOR = -1); keys reverse the order of ranks 0 and 2 inside color 0.
readonly -a SPLIT_ARGS=("0 5" "1 0" "0 2" "-1 0")
# What each world rank must print for that split (single host: local rank = rank, local count = size).
readonly -a SPLIT_EXPECT=(
  "split rank=1 size=2 local_rank=1 local_count=2"
  "split rank=0 size=1 local_rank=0 local_count=1"
  "split rank=0 size=2 local_rank=0 local_count=2"
  "split none"
)

TEST_NAME=${TEST_NAME:-launcher test}
WORK=""  # the test's private temp dir, made by make_workdir, removed at exit

fail() {
  echo "FAIL ($TEST_NAME): $*" >&2
  exit 1
}

skip() {
  echo "SKIP ($TEST_NAME): $*" >&2
  exit 77
}

# Skip only when the engine is genuinely absent; anything else that goes wrong is a failure.
require_command() {
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 || skip "$cmd is not installed"
  done
}

require_probe() {
  local probe=$1
  [[ -n "$probe" ]] || fail "usage: pass the path of the init_probe executable"
  [[ -x "$probe" ]] || fail "init_probe not found or not executable: $probe"
}

# A port nobody listens on right now, on loopback. The kernel picks it (bind to port 0), so two
# tests running side by side do not collide the way a fixed port would.
free_port() {
  local py=/usr/bin/python3
  # Debian's interpreter first: a pyenv shim earlier on PATH costs a few hundred ms per call.
  [[ -x "$py" ]] || py=$(command -v python3 || true)
  [[ -n "$py" ]] || fail "python3 is needed to pick a free port"
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The caller may itself run under a launcher (a CI job under srun, a shell under ouro-run or
# torchrun). Its variables would outrank the engine's in ouroCommInitFromEnv's order of
# precedence and the test would prove nothing, so drop every launcher's variables first.
scrub_launcher_env() {
  local name
  unset OURO_RANK OURO_WORLD_SIZE OURO_LOCAL_RANK OURO_LOCAL_WORLD_SIZE OURO_INIT OURO_STORE_HOSTED \
    OURO_TOKEN OURO_HOSTID
  unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT
  for name in $(compgen -e); do
    case "$name" in
      SLURM_* | SBATCH_* | SRUN_* | SALLOC_* | OMPI_* | PMIX_* | PMI_* | HYDRA_* | MPI_LOCAL* | TORCHELASTIC_*)
        unset "$name" ;;
    esac
  done
  export OURO_TIMEOUT_S=$OURO_WAIT_S
}

# A fresh private directory for everything the test writes (stores, logs, engine session dirs).
# LAUNCHER_TEST_TAG marks every process started from here on (it is inherited through the
# engines and their daemons), so cleanup can find stragglers of this run, and only of this run,
# by PID. The name must not start with OURO_: ouro warns about unknown OURO_* variables.
make_workdir() {
  local prefix=$1
  WORK=$(mktemp -d "/tmp/${prefix}.XXXXXX") || fail "mktemp failed"
  export LAUNCHER_TEST_TAG=$WORK
  # Open MPI puts its session directory under TMPDIR; keep it inside WORK so nothing is left in /tmp.
  export TMPDIR=$WORK
}

# True while PID is a live process; a zombie (state Z) counts as gone: PID 1 here is not an init
# and may take its time reaping, so waiting for the PID to vanish could hang.
pid_alive() {
  local pid=$1 stat
  read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]
}

# stop_pids PID...: TERM, wait up to 5 s for all of them together, then KILL the rest. Reaps the
# PIDs that are our children so no zombie of ours remains.
stop_pids() {
  local pid i live
  local -a pids=()
  for pid in "$@"; do
    [[ -n "$pid" ]] && pid_alive "$pid" && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 50; i++)); do
    live=0
    for pid in "${pids[@]}"; do
      pid_alive "$pid" && live=1 && break
    done
    ((live)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    if pid_alive "$pid"; then
      echo "note: PID $pid ignored SIGTERM for 5 s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # wait only works (and only returns promptly) for our own children; others are not ours to reap.
  for pid in "$@"; do
    [[ -n "$pid" ]] && wait "$pid" 2>/dev/null
  done
  return 0
}

stop_pid() {
  stop_pids "$1"
}

# PIDs of live processes of this run other than this shell: those carrying this run's
# LAUNCHER_TEST_TAG, and those holding a file open inside WORK (slurmstepd wipes its environment
# but keeps slurmd's log open).
tagged_pids() {
  local dir pid entry fd target comm
  local -a entries
  [[ -n "${LAUNCHER_TEST_TAG:-}" ]] || return 0
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    pid_alive "$pid" || continue
    # environ is NUL-separated; an exact entry match avoids matching a longer tag. Read in bash
    # (no pipeline) so the scan itself starts no tagged processes.
    mapfile -d '' entries 2>/dev/null <"$dir/environ" || continue
    for entry in "${entries[@]}"; do
      if [[ "$entry" == "LAUNCHER_TEST_TAG=$LAUNCHER_TEST_TAG" ]]; then
        echo "$pid"
        continue 2
      fi
    done
    # Only slurmstepd needs the slower look at open files (one readlink per descriptor).
    read -r comm 2>/dev/null <"$dir/comm" || continue
    [[ "$comm" == slurmstepd ]] || continue
    for fd in "$dir"/fd/*; do
      target=$(readlink "$fd" 2>/dev/null) || continue
      if [[ "$target" == "$LAUNCHER_TEST_TAG"/* ]]; then
        echo "$pid"
        continue 2
      fi
    done
  done
  return 0
}

# Stops whatever this run left behind (ranks of a timed-out job, a slurmstepd), by PID.
stop_stragglers() {
  local pid
  local -a pids
  mapfile -t pids < <(tagged_pids)
  for pid in "${pids[@]}"; do
    echo "note: stopping leftover process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))" >&2
  done
  stop_pids "${pids[@]}"
}

remove_workdir() {
  if [[ -n "$WORK" && -d "$WORK" ]]; then
    rm -rf -- "$WORK" || echo "note: could not remove $WORK" >&2
  fi
  WORK=""
}

# run_job NAME CMD... : runs one engine job, bounded, with stdout and stderr kept apart in
# $WORK/NAME.out and $WORK/NAME.err. Fails the test (showing both) when the job fails or times out.
# The job runs in the background and the shell waits for it, so a signal to the test (Ctrl-C,
# meson's timeout) runs the traps at once instead of after the job; cleanup stops JOB_PID first.
JOB_PID=""
run_job() {
  local name=$1 rc=0 start
  shift
  start=${EPOCHREALTIME/./}
  timeout -k 5 "$JOB_TIMEOUT_S" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
  JOB_PID=$!
  wait "$JOB_PID" || rc=$?
  JOB_PID=""
  if ((rc != 0)); then
    local why="exit status $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${JOB_TIMEOUT_S} s"
    show_job "$name"
    fail "job '$name' failed ($why): $*"
  fi
  local us=$((${EPOCHREALTIME/./} - start))
  printf 'ran: job %-14s %d.%03d s\n' "$name" $((us / 1000000)) $((us / 1000 % 1000))
}

show_job() {
  local name=$1
  echo "---- $name: stdout ----" >&2
  cat "$WORK/$name.out" >&2 || true
  echo "---- $name: stderr ----" >&2
  cat "$WORK/$name.err" >&2 || true
  echo "----" >&2
}

job_fail() {
  local name=$1
  shift
  show_job "$name"
  fail "job '$name': $*"
}

# The engine scripts turn their engine's labelled output into lines "LABEL TEXT", where LABEL is
# the engine's own rank for the process that printed TEXT. They define normalize_output, which
# reads the raw stdout on stdin and writes those lines; a raw line it cannot label is passed
# through as "? LINE" so the checks below can report it.

# check_world NAME: every engine rank 0..N-1 printed exactly one
#   world rank=R size=N local_rank=L local_count=N
# with R equal to the engine's own rank, and the local ranks are exactly 0..N-1 (one host).
check_world() {
  local name=$1 label text n=0 r
  local -a seen_rank=() seen_local=()
  local re='^world rank=([0-9]+) size=([0-9]+) local_rank=([0-9]+) local_count=([0-9]+)$'
  while read -r label text; do
    [[ "$text" == world* ]] || continue
    [[ "$text" =~ $re ]] || job_fail "$name" "malformed line from engine rank $label: '$text'"
    local rank=${BASH_REMATCH[1]} size=${BASH_REMATCH[2]} lrank=${BASH_REMATCH[3]} lcount=${BASH_REMATCH[4]}
    [[ "$label" =~ ^[0-9]+$ ]] || job_fail "$name" "line without an engine rank label: '$text'"
    ((rank == label)) || job_fail "$name" "engine rank $label got ouro rank $rank (expected the engine's rank)"
    ((size == NRANKS)) || job_fail "$name" "rank $rank: size=$size, expected $NRANKS"
    ((lcount == NRANKS)) || job_fail "$name" "rank $rank: local_count=$lcount, expected $NRANKS (all ranks on one host)"
    ((rank < NRANKS)) || job_fail "$name" "rank $rank out of range 0..$((NRANKS - 1))"
    ((lrank < NRANKS)) || job_fail "$name" "rank $rank: local_rank=$lrank out of range 0..$((NRANKS - 1))"
    [[ -z "${seen_rank[rank]:-}" ]] || job_fail "$name" "rank $rank printed its world line twice"
    [[ -z "${seen_local[lrank]:-}" ]] || job_fail "$name" "local_rank=$lrank given to two ranks (${seen_local[lrank]} and $rank)"
    seen_rank[rank]=1
    seen_local[lrank]=$rank
    n=$((n + 1))
  done < <(normalize_output <"$WORK/$name.out")
  for ((r = 0; r < NRANKS; r++)); do
    [[ -n "${seen_rank[r]:-}" ]] || job_fail "$name" "no world line from rank $r"
  done
  ((n == NRANKS)) || job_fail "$name" "expected $NRANKS world lines, got $n"
}

# check_split NAME: each engine rank printed exactly its SPLIT_EXPECT line.
check_split() {
  local name=$1 label text r
  local -a got=()
  while read -r label text; do
    [[ "$text" == split* ]] || continue
    if ! [[ "$label" =~ ^[0-9]+$ ]] || ((label >= NRANKS)); then
      job_fail "$name" "split line without a valid engine rank label: '$label $text'"
    fi
    [[ -z "${got[label]:-}" ]] || job_fail "$name" "rank $label printed two split lines"
    got[label]=$text
  done < <(normalize_output <"$WORK/$name.out")
  for ((r = 0; r < NRANKS; r++)); do
    [[ "${got[r]:-}" == "${SPLIT_EXPECT[r]}" ]] ||
      job_fail "$name" "rank $r (split ${SPLIT_ARGS[r]}): got '${got[r]:-<nothing>}', expected '${SPLIT_EXPECT[r]}'"
  done
}

# Nothing but probe lines may appear on stdout: an unlabelled or unknown line means the engine or
# ouro printed something unexpected, and the test should say so rather than ignore it.
check_only_probe_lines() {
  local name=$1 label text
  while read -r label text; do
    [[ "$label" =~ ^[0-9]+$ && ("$text" == world* || "$text" == split*) ]] ||
      job_fail "$name" "unexpected stdout line: '$label $text'"
  done < <(normalize_output <"$WORK/$name.out")
}

check_world_job() {
  check_only_probe_lines "$1"
  check_world "$1"
}

check_split_job() {
  check_only_probe_lines "$1"
  check_world "$1"
  check_split "$1"
}

# The tests that run ouro-run on namespace hosts (tests/netns/hosts.sh): after their skip checks,
# namespace_hosts_test PREFIX makes the work folder, takes a fresh OURO_TOKEN, and on exit stops
# PIDS, takes the hosts named PREFIX down (set PREFIX="" once they are down), stops stragglers and
# removes the folder. HOSTS must name hosts.sh.
namespace_hosts_cleanup() {
  local rc=$?
  set +e
  stop_pids "${PIDS[@]}"
  [[ -n "$PREFIX" ]] && "$HOSTS" down "$PREFIX" >/dev/null 2>&1
  stop_stragglers
  remove_workdir
  exit "$rc"
}
namespace_hosts_test() {
  scrub_launcher_env
  make_workdir "$1"
  PREFIX="" PIDS=()
  trap namespace_hosts_cleanup EXIT
  trap 'exit 1' INT TERM HUP
  OURO_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export OURO_TOKEN
}
