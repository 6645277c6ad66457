"""Worst scaled error |got - ref| / max(1, |ref|) of pilot artifacts of ddddocr's `common.onnx`
against onnxruntime, on a captcha-like grey image (light noisy background, five dark glyph-like
strokes, three noise lines; values in [0, 1] as ddddocr feeds them) and on uniform noise in [-1, 1).

Usage: .venv/bin/python scripts/ocr_half_error.py PILOT MODEL.onnx DEVICE ARTIFACT.pkl...
(the artifacts compiled with --shape input1=1x1x64x160; DEVICE as `pilot run --device`).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

WIDTH = 160


def captcha(rng: np.random.Generator) -> np.ndarray:
    img = 0.85 + 0.1 * rng.random((64, WIDTH))
    yy, xx = np.mgrid[0:64, 0:WIDTH]
    for c in range(5):
        cx = 16 + c * 30 + rng.integers(-4, 5)
        for _ in range(3):
            t = np.linspace(0, 1, 60)
            x = cx + 10 * np.sin(2 * np.pi * (t * rng.uniform(0.5, 1.5) + rng.random()))
            y = 12 + 40 * t + 4 * np.cos(2 * np.pi * t * rng.uniform(0.5, 2))
            for px, py in zip(x, y):
                img[(xx - px) ** 2 + (yy - py) ** 2 < 6] = rng.uniform(0.05, 0.3)
    for _ in range(3):
        a, b = rng.uniform(5, 60, 2)
        for x in range(WIDTH):
            img[int(a + (b - a) * x / WIDTH), x] = 0.2
    return img.astype(np.float32)[None, None]


def main() -> None:
    pilot, model, device, artifacts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    rng = np.random.default_rng(7)
    inputs = {"captcha": captcha(rng), "uniform": rng.uniform(-1, 1, (1, 1, 64, WIDTH)).astype(np.float32)}
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    with tempfile.TemporaryDirectory() as tmp:
        for name, x in inputs.items():
            path = os.path.join(tmp, f"{name}.npy")
            np.save(path, x)
            ref = sess.run(None, {"input1": x})[0]
            for art in artifacts:
                out = os.path.join(tmp, "out")
                subprocess.run(
                    [pilot, "run", art, "--device", device, "--steps", "1", "--input", f"input1={path}",
                     "--save-outputs", out],
                    check=True, capture_output=True,
                )
                got = np.load(os.path.join(out, os.listdir(out)[0])).reshape(ref.shape)
                e = np.abs(got - ref) / np.maximum(1, np.abs(ref))
                same = np.mean(got.argmax(-1) == ref.argmax(-1))
                print(f"{os.path.basename(art)} {name}: worst scaled error {e.max():.2e}, mean {e.mean():.1e}, "
                      f"same best character at {same:.0%} of steps")


if __name__ == "__main__":
    main()
