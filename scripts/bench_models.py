"""Times onnxruntime (1 thread) and tinygrad 0.14.0 (DEV=CPU:LLVM, compile3-style TinyJit) on a model.

Usage: .venv/bin/python scripts/bench_models.py MODEL.onnx {ort,tinygrad} [--steps 50] [NAME=1x2x3 ...]
Prints one JSON line: {"framework", "model", "compile_s", "step_ms_median", "step_ms_min", "steps"}.
tinygrad's compile time is compile3's: the plain run, the JIT capture run and the first replay.
"""
import json
import os
import statistics
import sys
import time

import numpy as np


def inputs_for(model_path, pins):
    import onnx

    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        shape = pins.get(i.name) or [d.dim_value for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if dtype == np.uint8:
            feeds[i.name] = rng.integers(0, 256, size=shape, dtype=np.uint8)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def bench_ort(model, feeds, steps):
    import onnxruntime as ort

    st = time.perf_counter()
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
    s.run(None, feeds)
    compile_s = time.perf_counter() - st
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        s.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return compile_s, times


def pinned_model(model, pins):
    """A copy of `model` with the pinned inputs' dimensions fixed: tinygrad's OnnxRunner refuses a
    dynamic dimension (-1) even when the fed array has a definite shape."""
    import tempfile

    import onnx

    m = onnx.load(model)
    for i in m.graph.input:
        if i.name in pins:
            for d, v in zip(i.type.tensor_type.shape.dim, pins[i.name]):
                d.ClearField("dim_param")
                d.dim_value = v
    path = os.path.join(tempfile.mkdtemp(prefix="pilot-bench-"), os.path.basename(model))
    onnx.save(m, path)
    return path


def bench_tinygrad(model, feeds, steps):
    os.environ.setdefault("DEV", "CPU:LLVM")
    import shutil
    import tempfile

    if shutil.which("clang") is None and shutil.which("clang-19"):
        # tinygrad runs `clang` by that name; scripts/setup.sh installs clang-19 only.
        shim = tempfile.mkdtemp(prefix="pilot-clang-")
        os.symlink(shutil.which("clang-19"), os.path.join(shim, "clang"))
        os.environ["PATH"] = shim + os.pathsep + os.environ["PATH"]
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner

    st = time.perf_counter()
    runner = OnnxRunner(model)
    names = list(feeds)

    @TinyJit
    def run(*xs):
        return next(iter(runner(dict(zip(names, xs))).values())).cast("float32").contiguous().realize()

    tensors = [Tensor(v).realize() for v in feeds.values()]
    for _ in range(3):  # compile3: plain run, capture, replay
        run(*tensors).numpy()
    compile_s = time.perf_counter() - st
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        run(*tensors).numpy()
        times.append((time.perf_counter() - t) * 1e3)
    return compile_s, times


def main():
    model, fw = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    pins = {}
    for a in sys.argv[3:]:
        if "=" in a:
            n, d = a.split("=", 1)
            pins[n] = [int(x) for x in d.split("x")]
    feeds = inputs_for(model, pins)
    if fw == "tinygrad" and pins:
        model = pinned_model(model, pins)
    compile_s, times = (bench_ort if fw == "ort" else bench_tinygrad)(model, feeds, steps)
    print(json.dumps({
        "framework": fw, "model": os.path.basename(model), "compile_s": round(compile_s, 4),
        "step_ms_median": round(statistics.median(times), 4), "step_ms_min": round(min(times), 4), "steps": steps,
    }))


if __name__ == "__main__":
    main()
