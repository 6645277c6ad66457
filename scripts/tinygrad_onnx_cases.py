"""Runs tinygrad 0.14.0's ONNX runner (`tinygrad.nn.onnx.OnnxRunner`) on its CPU backend over the ONNX
backend node test cases (the cases `scripts/gen_onnx_node_tests.py` writes, collected the same way from the
`onnx` package), comparing as onnx's backend runner does (`onnx.backend.test.runner.Runner.
assert_similar_outputs`: same output count, shapes and dtypes, `np.testing.assert_allclose` with the case's
rtol/atol, 1e-3/1e-7 by default).

Writes OUT_DIR/tinygrad_results.txt (`PASS|FAIL case op # reason`), OUT_DIR/TINYGRAD_PASSING.txt (`case op`,
one a line) and OUT_DIR/TINYGRAD_ONLY.txt (those not in compiler/tests/onnx_node_passing.txt), and prints
the counts: tinygrad passes, pilot's manifest, both, only tinygrad, only pilot.

Usage: .venv/bin/python -W ignore scripts/tinygrad_onnx_cases.py OUT_DIR [--jobs 2] [--timeout 120]
       .venv/bin/python -W ignore scripts/tinygrad_onnx_cases.py OUT_DIR --relist OLD_DIR/tinygrad_results.txt
"""
import argparse
import multiprocessing
import os
import signal
import sys
import tempfile
import traceback

os.environ.setdefault("DEV", "CPU")
os.environ.setdefault("CC", "clang-19")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.backend.test.case.node as node_test  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def case_op(case) -> str:
    """The operator a case tests: its graph's only node; for an expanded function case, the op of the
    case it expands; else the op whose snake_case name prefixes the case name, else the first node's."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    base = case.name.split("_expanded")[0]
    if base != case.name and base in SINGLE_NODE_OPS:
        return SINGLE_NODE_OPS[base]
    name = case.name[len("test_"):]
    best = ""
    for schema in onnx.defs.get_all_schemas():
        snake = "".join("_" + c.lower() if c.isupper() and i and not schema.name[i - 1].isupper() else c.lower()
                        for i, c in enumerate(schema.name))
        if (name == snake or name.startswith(snake + "_")) and len(schema.name) > len(best):
            best = schema.name
    return best or (nodes[0].op_type if nodes else "?")


def normalize(v):
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, list):
        return [normalize(x) for x in v]
    if isinstance(v, np.generic):
        return np.asarray(v)  # a scalar input: the 0-d tensor its .pb file holds
    return v


def to_numpy(x):
    from tinygrad import Tensor

    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, (list, tuple)):
        return [to_numpy(i) for i in x]
    return None if x is None else np.array(x)


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def run_case(args):
    index, timeout = args
    case = CASES[index]
    op = case_op(case)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout)
    try:
        from tinygrad.nn.onnx import OnnxRunner

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            with open(path, "wb") as f:
                f.write(case.model.SerializeToString())
            runner = OnnxRunner(path)
            init = {t.name for t in case.model.graph.initializer}
            names = [i.name for i in case.model.graph.input if i.name not in init]
            for inputs, outputs in case.data_sets:
                feed = {n: normalize(v) for n, v in zip(names, inputs)}
                got = runner(feed)
                got = [to_numpy(got[o.name]) for o in case.model.graph.output]
                Runner.assert_similar_outputs([normalize(v) for v in outputs], got, rtol=case.rtol, atol=case.atol)
        return case.name, op, True, ""
    except Timeout:
        return case.name, op, False, f"timed out after {timeout}s"
    except BaseException as e:  # noqa: BLE001 - every failure is a FAIL line, the survey goes on
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not msg:
            msg = traceback.format_exception_only(type(e), e)[-1].strip()
        return case.name, op, False, f"{type(e).__name__}: {msg}"[:300]
    finally:
        signal.alarm(0)


CASES = node_test.collect_testcases()
SINGLE_NODE_OPS = {c.name: c.model.graph.node[0].op_type for c in CASES if len(c.model.graph.node) == 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--only", help="run the cases whose name contains this string")
    ap.add_argument("--relist", metavar="RESULTS", help="run nothing: rebuild the lists from a results file "
                    "(after the manifest changed)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.relist:
        ops = {c.name: case_op(c) for c in CASES}
        results = []
        for line in open(a.relist):
            verdict, name = line.split()[:2]
            results.append((name, ops[name], verdict == "PASS", line.split(" # ", 1)[-1].strip()))
    else:
        todo = [i for i, c in enumerate(CASES) if not a.only or a.only in c.name]
        results = []
        with multiprocessing.Pool(a.jobs, maxtasksperchild=40) as pool:
            for n, r in enumerate(pool.imap_unordered(run_case, [(i, a.timeout) for i in todo], chunksize=4)):
                results.append(r)
                if (n + 1) % 100 == 0:
                    print(f"{n + 1}/{len(todo)}", file=sys.stderr, flush=True)
    results.sort()
    manifest_path = os.path.join(REPO, "compiler/tests/onnx_node_passing.txt")
    manifest = {l.split("#")[0].strip() for l in open(manifest_path) if not l.startswith("//")} - {""}
    with open(os.path.join(a.out, "tinygrad_results.txt"), "w") as f:
        for name, op, ok, why in results:
            f.write(f"{'PASS' if ok else 'FAIL'} {name} {op}" + ("" if ok else f" # {why}") + "\n")
    passing = [(name, op) for name, op, ok, _ in results if ok]
    with open(os.path.join(a.out, "TINYGRAD_PASSING.txt"), "w") as f:
        f.writelines(f"{name} {op}\n" for name, op in passing)
    only = [(name, op) for name, op in passing if name not in manifest]
    with open(os.path.join(a.out, "TINYGRAD_ONLY.txt"), "w") as f:
        f.writelines(f"{name} {op}\n" for name, op in only)
    names = {name for name, _ in passing}
    print(f"{len(results)} cases; tinygrad passes {len(passing)}; pilot's manifest {len(manifest)}; "
          f"both {len(names & manifest)}; only tinygrad {len(only)}; only pilot {len(manifest - names)}")


if __name__ == "__main__":
    main()
