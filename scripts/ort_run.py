"""Runs MODEL.onnx with onnxruntime (one thread) on .npy inputs and writes every output as .npy.

Usage: .venv/bin/python scripts/ort_run.py MODEL.onnx OUTDIR NAME=IN.npy ...
Output files are OUTDIR/<k>.npy for the k-th graph output.
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    model, out = sys.argv[1], sys.argv[2]
    feeds = {}
    for arg in sys.argv[3:]:
        name, path = arg.split("=", 1)
        feeds[name] = np.load(path)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    os.makedirs(out, exist_ok=True)
    for k, v in enumerate(sess.run(None, feeds)):
        np.save(os.path.join(out, f"{k}.npy"), np.ascontiguousarray(v))


if __name__ == "__main__":
    main()
