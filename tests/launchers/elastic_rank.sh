#!/usr/bin/env bash
# A rank of the elastic tests (ouro-run --max-restarts / --rank-failure / --nnodes MIN:MAX).
# usage: elastic_rank.sh DIR MODE [INIT_PROBE]
# Every start appends "rank R/W round C te=T max=M group=G pid=P" to DIR/starts, and the rank's
# PID to DIR/pids (the tests check that none is left). MODE:
#   kill1       round 0: rank 1 kills itself with SIGKILL 1 s in, the others start INIT_PROBE
#               (their rendezvous records reach round 0's store; they wait there for rank 1
#               until stopped); later rounds: every rank runs INIT_PROBE and exits 0
#   killalways  rank 1 kills itself with SIGKILL in every round; the others wait
#   exit3       rank 1 exits 3 at once; the others sleep 2 s, then exit 0
#   wait        round 0: every rank waits (until stopped, 50 s at most) after touching
#               DIR/ready.R.0; later rounds: INIT_PROBE, then exit 0
#   cascade     every round: node 2 (GROUP_RANK) touches DIR/first.ROUND and exits 3; node 1
#               exits 4 as soon as it sees that file (a consequence, as a rank whose peer
#               vanished); node 0 waits
#   slowstop    round 0: rank 1 fails at once; the others ignore SIGTERM (SIGKILL after
#               ouro-run's --kill-timeout), so a signal can reach ouro-run between rounds
set -u
dir=$1 mode=$2 probe=${3:-}
round=${OURO_RESTART_COUNT:-0}
trap 'exit 143' TERM INT
echo "rank $RANK/$WORLD_SIZE round $round te=${TORCHELASTIC_RESTART_COUNT:-} max=${TORCHELASTIC_MAX_RESTARTS:-} group=${GROUP_RANK:-}/${GROUP_WORLD_SIZE:-} pid=$$" >>"$dir/starts"
echo $$ >>"$dir/pids"
pause() {  # up to 50 s, in short sleeps so a SIGTERM is acted on at once
  local i
  for ((i = 0; i < 500; i++)); do sleep 0.1; done
}
case "$mode" in
  kill1)
    if ((round == 0)); then
      if ((RANK == 1)); then sleep 1; kill -KILL $$; fi
      exec "$probe"
    fi
    exec "$probe" ;;
  killalways)
    if ((RANK == 1)); then sleep 0.3; kill -KILL $$; fi
    pause ;;
  exit3)
    if ((RANK == 1)); then exit 3; fi
    sleep 2
    echo "rank $RANK finished" >>"$dir/finished"
    exit 0 ;;
  wait)
    if ((round == 0)); then
      touch "$dir/ready.$RANK.0"
      pause
      exit 0
    fi
    exec "$probe" ;;
  cascade)
    if ((GROUP_RANK == 2)); then touch "$dir/first.$round"; exit 3; fi
    if ((GROUP_RANK == 1)); then
      for ((i = 0; i < 500; i++)); do [[ -e "$dir/first.$round" ]] && exit 4; sleep 0.01; done
    fi
    pause ;;
  slowstop)
    if ((RANK == 1)); then sleep 0.3; exit 5; fi
    trap '' TERM
    touch "$dir/ready.$RANK.$round"
    pause ;;
  *) echo "elastic_rank.sh: unknown mode $mode" >&2; exit 2 ;;
esac
