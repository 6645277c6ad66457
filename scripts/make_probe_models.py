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
  mobilenetv2.onnx MobileNetV2 at 224x224: inverted residuals with depthwise convolutions, ReLU6 as Clip,
                  unfolded BatchNormalization
  mixer.onnx      an MLP-Mixer-like net at 224x224: 16x16 patches (196 tokens of 256), 4 blocks of token mixing
                  through Transpose and channel mixing, GELU, LayerNorm
  densenet.onnx   a DenseNet-like net at 224x224: 3 dense blocks (growth 32) of growing Concat, AveragePool
                  transitions

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
from make_full_models import bn_const, classifier, gelu, layer_norm  # noqa: E402
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


def mobilenetv2():
    g = G()

    def cbr(x, cin, cout, k=1, s=1, group=1, act=True):
        y = bn_const(g, g.conv(x, cin, cout, k, s, group=group, bias=False), cout, 1e-5)
        return g.op("Clip", [y, g.const(0.0), g.const(6.0)]) if act else y

    x, cin = cbr("x", 3, 32, 3, 2), 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)]:
        for i in range(n):
            st, mid = (s if i == 0 else 1), cin * t
            y = cbr(x, cin, mid) if t != 1 else x
            y = cbr(cbr(y, mid, mid, 3, st, group=mid), mid, c, act=False)
            x, cin = (g.op("Add", [x, y]) if st == 1 and cin == c else y), c
    return classifier(g, cbr(x, 320, 1280), 1280, "mobilenetv2"), ["x=1x3x224x224"]


def mixer():
    g = G()
    p = g.op("Conv", ["x", g.init(w("patch", 256, 3, 16, 16)), g.init(w("patchb", 256, scale=0.1))],
             kernel_shape=[16, 16], strides=[16, 16])
    tokens = g.op("Reshape", [p, g.const(np.array([1, 256, 196], np.int64), np.int64)])
    x = g.op("Transpose", [tokens], perm=[0, 2, 1])  # (1, 196, 256)

    def dense(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.init(w(g.name("dw"), cin, cout))]),
                            g.init(w(g.name("db"), cout, scale=0.1))])

    for _ in range(4):
        y = g.op("Transpose", [layer_norm(g, x, 256, 1e-6)], perm=[0, 2, 1])  # (1, 256, 196)
        y = dense(gelu(g, dense(y, 196, 256)), 256, 196)
        x = g.op("Add", [x, g.op("Transpose", [y], perm=[0, 2, 1])])
        y = layer_norm(g, x, 256, 1e-6)
        x = g.op("Add", [x, dense(gelu(g, dense(y, 256, 1024)), 1024, 256)])
    x = g.op("ReduceMean", [layer_norm(g, x, 256, 1e-6)], axes=[1], keepdims=0)
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", 1000, 256)), g.init(w("fcb", 1000, scale=0.1))],
                                    ["logits"], transB=1, name="out"))
    return g.model([vi("x", [1, 3, 224, 224])], [vi("logits", [1, 1000])], name="mixer"), ["x=1x3x224x224"]


def densenet():
    g = G()
    stem = g.op("Relu", [bn_const(g, g.conv("x", 3, 64, 7, 2, bias=False), 64, 1e-5)])
    x, c = g.op("MaxPool", [stem], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4), 64
    for block, n in enumerate([4, 6, 8]):
        for _ in range(n):
            y = g.conv(g.op("Relu", [bn_const(g, x, c, 1e-5)]), c, 128, 1, bias=False)
            y = g.conv(g.op("Relu", [bn_const(g, y, 128, 1e-5)]), 128, 32, 3, bias=False)
            x, c = g.op("Concat", [x, y], axis=1), c + 32
        if block < 2:
            x, c = g.conv(g.op("Relu", [bn_const(g, x, c, 1e-5)]), c, c // 2, 1, bias=False), c // 2
            x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    return classifier(g, g.op("Relu", [bn_const(g, x, c, 1e-5)]), c, "densenet"), ["x=1x3x224x224"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for f in [resnet18, unet, shufflenet, dmon5, policy_ln, lstm_text, fpn_seg, audio1d, mobilenetv2, mixer,
              densenet]:
        model, pins = f()
        path = os.path.join(out, f"{f.__name__}.onnx")
        onnx.save(model, path)
        print(f.__name__, path, *[f"--shape {p}" for p in pins])


if __name__ == "__main__":
    main()
