"""Static check of the hot kernels' inner loops on the comma device's core, beside x86.

The Kryo 385 cannot be timed here, so the three heaviest kernels of each model (by `pilot run
--profile` on this machine) are compiled as pilot compiles them, for `--arch aarch64` (cortex-a75)
and for x86 (`--cpu znver4`, AVX-512), and the innermost loop of each (the self-looping block with
the most multiply-add lanes, or the straight-line block where clang unrolled that loop fully) goes
through `llvm-mca-19`. Reported per kernel and ISA: cycles per loop iteration,
multiply-add lanes per iteration, cycles per multiply-add, and cycles per output element (cycles per
multiply-add times the reduction length of the kernel's register tile: the product of the reduction
loop extents around it). Kernels that take no register tile report their loop but no per-output figure.

Usage: .venv/bin/python scripts/mca_aarch64.py [--dir bench-out/full] [--pilot target/release/pilot]
                                               [--only NAME,...] [--top 3]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The flags of compiler/src/target/cpu/cc.rs, less the CPU selection.
CFLAGS = ["-O3", "-ffreestanding", "-fno-builtin", "-fno-stack-protector", "-fno-asynchronous-unwind-tables",
          "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast", "-fPIC", "-std=gnu11", "-w", "-S"]
ISAS = {
    "x86 znver4": (["--target=x86_64-linux-gnu", "-march=znver4", "-mprefer-vector-width=512"], "znver4", "x86_64",
                   ["--cpu", "znver4"]),
    "aarch64 cortex-a75": (["--target=aarch64-linux-gnu", "-mcpu=cortex-a75"], "cortex-a75", "aarch64",
                           ["--arch", "aarch64"]),
}


def fma_lanes(line):
    """Multiply-add lanes of one instruction (0 if it is not one)."""
    s = line.strip()
    m = re.match(r"v?fn?m(?:add|sub)[0-9]*([ps])([sd])\s+(.*)", s)
    if m:  # x86 vfmadd231ps and friends
        if m.group(1) == "s":
            return 1
        ops = m.group(3)
        width = 512 if "zmm" in ops else 256 if "ymm" in ops else 128
        return width // (32 if m.group(2) == "s" else 64)
    m = re.match(r"fml[as]\s+v\d+\.(\d+)([sdh])", s)
    if m:  # aarch64 fmla v0.4s
        return int(m.group(1))
    if re.match(r"fml[as]\s+[sd]\d+", s) or re.match(r"fn?m(?:add|sub)\s+[sd]\d+", s):
        return 1
    return 0


def hottest_loop(asm, func):
    """The basic block of `func` with the most multiply-add lanes: (lines, lanes, "loop" or "block")."""
    body = asm.split(f"\n{func}:", 1)[1].split(".Lfunc_end", 1)[0]
    blocks, label, cur = [], None, []
    for line in body.splitlines():
        m = re.match(r"^(\.LBB\d+_\d+):", line)
        if m:
            blocks.append((label, cur))
            label, cur = m.group(1), []
            continue
        s = line.strip()
        if s and not s.startswith((".", "#", "//", ";")):
            cur.append(line)
    blocks.append((label, cur))
    def broadcast_lanes(lines):
        # A register tile's multiply-adds take one operand broadcast from a scalar weight: x86
        # `{1toN}` memory operands or `vbroadcastss`, aarch64's by-element form `v1.s[0]` or `ld1r`.
        # Polynomial math in an epilogue (exp) multiplies whole vectors.
        if any("{1to" in x or "vbroadcastss" in x or "ld1r" in x or re.search(r"\.s\[\d\]", x) for x in lines):
            return sum(fma_lanes(x) for x in lines)
        return 0

    best = None
    for label, lines in blocks:
        lanes = sum(fma_lanes(x) for x in lines)
        if not lanes:
            continue
        looping = label is not None and label in re.split(r"[\s,]+", lines[-1].strip())
        # The register tile's body first (whether clang kept it a loop or unrolled it into one
        # straight-line block), then loops, then the most multiply-add lanes.
        key = (broadcast_lanes(lines), looping, lanes)
        if best is None or key > best[3]:
            best = (lines, lanes, "loop" if looping else "block", key)
    return best[:3] if best else None


def mca_cycles(lines, mcpu, triple):
    with tempfile.NamedTemporaryFile("w", suffix=".s", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        out = subprocess.run(["llvm-mca-19", f"-mtriple={triple}", f"-mcpu={mcpu}", "-iterations=200", f.name],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 200


def reduction_length(c_src, func):
    """The product of the reduction loop extents around the register tile of `func`, or None."""
    body = c_src.split(f"void {func}(", 1)[1].split("\n}\n", 1)[0]
    if "_v0 = {0};" not in body:
        return None
    tile = body.split("_v0 = {0};", 1)[1].split("*(pl_v", 1)[0]
    r = 1
    for m in re.finditer(r"for \(i64 v\d+ = 0; v\d+ < (\d+); v\d+ \+= 1\) \{", tile):
        r *= int(m.group(1))
    return r


def heaviest(pilot, pkl, top):
    out = subprocess.run([pilot, "run", pkl, "--threads", "1", "--steps", "5", "--profile"], capture_output=True,
                         text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if "%" in line and line.split()[-1].startswith("k")]
    return names[:top]


def same_kernel(k, units):
    """`k`, or the kernel of another build named as `k` past its `kN_` number."""
    if any(f"void {k}(" in text for text in units.values()):
        return k
    tail = k.split("_", 1)[1] if "_" in k else k
    for text in units.values():
        m = re.search(r"void (k\d+_%s)\(" % re.escape(tail), text)
        if m:
            return m.group(1)
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="bench-out/full")
    ap.add_argument("--pilot", default="target/release/pilot")
    ap.add_argument("--only", default="")
    ap.add_argument("--top", type=int, default=3)
    a = ap.parse_args()
    listing = subprocess.run([sys.executable, os.path.join(HERE, "make_full_models.py"), a.dir], capture_output=True,
                             text=True, check=True).stdout
    print("| model | kernel | ISA | cycles/iter | MAC lanes/iter | cycles/MAC | reduction | cycles/output |")
    print("|---|---|---|---|---|---|---|---|")
    for line in listing.splitlines():
        name, path, *rest = line.split()
        if a.only and name not in a.only.split(","):
            continue
        # Compiled afresh: the kernel names must be those of the compiles below.
        with tempfile.TemporaryDirectory() as d:
            host_pkl = os.path.join(d, f"{name}.pkl")
            subprocess.run([a.pilot, "compile", path, "-o", host_pkl] + rest, check=True, stdout=subprocess.DEVNULL)
            hot = heaviest(a.pilot, host_pkl, a.top)
        for isa, (flags, mcpu, triple, pilot_flags) in ISAS.items():
            with tempfile.TemporaryDirectory() as d:
                env = dict(os.environ, PILOT_DUMP_C=d)
                subprocess.run([a.pilot, "compile", path, "-o", os.path.join(d, "m.pkl")] + rest + pilot_flags,
                               check=True, stdout=subprocess.DEVNULL, env=env)
                units = {u: open(u).read() for u in glob.glob(os.path.join(d, "*.c"))}
                for k in hot:
                    # Kernels are numbered per build and the builds may differ in a kernel's split (the vector
                    # width decides some layouts): the same node's kernel is found by its name past `kN_`.
                    k = same_kernel(k, units)
                    unit = next((u for u, text in units.items() if f"void {k}(" in text), None)
                    if unit is None:
                        print(f"| {name} | {k} | {isa} | not in the {isa} build (kernels differ) | | | | |")
                        continue
                    asm = subprocess.run(["clang-19"] + CFLAGS + flags + [unit, "-o", "-"], capture_output=True,
                                         text=True, check=True).stdout
                    loop = hottest_loop(asm, k)
                    if loop is None:
                        print(f"| {name} | {k} | {isa} | no multiply-add loop | | | | |")
                        continue
                    cyc = mca_cycles(loop[0], mcpu, triple)
                    red = reduction_length(open(unit).read(), k)
                    per_mac = cyc / loop[1]
                    per_out = f"{per_mac * red:.2f}" if red else "-"
                    kind = "" if loop[2] == "loop" else " (unrolled block)"
                    print(f"| {name} | {k}{kind} | {isa} | {cyc:.2f} | {loop[1]} | {per_mac:.3f} | {red or '-'} | {per_out} |")
                    sys.stdout.flush()


if __name__ == "__main__":
    main()
