#!/usr/bin/env bash
# The OpenCL target on this machine's OpenCL device (PoCL in CI): per model and mode (plain,
# --image, --image --float16, each with --nolocals timing the local sizes), the kernel count, the
# seed's read_image gates and the median step time. Prints a markdown table for BENCHMARKS.md.
#   scripts/bench_cl.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
steps="${1:-30}"
mkdir -p bench-out/models
cargo build --release --quiet -p pilot-tools
pilot=target/release/pilot
.venv/bin/python scripts/make_models.py bench-out/models > /dev/null

median() { python3 -c 'import json,statistics,sys; print(round(statistics.median(json.loads(l)["wall_ms"] for l in open(sys.argv[1])), 3))' "$1"; }

echo "| model | mode | kernels | read_image | gated | compile s | step ms (median of $steps) |"
echo "|---|---|---|---|---|---|---|"
for m in vision policy dmonitoring; do
  for mode in "plain:" "image:--image" "image+float16:--image --float16"; do
    name="${mode%%:*}"; flags="${mode#*:}"
    art="bench-out/$m-cl-${name/+/-}.pkl"
    st=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$pilot" compile "bench-out/models/$m.onnx" --target cl $flags --nolocals -o "$art" > /dev/null
    cs=$(python3 -c "print(round($(date +%s.%N) - $st, 2))")
    "$pilot" run "$art" --device cl --steps "$steps" --benchmark-log "bench-out/$m-cl.jsonl" > /dev/null
    ms=$(median "bench-out/$m-cl.jsonl")
    "$pilot" inspect --json "$art" | python3 -c "import json,sys; d=json.load(sys.stdin); print('| $m | $name |', d['kernel_count'], '|', d['read_image'], '|', d['gated_read_image'], '| $cs | $ms |')"
  done
done
