"""Ctrl-C during a long step (#26): on the devices that can stop a step (the RDNA3 emulator behind `amd-emu`)
`KeyboardInterrupt` arrives within a bound instead of after the step, and the model stays usable."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import pilot
from conftest import ROOT, run_pilot

# A step of this matmul takes the emulator far longer than the bound below (about 10^8 wave instructions).
N = 1024
# Signal to KeyboardInterrupt: the module checks for signals every 20 ms and the emulator stops within a few
# thousand instructions per wave; generous for a loaded CI machine.
BOUND_S = 5.0


def matmul_onnx(path):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((N, N)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "long_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


@pytest.fixture(scope="module")
def long_amd(tmp_path_factory):
    d = tmp_path_factory.mktemp("interrupt")
    matmul_onnx(d / "matmul.onnx")
    run_pilot("compile", d / "matmul.onnx", "--target", "usb+amd", "--arch", "gfx1100", "-o", d / "matmul.pkl")
    return d / "matmul.pkl"


def interrupted_step(model):
    """Steps `model` with a SIGINT 0.3 s in; returns the seconds from the signal to the KeyboardInterrupt."""
    sent = []
    timer = threading.Timer(0.3, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.step()
    finally:
        timer.cancel()
    return time.monotonic() - sent[0]


def test_ctrl_c_stops_a_long_step_on_the_emulator(long_amd, models, tmp_path):
    model = pilot.load(long_amd, device="amd-emu", threads=1)
    model.inputs["x"][:] = 1.0
    for _ in range(2):
        # The second time shows the model is neither busy nor refusing after an interrupted step.
        waited = interrupted_step(model)
        assert waited < BOUND_S, f"KeyboardInterrupt {waited:.1f} s after the signal"
    assert model.stats["steps"] == 0
    # The stop request was cleared: another model on the emulator steps to the end, as `pilot run` does.
    policy_amd = tmp_path / "policy_amd.pkl"
    run_pilot("compile", models["policy"].with_suffix(".onnx"), "--target", "usb+amd", "--arch", "gfx1100", "-o", policy_amd)
    policy = pilot.load(policy_amd, device="amd-emu")
    policy.step()
    assert policy.stats["steps"] == 1


def test_ctrl_c_stops_a_long_step_on_the_simulated_gpu(long_amd):
    """On `sim` the dispatch runs on the same emulator inside the simulated GPU: Ctrl-C stops it within the bound and
    the simulated queue stays hung (as a card whose kernel was killed would), so the next step fails in one line
    instead of hanging."""
    firmware = os.environ.get("PILOT_AMD_FIRMWARE", str(ROOT / "target/amd-firmware/root/usr/lib/firmware/amdgpu"))
    if not os.path.isdir(firmware):
        pytest.fail(f"the AMD firmware is missing ({firmware}): run scripts/setup.sh")
    os.environ["PILOT_AMD_FIRMWARE"] = firmware
    model = pilot.load(long_amd, device="sim", threads=1)
    model.inputs["x"][:] = 1.0
    waited = interrupted_step(model)
    assert waited < BOUND_S, f"KeyboardInterrupt {waited:.1f} s after the signal"
    assert model.stats["steps"] == 0
    with pytest.raises(pilot.PilotError) as e:
        model.step()
    assert "\n" not in str(e.value), str(e.value)
