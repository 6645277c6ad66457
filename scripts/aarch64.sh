#!/usr/bin/env bash
# The comma device's CPU path, executed here: the runtime cross-built for aarch64 (no compiler, no
# OpenCL) runs `--arch aarch64` artifacts under qemu-user, and their outputs must match onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p pilot-tools
cargo build --quiet -p pilot-tools --no-default-features --target aarch64-unknown-linux-gnu
pilot=target/debug/pilot
pilot_a64=target/aarch64-unknown-linux-gnu/debug/pilot
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/python scripts/make_models.py "$work/models" > /dev/null
for model in vision policy dmonitoring; do
  "$pilot" compile "$work/models/$model.onnx" --arch aarch64 -o "$work/$model.pkl" > /dev/null
  mkdir -p "$work/$model"
  .venv/bin/python scripts/check_aarch64.py "$pilot_a64" "$work/models/$model.onnx" "$work/$model.pkl" "$work/$model"
done
