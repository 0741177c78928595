#!/usr/bin/env bash
# torchrun hands over its host's name as MASTER_ADDR unless --master_addr is given; on a machine
# whose /etc/hosts lacks that name, ouroCommInitFromEnv must say where the address came from and
# how to give one that resolves, not only "cannot resolve host". The probe runs in a new, empty
# network namespace (unshare --net), so the name lookup never leaves this machine.
# usage: unresolvable_master.sh PATH/TO/init_probe
set -uo pipefail
probe=$1
if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root and unshare (the lookup runs in an empty network namespace)"
  exit 77
fi
out=$(env -i PATH="$PATH" RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=ouro-no-such-host MASTER_PORT=29500 \
      OURO_TIMEOUT_S=20 timeout 60 unshare --net "$probe" 2>&1)
rc=$?
echo "$out"
fail() { echo "FAIL: $1"; exit 1; }
((rc == 10 + 4)) || fail "init_probe exited $rc; expected ouroInvalidArgument (exit 14)"
for want in "rank 0: ouroCommInitFromEnv" "MASTER_ADDR='ouro-no-such-host' (launched by torchrun) does not resolve" \
            "unless --master_addr is given" "--master_addr=ADDRESS" "OURO_INIT=tcp://HOST:PORT"; do
  grep -qF -- "$want" <<<"$out" || fail "the message lacks '$want'"
done
echo "ok: the unresolvable MASTER_ADDR is named with what to do"
