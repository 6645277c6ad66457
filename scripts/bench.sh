#!/usr/bin/env bash
# Benchmarks pilot against onnxruntime (1 thread) and tinygrad 0.14.0 (DEV=CPU:LLVM) on the test
# models, in one run on this machine, and prints a markdown table for BENCHMARKS.md.
#   scripts/bench.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
steps="${1:-50}"
.venv/bin/python -c 'import tinygrad' 2>/dev/null || .venv/bin/pip install -q tinygrad==0.14.0
mkdir -p target/shim bench-out/models
ln -sf "$(command -v clang-19)" target/shim/clang   # tinygrad's CPU device calls `clang`
export PATH="$PWD/target/shim:$PATH"
cargo build --release --quiet -p pilot-tools
pilot=target/release/pilot
.venv/bin/python scripts/make_models.py bench-out/models > /dev/null

median() { python3 -c 'import json,statistics,sys; print(round(statistics.median(json.loads(l)["wall_ms"] for l in open(sys.argv[1])), 4))' "$1"; }

echo "| model | pilot compile s | tinygrad compile s | pilot step ms (1 thread) | tinygrad step ms | onnxruntime step ms (1 thread) | pilot / tinygrad | pilot / onnxruntime |"
echo "|---|---|---|---|---|---|---|---|"
for m in vision policy dmonitoring; do
  onnx="bench-out/models/$m.onnx"
  st=$(date +%s.%N)
  "$pilot" compile "$onnx" -o "bench-out/$m.pkl" > /dev/null
  pc=$(python3 -c "print(round($(date +%s.%N) - $st, 3))")
  "$pilot" run "bench-out/$m.pkl" --threads 1 --steps "$steps" --benchmark-log "bench-out/$m.jsonl" > /dev/null
  ps=$(median "bench-out/$m.jsonl")
  ort=$(.venv/bin/python scripts/bench_models.py "$onnx" ort --steps "$steps")
  tg=$(.venv/bin/python scripts/bench_models.py "$onnx" tinygrad --steps "$steps" 2>/dev/null | tail -1)
  python3 - "$m" "$pc" "$ps" "$ort" "$tg" <<'PY'
import json, sys
m, pc, ps, ort, tg = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
print(f"| {m} | {pc:.2f} | {tg['compile_s']:.2f} | {ps:.3f} | {tg['step_ms_median']:.3f} | {ort['step_ms_median']:.3f} | {ps / tg['step_ms_median']:.2f} | {ps / ort['step_ms_median']:.2f} |")
PY
done
