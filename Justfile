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
    cargo bench -p pilot-tests --bench load --bench step
    scripts/bench.sh

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings
