"""Where ddddocr's `common.onnx` loses precision when tensors are stored as half: onnxruntime runs the
float model with chosen tensors rounded to float16 and back (Cast pairs for activations, rounded
initializers for weights), exactly what `--image --float16` stores as half images, and prints the worst
scaled error |got - ref| / max(1, |ref|) against the float model on the captcha-like input of
scripts/ocr_half_error.py: each convolution's weight or input alone, all convolutions, and the tail
(the LSTM's input and W, the Gemm head's input and weight).

Usage: .venv/bin/python scripts/ocr_half_sensitivity.py MODEL.onnx
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, __import__("os").path.dirname(__file__))
from ocr_half_error import captcha  # noqa: E402


def rounded(path, convs_w, convs_x, tail):
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    nodes, k = [], [0]

    def rw(name):
        a = numpy_helper.to_array(inits[name]).astype(np.float16).astype(np.float32)
        inits[name].CopyFrom(numpy_helper.from_array(a, name))

    def rx(name):
        k[0] += 1
        nodes.append(helper.make_node("Cast", [name], [f"h{k[0]}"], to=TensorProto.FLOAT16))
        nodes.append(helper.make_node("Cast", [f"h{k[0]}"], [f"f{k[0]}"], to=TensorProto.FLOAT))
        return f"f{k[0]}"

    ci = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            if ci in convs_w:
                rw(n.input[1])
            if ci in convs_x:
                n.input[0] = rx(n.input[0])
            ci += 1
        if tail and n.op_type in ("LSTM", "Gemm"):
            n.input[0] = rx(n.input[0])
            rw(n.input[1])
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def main(path):
    x = captcha(np.random.default_rng(7))
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"input1": x})[0]
    ref = run(onnx.load(path))
    err = lambda o: (np.abs(o - ref) / np.maximum(1, np.abs(ref))).max()
    n = sum(1 for node in onnx.load(path).graph.node if node.op_type == "Conv")
    every = set(range(n))
    for i in range(n):
        print(f"conv {i:2}: weight {err(run(rounded(path, {i}, set(), False))):.2e}, "
              f"input {err(run(rounded(path, set(), {i}, False))):.2e}")
    for label, w, xs, tail in [("every conv weight", every, set(), False), ("every conv input", set(), every, False),
                               ("every conv weight and input", every, every, False),
                               ("the tail (LSTM, Gemm)", set(), set(), True),
                               ("all of the above", every, every, True)]:
        print(f"{label}: {err(run(rounded(path, w, xs, tail))):.2e}")


if __name__ == "__main__":
    main(sys.argv[1])
