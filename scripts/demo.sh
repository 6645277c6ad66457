#!/usr/bin/env bash
# The demo: compile an openpilot-like vision model (uint8 camera planes, depthwise-separable convs)
# from ONNX, check it against onnxruntime, inspect it, load it with checksum verification, step it on
# the CPU with a benchmark log, gate that log against a second run; then the OpenCL image path.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p pilot-tools
out=bench-out/demo
mkdir -p "$out"
pilot=target/release/pilot
.venv/bin/python scripts/make_models.py "$out/models" > /dev/null
PILOT_PYTHON=.venv/bin/python "$pilot" compile "$out/models/vision.onnx" -o "$out/vision.pkl" --selftest
"$pilot" inspect "$out/vision.pkl"
"$pilot" load "$out/vision.pkl" --times 5 --verify
"$pilot" run "$out/vision.pkl" --steps 20 --save-outputs "$out/outputs" --benchmark-log "$out/baseline.jsonl"
"$pilot" run "$out/vision.pkl" --steps 100 --profile --benchmark-log "$out/current.jsonl" | tail -6
"$pilot" gate --baseline "$out/baseline.jsonl" --current "$out/current.jsonl" --max-regression 5% \
  || echo "demo: the gate reported a regression (exit $?): this machine was noisy between the runs"
# The same model as the Adreno path compiles it (OpenCL C, images stored as half, local sizes timed),
# checked against onnxruntime and stepped on this machine's OpenCL device (PoCL here).
PILOT_PYTHON=.venv/bin/python "$pilot" compile "$out/models/vision.onnx" -o "$out/vision-cl.pkl" \
  --target cl --image --float16 --nolocals --selftest
"$pilot" inspect "$out/vision-cl.pkl" | grep -E "target|step|images"
"$pilot" run "$out/vision-cl.pkl" --steps 5 | tail -2
echo "demo: outputs in $out/outputs"
