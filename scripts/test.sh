#!/usr/bin/env bash
# Every check CI runs: setup, the dependency rule, formatting, lints, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

# core, qcom and usbgpu must never link protobuf/ONNX code (the dependency rule in ARCHITECTURE.md).
for crate in pilot-core pilot-qcom pilot-usbgpu; do
  if cargo tree -p "$crate" -e normal --prefix none | grep -Eiq '^(prost|protobuf|onnx|pilot-compiler)'; then
    echo "dependency rule broken: $crate depends on protobuf/ONNX/compiler code" >&2
    cargo tree -p "$crate" -e normal -i prost 2>/dev/null || true
    exit 1
  fi
done

# The on-device runtime is `pilot` without the compiler feature: no protobuf, no ONNX.
if cargo tree -p pilot-tools --no-default-features -e normal --prefix none | grep -Eiq '^(prost|protobuf|onnx|pilot-compiler|pilot-cl|cl3)'; then
  echo "dependency rule broken: pilot without default features links protobuf/ONNX/compiler/OpenCL code" >&2
  exit 1
fi
cargo build --quiet -p pilot-tools --no-default-features
# The bridge simulator never reaches the lean runtime.
if cargo tree -p pilot-tools --no-default-features -e normal --prefix none -f '{p} {f}' | grep -E '^pilot-usbgpu .*\bsim\b'; then
  echo "dependency rule broken: pilot without default features contains the USB bridge simulator" >&2
  exit 1
fi
# The USB transport (rusb with libusb built from source) must build for the comma device (the cross
# linker and C compiler are set in .cargo/config.toml).
cargo build --quiet --target aarch64-unknown-linux-gnu -p pilot-usbgpu

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
PILOT_CL_REQUIRE=1 PROPTEST_CASES="${PROPTEST_CASES:-4096}" cargo test --workspace --quiet

# The comma device's CPU path: the aarch64 runtime under qemu-user against onnxruntime.
scripts/aarch64.sh
