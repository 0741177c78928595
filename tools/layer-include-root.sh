#!/bin/sh
# Makes the include root one layer compiles against: a folder of symlinks to the source
# folders that layer may include (itself and the layers below it, DESIGN.md). An upward
# #include "comm/..." from transport/ then fails to compile instead of slipping by review.
# usage: layer-include-root.sh ROOT_DIR SOURCE_DIR LAYER [LAYER...]
set -eu
root=$1 src=$2
shift 2
rm -rf "$root"
mkdir -p "$root"
for layer in "$@"; do
  ln -s "$src/$layer" "$root/$layer"
done
