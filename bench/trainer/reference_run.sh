#!/usr/bin/env bash
# The reference runs of docs/TRAINING.md, in one sitting:
#   1. every mode of the reference model (784,512,256,10, bf16, AdamW, 4 ranks, 2 epochs), with
#      its accuracy, speed, communication share, and the zero2 run's curves;
#   2. the memory table: a wider model (784,2048,2048,10) for a few steps in each mode, so the
#      per-rank bytes of the ZeRO formulas show in the peak RSS beside them.
# Prints markdown tables; leaves every JSON, CSV and the PNG in OUT (default ./reference-run).
# usage: bench/trainer/reference_run.sh [OUT]   (after scripts/setup.sh built ./build)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-reference-run}
mkdir -p "$out"
run=build/tools/ouro-run/ouro-run
train=build/tools/ouro-train/ouro-train
[[ -x $run && -x $train ]] || { echo "reference_run.sh: build first (scripts/setup.sh)" >&2; exit 1; }

common=(--layers 784,512,256,10 --batch-size 64 --epochs 2 --precision bf16 --optimizer adamw
        --lr 1e-3 --weight-decay 0.01 --seed 0 --log-every 10)
for mode in ddp zero1 zero2 zero3; do
  echo "== reference run, $mode" >&2
  "$run" -n 4 "$train" --mode "$mode" "${common[@]}" --json "$out/$mode.json" --metrics "$out/$mode.csv" \
    $([[ $mode == zero2 ]] && echo --plot "$out/zero2.png") >"$out/$mode.log" 2>&1
done
wide=(--layers 784,2048,2048,10 --batch-size 64 --steps 20 --precision bf16 --optimizer adamw --lr 1e-3
      --log-every 0)
for mode in ddp zero1 zero2 zero3; do
  echo "== memory, $mode" >&2
  "$run" -n 4 "$train" --mode "$mode" "${wide[@]}" --json "$out/memory-$mode.json" >"$out/memory-$mode.log" 2>&1
done

/usr/bin/python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)
print("| mode | test accuracy | samples/s | comm share | train seconds |")
print("|---|---|---|---|---|")
for mode in ["ddp", "zero1", "zero2", "zero3"]:
    j = load(f"{mode}.json")
    print(f"| `{mode}` | {j['test_accuracy']:.4f} | {j['samples_per_s']:.0f} | {100 * j['comm_fraction']:.1f}% "
          f"| {j['train_seconds']:.1f} |")
print()
mib = 1 << 20
print("| mode | params | grads | optimizer | buffers | activations | formula (16Ψ/...) | peak RSS |")
print("|---|---|---|---|---|---|---|---|")
for mode in ["ddp", "zero1", "zero2", "zero3"]:
    j = load(f"memory-{mode}.json")
    b, psi, n = j["bytes_per_rank"], j["param_count"], j["world_size"]
    formula = {"ddp": 16 * psi, "zero1": 4 * psi + 12 * psi / n, "zero2": 2 * psi + 14 * psi / n,
               "zero3": 16 * psi / n}[mode]
    print(f"| `{mode}` | {b['params'] / mib:.1f} | {b['grads'] / mib:.1f} | {b['optimizer'] / mib:.1f} "
          f"| {b['buffers'] / mib:.1f} | {b['activations'] / mib:.1f} | {formula / mib:.1f} "
          f"| {j['peak_rss_bytes'] / mib:.0f} |")
print(f"\n(MiB per rank; Ψ = {load('memory-ddp.json')['param_count']:,}, W = 4, bf16, AdamW)")
PY
