#!/usr/bin/env bash
# hosts.sh: pretend hosts on one machine, as network namespaces on a private bridge. Tests and
# benchmarks use it to run ouro across "hosts" with real sockets and no outside network.
#
#   hosts.sh up PREFIX N         namespaces PREFIX-h1..PREFIX-hN, each with loopback and one link
#                                (eth0, 10.X.0.I/24) into a bridge in namespace PREFIX-br.
#                                X comes from PREFIX (1..250), so prefixes rarely share a subnet
#                                (they could not clash anyway: each prefix has its own bridge).
#                                Leftovers of an earlier run with this PREFIX are removed first.
#                                No default route anywhere: nothing inside can reach the outside.
#   hosts.sh exec PREFIX I CMD...   runs CMD on host I: its network namespace, and a new UTS
#                                namespace whose hostname is PREFIX-hI (so ranks, slurmd and
#                                mpirun see distinct host names). Replaces itself with CMD (same
#                                PID), which is recorded so `down` can stop it.
#                                HOSTS_UTS=0: keep the machine's hostname (network namespace only).
#   hosts.sh addr PREFIX I       prints host I's address (10.X.0.I)
#   hosts.sh name PREFIX I       prints host I's name (PREFIX-hI)
#   hosts.sh host-of PREFIX NAME prints I for NAME (PREFIX-hI or its address); fails otherwise
#   hosts.sh shape PREFIX RATE [BURST [GSO]]
#                                tbf at RATE (tc syntax: 1gbit, 100mbit) on both ends of every
#                                host link (burst BURST, default 256kb; latency 10ms). RATE "off"
#                                removes it. tbf refunds a link's idle time up to BURST: after an
#                                idle gap the next BURST bytes pass at the veth's speed, which a
#                                wire never does. A smaller BURST shapes closer to a wire, but with
#                                segments as large as the bucket tbf passed half the rate, so GSO
#                                (bytes) caps the links' GSO segments too (ip link gso_max_size;
#                                65536 is the default). 32kb with GSO 16384 came within 12% of
#                                1 Gbit/s at 16 MiB on 4 x 2 namespace hosts (docs/ACROSS-HOSTS.md).
#   hosts.sh loss PREFIX PCT     nftables on every host: each packet arriving over eth0 is
#                                dropped with probability PCT% (0..100; both directions of every
#                                link, as each packet enters some host). PCT 0 removes the rule.
#   hosts.sh drops PREFIX        prints "hI DROPPED" per host: packets the loss rule dropped
#   hosts.sh cut PREFIX I        ip link set down on host I's link (both ends)
#   hosts.sh heal PREFIX I       brings host I's link up again
#   hosts.sh pids PREFIX         PIDs of live processes inside PREFIX's namespaces
#   hosts.sh stop PREFIX         stops them (TERM, up to 5 s, then KILL), the hosts kept
#   hosts.sh down PREFIX         stops (TERM, up to 5 s, then KILL) every process inside the
#                                namespaces (recorded by exec or not), deletes the namespaces
#
# Needs root, ip (iproute2), nsenter/unshare (util-linux); tc for shape, nft for loss.
# Exit codes: 0 ok, 1 failure (message on stderr), 2 usage, 77 a needed tool is missing or not
# root (the meson/automake skip code, so tests can pass it on).
# Example:
#   hosts.sh up demo 3; hosts.sh shape demo 1gbit
#   hosts.sh exec demo 2 ouro-run --nnodes 3 --node-rank 1 --master "$(hosts.sh addr demo 1):29500" ... &
#   hosts.sh down demo
set -euo pipefail

readonly STATE_ROOT=${HOSTS_STATE_DIR:-/run/ouro-hosts}

die() {
  echo "hosts.sh: $*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || { echo "hosts.sh: $t is not installed" >&2; exit 77; }
  done
}
need_root() {
  [[ $(id -u) == 0 ]] || { echo "hosts.sh: needs root (network namespaces)" >&2; exit 77; }
}

check_prefix() {
  # Interface names stay short (h1.., eth0) whatever the prefix; namespace names allow more, but a
  # plain word keeps paths and hostnames valid.
  [[ "$1" =~ ^[a-z][a-z0-9-]{0,30}$ ]] || die "PREFIX must be 1-31 of [a-z0-9-], starting with a letter (got '$1')"
}
check_index() {
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "host index must be 1, 2, ... (got '$2')"
  [[ -e "/run/netns/$1-h$2" ]] || die "no host $2 for prefix $1 (/run/netns/$1-h$2 missing; run 'hosts.sh up' first)"
}

subnet_octet() { echo $(($(printf '%s' "$1" | cksum | cut -d' ' -f1) % 250 + 1)); }
addr_of() { echo "10.$(subnet_octet "$1").0.$2"; }
ns() { echo "/run/netns/$1"; }
# Runs a command in namespace NAME's network (nsenter, not `ip netns exec`: that remounts /sys).
in_ns() {
  local name=$1
  shift
  nsenter --net="$(ns "$name")" "$@"
}

# Namespaces of PREFIX that exist now: the bridge and every host.
existing() {
  local f
  for f in /run/netns/"$1"-br /run/netns/"$1"-h[0-9]*; do
    [[ -e "$f" ]] && basename "$f"
  done
  return 0
}
host_count() {
  local n=0 f
  for f in /run/netns/"$1"-h[0-9]*; do [[ -e "$f" ]] && n=$((n + 1)); done
  echo "$n"
}

# PIDs (other than ours) whose network namespace is one of PREFIX's: found by the namespace's
# inode, so only processes really inside are listed, whatever their name.
pids_in() {
  local prefix=$1 name dir pid ino
  local -A inodes=()
  for name in $(existing "$prefix"); do
    ino=$(stat -L -c %i "$(ns "$name")" 2>/dev/null) && inodes[$ino]=1
  done
  ((${#inodes[@]})) || return 0
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [[ "$pid" == "$$" || "$pid" == "$BASHPID" ]] && continue
    ino=$(stat -L -c %i "$dir/ns/net" 2>/dev/null) || continue
    [[ -n "${inodes[$ino]:-}" ]] && echo "$pid"
  done
  return 0
}

alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ "${stat%% *}" != Z ]]  # a zombie counts as gone (PID 1 here may be slow to reap)
}

stop_all() {
  local prefix=$1 pid i live
  local -a pids
  mapfile -t pids < <(pids_in "$prefix")
  ((${#pids[@]})) || return 0
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 50; i++)); do
    live=0
    for pid in "${pids[@]}"; do alive "$pid" && live=1 && break; done
    ((live)) || return 0
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    alive "$pid" || continue
    echo "hosts.sh: PID $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) ignored SIGTERM for 5 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
}

cmd_down() {
  local prefix=$1 name
  stop_all "$prefix"
  # Deleting a namespace removes its veth ends and the bridge with it.
  for name in $(existing "$prefix"); do
    ip netns delete "$name" 2>/dev/null || echo "hosts.sh: could not delete namespace $name" >&2
  done
  rm -rf -- "${STATE_ROOT:?}/$prefix"
}

UP_PREFIX=""
undo_up() {
  local rc=$?
  trap - EXIT
  if ((rc != 0)); then
    echo "hosts.sh: up $UP_PREFIX failed; removing it" >&2
    cmd_down "$UP_PREFIX"
  fi
  exit "$rc"
}

cmd_up() {
  local prefix=$1 n=$2 i x br out
  [[ "$n" =~ ^[1-9][0-9]?$ && "$n" -le 60 ]] || die "N must be 1..60 (got '$n')"
  need ip nsenter
  # A crashed earlier run may have left namespaces, processes or state under this prefix.
  if [[ -n "$(existing "$prefix")" ]]; then
    echo "hosts.sh: removing leftovers of an earlier '$prefix': $(existing "$prefix" | tr '\n' ' ')" >&2
    cmd_down "$prefix"
  fi
  # Half-built hosts are worse than none: undo everything if any step fails or we are stopped.
  UP_PREFIX=$prefix
  trap undo_up EXIT
  trap 'exit 1' INT TERM HUP
  mkdir -p "$STATE_ROOT/$prefix"
  x=$(subnet_octet "$prefix")
  br=$prefix-br
  ip netns add "$br"
  in_ns "$br" ip link set lo up
  in_ns "$br" ip link add br0 type bridge
  in_ns "$br" ip link set br0 up
  for ((i = 1; i <= n; i++)); do
    ip netns add "$prefix-h$i"
    in_ns "$prefix-h$i" ip link set lo up
    # Both veth ends are born in their namespaces, so names never clash with the root's links.
    in_ns "$br" ip link add "h$i" type veth peer name eth0 netns "$(ns "$prefix-h$i")"
    in_ns "$br" ip link set "h$i" master br0 up
    in_ns "$prefix-h$i" ip addr add "10.$x.0.$i/24" dev eth0
    in_ns "$prefix-h$i" ip link set eth0 up
  done
  echo "$n" >"$STATE_ROOT/$prefix/hosts"
  # The bridge may need a moment before ports forward; wait (bounded) until host 1 reaches the last.
  if ((n > 1)); then
    for ((i = 0; i < 50; i++)); do
      # A refused TCP connection proves the path works (nothing listens on port 9); no ping here.
      out=$(in_ns "$prefix-h1" timeout 1 bash -c ": </dev/tcp/10.$x.0.$n/9" 2>&1 || true)
      [[ "$out" == *refused* ]] && break
      ((i < 49)) || die "host 1 cannot reach host $n over the bridge after 50 tries"
      sleep 0.1
    done
  fi
  trap - EXIT INT TERM HUP
  echo "hosts.sh: $n hosts $prefix-h1..$prefix-h$n on 10.$x.0.0/24 (bridge in $br)"
}

cmd_exec() {
  local prefix=$1 i=$2
  shift 2
  (($#)) || die "exec needs a command"
  check_index "$prefix" "$i"
  need nsenter
  mkdir -p "$STATE_ROOT/$prefix"
  echo "$$" >>"$STATE_ROOT/$prefix/pids"
  if [[ "${HOSTS_UTS:-1}" == 0 ]]; then
    exec nsenter --net="$(ns "$prefix-h$i")" -- "$@"
  fi
  need unshare hostname
  # nsenter and unshare (no --fork) replace themselves, so the recorded PID ends up being CMD.
  # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
  exec nsenter --net="$(ns "$prefix-h$i")" -- unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$prefix-h$i" "$@"
}

cmd_shape() {
  local default_gso=65536  # a veth's own gso_max_size, restored by every other shape
  local prefix=$1 rate=$2 burst=${3:-256kb} gso=${4:-$default_gso} i n
  need tc
  [[ "$gso" =~ ^[0-9]+$ ]] || die "GSO must be a byte count (got '$gso')"
  n=$(host_count "$prefix")
  ((n > 0)) || die "no hosts for prefix $prefix"
  for ((i = 1; i <= n; i++)); do
    if [[ "$rate" == off ]]; then
      in_ns "$prefix-h$i" tc qdisc del dev eth0 root 2>/dev/null || true
      in_ns "$prefix-br" tc qdisc del dev "h$i" root 2>/dev/null || true
      gso=$default_gso
    else
      in_ns "$prefix-h$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 10ms
      in_ns "$prefix-br" tc qdisc replace dev "h$i" root tbf rate "$rate" burst "$burst" latency 10ms
    fi
    in_ns "$prefix-h$i" ip link set dev eth0 gso_max_size "$gso"
    in_ns "$prefix-br" ip link set dev "h$i" gso_max_size "$gso"
  done
}

cmd_loss() {
  local prefix=$1 pct=$2 i n
  [[ "$pct" =~ ^[0-9]+$ && "$pct" -le 100 ]] || die "PCT must be 0..100 (got '$pct')"
  need nft
  n=$(host_count "$prefix")
  ((n > 0)) || die "no hosts for prefix $prefix"
  for ((i = 1; i <= n; i++)); do
    in_ns "$prefix-h$i" nft delete table inet ouro_loss 2>/dev/null || true
    ((pct > 0)) || continue
    # Only eth0 (not loopback); ARP is another family, so neighbours are still found.
    in_ns "$prefix-h$i" nft -f - <<EOF
table inet ouro_loss {
  chain input {
    type filter hook input priority 0; policy accept;
    iifname "eth0" numgen random mod 100 < $pct counter drop
  }
}
EOF
  done
}

cmd_drops() {
  local prefix=$1 i n dropped
  need nft
  n=$(host_count "$prefix")
  for ((i = 1; i <= n; i++)); do
    dropped=$(in_ns "$prefix-h$i" nft list table inet ouro_loss 2>/dev/null | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
    echo "h$i ${dropped:-0}"
  done
}

cmd_link() {
  local prefix=$1 i=$2 state=$3
  check_index "$prefix" "$i"
  in_ns "$prefix-h$i" ip link set eth0 "$state"
  in_ns "$prefix-br" ip link set "h$i" "$state"
}

cmd_host_of() {
  local prefix=$1 what=$2 x
  x=$(subnet_octet "$prefix")
  if [[ "$what" =~ ^$prefix-h([0-9]+)$ || "$what" =~ ^10\.$x\.0\.([0-9]+)$ ]]; then
    local i=${BASH_REMATCH[1]}  # check_index's own match would overwrite BASH_REMATCH
    check_index "$prefix" "$i"
    echo "$i"
  else
    die "'$what' is not a host of prefix $prefix ($prefix-hI or 10.$x.0.I)"
  fi
}

main() {
  (($# >= 2)) || usage
  local cmd=$1 prefix=$2
  shift 2
  check_prefix "$prefix"
  case "$cmd" in
    up) (($# == 1)) || usage; need_root; cmd_up "$prefix" "$1" ;;
    down) need_root; cmd_down "$prefix" ;;
    exec) (($# >= 2)) || usage; need_root; cmd_exec "$prefix" "$@" ;;
    addr) (($# == 1)) || usage; addr_of "$prefix" "$1" ;;
    name) (($# == 1)) || usage; echo "$prefix-h$1" ;;
    host-of) (($# == 1)) || usage; cmd_host_of "$prefix" "$1" ;;
    shape) (($# >= 1 && $# <= 3)) || usage; need_root; cmd_shape "$prefix" "$@" ;;
    loss) (($# == 1)) || usage; need_root; cmd_loss "$prefix" "$1" ;;
    drops) need_root; cmd_drops "$prefix" ;;
    cut) (($# == 1)) || usage; need_root; cmd_link "$prefix" "$1" down ;;
    heal) (($# == 1)) || usage; need_root; cmd_link "$prefix" "$1" up ;;
    pids) pids_in "$prefix" ;;
    stop) need_root; stop_all "$prefix" ;;
    *) usage ;;
  esac
}

main "$@"
