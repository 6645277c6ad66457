#!/usr/bin/env bash
# Installs what pilot's demo and tests need on a fresh Debian machine; idempotent and quiet when done.
#   system: a C compiler (kernels), clang-19 + lld-19 (cross-compiled aarch64 kernels, AMD code objects),
#           llvm-19 (llvm-objdump/llvm-readelf cross-checks of AMD code objects), python3-venv,
#           PoCL with the OpenCL ICD loader (the `cl` target's kernels run on it in tests),
#           the aarch64 cross linker and qemu-user (the comma device's runtime, run here)
#   rustup: the aarch64-unknown-linux-gnu standard library
#   .venv:  numpy, onnx, onnxruntime (reference outputs and interop checks)
#   target/amd-firmware: AMD GPU firmware files (apt-get download + dpkg -x, nothing installed)
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need_apt=()
command -v cc >/dev/null || need_apt+=(gcc)
command -v clang-19 >/dev/null || need_apt+=(clang-19)
command -v ld.lld-19 >/dev/null || need_apt+=(lld-19)
command -v llvm-objdump-19 >/dev/null || need_apt+=(llvm-19)  # usb+amd tests: llvm-objdump-19, llvm-readelf-19
python3 -c 'import ensurepip' 2>/dev/null || need_apt+=(python3-venv)
[ -e /etc/OpenCL/vendors/pocl.icd ] || need_apt+=(pocl-opencl-icd)
ldconfig -p | grep -q 'libOpenCL.so.1' || need_apt+=(ocl-icd-libopencl1)
command -v aarch64-linux-gnu-gcc >/dev/null || need_apt+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || need_apt+=(qemu-user-static)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_apt[@]}" >/dev/null
fi

rustup target list --installed | grep -q '^aarch64-unknown-linux-gnu$' \
  || rustup target add aarch64-unknown-linux-gnu >/dev/null

# tinygrad is the peer the QCOM tables are checked against (qcom/tests/peer_tables.rs).
if ! .venv/bin/python -c 'import numpy, onnx, onnxruntime, tinygrad' 2>/dev/null; then
  echo "setup: installing numpy, onnx, onnxruntime, tinygrad into .venv" >&2
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements.txt
fi

# ddddocr 1.6.1's float CNN + LSTM recognizer (54 MB, from its PyPI wheel) for tests/tests/ocr_model.rs.
.venv/bin/python scripts/fetch_ocr_model.py target/models/ddddocr_common.onnx

# The real AMD GPU firmware (Debian trixie firmware-amd-graphics) for amd/tests/firmware_real.rs.
scripts/fetch_amd_firmware.sh

# Mesa's ir3 compiler (Debian trixie's source, built once) behind pilot's shim, for
# `--qcom-compiler ir3`, and Mesa's ir3-disasm and cffdump, the witnesses the QCOM tests run.
scripts/build_mesa.sh
# Mesa's ir3 assembler built against it: the independent encoder of the a6xx emulator's tests.
scripts/build_ir3_asm.sh
