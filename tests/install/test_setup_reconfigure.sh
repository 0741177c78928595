#!/usr/bin/env bash
# The README's order on a fresh machine: scripts/run-main.sh configures build/ before torch is
# installed, then scripts/run-tests.sh installs python3-torch and libtorch-dev and must end with
# ouro.torch built. Reproduced without touching the system's packages: a scratch build is
# configured by setup.sh in a private mount namespace where torch's headers are hidden (an empty
# tmpfs over /usr/include/torch), then setup.sh runs again with them visible. It must configure
# again (clearing meson's cached "header not found"), list the _torch extension among the targets,
# and a third run, with nothing changed, must not configure at all.
# usage: test_setup_reconfigure.sh SOURCE_ROOT
set -euo pipefail
src=$1
header=/usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp

if [[ $(id -u) != 0 ]] || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root and unshare (a private mount namespace hides torch's headers from meson)"
  exit 77
fi
if [[ ! -f $header ]]; then
  echo "FAIL: $header is missing: install libtorch-dev (scripts/setup.sh --tests does)"
  exit 1
fi

scratch=$(mktemp -d /tmp/ouro-setup-reconfigure.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
build=$scratch/build

# Lists the extension modules the configured build will compile, one name a line.
extension_targets() {
  meson introspect --targets "$build" |
    /usr/bin/python3 -c 'import json, sys; [print(t["name"].split(".")[0]) for t in json.load(sys.stdin) if t["name"].startswith("_")]'
}
fail() {
  echo "FAIL: $1"
  [[ -n ${2:-} ]] && sed 's/^/    /' "$2"
  exit 1
}

echo "1. configure with torch's headers hidden (as run-main.sh on a machine without libtorch-dev)"
unshare --mount --propagation private bash -c '
  set -e
  mount -t tmpfs -o size=1m,mode=0755 ouro-hide-torch /usr/include/torch
  [[ ! -e '"$header"' ]]
  "$1/scripts/setup.sh" --no-install --configure-only --builddir "$2"' _ "$src" "$build" >"$scratch/log1" 2>&1 ||
  fail "the first configure failed" "$scratch/log1"
grep -q "ouro.torch: .*ProcessGroup.hpp not found" "$scratch/log1" ||
  fail "with torch's headers hidden, meson should have said ouro.torch is not built" "$scratch/log1"
extension_targets >"$scratch/targets1"
grep -qx "_torch" "$scratch/targets1" && fail "_torch is a target although its headers were hidden" "$scratch/targets1"
grep -qx "_ouro" "$scratch/targets1" || fail "_ouro (ouro.Comm) is missing from the first configure" "$scratch/targets1"

echo "2. setup.sh again with torch visible (as run-tests.sh after installing libtorch-dev)"
"$src/scripts/setup.sh" --no-install --configure-only --builddir "$build" >"$scratch/log2" 2>&1 ||
  fail "the second setup.sh failed" "$scratch/log2"
grep -q "configuring it again" "$scratch/log2" || fail "setup.sh did not notice that torch appeared" "$scratch/log2"
grep -q "Python package *: YES (ouro.Comm, ouro.torch)" "$scratch/log2" ||
  fail "after configuring again, meson's summary does not say ouro.torch is built" "$scratch/log2"
extension_targets >"$scratch/targets2"
grep -qx "_torch" "$scratch/targets2" || fail "_torch is not a target after configuring again" "$scratch/targets2"

echo "3. setup.sh once more, nothing changed: no configure"
before=$(stat -c %Y.%s "$build/build.ninja")
"$src/scripts/setup.sh" --no-install --configure-only --builddir "$build" >"$scratch/log3" 2>&1 ||
  fail "the third setup.sh failed" "$scratch/log3"
after=$(stat -c %Y.%s "$build/build.ninja")
[[ -s $scratch/log3 || $before != "$after" ]] && fail "setup.sh configured again although nothing changed" "$scratch/log3"
echo "ok: _torch appears once torch does, and an unchanged system costs no configure"
