#!/usr/bin/env bash
# usage: rank.sh PROGRAM ARGS...   (started by a launcher, once per rank)
# Runs PROGRAM with stdout in $NETNS_OUT/rank-R.out and stderr in rank-R.err, R being the rank the
# LAUNCHER gave this process (its own variable, not ouro's), so the tests can hold ouro's view of
# each rank against the launcher's. Replaces itself with PROGRAM (same PID, same exit status).
set -euo pipefail
r=${OURO_RANK:-${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}}}
if [[ -z "$r" || -z "${NETNS_OUT:-}" ]]; then
  echo "rank.sh: no launcher rank variable (OURO_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK) or no NETNS_OUT" >&2
  exit 2
fi
exec "$@" >"$NETNS_OUT/rank-$r.out" 2>"$NETNS_OUT/rank-$r.err"
