"""Fetches a real int8 ONNX model for the quantized-model test and benchmark.

ddddocr 1.6.1 (MIT licence) ships `common_old.onnx`, a captcha OCR model quantized by onnxruntime's
`quantize_dynamic`: every convolution is DynamicQuantizeLinear + ConvInteger on uint8 activations and
weights (21 of them), then a DynamicQuantizeLSTM (an onnxruntime contrib op, outside standard ONNX)
and a MatMulInteger head. This script downloads the wheel with pip, takes the model out, and writes
its convolutional trunk (the standard-ONNX part: input image to the LSTM's input sequence) with the
image width pinned, as OUT (default target/models/ddddocr_int8_trunk.onnx).

Usage: .venv/bin/python scripts/fetch_quant_model.py [OUT]
"""
import os
import sys
import tempfile

import onnx
import onnx.utils

from wheel_member import extract

WHEEL = "ddddocr==1.6.1"
MEMBER = "ddddocr/common_old.onnx"
TRUNK_OUTPUT = "227"  # the DynamicQuantizeLSTM's input sequence
WIDTH = 128


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model = onnx.load(extract(WHEEL, MEMBER, tmp))
    dim = model.graph.input[0].type.tensor_type.shape.dim[3]
    dim.Clear()
    dim.dim_value = WIDTH
    trunk = onnx.utils.Extractor(model).extract_model(["input1"], [TRUNK_OUTPUT])
    trunk = onnx.shape_inference.infer_shapes(trunk)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp_out = out + ".tmp"
    onnx.save(trunk, tmp_out)
    os.replace(tmp_out, out)
    ops = sorted({n.op_type for n in trunk.graph.node})
    print(f"{out}: {len(trunk.graph.node)} nodes ({', '.join(ops)})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/models/ddddocr_int8_trunk.onnx")
