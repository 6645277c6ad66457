#!/usr/bin/env bash
# The sha256 of every test model's artifact for every target, so a refactoring can show its output bytes unchanged:
# run it with the pilot binary built before and after, and diff the two SHA256SUMS files.
#   scripts/artifact_hashes.sh PILOT OUT_DIR      (writes OUT_DIR/models/*.onnx, OUT_DIR/*.pkl, OUT_DIR/SHA256SUMS)
# Targets: cpu (x86_64), cl (a630), qcom (--qcom-compiler fake), usb+amd (gfx1100 and gfx1201). Exit 1 when a
# compile fails (its error is in OUT_DIR/NAME.pkl.err).
set -euo pipefail
# CPU artifacts carry the register-tile shapes timed on this machine; the default shapes make them comparable.
export PILOT_CPU_TUNE=0
[ $# -eq 2 ] || { echo "usage: $0 PILOT OUT_DIR" >&2; exit 2; }
pilot=$(realpath "$1")
out=$2
cd "$(dirname "$0")/.."
mkdir -p "$out/models"
.venv/bin/python scripts/make_models.py "$out/models" >/dev/null
failed=0
for model in "$out"/models/*.onnx; do
  name=$(basename "$model" .onnx)
  shape=()
  [ "$name" = exporter ] && shape=(--shape x=2x3x8x12)  # the pins tests/tests/models.rs uses
  for target in cpu:x86_64 cl:a630 qcom: usb+amd:gfx1100 usb+amd:gfx1201; do
    backend=${target%%:*} arch=${target#*:}
    opts=(--target "$backend")
    if [ -n "$arch" ]; then opts+=(--arch "$arch"); else opts+=(--qcom-compiler fake); fi
    artifact="$out/$name.${backend/+/-}.${arch:-fake}.pkl"
    if ! "$pilot" compile "$model" "${opts[@]}" "${shape[@]}" -o "$artifact" >/dev/null 2>"$artifact.err"; then
      echo "$name --target $backend ${arch:+--arch $arch}: $(tail -1 "$artifact.err")" >&2
      failed=1
    fi
  done
done
(cd "$out" && sha256sum -- *.pkl >SHA256SUMS)
exit $failed
