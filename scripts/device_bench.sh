#!/usr/bin/env bash
# On a comma device (Adreno 630, /dev/kgsl-3d0, Qualcomm's libOpenCL): compile MODEL.onnx for the
# car as openpilot does (--target qcom --image --float16 --nolocals, binaries from the device's own
# compiler), then report load and step times through KGSL, with the seed's gates:
#   ALLOWED_KERNEL_COUNT, ALLOWED_READ_IMAGE, ALLOWED_GATED_READ_IMAGE   (compile, exact)
#   ASSERT_MIN_LOAD_TIME=s, ASSERT_MIN_STEP_TIME=ms                      (ceilings on the fastest load/step)
#   scripts/device_bench.sh MODEL.onnx [STEPS]       (or: just device-bench MODEL.onnx)
# Needs only a built `pilot` (PILOT=path, default target/release/pilot); no Python.
set -euo pipefail
model="${1:?usage: scripts/device_bench.sh MODEL.onnx [STEPS]}"
steps="${2:-100}"
pilot="${PILOT:-target/release/pilot}"
[ -x "$pilot" ] || cargo build --release --quiet -p pilot-tools
out="${OUT:-bench-out/device}"
mkdir -p "$out"
art="$out/$(basename "${model%.onnx}")-qcom.pkl"
"$pilot" compile "$model" --target qcom --image --float16 --nolocals -o "$art"
"$pilot" inspect "$art" | grep -E "target|step|images"
"$pilot" load "$art" --times 10 --verify
"$pilot" run "$art" --device qcom --steps "$steps" --benchmark-log "$out/steps.jsonl" | tail -3
python3 - "$out/steps.jsonl" <<'PY' 2>/dev/null || true
import json, statistics, sys
t = [json.loads(l)["wall_ms"] for l in open(sys.argv[1])]
print(f"step ms: best {min(t):.3f}, median {statistics.median(t):.3f} over {len(t)} steps")
PY
