"""The C ABI from C: capi/tests/c/check.c, compiled against libpilot_capi.a, against the `pilot` command."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import pilot
from conftest import ROOT, require_pocl
from test_pilot import cli_error, cli_outputs, seeded_inputs

LIBS = ["-lpthread", "-ldl", "-lm", "-lrt", "-lutil"]


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    lib = os.environ.get("PILOT_CAPI_LIB", str(ROOT / "target/debug/libpilot_capi.a"))
    if not os.path.exists(lib):
        pytest.fail(f"{lib} is missing: cargo build -p pilot-capi")
    cc = os.environ.get("CC") or shutil.which("cc") or "clang-19"
    exe = tmp_path_factory.mktemp("c") / "check"
    src = ROOT / "capi/tests/c/check.c"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "capi/include"), str(src), lib,
                    *LIBS, "-o", str(exe)], check=True)
    return exe


def run_c(check, artifact, device, out, steps, inputs):
    out.mkdir()
    files = []
    for i, (name, value) in enumerate(inputs.items()):
        files.append(out.parent / f"in{i}.bin")
        files[-1].write_bytes(value.tobytes())
    return subprocess.run([str(check), str(artifact), device, str(out), str(steps), *map(str, files)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("name,device", [("vision", "cpu"), ("policy", "cpu"), ("policy_qcom", "fake-kgsl")])
def test_c_outputs_equal_pilot_run_bit_for_bit(models, check, tmp_path, name, device):
    if device == "fake-kgsl":
        require_pocl()
    model = pilot.load(models[name], device=device)
    inputs = seeded_inputs(model, 5)
    r = run_c(check, models[name], device, tmp_path / "c", 2, inputs)
    assert r.returncode == 0, r.stderr
    # Input 0 is bound by pointer: zero-copy where the device maps host memory (KGSL), read at each step elsewhere.
    assert f"input 0 bound, zero-copy {int(device == 'fake-kgsl')}" in r.stdout
    want = cli_outputs(models[name], inputs, tmp_path, device=device, steps=2)
    got = (tmp_path / "c" / "0.bin").read_bytes()
    assert got == want["outputs"].tobytes()
    assert np.any(want["outputs"] != 0)


def test_c_errors_are_codes_with_the_commands_text(check, tmp_path, models):
    missing = tmp_path / "missing.pkl"
    r = run_c(check, missing, "cpu", tmp_path / "c", 1, {})
    assert r.returncode == 2 + 2, r  # PILOT_STATUS_LOAD
    assert r.stderr.strip() == "pilot: error: " + cli_error("run", missing)
    r = run_c(check, models["policy"], "gpu9", tmp_path / "d", 1, {})
    assert r.returncode == 4 and r.stderr.strip() == "pilot: error: " + cli_error("run", models["policy"], "--device", "gpu9")
