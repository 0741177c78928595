#!/usr/bin/python3
"""bench/trainer/side_by_side.py without training: its table, ratios, medians and ouro-train
--json parsing on made-up figures, and whole runs against stand-in ouro-run and ouro-train
programs (written here) that only record their arguments and write a report. Keeps the script
from rotting where nobody runs the real comparison.

    test_side_by_side_mock.py PATH/TO/side_by_side.py
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile

MOCK_RUN = r'''#!/usr/bin/env python3
import os, subprocess, sys
args = sys.argv[1:]
assert args[0] == "-n" and args[2] == "--bind-to", args
world, program = int(args[1]), args[4:]
ranks = [subprocess.Popen(program, env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(world))) for r in range(world)]
sys.exit(max(p.wait() for p in ranks))
'''

MOCK_TRAIN = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
flag = lambda name: args[args.index(name) + 1]
mode, rank = flag("--mode"), os.environ["RANK"]
with open(os.environ["MOCK_LOG"], "a") as log:
    log.write(json.dumps({"rank": rank, "argv": args}) + "\n")
if mode == os.environ.get("MOCK_FAIL"):
    print(f"mock ouro-train: failing --mode {mode} on purpose", file=sys.stderr)
    sys.exit(3)
if rank == "0" and "--model" in args and flag("--model") == "gpt":
    speed = {"ddp": 100.0, "zero1": 90.0, "zero2": 80.0, "zero3": 70.0}[mode]
    report = {"val_loss": 2.5, "final_loss": 2.4, "train_loss": 2.75, "steps": int(flag("--steps")),
              "samples_per_s": speed, "tokens_per_s": speed * int(flag("--block-size")), "comm_fraction": 0.125,
              "train_seconds": 3.0, "world_size": int(os.environ["WORLD_SIZE"]), "mode": mode, "model": "gpt"}
    if mode == os.environ.get("MOCK_BAD_JSON"):
        del report["tokens_per_s"]
    json.dump(report, open(flag("--json"), "w"))
elif rank == "0":
    speed = {"ddp": 3000.0, "zero1": 2900.0, "zero2": 2800.0, "zero3": 2000.0}[mode]
    report = {"samples_per_s": speed, "test_accuracy": 0.8125, "steps": 468, "final_loss": 0.5,
              "train_seconds": 20.0, "world_size": int(os.environ["WORLD_SIZE"]), "mode": mode}
    if mode == os.environ.get("MOCK_BAD_JSON"):
        del report["samples_per_s"]
    json.dump(report, open(flag("--json"), "w"))
'''

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}")


def load(path):
    spec = importlib.util.spec_from_file_location("side_by_side", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_table(sbs):
    torch_runs = [{"samples_per_s": s, "test_accuracy": 0.8, "steps": 10} for s in (1000.0, 5000.0, 1500.0)]
    ouro_runs = [{"samples_per_s": s, "test_accuracy": 0.81, "steps": 10} for s in (3000.0, 2000.0)]
    rows = sbs.add_ratios([sbs.summarize("torch DDP (gloo)", "ddp", torch_runs),
                           sbs.summarize("ouro-train", "ddp", ouro_runs),
                           sbs.summarize("ouro-train", "zero3", [], error="exited 3")])
    check(rows[0]["samples_per_s"] == 1500.0, f"median of 1000, 5000, 1500 is 1500, got {rows[0]['samples_per_s']}")
    check(rows[1]["samples_per_s"] == 2500.0, f"median of 3000, 2000 is 2500, got {rows[1]['samples_per_s']}")
    check(abs(rows[1]["ratio"] - 2500 / 1500) < 1e-12, f"ratio to torch DDP, got {rows[1]['ratio']}")
    table = sbs.markdown_table(rows).splitlines()
    check(table[0].startswith("| system | mode | samples/s | ratio to torch DDP"), f"header: {table[0]}")
    check(table[2] == "| torch DDP (gloo) | ddp | 1500 | 1.00x | 0.8000 |", f"torch row: {table[2]}")
    check(table[3] == "| ouro-train | ddp | 2500 | 1.67x | 0.8100 |", f"ouro row: {table[3]}")
    check(table[4] == "| ouro-train | zero3 | failed | - | - |", f"failed row: {table[4]}")
    alone = sbs.markdown_table(sbs.add_ratios([sbs.summarize("ouro-train", "ddp", ouro_runs)])).splitlines()
    check(alone[2] == "| ouro-train | ddp | 2500 | n/a | 0.8100 |", f"row without torch: {alone[2]}")


def check_parsing(sbs):
    parsed = sbs.parse_ouro_json('{"samples_per_s": 12.5, "test_accuracy": 0.5, "steps": 3, "mode": "ddp"}', "x")
    check(parsed["samples_per_s"] == 12.5 and parsed["steps"] == 3, f"parsed: {parsed}")
    for text, expected in (('{"test_accuracy": 0.5}', "samples_per_s, steps"), ("{oops", "not JSON")):
        try:
            sbs.parse_ouro_json(text, "report.json")
            check(False, f"{text!r} was accepted")
        except ValueError as error:
            check("report.json" in str(error) and expected in str(error), f"message for {text!r}: {error}")


def run_script(script, folder, extra, env=None):
    command = [sys.executable, script, "--ouro-run", os.path.join(folder, "ouro-run"),
               "--ouro-train", os.path.join(folder, "ouro-train"), "--init", os.path.join(folder, "init.safetensors"),
               "--data", folder] + extra
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MOCK_LOG=os.path.join(folder, "log.jsonl"), **(env or {})))
    return result


def check_runs(script, folder):
    for name, text in (("ouro-run", MOCK_RUN), ("ouro-train", MOCK_TRAIN)):
        with open(os.path.join(folder, name), "w") as out:
            out.write(text.replace("/usr/bin/env python3", sys.executable))
        os.chmod(os.path.join(folder, name), 0o755)
    open(os.path.join(folder, "init.safetensors"), "wb").close()
    report = os.path.join(folder, "out.json")

    result = run_script(script, folder, ["--torch-backends", "", "--repeat", "2", "--json", report])
    check(result.returncode == 0, f"mock run exit status {result.returncode}: {result.stderr[-500:]}")
    lines = result.stdout.splitlines()
    for mode, speed in (("ddp", 3000), ("zero1", 2900), ("zero2", 2800), ("zero3", 2000)):
        check(f"| ouro-train | {mode} | {speed} | n/a | 0.8125 |" in lines, f"row for {mode} in:\n{result.stdout}")
    saved = json.load(open(report))
    check([r["mode"] for r in saved["rows"]] == ["ddp", "zero1", "zero2", "zero3"], f"JSON rows: {saved['rows']}")
    check(all(r["runs"] == [r["samples_per_s"]] * 2 for r in saved["rows"]), "two runs per system in the JSON")
    calls = [json.loads(line) for line in open(os.path.join(folder, "log.jsonl"))]
    check(len(calls) == 2 * 4 * 2, f"2 repeats x 4 modes x 2 ranks started, got {len(calls)}")
    argv = calls[0]["argv"]
    for flag, value in (("--layers", "784,1024,1024,10"), ("--batch-size", "64"), ("--epochs", "1"),
                        ("--lr", "0.05"), ("--momentum", "0.9"), ("--threads", "1"), ("--optimizer", "sgd"),
                        ("--init", os.path.join(folder, "init.safetensors"))):
        check(flag in argv and argv[argv.index(flag) + 1] == value, f"ouro-train got {flag} {value}: {argv}")

    result = run_script(script, folder, ["--torch-backends", "", "--steps", "7"], {"MOCK_FAIL": "zero2"})
    check(result.returncode == 1, f"a failed mode makes exit status 1, got {result.returncode}")
    check("| ouro-train | zero2 | failed | - | - |" in result.stdout, f"failed row in:\n{result.stdout}")
    check("| ouro-train | zero3 | 2000 | n/a | 0.8125 |" in result.stdout, "modes after a failure still run")
    check("exited 3" in result.stderr, f"the failure's exit status on stderr: {result.stderr[-500:]}")

    result = run_script(script, folder, ["--torch-backends", "", "--modes", "ddp"], {"MOCK_BAD_JSON": "ddp"})
    check(result.returncode == 1 and "lacks samples_per_s" in result.stderr,
          f"a report without samples_per_s is named: {result.returncode} {result.stderr[-500:]}")

    result = run_script(script, folder, ["--torch-backends", "", "--ouro-train", os.path.join(folder, "absent")])
    check(result.returncode == 0 and "note: ouro-train skipped" in result.stdout, f"absent binary: {result.stdout}")

    result = run_script(script, folder, ["--modes", "bogus"])
    check(result.returncode == 2 and "--modes: unknown bogus" in result.stderr, f"bad --modes: {result.stderr}")


def check_gpt(sbs, script, folder):
    """--model gpt: the GPT's flags reach ouro-train, its report is read, and the table gives
    tokens/s, the model's FLOP/s against the sgemm rate measured in the run, and the loss."""
    check(sbs.gpt_flops_per_token(2, 64, 32) == 6 * (256 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64) + 12 * 2 * 32 * 64,
          "FLOPs per token: 6 N (N without wpe) + 12 L T C")
    open(os.path.join(folder, "log.jsonl"), "w").close()
    report = os.path.join(folder, "gpt.json")
    gpt_flags = ["--model", "gpt", "--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "32",
                 "--steps", "5", "--threads", "1", "--sgemm-seconds", "0.05", "--torch-backends", "",
                 "--json", report]
    result = run_script(script, folder, gpt_flags)
    check(result.returncode == 0, f"GPT mock run exit status {result.returncode}: {result.stderr[-500:]}")
    saved = json.load(open(report)) if os.path.exists(report) else {"rows": [{}]}
    row = saved["rows"][0]
    check(row.get("mode") == "ddp" and len(saved["rows"]) == 1, f"GPT modes default to ddp: {saved['rows']}")
    check(row.get("tokens_per_s") == 3200.0, f"tokens/s = samples/s * T: {row.get('tokens_per_s')}")
    flops = saved.get("flops_per_token")
    check(flops == sbs.gpt_flops_per_token(2, 64, 32), f"JSON flops_per_token {flops}")
    # numpy (the sgemm reference's BLAS) is one of scripts/setup.sh's packages.
    import numpy  # noqa: F401
    check((saved.get("sgemm_gflops") or 0) > 0 and set(saved.get("sgemm_runs", {})) == {"before", "after"},
          f"sgemm measured before and after: {saved.get('sgemm_gflops')} {saved.get('sgemm_runs')}")
    if flops and saved.get("sgemm_gflops"):
        share = 3200.0 * flops / (saved["sgemm_gflops"] * 1e9)
        check(abs(row.get("of_sgemm", 0) - share) < 1e-12, f"share of sgemm {row.get('of_sgemm')} != {share}")
        line = next((l for l in result.stdout.splitlines() if l.startswith("| ouro-train | ddp | 3200 | n/a |")), "")
        check(line.endswith(f"| {100 * share:.0f}% | 2.7500 | 12.5% |"), f"GPT row: {line!r} in\n{result.stdout}")
    calls = [json.loads(line) for line in open(os.path.join(folder, "log.jsonl"))]
    check(len(calls) == 2, f"one mode x 2 ranks started, got {len(calls)}")
    argv = calls[0]["argv"] if calls else []
    for flag, value in (("--model", "gpt"), ("--n-layer", "2"), ("--n-head", "2"), ("--n-embd", "64"),
                        ("--block-size", "32"), ("--batch-size", "16"), ("--steps", "5"), ("--optimizer", "adamw"),
                        ("--lr", "0.001"), ("--min-lr", "0.0001"), ("--weight-decay", "0.1"),
                        ("--betas", "0.9,0.95"), ("--grad-clip", "1.0"), ("--warmup-steps", "20"),
                        ("--threads", "1"), ("--sample", "0")):
        check(flag in argv and argv[argv.index(flag) + 1] == value, f"GPT ouro-train got {flag} {value}: {argv}")
    check("--layers" not in argv and "--data" not in argv, f"no MLP flags for the GPT: {argv}")

    result = run_script(script, folder, gpt_flags[:-2] + ["--sgemm-seconds", "0"], {"MOCK_BAD_JSON": "ddp"})
    check(result.returncode == 1 and "lacks tokens_per_s" in result.stderr,
          f"a GPT report without tokens_per_s is named: {result.returncode} {result.stderr[-500:]}")
    result = run_script(script, folder, ["--model", "gpt", "--n-embd", "65", "--n-head", "2"])
    check(result.returncode == 2 and "multiple of --n-head" in result.stderr, f"bad GPT shape: {result.stderr}")


def check_torch_backends(sbs):
    # torch is one of scripts/setup.sh --tests' packages: without it these checks fail, not skip.
    try:
        import torch  # noqa: F401
    except ImportError as e:
        check(False, f"torch cannot be imported ({e}); scripts/setup.sh --tests installs python3-torch")
        return
    usable, note = sbs.torch_backend_status("gloo")
    check(usable and note is None, f"gloo usable: {usable} {note}")
    usable, note = sbs.torch_backend_status("ouro")
    check(not usable and "'ouro'" in note and "--torch-plugin" in note, f"unknown backend skipped: {note}")
    usable, note = sbs.torch_backend_status("ouro", ["no_such_plugin_module"])
    check(not usable and "no_such_plugin_module" in note, f"missing plugin named: {note}")


def main(argv):
    if len(argv) != 1:
        print("usage: test_side_by_side_mock.py PATH/TO/side_by_side.py", file=sys.stderr)
        return 2
    sbs = load(argv[0])
    check_table(sbs)
    check_parsing(sbs)
    check_torch_backends(sbs)
    with tempfile.TemporaryDirectory(prefix="ouro-side-by-side-mock-") as folder:
        check_runs(argv[0], folder)
        check_gpt(sbs, argv[0], folder)
    print(f"{'FAIL' if failures else 'ok'}: side_by_side.py mock checks ({len(failures)} failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
