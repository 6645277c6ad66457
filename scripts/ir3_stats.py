#!/usr/bin/env python3
"""a6xx machine code side by side: tinygrad 0.14.0's IR3 path and pilot's ir3 artifacts, per model.

For one step of a model: the kernels it dispatches, their a6xx instructions (each kernel counted once per dispatch,
up to and including `end`; the padding after it is not code) and the split of those instructions by Mesa's
instruction category (the top three bits of each 64-bit instruction): ALU (cat1-4: moves, conversions, arithmetic,
special functions), memory (cat6: global, IBO, const and local loads, stores and atomics), texture (cat5: isam, sam,
getsize ...), flow (cat0 other than nop: end, branches) and sync (cat0 nops and cat7 barriers/fences); ss and sy
count the instructions flagged `(ss)`/`(sy)`, which wait for a shared-register or a texture/memory result. Every
kernel is disassembled by Mesa's `ir3-disasm` (built into target/mesa by scripts/setup.sh, scripts/build_mesa.sh)
for the Adreno 630; an instruction it cannot decode is an error. Static counts: code per step, not instructions
executed.

tinygrad compiles as the seed's compile-only CI gate does: DEV=NULL:IR3:a630,IMAGE_PITCH_ALIGNMENT=64 with IMAGE=1
FLOAT16=1 NOLOCALS=1 (Mesa's ir3 from the `tinymesa` wheel, scripts/requirements.txt), a compile3-style TinyJit
(plain run, capture, replay, prune=True); the step's kernels are those the replay dispatches.

Usage (with the venv's Python, .venv/bin/python):
  scripts/ir3_stats.py tinygrad MODEL.onnx [NAME=2x3x8x12 ...]   one model through tinygrad
  scripts/ir3_stats.py pilot ARTIFACT.pkl                         one pilot artifact with ir3 programs
  scripts/ir3_stats.py table [--full DIR] [--pilot PILOT]         the model tests (scripts/make_models.py) and, with
                                                                  --full, the full-size models of
                                                                  scripts/make_full_models.py DIR through tinygrad,
                                                                  as BENCHMARKS.md's markdown table; with --pilot, a
                                                                  row per model from that pilot binary too
                                                                  (`compile --target qcom --qcom-compiler ir3 --image
                                                                  --float16 --nolocals`, the same pins)
Add --json for one JSON object per model instead of the table.
"""
import base64
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IR3_DISASM = os.path.join(ROOT, "target", "mesa", "build", "src", "freedreno", "isa", "ir3-disasm")
A630_CHIP_ID = "0x06030001"
TINYGRAD_ENV = {"DEV": "NULL:IR3:a630,IMAGE_PITCH_ALIGNMENT=64", "IMAGE": "1", "FLOAT16": "1", "NOLOCALS": "1",
                "NULL_ALLOW_COPYOUT": "1"}
# The model tests and the input dimensions they pin (tests/tests/models.rs).
TEST_MODELS = [("vision", []), ("policy", []), ("dmonitoring", []), ("exporter", ["x=2x3x8x12"])]
COLUMNS = ["kernels", "instructions", "alu", "memory", "texture", "flow", "sync", "ss", "sy"]


def fail(msg):
    print(f"ir3_stats: {msg}", file=sys.stderr)
    sys.exit(2)


def disassemble(code):
    """[(category, text)] of `code` up to and including `end`, from ir3-disasm; exits on an undecodable encoding."""
    if not os.path.isfile(IR3_DISASM):
        fail(f"{IR3_DISASM} is missing: scripts/setup.sh (scripts/build_mesa.sh) builds Mesa's ir3-disasm into "
             "target/mesa")
    if len(code) == 0 or len(code) % 8:
        fail(f"a kernel of {len(code)} bytes is not whole 64-bit instructions")
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        p = subprocess.run([IR3_DISASM, "-c", A630_CHIP_ID, f.name], capture_output=True, text=True)
    if p.returncode:
        fail(f"ir3-disasm failed: {p.stderr.strip()}")
    out = []
    for line in p.stdout.splitlines():
        # `  12[hi_lo] (ss)add.f r0.x, ...`; branch labels (`l3:`) stand alone on their own lines.
        if "[" not in line or "]" not in line:
            continue
        enc, text = line.split("[", 1)[1].split("]", 1)
        hi = int(enc.split("_")[0], 16)
        text = text.strip()
        if "no match" in text or "WARNING" in text:
            fail(f"ir3-disasm cannot decode instruction {len(out)}: {line.strip()}")
        out.append((hi >> 29, text))
        if mnemonic(text) == "end":
            return out
    fail("a kernel without `end`")


def mnemonic(text):
    """The opcode of a disassembled instruction, without its `(ss)`/`(rptN)`-style flags."""
    while text.startswith("("):
        text = text[text.index(")") + 1:]
    return text.split(" ", 1)[0]


def stats(kernels):
    """Totals over a step's kernels (one code blob per dispatch)."""
    s = dict.fromkeys(COLUMNS, 0)
    s["kernels"] = len(kernels)
    cache = {}
    for code in kernels:
        if code not in cache:
            cache[code] = disassemble(code)
        for cat, text in cache[code]:
            s["instructions"] += 1
            s["ss"] += "(ss)" in text
            s["sy"] += "(sy)" in text
            if cat == 0:
                s["sync" if mnemonic(text) == "nop" else "flow"] += 1
            elif cat == 7:
                s["sync"] += 1
            elif cat == 5:
                s["texture"] += 1
            elif cat == 6:
                s["memory"] += 1
            else:
                s["alu"] += 1
    return s


def fold_constants(model, dims):
    """`model` (inputs pinned to `dims`) with every node computable before the step folded into initializers:
    Constant nodes, Shape of a statically shaped value, and nodes whose inputs are all constants (evaluated by onnx's
    reference evaluator). Returns the model and its initializers as numpy arrays. On the NULL device tinygrad computes
    no values, so a shape or index that the graph computes (or an initializer it uploads) reads back as garbage; on a
    GPU these are python constants or kernels that prune=True removes from the step, so folding them first leaves the
    step's kernels as they are."""
    import numpy as np
    import onnx
    from onnx import numpy_helper, shape_inference
    from onnx.reference import ReferenceEvaluator

    m = onnx.load(model)
    for i in m.graph.input:
        if i.name in dims:
            for d, v in zip(i.type.tensor_type.shape.dim, dims[i.name]):
                d.ClearField("dim_param")
                d.dim_value = v
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        dims_v = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims_v):
            shapes[v.name] = [d.dim_value for d in dims_v]
    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    kept = []
    for n in m.graph.node:
        has_graph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute)
        if n.op_type == "Shape" and n.input[0] in shapes and not has_graph:
            a = {x.name: x.i for x in n.attribute}
            consts[n.output[0]] = np.array(shapes[n.input[0]][a.get("start", 0):a.get("end")], dtype=np.int64)
        elif not has_graph and n.domain in ("", "ai.onnx") and all(x == "" or x in consts for x in n.input):
            outs = ReferenceEvaluator(n).run(None, {x: consts[x] for x in n.input if x})
            consts.update(zip(n.output, outs))
        else:
            kept.append(n)
    used = {x for n in kept for x in n.input} | {o.name for o in m.graph.output}
    del m.graph.node[:]
    m.graph.node.extend(kept)
    del m.graph.initializer[:]
    m.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items() if k in used)
    del m.graph.value_info[:]
    return m, {k: v for k, v in consts.items() if k in used}


def tinygrad_child(model, pins):
    """In a process with TINYGRAD_ENV: prints the step's kernels as JSON [{"name", "code": base64}]."""
    sys.path.insert(0, HERE)
    from bench_models import inputs_for
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner
    from tinygrad.runtime import ops_null
    from tinygrad.runtime.support.compiler_mesa import IR3Compiler

    dispatched = []
    init, call, graph_call = ops_null.NullProgram.__init__, ops_null.NullProgram.__call__, ops_null.NullGraph.__call__

    def program_init(self, dev, obj):
        init(self, dev, obj)
        self.lib = obj.lib

    def program_call(self, *a, **k):
        dispatched.append(self)
        return call(self, *a, **k)

    def graph(self, *a, **k):
        dispatched.extend(r for r in self.runtimes if r is not None)  # None: a copy
        return graph_call(self, *a, **k)

    ops_null.NullProgram.__init__, ops_null.NullProgram.__call__ = program_init, program_call
    ops_null.NullGraph.__call__ = graph
    import onnx

    dims = {n: [int(x) for x in d.split("x")] for n, d in (p.split("=", 1) for p in pins)}
    feeds = inputs_for(model, dims)
    m, consts = fold_constants(model, dims)
    path = os.path.join(tempfile.mkdtemp(prefix="pilot-ir3-stats-"), os.path.basename(model))
    onnx.save(m, path)
    runner = OnnxRunner(path)
    # The values tinygrad reads back as python constants (shapes, axes, indices) are the model's, not the NULL
    # device's: seeded into the runner's name-keyed cache the way `_to_python_const` writes it.
    for name, v in consts.items():
        runner._python_const_cache[name] = v.tobytes() if v.dtype.name == "uint8" else v.tolist()
    names = list(feeds)
    run = TinyJit(lambda *xs: next(iter(runner(dict(zip(names, xs))).values())).cast("float32").realize(), prune=True)
    tensors = [Tensor(v).realize() for v in feeds.values()]
    for _ in range(3):  # compile3: plain run, capture, replay
        run(*tensors)
    dispatched.clear()
    run(*tensors)
    kernels = []
    for p in dispatched:
        v, _, _, code = IR3Compiler.unpack_lib(p.lib)
        # Mesa's own count of the (ss)/(sy) flags it emitted (ir3_collect_info), to check the disassembly's.
        kernels.append({"name": p.name, "code": base64.b64encode(code).decode(), "ss": v.info.ss, "sy": v.info.sy})
    print(json.dumps(kernels))


def tinygrad_kernels(model, pins):
    """The step's kernels tinygrad compiles for `model` (in a child process with TINYGRAD_ENV)."""
    env = dict(os.environ, **TINYGRAD_ENV)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--tinygrad-child", model, *pins], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        fail(f"tinygrad on {model}: {why}")
    kernels = json.loads(p.stdout.strip().splitlines()[-1])
    for k in kernels:
        s = stats([base64.b64decode(k["code"])])
        if (s["ss"], s["sy"]) != (k["ss"], k["sy"]):
            fail(f"{k['name']}: the disassembly shows {s['ss']} (ss) and {s['sy']} (sy), Mesa's compiler counted "
                 f"{k['ss']} and {k['sy']}")
    return [base64.b64decode(k["code"]) for k in kernels]


def pilot_compile(pilot, model, pins):
    """`model` compiled by the `pilot` binary for the car with Mesa's ir3; the artifact's path."""
    out = os.path.join(tempfile.mkdtemp(prefix="pilot-ir3-stats-"), os.path.basename(model) + ".pkl")
    shapes = [a for p in pins for a in ("--shape", p)]
    p = subprocess.run([pilot, "compile", model, "-o", out, "--target", "qcom", "--qcom-compiler", "ir3", "--image",
                        "--float16", "--nolocals", *shapes], capture_output=True, text=True)
    if p.returncode:
        fail(f"pilot compile {model}: {p.stderr.strip()}")
    return out


def load_artifact(path):
    """A pilot artifact's payload with Python's standard library alone (the container: <q n> pickle, then <q n>
    records as pickle buffers)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:

        def length():
            n = struct.unpack("<q", f.read(8))[0]
            if not 0 <= n <= size - f.tell():
                raise ValueError(f"a length of {n} bytes at offset {f.tell() - 8} runs past the file")
            return n

        payload = f.read(length())

        def records():
            while f.tell() < size:
                b = bytearray(length())
                f.readinto(b)
                yield pickle.PickleBuffer(b)

        return pickle.load(io.BytesIO(payload), buffers=records())


def pilot_kernels(path):
    """The code of each dispatch of the artifact's step. Only ir3 programs (`--qcom-compiler ir3`) are a6xx machine
    code: their blob record is the code itself, as Mesa's ir3 assembled it."""
    try:
        d = load_artifact(path)
        programs = d["programs"]
    except (OSError, EOFError, ValueError, KeyError, TypeError, struct.error, pickle.UnpicklingError) as e:
        fail(f"{path}: not a readable pilot artifact ({e})")
    formats = {p["format"] for p in programs}
    if formats != {"ir3"}:
        fail(f"{path}: programs are {sorted(formats)}, not ir3 machine code (compile with --target qcom "
             "--qcom-compiler ir3)")
    blobs = d["blobs"]
    return [bytes(blobs[programs[op["program"]]["blob"]].raw()) for op in d["step"] if op["op"] == "dispatch"]


def table(rows):
    head = ["model", "compiler"] + COLUMNS
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, who, s in rows:
        lines.append("| " + " | ".join([name, who] + [str(s[c]) for c in COLUMNS]) + " |")
    return "\n".join(lines)


def report(rows, as_json):
    if as_json:
        for name, who, s in rows:
            print(json.dumps({"model": name, "compiler": who, **s}))
    else:
        print(table(rows))


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--tinygrad-child"]:
        return tinygrad_child(argv[1], argv[2:])
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    if not argv or argv[0] not in ("tinygrad", "pilot", "table"):
        fail("usage: ir3_stats.py {tinygrad MODEL.onnx [NAME=DIMS ...] | pilot ARTIFACT.pkl | "
             "table [--full DIR] [--pilot PILOT]} [--json]")
    rows = []
    if argv[0] == "tinygrad" and len(argv) >= 2:
        rows.append((os.path.basename(argv[1]), "tinygrad IR3", stats(tinygrad_kernels(argv[1], argv[2:]))))
    elif argv[0] == "pilot" and len(argv) == 2:
        rows.append((os.path.basename(argv[1]), "pilot ir3", stats(pilot_kernels(argv[1]))))
    elif argv[0] == "table":
        models_dir = os.path.join(ROOT, "target", "test-models")
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), models_dir], check=True,
                       stdout=subprocess.DEVNULL)
        models = [(n, os.path.join(models_dir, f"{n}.onnx"), pins) for n, pins in TEST_MODELS]
        if "--full" in argv:
            full = argv[argv.index("--full") + 1]
            out = subprocess.run([sys.executable, os.path.join(HERE, "make_full_models.py"), full, "--no-fetch"],
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[1].endswith(".onnx"):
                    pins = [parts[i + 1] for i in range(2, len(parts) - 1) if parts[i] == "--shape"]
                    models.append((parts[0], parts[1], pins))
        pilot = argv[argv.index("--pilot") + 1] if "--pilot" in argv else None
        for name, path, pins in models:
            print(f"{name}: compiling with tinygrad IR3", file=sys.stderr)
            rows.append((name, "tinygrad IR3", stats(tinygrad_kernels(path, pins))))
            if pilot:
                rows.append((name, "pilot ir3", stats(pilot_kernels(pilot_compile(pilot, path, pins)))))
    else:
        fail(f"bad arguments: {' '.join(argv)}")
    report(rows, as_json)


if __name__ == "__main__":
    main()
