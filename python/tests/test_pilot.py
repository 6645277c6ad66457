"""The Python module against the `pilot` command: outputs bit for bit, numpy views of pilot's own buffers,
errors with the command's text, gates, output_slices, and steps that release the GIL."""

import re
import threading
import time

import numpy as np
import pytest

import pilot
from conftest import require_pocl, run_pilot


def seeded_inputs(model, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, view in model.inputs.items():
        if view.dtype == np.uint8:
            out[name] = rng.integers(0, 256, view.shape, dtype=np.uint8)
        else:
            out[name] = rng.standard_normal(view.shape).astype(view.dtype)
    return out


def cli_outputs(artifact, inputs, tmp_path, device=None, steps=1):
    args = ["run", artifact, "--steps", steps, "--save-outputs", tmp_path / "out"]
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    if device:
        args += ["--device", device]
    run_pilot(*args)
    return {p.stem: np.load(p) for p in (tmp_path / "out").glob("*.npy")}


def cli_error(*args):
    r = run_pilot(*args, check=False)
    assert r.returncode == 2, r
    prefix = "pilot: error: "
    assert r.stderr.startswith(prefix), r.stderr
    return r.stderr[len(prefix):].strip()


@pytest.mark.parametrize("name", ["vision", "policy"])
def test_outputs_equal_pilot_run_bit_for_bit(models, tmp_path, name):
    model = pilot.load(models[name], device="cpu")
    inputs = seeded_inputs(model, 7)
    got = model(**inputs)
    want = cli_outputs(models[name], inputs, tmp_path)
    assert set(got) == set(want) == {"outputs"}
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        assert got[k].tobytes() == want[k].tobytes(), k
        assert np.any(got[k] != 0)


def test_inputs_and_outputs_are_views_of_pilots_buffers(models):
    model = pilot.load(models["policy"])
    out = model.outputs["outputs"]
    assert not out.flags.writeable and out.flags.c_contiguous
    address = out.__array_interface__["data"][0]
    desire = model.inputs["desire"]
    assert desire.flags.writeable
    desire[:] = 0.5
    model.step()
    first = out.copy()
    desire[:] = -0.5  # written in place: the next step reads it without being told
    model.step()
    assert out.__array_interface__["data"][0] == address
    assert not np.array_equal(out, first), "the same array shows the new step's outputs"
    again = pilot.load(models["policy"])
    again(desire=np.full((1, 24, 8), -0.5, np.float32), traffic_convention=model.inputs["traffic_convention"].copy(),
          features_buffer=model.inputs["features_buffer"].copy())
    assert again.outputs["outputs"].tobytes() == out.tobytes()
    with pytest.raises(ValueError):
        out[0, 0] = 1.0


def test_an_array_bound_by_pointer_is_read_at_each_step(models):
    bound, copied = pilot.load(models["policy"]), pilot.load(models["policy"])
    inputs = seeded_inputs(bound, 13)
    for name, value in inputs.items():
        bound.inputs[name][:] = value
    frame = inputs["desire"].copy()
    assert bound.bind_input("desire", frame) is False, "the CPU device copies it at each enqueue"
    bound.inputs["desire"][:] = 99.0  # pilot's own buffer no longer feeds the model
    for step in range(3):
        frame[...] = step * 0.5 - 0.3  # written after binding: the step reads these values
        bound.step()
        copied(**{**inputs, "desire": frame})
        assert bound.outputs["outputs"].tobytes() == copied.outputs["outputs"].tobytes(), step
    with pytest.raises(pilot.PilotError, match="bound to caller memory"):
        bound.set_input("desire", frame)
    with pytest.raises(pilot.PilotError, match="C-contiguous"):
        bound.bind_input("desire", np.zeros((8, 24, 1), np.float32).T)
    bound.unbind_input("desire")
    bound.step()
    assert np.all(bound.inputs["desire"] == 99.0)
    assert bound.outputs["outputs"].tobytes() != copied.outputs["outputs"].tobytes()


def test_output_slices_are_decoded_from_the_metadata(models):
    policy = pilot.load(models["policy"])
    assert policy.output_slices == {"plan": slice(0, 33), "hidden_state": slice(33, 545)}
    policy.step()
    flat = policy.outputs["outputs"].reshape(-1)
    assert flat[policy.output_slices["hidden_state"]].shape == (512,)
    assert pilot.load(models["vision"]).output_slices == {}


def test_errors_carry_the_commands_text(models, tmp_path):
    missing = tmp_path / "missing.pkl"
    with pytest.raises(pilot.PilotError) as e:
        pilot.load(missing)
    assert str(e.value) == cli_error("run", missing)
    with pytest.raises(pilot.PilotError) as e:
        pilot.load(models["policy"], device="gpu9")
    assert str(e.value) == cli_error("run", models["policy"], "--device", "gpu9")
    broken = tmp_path / "broken.pkl"
    broken.write_bytes(models["policy"].read_bytes()[:1000])
    with pytest.raises(pilot.PilotError) as e:
        pilot.load(broken)
    assert str(e.value) == cli_error("run", broken)
    model = pilot.load(models["policy"])
    with pytest.raises(pilot.PilotError, match=r"^the artifact has no input `speed` \(inputs: desire, "):
        model(speed=np.zeros(1))
    wrong = tmp_path / "desire.npy"
    np.save(wrong, np.zeros((1, 24, 8), np.float64))
    with pytest.raises(pilot.PilotError) as e:
        model(desire=np.load(wrong))
    assert f"{wrong}: {e.value}" == cli_error("run", models["policy"], "--input", f"desire={wrong}")
    with pytest.raises(pilot.PilotError, match="^wait: no step in flight"):
        model.wait()


def test_the_step_time_gate(models, monkeypatch):
    model = pilot.load(models["policy"])
    with pytest.raises(pilot.GateError, match="no step has finished"):
        model.assert_min_step_time(1000)
    for _ in range(3):
        model.step()
    model.assert_min_step_time(10_000)
    for bad in (float("nan"), 0.0, -1.0, float("inf")):
        with pytest.raises(pilot.PilotError, match="the limit must be a positive number of milliseconds") as e:
            model.assert_min_step_time(bad)
        assert not isinstance(e.value, pilot.GateError), bad
    text = r"^ASSERT_MIN_STEP_TIME: fastest step took \d+\.\d{3} ms, the limit is 0.001 ms$"
    with pytest.raises(pilot.GateError, match=text):
        model.assert_min_step_time(0.001)
    cli = run_pilot("run", models["policy"], "--steps", 3, "--assert-min-step-time", "0.001", check=False)
    assert cli.returncode == 1 and re.match(text, cli.stderr.strip()), cli.stderr
    monkeypatch.setenv("ASSERT_MIN_STEP_TIME", "0.001")
    with pytest.raises(pilot.GateError):
        model.assert_min_step_time()
    stats = model.stats
    assert stats["steps"] == 3 and stats["best_ms"] > 0
    assert stats["load_ms"] > 0


def test_profile_and_counters(models):
    model = pilot.load(models["vision"], profile=True)
    for _ in range(2):
        model.step()
    ops = model.profile()
    assert ops and all(isinstance(n, str) and t >= 0 for n, t in ops) and sum(t for _, t in ops) > 0
    assert model.counters() == {}, "the CPU device keeps no counters"
    with pytest.raises(pilot.PilotError, match="does not profile"):
        pilot.load(models["vision"]).profile()


def test_enqueue_and_wait_halves(models):
    a, b = pilot.load(models["policy"]), pilot.load(models["policy"])
    inputs = seeded_inputs(a, 3)
    a(**inputs)
    for k, v in inputs.items():
        b.inputs[k][:] = v
    b.enqueue()
    b.wait()
    assert a.outputs["outputs"].tobytes() == b.outputs["outputs"].tobytes()


def test_steps_release_the_gil(models):
    """A second thread that finds the model busy ran while a step was in progress: the GIL was released."""
    model = pilot.load(models["vision"], threads=1)
    busy, stop = [], time.monotonic() + 1.0

    def stepper():
        while time.monotonic() < stop:
            try:
                model.step()
            except pilot.PilotError as e:
                busy.append(str(e))

    t = threading.Thread(target=stepper)
    t.start()
    stepper()
    t.join()
    assert busy and set(busy) == {"the model is busy in another thread"}


def test_zero_copy_inputs_on_the_fake_kgsl(models, tmp_path):
    require_pocl()
    model = pilot.load(models["policy_qcom"], device="fake-kgsl")
    assert all(model.is_zero_copy(n) for n in model.inputs), "KGSL maps pilot's input buffers"
    inputs = seeded_inputs(model, 11)
    got = model(**inputs)["outputs"]
    want = cli_outputs(models["policy_qcom"], inputs, tmp_path, device="fake-kgsl")["outputs"]
    assert got.tobytes() == want.tobytes()
    assert model.counters()["ioctls"] > 0
    frame = np.full((1, 24, 8), 0.25, np.float32)
    assert model.bind_input("desire", frame), "KGSL maps the caller's array too"
    model.step()
    from_frame = got.tobytes()
    model.unbind_input("desire")
    model.inputs["desire"][:] = 0.25
    model.step()
    assert got.tobytes() == from_frame
    # Written in place after the step: the device reads the new values where they lie.
    model.inputs["desire"][:] = 0.25
    model.step()
    assert got.tobytes() != want.tobytes()
