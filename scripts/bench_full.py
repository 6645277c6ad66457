"""The full-size CPU benchmark: pilot at 1 and 2 threads against onnxruntime at 1 and 2 intra-op threads
(and tinygrad 0.14.0 with --tinygrad), on the models of `make_full_models.py`, in one run.

Timings on a shared machine are noisy, so the runtimes are interleaved: each round steps pilot 1T,
onnxruntime 1T, pilot 2T, onnxruntime 2T in turn (onnxruntime in this process, pilot as `pilot run`,
whose per-step wall times come from its benchmark log), and a model's figure is the median over rounds
of each round's median step time. Ratios are pilot / onnxruntime at the same thread count; the last row
holds their geometric means. Correctness: every model is compiled with `--selftest` (scaled error
<= 1e-4 against onnxruntime); a failure is reported in the table and makes the script exit 1.
The three heaviest kernels of each model (`pilot run --profile`, 1 thread) follow the table.

`--set probe` runs the same table on `make_probe_models.py`'s nets, families the code generator was not tuned on.

Usage: .venv/bin/python scripts/bench_full.py [--dir bench-out/full] [--rounds 5] [--steps 20] [--set full|probe]
                                               [--pilot target/release/pilot] [--tinygrad] [--only NAME,...]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_models import inputs_for  # noqa: E402


def ort_session(model, threads):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])


def ort_median(sess, feeds, steps):
    sess.run(None, feeds)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def pilot_median(pilot, pkl, threads, steps):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        subprocess.run([pilot, "run", pkl, "--threads", str(threads), "--steps", str(steps + 1), "--benchmark-log", log],
                       check=True, stdout=subprocess.DEVNULL)
        walls = [json.loads(line)["wall_ms"] for line in open(log)][1:]  # the first step warms caches
    return statistics.median(walls)


def compile_model(pilot, onnx_path, pkl, pins):
    args = [pilot, "compile", onnx_path, "-o", pkl, "--selftest"] + [a for p in pins for a in ("--shape", p)]
    st = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True)
    secs = time.perf_counter() - st
    errs = [float(line.split("max scaled error")[1].split()[0]) for line in r.stdout.splitlines() if "max scaled error" in line]
    gflop = next((float(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("flops")), float("nan"))
    if r.returncode not in (0, 1):
        return None, secs, gflop, (r.stderr.strip().splitlines() or ["failed"])[-1]
    return (max(errs) if errs else float("nan")), secs, gflop, ("ok" if r.returncode == 0 else "FAILED")


def heaviest(pilot, pkl, steps, n=3):
    out = subprocess.run([pilot, "run", pkl, "--threads", "1", "--steps", str(steps), "--profile"],
                         capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if line.strip() and line.split()[0].replace(".", "", 1).isdigit()
             and "%" in line]
    return lines[:n]


def tinygrad_median(onnx_path, pins, steps):
    cmd = [sys.executable, os.path.join(HERE, "bench_models.py"), onnx_path, "tinygrad", "--steps", str(steps)] + pins
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["step_ms_median"]


def stream_read_gbs(nbytes=512 << 20, runs=5):
    """Single-thread read bandwidth over a working set of `nbytes`: the best of `runs` sums of a float32
    array of that size (numpy's vectorized reduction streams it once). 512 MiB measures memory; a model's
    weight size measures whatever level of the cache hierarchy holds them between steps."""
    a = np.ones(max(nbytes // 4, 1024), dtype=np.float32)
    a.sum()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t)
    return a.nbytes / best / 1e9


def weight_bytes(onnx_path):
    import onnx

    m = onnx.load(onnx_path)
    return sum(np.prod(t.dims, dtype=np.int64) * 4 for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="bench-out/full")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--pilot", default="target/release/pilot")
    ap.add_argument("--tinygrad", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--set", choices=["full", "probe"], default="full")
    a = ap.parse_args()
    maker = {"full": "make_full_models.py", "probe": "make_probe_models.py"}[a.set]
    listing = subprocess.run([sys.executable, os.path.join(HERE, maker), a.dir],
                             capture_output=True, text=True, check=True).stdout
    models = []
    for line in listing.splitlines():
        name, path, *rest = line.split()
        pins = [rest[i + 1] for i in range(len(rest)) if rest[i] == "--shape"]
        if not a.only or name in a.only.split(","):
            models.append((name, path, pins))
    load_before = os.getloadavg()[0]
    print(f"load average before: {load_before:.2f}", file=sys.stderr)
    bandwidth = stream_read_gbs()
    print(f"stream read bandwidth (1 thread): {bandwidth:.1f} GB/s", file=sys.stderr)
    rows, failed = [], False
    for name, path, pins in models:
        pkl = os.path.join(a.dir, f"{name}.pkl")
        err, secs, gflop, verdict = compile_model(a.pilot, path, pkl, pins)
        print(f"{name}: compiled in {secs:.1f} s, {gflop} GFLOP, selftest {verdict} ({err})", file=sys.stderr)
        if err is None:
            failed = True
            rows.append((name, gflop, None, verdict))
            continue
        failed |= verdict != "ok"
        feeds = inputs_for(path, {p.split("=")[0]: [int(x) for x in p.split("=")[1].split("x")] for p in pins})
        s1, s2 = ort_session(path, 1), ort_session(path, 2)
        per = {k: [] for k in ("p1", "o1", "p2", "o2")}
        for _ in range(a.rounds):
            per["p1"].append(pilot_median(a.pilot, pkl, 1, a.steps))
            per["o1"].append(ort_median(s1, feeds, a.steps))
            per["p2"].append(pilot_median(a.pilot, pkl, 2, a.steps))
            per["o2"].append(ort_median(s2, feeds, a.steps))
        med = {k: statistics.median(v) for k, v in per.items()}
        tg = tinygrad_median(path, pins, a.steps) if a.tinygrad else None
        top = heaviest(a.pilot, pkl, max(3, a.steps // 4))
        rows.append((name, gflop, dict(med, tg=tg, err=err, top=top), verdict))
        print(f"{name}: {json.dumps({k: round(v, 3) for k, v in med.items()})}", file=sys.stderr)
    load_after = os.getloadavg()[0]
    print(f"load average after: {load_after:.2f}", file=sys.stderr)
    print(f"Load average {load_before:.2f} before, {load_after:.2f} after; single-thread stream read bandwidth "
          f"{bandwidth:.1f} GB/s.")
    print()

    print("| model | GFLOP | pilot 1T ms | ort 1T ms | pilot 2T ms | ort 2T ms | tinygrad ms | pilot/ort 1T | pilot/ort 2T | pilot 2T speedup | max scaled error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    r1, r2 = [], []
    for name, gflop, m, verdict in rows:
        if m is None:
            print(f"| {name} | {gflop} | {verdict} | | | | | | | | |")
            continue
        x1, x2 = m["p1"] / m["o1"], m["p2"] / m["o2"]
        r1.append(x1)
        r2.append(x2)
        tg = f"{m['tg']:.2f}" if m["tg"] else "-"
        print(f"| {name} | {gflop:.3f} | {m['p1']:.3f} | {m['o1']:.3f} | {m['p2']:.3f} | {m['o2']:.3f} | {tg} | "
              f"{x1:.2f} | {x2:.2f} | {m['p1'] / m['p2']:.2f} | {m['err']:.1e} {'' if verdict == 'ok' else verdict} |")
    print(f"| geometric mean | | | | | | | {geomean(r1):.2f} | {geomean(r2):.2f} | | |")
    print()
    # Batch-1 matrix-vector nets read every weight once per step: their step time against the stream
    # bandwidth says how close to memory speed the products run.
    for name, _, m, _ in rows:
        if m and name.startswith("policy"):
            path = next(p for n, p, _ in models if n == name)
            nbytes = weight_bytes(path)
            gb, same = nbytes / 1e9, stream_read_gbs(int(nbytes), runs=20)
            print(f"{name}: {gb * 1e3:.1f} MB of float32 weights in {m['p1']:.3f} ms at 1 thread = "
                  f"{gb / m['p1'] * 1e3:.1f} GB/s: {gb / m['p1'] * 1e3 / same:.0%} of the read bandwidth over a "
                  f"working set of that size ({same:.1f} GB/s), {gb / m['p1'] * 1e3 / bandwidth:.0%} of memory's "
                  f"(onnxruntime {gb / m['o1'] * 1e3:.1f} GB/s)")
    print()
    for name, _, m, _ in rows:
        if m:
            print(f"{name}, heaviest kernels (1 thread):")
            for line in m["top"]:
                print(f"    {line.strip()}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
