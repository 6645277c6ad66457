#!/usr/bin/env bash
# Compile time against model size: chains of N Adds (y = ((x + x) + x) + ...), compiled for the
# null target with the release build, printed as a markdown table with the time per node. The time
# per node must stay roughly flat as N doubles (near-linear compile time); it once grew with N
# (10k nodes 3.2 s, 40k nodes 46 s).
#   scripts/compile_scaling.sh [N...]   (default: 5000 10000 20000 40000)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-5000 10000 20000 40000}")
read -r -a sizes <<< "${sizes[*]}"
cargo build --release --quiet -p pilot-tools
out=target/compile-scaling
mkdir -p "$out"
echo "| Add nodes | kernels | compile s | µs per node |"
echo "|---|---|---|---|"
for n in "${sizes[@]}"; do
  .venv/bin/python - "$n" "$out/chain$n.onnx" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
n, path = int(sys.argv[1]), sys.argv[2]
nodes, prev = [], "x"
for i in range(n):
    out = "y" if i == n - 1 else f"v{i}"
    nodes.append(helper.make_node("Add", [prev, "x"], [out], name=f"add{i}"))
    prev = out
vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 16])
m = helper.make_model(helper.make_graph(nodes, "chain", [vi("x")], [vi("y")]),
                      opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, path)
PY
  st=$(date +%s.%N)
  kernels=$(target/release/pilot compile "$out/chain$n.onnx" -o "$out/chain$n.pkl" --target null | awk '/^kernels/ {print $2}')
  s=$(python3 -c "print(round($(date +%s.%N) - $st, 2))")
  echo "| $n | $kernels | $s | $(python3 -c "print(round($s * 1e6 / $n))") |"
done
