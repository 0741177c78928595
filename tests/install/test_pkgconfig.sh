#!/usr/bin/env bash
# Builds an outside program against ouro through pkg-config, twice: with the build tree's
# uninstalled ouro.pc, and after `meson install` into a scratch prefix; runs each under ouro-run.
# usage: test_pkgconfig.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/ouro-pkgconfig.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# A sanitized libouro (scripts/run-tests.sh --sanitize) needs its sanitizer's runtime loaded
# first, which an outside program built with the same -fsanitize does.
sanitize=()
case $(ldd "$build/comm/libouro.so") in
  *libasan*) sanitize=(-fsanitize=address,undefined) ;;
  *libtsan*) sanitize=(-fsanitize=thread) ;;
esac

compile_and_run() {  # label, PKG_CONFIG_PATH, extra pkg-config flags, LD_LIBRARY_PATH
  local label=$1 pcpath=$2 extra=$3 libpath=$4
  flags=$(PKG_CONFIG_PATH=$pcpath pkg-config $extra --cflags --libs ouro)
  g++ -std=c++20 "${sanitize[@]}" "$src/tests/install/consumer.cpp" $flags -o "$tmp/consumer-$label"
  LD_LIBRARY_PATH=$libpath "$build/tools/ouro-run/ouro-run" -n 2 "$tmp/consumer-$label" > "$tmp/out-$label"
  if [[ $(grep -c ": ok" "$tmp/out-$label") != 2 ]]; then
    echo "FAIL ($label): the consumer did not report ok on both ranks:"; cat "$tmp/out-$label"; exit 1
  fi
  echo "ok: built and ran with the $label ouro.pc"
}

compile_and_run uninstalled "$build/meson-uninstalled" "" "$build/comm"

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet > "$tmp/install.log" 2>&1 || {
  echo "FAIL: meson install"; cat "$tmp/install.log"; exit 1; }
pc=$(find "$tmp/root" -name ouro.pc | head -1)
[[ -n $pc ]] || { echo "FAIL: meson install put no ouro.pc under $tmp/root"; exit 1; }
libdir=$(dirname "$(find "$tmp/root" -name 'libouro.so' | head -1)")
[[ -f $(dirname "$(dirname "$pc")")/../include/ouro/ouro.h || -n $(find "$tmp/root" -path '*include/ouro/ouro.h') ]] ||
  { echo "FAIL: ouro/ouro.h was not installed"; exit 1; }
# The installed .pc names the real prefix; point it at where DESTDIR put the files.
prefix=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=prefix ouro)
compile_and_run installed "$(dirname "$pc")" "--define-variable=prefix=$tmp/root$prefix" "$libdir"

# ouro's libnccl.so.2 as installed: in a folder of its own (so it replaces NVIDIA's NCCL only for
# processes pointed at it), finding libouro next door through its $ORIGIN RPATH, and usable by a
# program built against the installed nccl.h (without the LD_LIBRARY_PATH meson gives tests, which
# names the build tree).
nccl_lib=$(find "$tmp/root" -path '*/ouro-nccl/libnccl.so.2' | head -1)
nccl_h=$(find "$tmp/root" -path '*/include/ouro-nccl/nccl.h' | head -1)
[[ -n $nccl_lib && -n $nccl_h ]] || { echo "FAIL: libnccl.so.2 or ouro-nccl/nccl.h was not installed"; exit 1; }
[[ $(readelf -d "$nccl_lib" | grep -c 'Library soname: \[libnccl.so.2\]') == 1 ]] ||
  { echo "FAIL: the installed libnccl.so.2 has another SONAME"; readelf -d "$nccl_lib"; exit 1; }
if ldd "$nccl_lib" | grep -q 'libouro.so.0 => not found'; then
  echo "FAIL: the installed libnccl.so.2 does not find libouro.so.0 next to it"; ldd "$nccl_lib"; exit 1
fi
g++ -std=c++20 "${sanitize[@]}" -I"$(dirname "$nccl_h")" -I"$src" "$src/tests/nccl/nccl_api_rank.cpp" \
  -L"$(dirname "$nccl_lib")" -l:libnccl.so.2 -Wl,-rpath,"$(dirname "$nccl_lib")" -o "$tmp/nccl-consumer"
env -u LD_LIBRARY_PATH "$tmp/nccl-consumer" --dir "$tmp" --part initall > "$tmp/out-nccl" 2>&1 ||
  { echo "FAIL: a program on the installed libnccl.so.2:"; cat "$tmp/out-nccl"; exit 1; }
grep -q "libnccl: $(dirname "$nccl_lib")" "$tmp/out-nccl" ||
  { echo "FAIL: the program did not load the installed libnccl.so.2:"; cat "$tmp/out-nccl"; exit 1; }
echo "ok: built and ran a program on the installed libnccl.so.2 ($nccl_lib)"
