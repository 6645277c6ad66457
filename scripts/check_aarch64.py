"""Runs an `--arch aarch64` artifact with the aarch64 runtime under qemu-user and checks its outputs
against onnxruntime on the same seeded inputs (scaled error <= 1e-4, as `pilot compile --selftest`).

Usage: .venv/bin/python scripts/check_aarch64.py PILOT_AARCH64 MODEL.onnx ARTIFACT.pkl WORKDIR [--shape NAME=DIMS ...]
(`--shape` gives an input's dimensions where the model leaves them symbolic, as `pilot compile --shape` does.)
Exit 0 when every output matches, 1 otherwise (the worst error is printed either way).
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

QEMU = ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"]


def seeded_inputs(model, workdir, pins):
    rng = np.random.default_rng(7)
    feeds = {}
    for value in model.graph.input:
        t = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = pins.get(value.name) or [d.dim_value for d in t.shape.dim]
        if np.issubdtype(dtype, np.integer):
            data = rng.integers(0, 256 if dtype == np.uint8 else 8, size=shape).astype(dtype)
        else:
            data = rng.standard_normal(shape).astype(dtype)
        feeds[value.name] = data
        np.save(os.path.join(workdir, f"in_{len(feeds)}.npy"), data)
    return feeds


def main():
    pilot, model_path, artifact, workdir = sys.argv[1:5]
    extra = sys.argv[5:]
    if len(extra) % 2 or any(flag != "--shape" for flag in extra[::2]):
        sys.exit(__doc__)
    pins = {name: [int(d) for d in dims.split("x")] for name, dims in (p.split("=", 1) for p in extra[1::2])}
    model = onnx.load(model_path)
    feeds = seeded_inputs(model, workdir, pins)
    args = [a for k, name in enumerate(feeds, 1) for a in ("--input", f"{name}={workdir}/in_{k}.npy")]
    outdir = os.path.join(workdir, "outputs")
    subprocess.run(QEMU + [pilot, "run", artifact, "--steps", "2", "--threads", "1", "--save-outputs", outdir] + args,
                   check=True, stdout=subprocess.DEVNULL)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    worst = 0.0
    for out, ref in zip(model.graph.output, sess.run(None, feeds)):
        got = np.load(os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", out.name) + ".npy"))
        if got.shape != ref.shape or got.dtype != ref.dtype:
            print(f"{out.name}: got {got.dtype}{got.shape}, onnxruntime {ref.dtype}{ref.shape}")
            return 1
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        err = np.max(np.abs(got64 - ref64) / np.maximum(1.0, np.abs(ref64)), initial=0.0)
        worst = max(worst, float(err))
    print(f"{os.path.basename(model_path)}: aarch64 under qemu vs onnxruntime: scaled error {worst:.2e}")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
