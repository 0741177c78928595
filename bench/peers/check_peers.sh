#!/bin/bash
# Runs each peer program built here over every collective, dtype, op and root on 1 to 3 ranks,
# in place and out of place, and fails on any wrong element or bad exit: the harness exits 1 when
# a checked element is wrong or a guard byte was written, 2 when a call failed.
#   check_peers.sh OURO_RUN NAME=PROGRAM...   (NAME: openmpi, mpich, gloo, or torch with
#                                              PROGRAM the path of torch_bench.py)
# Exits 77 (meson's "skipped") when no listed peer has its launcher (or torch) on this machine.
set -u
ouro_run=$1
shift

launch() {  # name nranks program -> the command line that starts it
  case $1 in
    openmpi) echo "mpirun.openmpi --allow-run-as-root --oversubscribe -n $2 $3" ;;
    mpich) echo "mpirun.mpich -n $2 $3" ;;
    gloo) echo "$ouro_run -n $2 $3" ;;
    torch) echo "$ouro_run -n $2 /usr/bin/python3 $3" ;;
  esac
}
launcher_present() {
  case $1 in
    openmpi) command -v mpirun.openmpi > /dev/null ;;
    mpich) command -v mpirun.mpich > /dev/null ;;
    gloo) [ -x "$ouro_run" ] ;;
    # Debian's python3-torch lives in the system interpreter, not whichever python3 is on PATH.
    torch) [ -x "$ouro_run" ] && /usr/bin/python3 -c 'import torch.distributed' 2> /dev/null ;;
  esac
}

ran=0
failures=0
for spec in "$@"; do
  name=${spec%%=*}
  program=${spec#*=}
  if ! launcher_present "$name"; then
    echo "skip $name: no launcher (or no torch for /usr/bin/python3)"
    continue
  fi
  # 2 ranks for every peer, 3 (counts no rank count divides) where a run is quick: MPICH and
  # torch take seconds per run on 2 cores, and the point here is the backend glue, not the peer.
  worlds="2 3"
  case "$name" in mpich | torch) worlds="2" ;; esac
  for n in $worlds; do
    for c in all_reduce reduce_scatter all_gather broadcast reduce alltoall sendrecv; do
      # Sizes 1 B, 64 B, 4 KiB cover counts of 0, 1 and ones no rank count divides.
      cmd="$(launch "$name" $n "$program") $c -b 1 -e 4K -f 64 -d all -o all -r all -n 2 -w 1 --no-progress"
      out=$(OURO_TIMEOUT_S=60 timeout 300 $cmd 2>&1)
      rc=$?
      ran=$((ran + 1))
      if [ $rc -ne 0 ]; then
        failures=$((failures + 1))
        echo "FAIL (exit $rc): $cmd"
        echo "$out" | tail -n 20
      else
        echo "ok   $name n=$n $c"
      fi
    done
  done
done
[ $ran -eq 0 ] && exit 77
echo "$ran runs, $failures failed"
[ $failures -eq 0 ]
