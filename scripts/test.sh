#!/usr/bin/env bash
# Every check CI runs: setup, the dependency rule, formatting, lints, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# A test whose tool (clang-19, llvm-objdump-19, the venv, PoCL, the AMD firmware, qemu) is missing fails, not skips.
export PILOT_REQUIRE=1

# The runtime crates must never link protobuf/ONNX code (the dependency rule in ARCHITECTURE.md); nor may
# the C ABI and the Python module.
for crate in pilot-core pilot-qcom pilot-usb-bridge pilot-amd-codeobj pilot-amd pilot-rdna3 pilot-usb-sim pilot-capi pilot-python; do
  if cargo tree -p "$crate" -e normal --prefix none | grep -Eiq '^(prost|protobuf|onnx|pilot-compiler)'; then
    echo "dependency rule broken: $crate depends on protobuf/ONNX/compiler code" >&2
    cargo tree -p "$crate" -e normal -i prost 2>/dev/null || true
    exit 1
  fi
done

# The C ABI (and the Python module on it) stands on pilot-runtime, never on the command: no CLI crates.
if cargo tree -p pilot-capi -e normal --prefix none | grep -Eq '^(pilot-tools|clap|serde_json|env_logger) '; then
  echo "dependency rule broken: pilot-capi links the command's crates (pilot-tools, clap, serde_json, env_logger)" >&2
  exit 1
fi

# The on-device runtime is `pilot` without the compiler feature: no protobuf, no ONNX.
if cargo tree -p pilot-tools --no-default-features -e normal --prefix none | grep -Eiq '^(prost|protobuf|onnx|pilot-compiler|pilot-cl|cl3)'; then
  echo "dependency rule broken: pilot without default features links protobuf/ONNX/compiler/OpenCL code" >&2
  exit 1
fi
cargo build --quiet -p pilot-tools --no-default-features
# The compiler needs only the code-object reader of the AMD path: not the driver, the bridge or the simulator.
if cargo tree -p pilot-compiler -e normal --prefix none | grep -E '^pilot-(amd|usb-bridge|usb-sim|rdna3) '; then
  echo "dependency rule broken: the compiler depends on the AMD driver, the USB bridge, the simulator or the emulator" >&2
  exit 1
fi
# The bridge simulator and the RDNA3 emulator never reach the lean runtime (optional dependencies of pilot-tools
# behind its `sim` and `amd-emu` features).
if cargo tree -p pilot-tools --no-default-features -e normal --prefix none | grep -E '^pilot-(usb-sim|rdna3) '; then
  echo "dependency rule broken: pilot without default features contains the USB bridge simulator or the RDNA3 emulator" >&2
  exit 1
fi
# The USB transport (rusb with libusb built from source) must build for the comma device (the cross
# linker and C compiler are set in .cargo/config.toml).
cargo build --quiet --target aarch64-unknown-linux-gnu -p pilot-usb-bridge --features usb

# The runtime a comma device runs contains no fake, no simulator and no emulator: no symbol of pilot's crates has a
# path component naming one (`pilot_qcom::fake::FakeKgsl`, `pilot_qcom::fake_shader`, `..::sim::..`), nor is in the
# simulator's or the emulator's crate (`pilot_usb_sim::`, `pilot_rdna3::`), and it stays at most 2 MiB stripped. The
# same pattern must find each of them in a build that has them, so the check cannot pass vacuously.
fake_symbols() {
  nm -C "$1" |
    grep -Eio 'pilot_[a-z_]+(::[A-Za-z0-9_]+)*::(fake[A-Za-z0-9_]*|sim|sim_[A-Za-z0-9_]*|[A-Za-z0-9_]*_sim|simulator[A-Za-z0-9_]*|rdna3|emu_device)(::|\b)|\bpilot_(usb_sim|rdna3|a6xx_emu)::[A-Za-z0-9_]+' |
    sort -u || true
}
runtime_dir=$(mktemp -d)
trap 'rm -rf "$runtime_dir"' EXIT
cargo build --quiet --release -p pilot-tools --no-default-features --features fake-kgsl,sim,amd-emu
cp target/release/pilot "$runtime_dir/with-fake"
fake_symbols "$runtime_dir/with-fake" >"$runtime_dir/with-fake.symbols"
for expected in 'pilot_qcom::fake::FakeKgsl' 'pilot_usb_sim::' 'pilot_rdna3::'; do
  if ! grep -q "$expected" "$runtime_dir/with-fake.symbols"; then
    echo "fake-symbol check is blind: a build with --features fake-kgsl,sim,amd-emu shows no $expected symbol" >&2
    exit 1
  fi
done
cargo build --quiet --release -p pilot-tools --no-default-features
cp target/release/pilot "$runtime_dir/runtime"
leaked=$(fake_symbols "$runtime_dir/runtime")
if [ -n "$leaked" ]; then
  echo "the runtime-only pilot contains fake or simulator code:" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi
# The size is that of the build a comma device gets: the `runtime` profile (Cargo.toml: LTO, size-optimized).
cargo build --quiet --profile runtime -p pilot-tools --no-default-features
leaked=$(fake_symbols target/runtime/pilot)
if [ -n "$leaked" ]; then
  echo "the runtime-profile pilot contains fake or simulator code:" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi
strip -o "$runtime_dir/runtime.stripped" target/runtime/pilot
size=$(stat -c %s "$runtime_dir/runtime.stripped")
if [ "$size" -gt $((2 * 1024 * 1024)) ]; then
  echo "the runtime-only pilot (profile runtime) is $size bytes stripped, more than 2 MiB" >&2
  exit 1
fi
echo "runtime-only pilot: no fake or simulator symbols, $size bytes stripped (profile runtime)"
# `smi` (CI housekeeping) is not in the on-device binary: asked for, it says so in one line, exit 2.
set +e
smi_err=$(target/runtime/pilot smi nv rmmod --expect 2>&1 >/dev/null)
smi_rc=$?
set -e
if [ "$smi_rc" -ne 2 ] || [ "$(printf '%s\n' "$smi_err" | wc -l)" -ne 1 ] || ! grep -q 'without smi' <<<"$smi_err"; then
  echo "the runtime-only pilot should refuse smi in one line with exit 2; got exit $smi_rc: $smi_err" >&2
  exit 1
fi

# The C ABI and the Python module by default hold the real devices only: no fake, simulator or emulator symbol in
# libpilot_capi.so or in the wheel's extension. A control build with the opt-in devices must show each kind, so the
# check cannot pass vacuously.
cargo build --quiet -p pilot-capi --features fake-kgsl,sim,amd-emu
cp target/debug/libpilot_capi.so "$runtime_dir/capi-with-fakes.so"
control=$(fake_symbols "$runtime_dir/capi-with-fakes.so")
for want in 'pilot_qcom::fake::FakeKgsl' 'pilot_usb_sim::' 'pilot_rdna3::'; do
  if ! grep -qF "$want" <<<"$control"; then
    echo "fake-symbol check is blind: libpilot_capi with its opt-in devices shows no $want symbol" >&2
    exit 1
  fi
done
cargo build --quiet -p pilot-capi
leaked=$(fake_symbols target/debug/libpilot_capi.so)
if [ -n "$leaked" ]; then
  echo "the default libpilot_capi contains fake, simulator or emulator code:" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi
# The extension module inside a wheel (a zip), for fake_symbols.
wheel_extension() {
  rm -rf "$1/unpacked"
  .venv/bin/python -m zipfile -e "$1"/pilot-*.whl "$1/unpacked"
  local so
  so=$(ls "$1"/unpacked/pilot/_pilot*.so)
  [ -f "$so" ] || { echo "no pilot/_pilot*.so in the wheel in $1" >&2; exit 1; }
  echo "$so"
}
.venv/bin/python -c 'import maturin' 2>/dev/null \
  || .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
maturin build --quiet -m python/Cargo.toml -o "$runtime_dir/wheel-default"
wheel_so=$(wheel_extension "$runtime_dir/wheel-default")
leaked=$(fake_symbols "$wheel_so")
if [ -n "$leaked" ]; then
  echo "the default pilot wheel contains fake, simulator or emulator code:" >&2
  echo "$leaked" | head -20 >&2
  exit 1
fi
echo "default libpilot_capi and wheel: no fake, simulator or emulator symbols (the wheel's control is the test wheel)"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
PROPTEST_CASES="${PROPTEST_CASES:-4096}" cargo test --workspace --quiet

# The fakes are witnesses: a few of issue 15's planted QCOM bugs must each make a fake or cross-check test fail
# (the full table: scripts/mutate_qcom.py, TESTING.md).
python3 scripts/mutate_qcom.py --quick

# The embedding: the Python module (a wheel built by maturin, installed into .venv) and the C ABI, tested
# from pytest and from C against the command; the examples step the test models at 20 Hz.
.venv/bin/python -c 'import maturin, pytest' 2>/dev/null \
  || .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
cargo build --quiet -p pilot-tools
# The C ABI and the wheel the tests use have the devices of the desktop `pilot` (the tests step on the fake KGSL and
# compare error texts, device lists included, with the command's). capi alone, so it holds the runtime crates only.
test_devices=fake-kgsl,sim,amd-emu
cargo build --quiet -p pilot-capi --features "$test_devices"
rm -rf target/wheels
maturin build --quiet -m python/Cargo.toml -o target/wheels --features "$test_devices"
wheel_so=$(wheel_extension target/wheels)
if ! fake_symbols "$wheel_so" | grep -q 'pilot_qcom::fake::FakeKgsl'; then
  echo "fake-symbol check is blind: the wheel built with --features fake-kgsl shows no pilot_qcom::fake::FakeKgsl" >&2
  exit 1
fi
.venv/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall target/wheels/pilot-*.whl
.venv/bin/python -m pytest -q -p no:cacheprovider python/tests
mkdir -p target/embed-models
.venv/bin/python scripts/make_models.py target/embed-models > /dev/null
for m in vision policy; do target/debug/pilot compile target/embed-models/$m.onnx -o target/embed-models/$m.pkl > /dev/null; done
cc -std=c11 -Wall -Wextra -Werror -Icapi/include examples/run_model.c target/debug/libpilot_capi.a \
  -lpthread -ldl -lm -lrt -lutil -o target/embed-models/run_model
target/embed-models/run_model target/embed-models/policy.pkl 5
.venv/bin/python examples/modeld.py target/embed-models/vision.pkl target/embed-models/policy.pkl --frames 5

# The comma device's CPU path: the aarch64 runtime under qemu-user against onnxruntime.
scripts/aarch64.sh
