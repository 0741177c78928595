#!/usr/bin/env bash
# usage (by mpirun, as its rsh/ssh agent): rsh_agent.sh [OPTIONS] HOST COMMAND...
# Starts COMMAND "on" namespace host HOST (PREFIX-hI or its address) the way ssh would: the words
# are joined and run by /bin/sh inside the host (network namespace and host name). NETNS_PREFIX
# names the hosts (inherited from the test through mpirun). Options an MPI passes to ssh are
# ignored. Exit: COMMAND's status; 255 (as ssh) when HOST is not one of the hosts.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
while (($#)) && [[ "$1" == -* ]]; do
  # ssh options with a value (-p PORT, -l USER, -o OPT) take the next word too.
  case "$1" in -p | -l | -o | -i | -F) shift ;; esac
  shift
done
(($# >= 2)) || { echo "rsh_agent.sh: usage: rsh_agent.sh HOST COMMAND..." >&2; exit 255; }
[[ -n "${NETNS_PREFIX:-}" ]] || { echo "rsh_agent.sh: NETNS_PREFIX is not set" >&2; exit 255; }
host=$1
shift
i=$("$HERE/hosts.sh" host-of "$NETNS_PREFIX" "$host") || exit 255
exec "$HERE/hosts.sh" exec "$NETNS_PREFIX" "$i" /bin/sh -c "$*"
