"""Writes a small QOperator int8 model (as onnxruntime's static quantizer emits them) to OUT:
QuantizeLinear (uint8) -> QLinearConv (int8 weights, one scale per output channel, int32 bias) ->
QLinearConv (depthwise, stride 2) -> QLinearMatMul (int8 weights) -> DequantizeLinear.

The int8 weights use 7 bits ([-64, 63]), as onnxruntime's quantizer does with reduce_range=True: on x86
without VNNI onnxruntime's u8s8 kernels add pairs of products in int16 with saturation (vpmaddubsw), so full-range
weights make the reference itself depart from the ONNX definition, which pilot follows exactly.

Usage: .venv/bin/python scripts/make_qop_model.py OUT.onnx
"""
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import checker, helper as h, numpy_helper as nh


def main(out: str) -> None:
    rng = np.random.default_rng(7)
    init = []

    def const(name, value):
        init.append(nh.from_array(np.asarray(value), name))
        return name

    const("x_scale", np.float32(2.0 / 255))
    const("x_zp", np.uint8(128))
    const("w1", rng.integers(-64, 64, (16, 8, 3, 3), dtype=np.int8))
    const("w1_scale", (rng.random(16, dtype=np.float32) * 0.004 + 0.001).astype(np.float32))
    const("w1_zp", np.zeros(16, np.int8))
    const("b1", rng.integers(-2000, 2000, 16, dtype=np.int32))
    const("y1_scale", np.float32(0.05))
    const("y1_zp", np.uint8(100))
    const("w2", rng.integers(-64, 64, (16, 1, 3, 3), dtype=np.int8))
    const("w2_scale", np.float32(0.004))
    const("w2_zp", np.int8(0))
    const("y2_scale", np.float32(0.04))
    const("y2_zp", np.uint8(120))
    const("w3", rng.integers(-64, 64, (8, 10), dtype=np.int8))
    const("w3_scale", np.float32(0.003))
    const("w3_zp", np.int8(0))
    const("y3_scale", np.float32(0.03))
    const("y3_zp", np.uint8(128))
    nodes = [
        h.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        h.make_node(
            "QLinearConv",
            ["xq", "x_scale", "x_zp", "w1", "w1_scale", "w1_zp", "y1_scale", "y1_zp", "b1"],
            ["y1"],
            pads=[1, 1, 1, 1],
        ),
        h.make_node(
            "QLinearConv",
            ["y1", "y1_scale", "y1_zp", "w2", "w2_scale", "w2_zp", "y2_scale", "y2_zp"],
            ["y2"],
            group=16,
            strides=[2, 2],
            pads=[1, 1, 1, 1],
        ),
        h.make_node(
            "QLinearMatMul", ["y2", "y2_scale", "y2_zp", "w3", "w3_scale", "w3_zp", "y3_scale", "y3_zp"], ["y3"]
        ),
        h.make_node("DequantizeLinear", ["y3", "y3_scale", "y3_zp"], ["y"]),
    ]
    graph = h.make_graph(
        nodes,
        "qop",
        [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 16, 16])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 8, 10])],
        init,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    checker.check_model(model)
    with open(out, "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1])
