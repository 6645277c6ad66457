"""A modeld-shaped loop: the vision and policy artifacts stepped at 20 Hz from Python, as openpilot's modeld
steps tinygrad's pickles, printing each frame's times.

    .venv/bin/python examples/modeld.py VISION.pkl POLICY.pkl [--device cpu] [--frames 40] [--hz 20]

Per frame: a camera frame is written into the vision model's own input buffer (a numpy view of pilot's
memory; in the car, VisionIPC would hand it over), vision steps, then the policy steps on the features
queue. The queue is the policy's own `features_buffer` input, shifted in place and fed the policy's
`hidden_state` output slice (openpilot's `output_slices`), so it never leaves pilot's buffers: on a device
that maps host memory (QCOM) the GPU reads it where it lies, with no copy per frame. The test models'
vision output is not the policy's feature, so this loop feeds back the policy's own hidden state instead.
`ASSERT_MIN_STEP_TIME=ms` gates each model's fastest step, as `pilot run` does.
"""

import argparse
import time

import numpy as np

import pilot


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vision")
    ap.add_argument("policy")
    ap.add_argument("--device", default=None, help="cpu, cl, qcom, fake-kgsl, ... (default: each artifact's own)")
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--hz", type=float, default=20.0)
    args = ap.parse_args()

    vision = pilot.load(args.vision, device=args.device)
    policy = pilot.load(args.policy, device=args.device)
    frame = vision.inputs["input_imgs"]
    features = policy.inputs["features_buffer"]  # (1, 24, 512): the queue, in pilot's buffer
    hidden = policy.output_slices["hidden_state"]
    out = policy.outputs["outputs"].reshape(-1)
    policy.inputs["traffic_convention"][:] = [[1.0, 0.0]]
    rng = np.random.default_rng(0)
    camera = [rng.integers(0, 256, frame.shape, dtype=np.uint8) for _ in range(4)]  # stand-in frames

    period = 1.0 / args.hz
    next_frame = time.monotonic()
    print("frame  vision ms  policy ms  host ms  (plan[0])")
    for n in range(args.frames):
        t0 = time.perf_counter()
        frame[...] = camera[n % len(camera)]
        vision.step()
        t1 = time.perf_counter()
        policy.inputs["desire"][...] = 0.0
        policy.inputs["desire"][0, -1, n % 8] = 1.0
        policy.step()
        t2 = time.perf_counter()
        features[0, :-1] = features[0, 1:]  # push the new hidden state into the queue, in place
        features[0, -1] = out[hidden]
        t3 = time.perf_counter()
        print(f"{n:5d}  {(t1 - t0) * 1e3:9.3f}  {(t2 - t1) * 1e3:9.3f}  {(t3 - t2) * 1e3:7.3f}  ({out[0]:+.4f})")
        next_frame += period
        time.sleep(max(0.0, next_frame - time.monotonic()))

    for name, model in [("vision", vision), ("policy", policy)]:
        s = model.stats
        print(f"{name}: {s['steps']} steps, fastest {s['best_ms']:.3f} ms, loaded in {s['load_ms']:.1f} ms, "
              f"zero-copy inputs: {all(model.is_zero_copy(i) for i in model.inputs)}")
        model.assert_min_step_time()  # raises pilot.GateError when $ASSERT_MIN_STEP_TIME is set and not met


if __name__ == "__main__":
    main()
