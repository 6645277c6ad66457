"""Fixtures: the test models (scripts/make_models.py) compiled by the `pilot` command, and its path.

$PILOT_BIN is the `pilot` command with the compiler (default target/debug/pilot); $PILOT_CAPI_LIB is
libpilot_capi.a (default target/debug/libpilot_capi.a)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def require_pocl():
    """The fake KGSL runs its dispatches on PoCL: without it skip, or fail under PILOT_REQUIRE=1 (CI sets it)."""
    if os.path.exists("/etc/OpenCL/vendors/pocl.icd"):
        return
    msg = "PoCL is missing (the fake KGSL runs its dispatches on it): run scripts/setup.sh"
    if os.environ.get("PILOT_REQUIRE") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def pilot_bin():
    return Path(os.environ.get("PILOT_BIN", ROOT / "target/debug/pilot"))


def run_pilot(*args, check=True):
    return subprocess.run([str(pilot_bin()), *map(str, args)], capture_output=True, text=True, check=check)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """name -> compiled artifact: vision and policy for the CPU, policy for the fake KGSL (`policy_qcom`)."""
    d = tmp_path_factory.mktemp("models")
    subprocess.run([sys.executable, str(ROOT / "scripts/make_models.py"), str(d)], check=True, capture_output=True)
    out = {}
    for name, extra in [("vision", []), ("policy", []), ("policy_qcom", ["--target", "qcom", "--qcom-compiler", "fake"])]:
        onnx = d / f"{name.split('_')[0]}.onnx"
        out[name] = d / f"{name}.pkl"
        run_pilot("compile", onnx, "-o", out[name], *extra)
    return out
