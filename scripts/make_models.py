"""Builds the openpilot-like and exporter-style test models (seeded, reproducible) into DIR.

  vision.onnx       uint8 camera planes (1,12,128,256) cast and normalized in the graph, a conv stem,
                    depthwise-separable blocks with Elu, a residual add, pooling and a dense head
  policy.onnx       a GRU-like recurrent policy over a (1,24,512) features buffer (MatMul/Sigmoid/Tanh
                    gates), desire and traffic convention inputs, output slices in metadata_props
  dmonitoring.onnx  a driver-monitoring conv net with unfolded BatchNormalization, MaxPool, Sigmoid
  exporter.onnx     PyTorch-style shape subgraphs (Shape/Gather/Unsqueeze/Concat/Reshape, Range,
                    ConstantOfShape, Expand) and dynamic dims (batch, h, w) pinned with --shape
  gru.onnx          the ONNX GRU operator over a short sequence
  grouped.onnx      grouped, depthwise and pointwise convolutions
  ocr.onnx          a ddddocr-style recognizer: conv trunk, bidirectional LSTM over 24 columns, logits

Usage: .venv/bin/python scripts/make_models.py DIR [--scale S]   (S multiplies channel widths)
"""
import base64
import os
import pickle
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
rng = np.random.default_rng(20261129)


def w(name, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
    return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}_{self.n}"

    def op(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def init(self, t):
        self.inits.append(t)
        return t.name

    def const(self, arr, dtype=np.float32):
        return self.init(numpy_helper.from_array(np.asarray(arr, dtype=dtype), self.name("c")))

    def conv(self, x, cin, cout, k=3, stride=1, group=1, bias=True):
        wn = self.init(w(self.name("w"), cout, cin // group, k, k))
        ins = [x, wn] + ([self.init(w(self.name("b"), cout, scale=0.1))] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)

    def model(self, inputs, outputs, props=None, name="m"):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pilot-tests")
        for k, v in (props or {}).items():
            m.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
        onnx.checker.check_model(m)
        return m


def vision(c):
    g = G()
    x = g.op("Cast", ["input_imgs"], to=TensorProto.FLOAT)
    x = g.op("Div", [x, g.const(255.0)])
    x = g.op("Sub", [x, g.const(0.5)])
    x = g.op("Elu", [g.conv(x, 12, 2 * c, 3, 2)])
    for _ in range(2):
        y = g.op("Elu", [g.conv(x, 2 * c, 2 * c, 3, 1, group=2 * c)])
        y = g.conv(y, 2 * c, 2 * c, 1)
        x = g.op("Elu", [g.op("Add", [x, y])])
    x = g.op("Elu", [g.conv(x, 2 * c, 4 * c, 3, 2)])
    x = g.op("Elu", [g.conv(x, 4 * c, 4 * c, 3, 1, group=4 * c)])
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.init(w("fc_w", 64, 4 * c)), g.init(w("fc_b", 64, scale=0.1))], transB=1)
    g.nodes.append(helper.make_node("Relu", [x], ["outputs"], name="out"))
    return g.model(
        [helper.make_tensor_value_info("input_imgs", TensorProto.UINT8, [1, 12, 128, 256])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 64])],
        name="vision",
    )


def policy(c):
    g = G()
    hidden = 32 * c
    feats = "features_buffer"
    # Summarize the features queue: mean over time plus the last entry.
    mean = g.op("ReduceMean", [feats], axes=[1], keepdims=0)
    last = g.op("Slice", [feats, g.const([23], np.int64), g.const([24], np.int64), g.const([1], np.int64)])
    last = g.op("Reshape", [last, g.const([1, 512], np.int64)])
    desire = g.op("Reshape", ["desire", g.const([1, 24 * 8], np.int64)])
    x = g.op("Concat", [mean, last, desire, "traffic_convention"], axis=1)
    inp = 512 + 512 + 24 * 8 + 2
    h = g.op("Tanh", [g.op("Gemm", [x, g.init(w("in_w", hidden, inp)), g.init(w("in_b", hidden, scale=0.1))], transB=1)])
    # A GRU-like cell over the last 4 queue entries, unrolled.
    for t in range(20, 24):
        xt = g.op("Gather", [feats, g.const(t, np.int64)], axis=1)
        xt = g.op("MatMul", [xt, g.init(w(g.name("wx"), 512, 3 * hidden))])
        hh = g.op("MatMul", [h, g.init(w(g.name("wh"), hidden, 3 * hidden))])
        xz, xr, xn = g.op("Split", [xt, g.const([hidden] * 3, np.int64)], n_out=3, axis=1)
        hz, hr, hn = g.op("Split", [hh, g.const([hidden] * 3, np.int64)], n_out=3, axis=1)
        z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
        r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
        n = g.op("Tanh", [g.op("Add", [xn, g.op("Mul", [r, hn])])])
        h = g.op("Add", [g.op("Mul", [g.op("Sub", [g.const(1.0), z]), n]), g.op("Mul", [z, h])])
    plan = g.op("MatMul", [h, g.init(w("plan_w", hidden, 33))])
    hidden_state = g.op("MatMul", [h, g.init(w("hs_w", hidden, 512))])
    g.nodes.append(helper.make_node("Concat", [plan, hidden_state], ["outputs"], axis=1, name="out"))
    slices = {"plan": slice(0, 33), "hidden_state": slice(33, 545)}
    props = {"output_slices": base64.b64encode(pickle.dumps(slices)).decode()}
    return g.model(
        [
            helper.make_tensor_value_info("desire", TensorProto.FLOAT, [1, 24, 8]),
            helper.make_tensor_value_info("traffic_convention", TensorProto.FLOAT, [1, 2]),
            helper.make_tensor_value_info("features_buffer", TensorProto.FLOAT, [1, 24, 512]),
        ],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 545])],
        props,
        name="policy",
    )


def dmonitoring(c):
    g = G()
    x = "input_img"

    def bn(x, ch):
        return g.op("BatchNormalization", [
            x,
            g.const(1.0 + 0.1 * rng.standard_normal(ch)),
            g.const(0.1 * rng.standard_normal(ch)),
            g.const(0.1 * rng.standard_normal(ch)),
            g.const(0.5 + rng.random(ch)),
        ], epsilon=1e-3)

    x = g.op("Relu", [bn(g.conv(x, 1, 2 * c, 3, 2, bias=False), 2 * c)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = g.op("Relu", [bn(g.conv(x, 2 * c, 4 * c, 3, 1, bias=False), 4 * c)])
    x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Relu", [bn(g.conv(x, 4 * c, 4 * c, 3, 1, bias=False), 4 * c)])
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x])
    x = g.op("Gemm", [x, g.init(w("fc", 4 * c, 16)), g.const(np.zeros(16))])
    calib = g.op("MatMul", ["calib", g.init(w("cw", 3, 16))])
    x = g.op("Add", [x, calib])
    g.nodes.append(helper.make_node("Sigmoid", [x], ["outputs"], name="out"))
    return g.model(
        [
            helper.make_tensor_value_info("input_img", TensorProto.FLOAT, [1, 1, 96, 160]),
            helper.make_tensor_value_info("calib", TensorProto.FLOAT, [1, 3]),
        ],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 16])],
        name="dmonitoring",
    )


def exporter(c):
    g = G()
    x = "x"
    shape = g.op("Shape", [x])
    n = g.op("Gather", [shape, g.const(0, np.int64)], axis=0)
    h = g.op("Gather", [shape, g.const(2, np.int64)], axis=0)
    wd = g.op("Gather", [shape, g.const(3, np.int64)], axis=0)
    hw = g.op("Mul", [h, wd])
    new_shape = g.op("Concat", [g.op("Unsqueeze", [n, g.const([0], np.int64)]), g.const([3], np.int64), g.op("Unsqueeze", [hw, g.const([0], np.int64)])], axis=0)
    flat = g.op("Reshape", [x, new_shape])
    t = g.op("Transpose", [flat], perm=[0, 2, 1])
    y = g.op("MatMul", [t, g.init(w("proj", 3, 8))])
    # Positional bias from Range, broadcast with Expand; ConstantOfShape for an all-ones gate.
    pos = g.op("Cast", [g.op("Range", [g.const(0, np.int64), hw, g.const(1, np.int64)])], to=TensorProto.FLOAT)
    pos = g.op("Unsqueeze", [g.op("Div", [pos, g.op("Cast", [hw], to=TensorProto.FLOAT)]), g.const([0, 2], np.int64)])
    full = g.op("Concat", [g.op("Unsqueeze", [n, g.const([0], np.int64)]), g.op("Unsqueeze", [hw, g.const([0], np.int64)]), g.const([8], np.int64)], axis=0)
    pos = g.op("Expand", [pos, full])
    ones = g.op("ConstantOfShape", [full], value=numpy_helper.from_array(np.array([1.0], np.float32)))
    y = g.op("Mul", [g.op("Add", [y, pos]), ones])
    y = g.op("Softmax", [y], axis=-1)
    g.nodes.append(helper.make_node("ReduceMax", [y], ["y"], axes=[1], keepdims=1, name="out"))
    return g.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1, 8])],
        name="exporter",
    )


def gru(c):
    g = G()
    hidden = 16
    wz = g.init(w("W", 1, 3 * hidden, 8))
    rz = g.init(w("R", 1, 3 * hidden, hidden))
    bz = g.init(w("B", 1, 6 * hidden, scale=0.1))
    y, yh = g.op("GRU", ["seq", wz, rz, bz], n_out=2, hidden_size=hidden, linear_before_reset=1)
    g.nodes.append(helper.make_node("Identity", [yh], ["h"], name="out"))
    return g.model(
        [helper.make_tensor_value_info("seq", TensorProto.FLOAT, [5, 1, 8])],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 1, hidden])],
        name="gru",
    )


def ocr(c):
    """A ddddocr-style captcha recognizer: a conv trunk over a grey image, its columns as a sequence into a
    bidirectional LSTM (state carried over 24 steps), per-step class logits."""
    g = G()
    x = g.op("Relu", [g.conv("image", 1, 4 * c, 3, 1)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Relu", [g.conv(x, 4 * c, 8 * c, 3, 1)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Relu", [g.conv(x, 8 * c, 16 * c, 3, 1)])
    x = g.op("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1])  # (1, 16c, 4, 24)
    x = g.op("Transpose", [x], perm=[3, 0, 1, 2])
    feats, hidden, steps = 16 * c * 4, 16 * c, 24
    x = g.op("Reshape", [x, g.const([steps, 1, feats], np.int64)])
    wl = g.init(w("lstm_W", 2, 4 * hidden, feats, scale=1.0 / np.sqrt(feats)))
    rl = g.init(w("lstm_R", 2, 4 * hidden, hidden, scale=2.0 / np.sqrt(hidden)))
    bl = g.init(w("lstm_B", 2, 8 * hidden, scale=0.1))
    y = g.op("LSTM", [x, wl, rl, bl], hidden_size=hidden, direction="bidirectional")
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.const([steps, 1, 2 * hidden], np.int64)])
    logits = g.op("MatMul", [y, g.init(w("cls_w", 2 * hidden, 37, scale=4.0 / np.sqrt(2 * hidden)))])
    g.nodes.append(helper.make_node("Add", [logits, g.init(w("cls_b", 37, scale=0.1))], ["logits"], name="out"))
    return g.model(
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 32, 96])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [steps, 1, 37])],
        name="ocr",
    )


def grouped(c):
    """Grouped convolutions whose groups span whole 4-channel pixels, then depthwise and pointwise."""
    g = G()
    x = g.op("Relu", [g.conv("x", 4 * c, 4 * c, 3, 1, group=2)])
    x = g.op("Elu", [g.conv(x, 4 * c, 4 * c, 3, 2, group=4)])
    x = g.op("Relu", [g.conv(x, 4 * c, 4 * c, 3, 1, group=4 * c)])
    x = g.conv(x, 4 * c, 8, 1, 1)
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", 8, 8)), g.const(np.zeros(8))], ["y"], name="out"))
    return g.model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4 * c, 24, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        name="grouped",
    )


def main():
    out = sys.argv[1]
    scale = int(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 4
    os.makedirs(out, exist_ok=True)
    for name, f in [("vision", vision), ("policy", policy), ("dmonitoring", dmonitoring), ("exporter", exporter), ("gru", gru),
                    ("grouped", grouped), ("ocr", ocr)]:
        onnx.save(f(scale), os.path.join(out, f"{name}.onnx"))
    print(f"models in {out}")


if __name__ == "__main__":
    main()
