"""Builds the probe set (seeded, reproducible) into DIR: nets of families the CPU code generator was not
tuned on, to check that its speed carries over to models it has never seen (`bench_full.py --set probe`).

  resnet18.onnx   ResNet-18 at 224x224: 7x7 stem, max pooling, basic blocks, unfolded BatchNormalization
  unet.onnx       a U-Net at 256x256: 2x2 max pooling, ConvTranspose 2x2 upsampling, skip concatenations
  shufflenet.onnx ShuffleNetV2-like at 224x224: Split, depthwise stride-2 branches, channel shuffle
                  (Reshape, Transpose, Reshape)
  dmon5.onnx      a driver-monitoring-like net on a 384x512 gray frame with 5x5 stride-2 convolutions,
                  max pooling and global max pooling
  policy_ln.onnx  a policy-like MLP: a (1,100,256) history flattened into 512 features (26 MB), three
                  LayerNorm residual blocks 512 -> 2048 -> 512
  lstm_text.onnx  token embedding (Gather), a bidirectional ONNX LSTM over 64 steps, max over time, Gemm
  fpn_seg.onnx    a segmentation net at 384x384: stride-2 encoder, FPN with bilinear Resize, Softmax
  audio1d.onnx    1-D convolutions over (1,80,1000) frames: dilations 1..8, residual adds

Usage: .venv/bin/python scripts/make_probe_models.py DIR
Prints one line per model: NAME PATH --shape NAME=DIMS.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the graph builder and seeded weights)
from make_full_models import bn_const  # noqa: E402
from make_models import G, w  # noqa: E402


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def head(g, x, cin, classes):
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", classes, cin)), g.init(w("fcb", classes, scale=0.1))],
                                    ["y"], transB=1, name="out"))


def resnet18():
    g = G()
    x = g.op("Conv", ["x", g.init(w("stem", 64, 3, 7, 7))], kernel_shape=[7, 7], strides=[2, 2], pads=[3] * 4)
    x = g.op("MaxPool", [g.op("Relu", [bn_const(g, x, 64, 1e-5)])], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for cout, s in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
        y = g.op("Relu", [bn_const(g, g.conv(x, cin, cout, 3, s, bias=False), cout, 1e-5)])
        y = bn_const(g, g.conv(y, cout, cout, 3, 1, bias=False), cout, 1e-5)
        short = x if (s == 1 and cin == cout) else bn_const(g, g.conv(x, cin, cout, 1, s, bias=False), cout, 1e-5)
        x, cin = g.op("Relu", [g.op("Add", [y, short])]), cout
    head(g, x, 512, 1000)
    return g.model([vi("x", [1, 3, 224, 224])], [vi("y", [1, 1000])], name="resnet18"), ["x=1x3x224x224"]


def unet():
    g = G()

    def block(x, cin, cout):
        x = g.op("Relu", [bn_const(g, g.conv(x, cin, cout, 3, bias=False), cout, 1e-5)])
        return g.op("Relu", [bn_const(g, g.conv(x, cout, cout, 3, bias=False), cout, 1e-5)])

    x, skips, cin = "x", [], 3
    for c in [16, 32, 64, 128]:
        x = block(x, cin, c)
        skips.append(x)
        x, cin = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2]), c
    x, cin = block(x, 128, 256), 256
    for c in [128, 64, 32, 16]:
        x = g.op("ConvTranspose", [x, g.init(w(g.name("up"), cin, c, 2, 2)), g.init(w(g.name("upb"), c, scale=0.1))],
                 kernel_shape=[2, 2], strides=[2, 2])
        x, cin = block(g.op("Concat", [x, skips.pop()], axis=1), 2 * c, c), c
    g.nodes.append(helper.make_node("Sigmoid", [g.conv(x, 16, 2, 1)], ["y"], name="out"))
    return g.model([vi("x", [1, 3, 256, 256])], [vi("y", [1, 2, 256, 256])], name="unet"), ["x=1x3x256x256"]


def shufflenet():
    g = G()
    x = g.op("Relu", [bn_const(g, g.conv("x", 3, 24, 3, 2, bias=False), 24, 1e-5)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 24
    for cout, n, hw in [(116, 4, 28), (232, 8, 14), (464, 4, 7)]:
        half = cout // 2
        for i in range(n):
            if i == 0:
                keep = bn_const(g, g.conv(x, cin, cin, 3, 2, group=cin, bias=False), cin, 1e-5)
                keep = g.op("Relu", [bn_const(g, g.conv(keep, cin, half, 1, bias=False), half, 1e-5)])
                branch, c = x, cin
            else:
                keep, branch = g.op("Split", [x, g.const([half, half], np.int64)], n_out=2, axis=1)
                c = half
            y = g.op("Relu", [bn_const(g, g.conv(branch, c, half, 1, bias=False), half, 1e-5)])
            y = bn_const(g, g.conv(y, half, half, 3, 2 if i == 0 else 1, group=half, bias=False), half, 1e-5)
            y = g.op("Relu", [bn_const(g, g.conv(y, half, half, 1, bias=False), half, 1e-5)])
            x = g.op("Concat", [keep, y], axis=1)
            x = g.op("Transpose", [g.op("Reshape", [x, g.const([1, 2, half, hw, hw], np.int64)])], perm=[0, 2, 1, 3, 4])
            x, cin = g.op("Reshape", [x, g.const([1, cout, hw, hw], np.int64)]), cout
    head(g, g.op("Relu", [bn_const(g, g.conv(x, 464, 1024, 1, bias=False), 1024, 1e-5)]), 1024, 1000)
    return g.model([vi("x", [1, 3, 224, 224])], [vi("y", [1, 1000])], name="shufflenet"), ["x=1x3x224x224"]


def dmon5():
    g = G()
    x = "x"
    for cin, cout, k, s in [(1, 8, 5, 2), (8, 16, 3, 1), (16, 16, 5, 2), (16, 32, 3, 1), (32, 64, 3, 2), (64, 64, 3, 1),
                            (64, 128, 3, 2)]:
        x = g.op("Relu", [bn_const(g, g.conv(x, cin, cout, k, s, bias=False), cout)])
        if cout == 32:
            x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [g.op("GlobalMaxPool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", 40, 128)), g.init(w("fcb", 40, scale=0.1))], ["y"],
                                    transB=1, name="out"))
    return g.model([vi("x", [1, 1, 384, 512])], [vi("y", [1, 40])], name="dmon5"), ["x=1x1x384x512"]


def policy_ln():
    g = G()
    steps, feat = 100, 256
    x = g.op("Reshape", ["hist", g.const([1, steps * feat], np.int64)])
    x = g.op("Gemm", [x, g.init(w("h", 512, steps * feat)), g.init(w("hb", 512, scale=0.1))], transB=1)
    for _ in range(3):
        y = g.op("LayerNormalization", [x, g.const(np.ones(512)), g.const(np.zeros(512))], axis=-1)
        y = g.op("Relu", [g.op("Gemm", [y, g.init(w(g.name("a"), 2048, 512)), g.init(w(g.name("ab"), 2048, scale=0.1))],
                               transB=1)])
        y = g.op("Gemm", [y, g.init(w(g.name("b"), 512, 2048)), g.init(w(g.name("bb"), 512, scale=0.1))], transB=1)
        x = g.op("Add", [x, y])
    g.nodes.append(helper.make_node("MatMul", [x, g.init(w("plan", 512, 200))], ["y"], name="out"))
    return g.model([vi("hist", [1, steps, feat])], [vi("y", [1, 200])], name="policy_ln"), ["hist=1x100x256"]


def lstm_text():
    g = G()
    steps, emb, hidden = 64, 128, 256
    x = g.op("Transpose", [g.op("Gather", [g.init(w("emb", 5000, emb, scale=0.1)), "ids"], axis=0)], perm=[1, 0, 2])
    y = g.op("LSTM", [x, g.init(w("W", 2, 4 * hidden, emb)), g.init(w("R", 2, 4 * hidden, hidden)),
                      g.init(w("B", 2, 8 * hidden, scale=0.1))], n_out=3, hidden_size=hidden, direction="bidirectional")[0]
    y = g.op("Reshape", [g.op("Transpose", [y], perm=[2, 0, 1, 3]), g.const([1, steps, 2 * hidden], np.int64)])
    y = g.op("ReduceMax", [y], axes=[1], keepdims=0)
    g.nodes.append(helper.make_node("Gemm", [y, g.init(w("fc", 10, 2 * hidden)), g.init(w("fcb", 10, scale=0.1))],
                                    ["y"], transB=1, name="out"))
    return g.model([vi("ids", [1, steps], TensorProto.INT64)], [vi("y", [1, 10])], name="lstm_text"), ["ids=1x64"]


def fpn_seg():
    g = G()
    x, feats, cin = "x", [], 3
    for c in [16, 32, 64, 128]:
        x = g.op("Relu", [bn_const(g, g.conv(x, cin, c, 3, 2, bias=False), c)])
        x = g.op("Relu", [bn_const(g, g.conv(x, c, c, 3, 1, bias=False), c)])
        feats.append(x)
        cin = c
    p = g.conv(feats[-1], 128, 64, 1)

    def up(t):
        return g.op("Resize", [t, "", g.const([1, 1, 2, 2])], mode="linear", coordinate_transformation_mode="half_pixel")

    for f, c in zip(reversed(feats[:-1]), [64, 32, 16]):
        p = g.op("Add", [up(p), g.conv(f, c, 64, 1)])
    p = up(g.conv(g.op("Relu", [g.conv(p, 64, 64, 3)]), 64, 8, 1))
    g.nodes.append(helper.make_node("Softmax", [p], ["y"], axis=1, name="out"))
    return g.model([vi("x", [1, 3, 384, 384])], [vi("y", [1, 8, 384, 384])], name="fpn_seg"), ["x=1x3x384x384"]


def audio1d():
    g = G()
    x, cin = "x", 80
    for c, k, d in [(256, 5, 1), (256, 3, 2), (256, 3, 4), (256, 3, 8), (256, 3, 1)]:
        y = g.op("Conv", [x, g.init(w(g.name("w"), c, cin, k)), g.init(w(g.name("b"), c, scale=0.1))],
                 kernel_shape=[k], dilations=[d], pads=[d * (k // 2)] * 2)
        y = g.op("Relu", [bn_const(g, y, c)])
        x, cin = (g.op("Add", [x, y]) if cin == c else y), c
    g.nodes.append(helper.make_node("Conv", [x, g.init(w("head", 32, 256, 1)), g.init(w("headb", 32, scale=0.1))],
                                    ["y"], kernel_shape=[1], name="out"))
    return g.model([vi("x", [1, 80, 1000])], [vi("y", [1, 32, 1000])], name="audio1d"), ["x=1x80x1000"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for f in [resnet18, unet, shufflenet, dmon5, policy_ln, lstm_text, fpn_seg, audio1d]:
        model, pins = f()
        path = os.path.join(out, f"{f.__name__}.onnx")
        onnx.save(model, path)
        print(f.__name__, path, *[f"--shape {p}" for p in pins])


if __name__ == "__main__":
    main()
