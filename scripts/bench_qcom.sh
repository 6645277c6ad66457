#!/usr/bin/env bash
# The QCOM backend on the fake KGSL: per model, plain and as openpilot compiles for the car
# (--image --float16 --nolocals), the prebuilt step's size (dwords), ioctls per step, pilot's host
# time per step (in submit, outside the GPU_COMMAND ioctl) and the fake's time per step (decoding
# every packet and running each dispatch on PoCL). Prints a markdown table for BENCHMARKS.md.
#   scripts/bench_qcom.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
steps="${1:-20}"
mkdir -p bench-out/models
cargo build --release --quiet -p pilot-tools
pilot=target/release/pilot
.venv/bin/python scripts/make_models.py bench-out/models > /dev/null

echo "| model | mode | kernels | dwords/step | ioctls/step | host µs/step | fake ms/step (median) |"
echo "|---|---|---|---|---|---|---|"
for m in vision policy dmonitoring; do
  for mode in "plain:" "image+float16+nolocals:--image --float16 --nolocals"; do
    name="${mode%%:*}"; flags="${mode#*:}"
    art="bench-out/$m-qcom-${name//+/-}.pkl"
    # shellcheck disable=SC2086
    "$pilot" compile "bench-out/models/$m.onnx" --target qcom --qcom-compiler fake $flags -o "$art" > /dev/null
    # One warm-up step builds the kernels on PoCL; the counters cover the timed steps only.
    "$pilot" run "$art" --device fake-kgsl --steps 1 > /dev/null
    out=$("$pilot" run "$art" --device fake-kgsl --steps "$steps" --benchmark-log "bench-out/$m-qcom.jsonl")
    kernels=$("$pilot" inspect --json "$art" | python3 -c 'import json,sys; print(json.load(sys.stdin)["kernel_count"])')
    python3 - "$m" "$name" "$kernels" "bench-out/$m-qcom.jsonl" "$out" <<'PY'
import json, re, statistics, sys
m, name, kernels, log, out = sys.argv[1:]
dev = re.search(r"device\s+([\d.]+) ioctls/step, (\d+) dwords/step, host ([\d.]+) µs/step", out)
ms = statistics.median(json.loads(l)["wall_ms"] for l in open(log))
print(f"| {m} | {name} | {kernels} | {dev[2]} | {dev[1]} | {dev[3]} | {ms:.1f} |")
PY
  done
done
