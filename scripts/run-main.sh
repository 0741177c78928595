#!/usr/bin/env bash
# The main job: set up, build, then a 4-rank allreduce bandwidth table on this host under ouro-run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [[ -x build/bench/ouro-bench ]]; then
  exec build/tools/ouro-run/ouro-run -n 4 build/bench/ouro-bench all_reduce -b 8 -e 64M -f 4 "$@"
fi
exec build/tools/ouro-run/ouro-run -n 4 build/examples/allreduce_example "$@"
