"""The Python step overhead over pilot's own step, and tinygrad's pickle runner on the same model, in one run.

    .venv/bin/python examples/bench_overhead.py MODEL.onnx MODEL.pkl [--steps 2000]

pilot: `model.step()` timed from Python against the step time pilot measures inside (enqueue to outputs
back, `model.stats["last_ms"]`), per step; the difference is what the Python module adds (the call, the
GIL release and re-acquire, the model lock). Run on the `null` device too (a step that does no work) and on
the CPU (1 thread). tinygrad 0.14.0 (DEV=CPU:LLVM): compile3's TinyJit on the same ONNX, pickled and loaded
back as modeld loads it, called with the same inputs and read back with `.numpy()` as modeld does.
Prints one markdown table.
"""

import os
import pickle
import statistics
import sys
import time

import numpy as np

import pilot


def pilot_times(pkl, device, steps):
    model = pilot.load(pkl, device=device, threads=1)
    rng = np.random.default_rng(0)
    for view in model.inputs.values():
        view[...] = rng.integers(0, 256, view.shape) if view.dtype == np.uint8 else rng.standard_normal(view.shape)
    for _ in range(20):
        model.step()
    step, raw = model.step, model._raw
    wall, overhead = [], []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        dt = (time.perf_counter() - t) * 1e3
        inner = raw.stats()[1]
        wall.append(dt)
        overhead.append((dt - inner) * 1e3)
    return statistics.median(wall), statistics.median(overhead)


def tinygrad_times(onnx_path, pkl, steps):
    os.environ.setdefault("DEV", "CPU:LLVM")
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner

    model = pilot.load(pkl, device="null")
    rng = np.random.default_rng(0)
    feeds = {n: (rng.integers(0, 256, v.shape, dtype=np.uint8) if v.dtype == np.uint8
                 else rng.standard_normal(v.shape).astype(v.dtype)) for n, v in model.inputs.items()}
    runner = OnnxRunner(onnx_path)

    @TinyJit
    def run(**xs):
        return next(iter(runner(xs).values())).cast("float32").contiguous().realize()

    tensors = {n: Tensor(v).realize() for n, v in feeds.items()}
    for _ in range(3):  # compile3: plain run, capture, replay
        run(**tensors).numpy()
    run = pickle.loads(pickle.dumps(run))  # the pickle runner, as modeld loads it
    for _ in range(20):
        run(**tensors).numpy()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        run(**tensors).numpy()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    onnx_path, pkl = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 2000
    null_wall, null_over = pilot_times(pkl, "null", steps)
    cpu_wall, cpu_over = pilot_times(pkl, "cpu", steps // 10)
    print(f"| {os.path.basename(pkl)} | median | Python overhead over pilot's own step |")
    print("|---|---|---|")
    print(f"| pilot, null device, `model.step()` | {null_wall * 1e3:.2f} µs | {null_over:.2f} µs |")
    print(f"| pilot, CPU 1 thread, `model.step()` | {cpu_wall:.4f} ms | {cpu_over:.2f} µs |")
    try:
        tg = tinygrad_times(onnx_path, pkl, steps // 10)
        print(f"| tinygrad 0.14.0 pickle runner, CPU:LLVM, `run(**inputs).numpy()` | {tg:.4f} ms | |")
    except Exception as e:  # reported, not hidden: the table says why there is no tinygrad row
        print(f"| tinygrad pickle runner | failed: {type(e).__name__}: {str(e).splitlines()[0][:120]} | |")


if __name__ == "__main__":
    main()
