"""Fetches a real float CNN + LSTM OCR recognizer for the half-precision model test.

ddddocr 1.6.1 (MIT licence, https://github.com/sml2h3/ddddocr) ships `common.onnx`, its float captcha
recognizer (54 MB, exported by PyTorch at opset 12): 21 convolutions with Sigmoid-gated activations, a
bidirectional LSTM of 512 hidden units per direction and a Gemm head over 8210 characters, on a grey
image of height 64 and dynamic width (ddddocr resizes a captcha to height 64 keeping its aspect ratio;
the logits are [width / 8, 1, 8210]). Too big to commit: this script downloads the wheel with pip,
checks the member's SHA-256 and writes it unchanged as OUT (default target/models/ddddocr_common.onnx).
Nothing is done (or printed) when OUT already holds the right bytes.

Usage: .venv/bin/python scripts/fetch_ocr_model.py [OUT]
"""
import hashlib
import os
import shutil
import sys
import tempfile

from wheel_member import extract

WHEEL = "ddddocr==1.6.1"
MEMBER = "ddddocr/common.onnx"
SHA256 = "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8"


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(out: str) -> None:
    if os.path.isfile(out) and sha256(out) == SHA256:
        return
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = extract(WHEEL, MEMBER, tmp)
        got = sha256(path)
        if got != SHA256:
            sys.exit(f"{WHEEL} {MEMBER}: SHA-256 {got}, expected {SHA256}")
        tmp_out = out + ".tmp"
        shutil.copyfile(path, tmp_out)
    os.replace(tmp_out, out)
    print(f"{out}: {os.path.getsize(out)} bytes from {WHEEL}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/models/ddddocr_common.onnx")
