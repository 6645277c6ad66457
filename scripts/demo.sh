#!/usr/bin/env bash
# The demo: build a small recurrent policy artifact by hand (C kernels compiled now), then
# inspect it, load it with checksum verification, step it on the CPU with a benchmark log,
# and gate that log against a second run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --quiet -p pilot-tools -p pilot-tests --examples --bins
out=bench-out/demo
mkdir -p "$out"
pilot=target/release/pilot
target/release/examples/make_demo "$out/policy.pkl"
"$pilot" inspect "$out/policy.pkl"
"$pilot" load "$out/policy.pkl" --times 5 --verify
"$pilot" run "$out/policy.pkl" --steps 20 --save-outputs "$out/outputs" --benchmark-log "$out/baseline.jsonl"
"$pilot" run "$out/policy.pkl" --steps 200 --benchmark-log "$out/current.jsonl" > /dev/null
"$pilot" gate --baseline "$out/baseline.jsonl" --current "$out/current.jsonl" --max-regression 5% \
  || echo "demo: the gate reported a regression (exit $?): this machine was noisy between the runs"
echo "demo: outputs in $out/outputs"
