#!/usr/bin/env python3
"""Plants the QCOM encoder bugs of issue 15 (1-12) and the ir3 layout bugs of issue 23 (13-15) one at a time in a scratch copy of the repository and reports which tests
catch each. The repository's own files are never edited: the copy
lives in target/mutants/tree (built in target/mutants).

Usage: scripts/mutate_qcom.py [--quick] [--models] [--cffdump] [--names] [ID ...]
  --quick   only the mutants CI runs (scripts/test.sh)
  --names   list every failing test instead of counts per kind
  --models  run the model tests on the fake KGSL for every mutant (by default only for a mutant nothing else catches)
  --cffdump also decode every model test's step with Mesa's cffdump (pilot-tests `cffdump`; needs target/mesa)
  ID ...    only these mutants

Suites: pilot-qcom's tests with every feature (the fake KGSL's unit tests, the device, OpenCL-executor and allocation
tests on the fake, the golden streams, the tinygrad cross-check) and the model tests on
the fake KGSL (pilot-tests `models`, compared with onnxruntime); for the ir3 mutants also pilot-tests `ir3_layout`
(every model test compiled by Mesa's ir3, its dispatches as the fake KGSL decodes them against the artifact's ir3
record; needs target/mesa). A mutant counts as caught only when a test other than a hand-written vector
(pm4/dispatch/ir3-layout unit vectors, the golden streams) fails. Prints a markdown table; exits 1 when
a mutant is not caught that way, or when the unmutated copy fails.
"""
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (id, planted bug, file, text to replace (exactly once), replacement)
MUTANTS = [
    (1, "texture-table and image-table base registers swapped (`SP_CS_TEXMEMOBJ_BASE` <-> `SP_CS_UAV_BASE`)",
     "qcom/src/dispatch.rs",
     "self.pkt4(reg::SP_CS_TEXMEMOBJ_BASE, &[tex.into()]);",
     "self.pkt4(reg::SP_CS_UAV_BASE, &[tex.into()]);"),
    (2, "memory barrier only before the first dispatch (none between dependent kernels)",
     "qcom/src/device.rs",
     "            s.memory_barrier(dummy);\n",
     "            if n == 0 {\n                s.memory_barrier(dummy);\n            }\n"),
    (3, "sampler without unnormalized coordinates",
     "qcom/src/dispatch.rs",
     "pub const SAMPLER_CLAMP_NEAREST: [u32; 4] = [0x1b60, 0x30, 0, 0];",
     "pub const SAMPLER_CLAMP_NEAREST: [u32; 4] = [0x1b60, 0x10, 0, 0];"),
    (4, "`SP_CS_INSTR_SIZE` offset typo (0xa9bc -> 0xa9bf, in the register data file; the module is generated at build)",
     "qcom/regs/a6xx.regs",
     "reg SP_CS_INSTR_SIZE 0xa9bc",
     "reg SP_CS_INSTR_SIZE 0xa9bf"),
    (5, "`bind_host` re-points only the first use of an input",
     "qcom/src/device.rs",
     "            uses += 1;\n",
     "            uses += 1;\n            break;\n"),
    (6, "local size in the global-size slots",
     "qcom/src/dispatch.rs",
     "[e.launch.ndrange_0(), n[0], 0, n[1], 0, n[2], 0,",
     "[e.launch.ndrange_0(), e.launch.local[0], 0, e.launch.local[1], 0, e.launch.local[2], 0,"),
    (7, "wrong type-7 count",
     "qcom/src/dispatch.rs",
     "self.buf.push(pm4::pkt7_hdr(op as u8, cnt as u32));",
     "self.buf.push(pm4::pkt7_hdr(op as u8, cnt as u32 + (cnt > 3) as u32));"),
    (8, "missing buffer offset",
     "qcom/src/device.rs",
     "Ok(Addr::base(Sym::Buffer(self.buffer)).add(self.offset))",
     "Ok(Addr::base(Sym::Buffer(self.buffer)))"),
    (9, "image pitch in pixels instead of bytes",
     "qcom/src/dispatch.rs",
     "| (self.pitch << 7) |",
     "| ((self.pitch / self.format.pixel_bytes()) << 7) |"),
    (10, "timeline value not bumped at submit",
     "qcom/src/device.rs",
     "for slot in &s.timeline_at {",
     "for slot in s.timeline_at.iter().take(0) {"),
    (11, "wrong state block (textures loaded into the shader block)",
     "qcom/src/dispatch.rs",
     "ls(ST_CONSTANTS, SB6_CS_TEX, l.tex_cnt)",
     "ls(ST_CONSTANTS, SB6_CS_SHADER, l.tex_cnt)"),
    (12, "texture and image counts swapped in `SP_CS_CONFIG`",
     "qcom/src/dispatch.rs",
     ".with_ntex(self.tex_cnt)",
     ".with_ntex(self.ibo_cnt)"),
    (13, "ir3 kernel parameters written one vec4 past the record's const offset",
     "qcom/src/device.rs",
     "block.set_ptr(at, args[arg].pointer(\"\")?)",
     "block.set_ptr(at + 16, args[arg].pointer(\"\")?)"),
    (14, "ir3 full register footprint one short (`max_reg` instead of `max_reg + 1`)",
     "qcom/src/ir3.rs",
     "fregs: r.full_regs,",
     "fregs: r.full_regs.saturating_sub(1),"),
    (15, "ir3 instruction length one 128-byte group short",
     "qcom/src/ir3.rs",
     "image_size: code_bytes as u32,",
     "image_size: code_bytes as u32 - 128,"),
]
QUICK = [1, 2, 3]
# Mutants of the ir3 layout: their runs add the ir3 suite (Mesa-compiled model tests on the fake KGSL).
IR3_MUTANTS = [13, 14, 15]

# (suite, cargo arguments)
SUITES = [
    ("qcom", ["test", "-p", "pilot-qcom", "--all-features", "--no-fail-fast"]),
]
MODELS = ("models", ["test", "-p", "pilot-tests", "--test", "models", "--no-fail-fast", "--", "fake_kgsl", "qcom_inputs"])
CFFDUMP = ("cffdump", ["test", "-p", "pilot-tests", "--test", "cffdump", "--no-fail-fast"])
IR3 = ("ir3", ["test", "-p", "pilot-tests", "--test", "ir3_layout", "--no-fail-fast"])

# Hand-written hex vectors: failing only these does not count as caught.
HEX_VECTORS = re.compile(r"^qcom (lib (dispatch|pm4|ir3)::|golden_streams )")

# How the table names the tests that failed, by prefix of "suite target test".
LABELS = [
    ("qcom lib fake::", "fake KGSL unit tests"),
    ("qcom device ", "QcomDevice on the fake"),
    ("qcom fake_exec ", "fake + OpenCL executor"),
    ("qcom fake_bind_host ", "bind_host on the fake"),
    ("qcom submit_no_alloc ", "allocation test on the fake"),
    ("qcom peer_tables ", "tinygrad cross-check"),
    ("models ", "models on the fake vs onnxruntime"),
    ("cffdump ", "models' steps in Mesa's cffdump"),
    ("qcom lib dispatch::", "dispatch hex vectors"),
    ("qcom lib pm4::", "pm4 hex vectors"),
    ("qcom lib ir3::", "ir3 layout unit vectors"),
    ("ir3 ", "ir3 models' dispatches on the fake vs Mesa's record"),
    ("qcom golden_streams ", "golden stream"),
]


def summary(failed, names):
    """`label ×n` per kind of test, or every test name with `names`."""
    if names:
        return "<br>".join(failed)
    counts = {}
    for f in failed:
        label = next((l for p, l in LABELS if f.startswith(p)), f)
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{l} ×{n}" if n > 1 else l for l, n in counts.items())


def scratch_copy():
    """The repository's files (tracked and untracked, not ignored) in target/mutants/tree. A file is rewritten only
    when its content differs, so cargo rebuilds only what changed; the path stays the same between runs, so test
    binaries that embed their source directory stay valid."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    dst = os.path.join(ROOT, "target", "mutants", "tree")
    for f in filter(None, files):
        src, out = os.path.join(ROOT, f), os.path.join(dst, f)
        if not os.path.isfile(src) or os.path.islink(src):
            continue
        data = open(src, "rb").read()
        if os.path.exists(out) and open(out, "rb").read() == data:
            continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as o:
            o.write(data)
        shutil.copymode(src, out)
    # The model tests find onnxruntime in the repository's .venv, the cffdump tests Mesa's tools in target/mesa, the
    # a6xx emulator's tests behind the fake (qcom's fake_emu) Mesa's assembler in target/ir3-asm.
    for link in (".venv", os.path.join("target", "mesa"), os.path.join("target", "ir3-asm")):
        src = os.path.join(ROOT, link)
        if os.path.exists(src) and not os.path.lexists(os.path.join(dst, link)):
            os.makedirs(os.path.dirname(os.path.join(dst, link)), exist_ok=True)
            os.symlink(os.path.realpath(src), os.path.join(dst, link))
    return dst


def run_suite(tree, suite, args, env):
    """The failing tests of one suite, as 'suite target test' strings; a build failure is one entry."""
    p = subprocess.run(["cargo", *args], cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    failed, target = [], "?"
    for line in out.splitlines():
        m = re.match(r"\s+Running (?:unittests )?(?:src/lib\.rs|tests/(\S+)\.rs)", line)
        if m:
            target = m.group(1) or "lib"
        m = re.match(r"test (\S+) \.\.\. FAILED", line)
        if m:
            failed.append(f"{suite} {target} {m.group(1)}")
    if p.returncode != 0 and not failed:
        failed.append(f"{suite} build failed" if "could not compile" in out else f"{suite} failed (exit {p.returncode})")
    return failed


def apply(tree, mutant, undo=None):
    """Plants `mutant` (or restores the saved originals `undo`); returns the originals."""
    _, _, files, old, new = mutant
    files, old, new = ([files], [old], [new]) if isinstance(files, str) else (files, old, new)
    saved = {}
    for f, o, n in zip(files, old, new):
        path = os.path.join(tree, f)
        text = open(path).read()
        if undo is not None:
            open(path, "w").write(undo[f])
            continue
        if text.count(o) != 1:
            sys.exit(f"mutant {mutant[0]}: `{o}` occurs {text.count(o)} times in {f}, not once; update the mutant")
        saved[f] = text
        open(path, "w").write(text.replace(o, n))
    return saved


def main():
    argv = sys.argv[1:]
    quick, models, names, cffdump = "--quick" in argv, "--models" in argv, "--names" in argv, "--cffdump" in argv
    ids = [int(a) for a in argv if not a.startswith("--")] or (QUICK if quick else [m[0] for m in MUTANTS])
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", "mutants"), PROPTEST_CASES="64",
               PILOT_REQUIRE="1", CARGO_TERM_COLOR="never")
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    if "PILOT_PYTHON" not in env and os.path.exists(venv):
        env["PILOT_PYTHON"] = venv
    tree = scratch_copy()
    suites = SUITES + ([MODELS] if models else []) + ([CFFDUMP] if cffdump else [])
    base_suites = suites + ([IR3] if any(i in IR3_MUTANTS for i in ids) else [])
    base = [f for s, a in base_suites for f in run_suite(tree, s, a, env)]
    if base:
        sys.exit("the unmutated copy fails:\n  " + "\n  ".join(base))
    rows, missed = [], []
    for mutant in (m for m in MUTANTS if m[0] in ids):
        start = time.time()
        saved = apply(tree, mutant)
        try:
            mutant_suites = suites + ([IR3] if mutant[0] in IR3_MUTANTS else [])
            failed = [f for s, a in mutant_suites for f in run_suite(tree, s, a, env)]
            witnesses = [f for f in failed if not HEX_VECTORS.match(f)]
            ran_models = models
            if not witnesses and not models:
                failed += run_suite(tree, *MODELS, env)
                witnesses = [f for f in failed if not HEX_VECTORS.match(f)]
                ran_models = True
        finally:
            apply(tree, mutant, undo=saved)
        hex_only = [f for f in failed if HEX_VECTORS.match(f)]
        if not witnesses:
            missed.append(mutant[0])
        note = "" if ran_models else " (model tests not run)"
        rows.append(f"| {mutant[0]} | {mutant[1]} | {summary(witnesses, names) or '**nothing**'}{note} | "
                    f"{summary(hex_only, names) or '-'} |")
        print(f"mutant {mutant[0]}: {len(witnesses)} witnesses, {len(hex_only)} hex vectors, "
              f"{time.time() - start:.0f} s", file=sys.stderr)
    print("| # | planted bug | caught by (fakes and cross-checks) | also by hex vectors |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    if missed:
        sys.exit(f"mutants caught by no fake or cross-check: {missed}")


if __name__ == "__main__":
    main()
