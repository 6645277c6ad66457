# pilot's task runner. Each recipe is a thin alias for a script, so the README's commands work
# on a machine without `just`.

# Install system packages and the Python venv.
setup:
    scripts/setup.sh

# Compile a model, check it against onnxruntime, inspect, load, run and gate it.
demo:
    scripts/demo.sh

# Every check CI runs.
test:
    scripts/test.sh

# Criterion benchmarks of the runtime, then pilot against tinygrad and onnxruntime (results in BENCHMARKS.md).
bench:
    cargo bench -p pilot-tests --bench load --bench step --bench cpu_dispatch
    scripts/bench.sh

# The OpenCL target on PoCL and the QCOM backend on the fake KGSL, per model and mode.
bench-gpu:
    scripts/bench_cl.sh
    scripts/bench_qcom.sh

# On a comma device: compile MODEL for the car, then load and step it through KGSL with the gates.
device-bench MODEL:
    scripts/device_bench.sh {{MODEL}}

# An AMD GPU over USB (DEVICE=usb+amd|usb:BUS-ADDR|sim): boot, load, step, with the 25 s / 50 ms gates on hardware.
usb-bench MODEL:
    scripts/usb_bench.sh {{MODEL}}

# Rewrite every committed generated file from its generator (the list: regen/src/lib.rs).
regen:
    cargo run -p pilot-regen

# The whole ONNX node manifest on every target from one build: the reference executor, the CPU (C), OpenCL
# (PoCL) and usb+amd on the simulated GPU (--device sim); prints each target's count (about 40 min on two
# cores with PoCL's cache cold). CI runs samples; run this once per change to the lowering.
conformance-all:
    PILOT_CONFORMANCE_CPU_ALL=1 PILOT_CONFORMANCE_CL_ALL=1 nice cargo test -p pilot-compiler --test onnx_node -- --nocapture --test-threads 1 manifest_cases_pass manifest_sample_passes_on_the_cpu_backend manifest_cases_pass_on_opencl
    PILOT_CONFORMANCE_AMD_ALL=1 nice cargo test -p pilot-compiler --test onnx_node_amd -- --nocapture manifest_cases_pass_on_the_simulated_amd_gpu

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings
