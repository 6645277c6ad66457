#!/usr/bin/env bash
# The USB GPU benchmark: compile MODEL.onnx for an AMD GPU behind the ASM2464PD bridge (--target usb+amd, ARCH
# gfx1100 or gfx1201), then on DEVICE boot it, load the artifact and step it.
#   DEVICE=usb+amd (default: the first bridge) | usb:BUS-ADDR | sim (the simulated bridge and GPU)
#   Hardware gates, as openpilot's CI sets them: ASSERT_MIN_LOAD_TIME=s (default 25), ASSERT_MIN_STEP_TIME=ms
#   (default 50), ceilings on the fastest load / step. AM_RESET=1 forces a full boot (mode-1 reset if running).
#   On sim the times are modelled, not measured: it reports USB transactions, bytes and host time per step and
#   the modelled boot, load and step times, and applies no gate.
#   scripts/usb_bench.sh MODEL.onnx [STEPS]       (or: just usb-bench MODEL.onnx)
# Needs a built `pilot` (PILOT=path, default target/release/pilot) and the AMD firmware (PILOT_AMD_FIRMWARE or
# /lib/firmware/amdgpu; scripts/fetch_amd_firmware.sh fetches it).
set -euo pipefail
model="${1:?usage: scripts/usb_bench.sh MODEL.onnx [STEPS]}"
steps="${2:-20}"
arch="${ARCH:-gfx1100}"
device="${DEVICE:-usb+amd}"
pilot="${PILOT:-target/release/pilot}"
[ -x "$pilot" ] || cargo build --release --quiet -p pilot-tools
out="${OUT:-bench-out/usb}"
mkdir -p "$out"
art="$out/$(basename "${model%.onnx}")-$arch.pkl"
"$pilot" compile "$model" --target usb+amd --arch "$arch" -o "$art"
"$pilot" inspect "$art" | grep -E "target|step" || true
if [ "$device" = sim ]; then
  gates_load=() gates_step=()
else
  gates_load=(--assert-min-load-time "${ASSERT_MIN_LOAD_TIME:-25}")
  gates_step=(--assert-min-step-time "${ASSERT_MIN_STEP_TIME:-50}")
fi
"$pilot" load "$art" --device "$device" --times "${LOAD_TIMES:-3}" "${gates_load[@]}"
"$pilot" run "$art" --device "$device" --steps "$steps" --benchmark-log "$out/steps.jsonl" "${gates_step[@]}" | tail -4
python3 - "$out/steps.jsonl" <<'PY' 2>/dev/null || true
import json, statistics, sys
t = [json.loads(l)["wall_ms"] for l in open(sys.argv[1])]
print(f"host step ms: best {min(t):.3f}, median {statistics.median(t):.3f} over {len(t)} steps")
PY
