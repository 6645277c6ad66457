"""pilot: run a compiled artifact from Python, as openpilot's modeld runs tinygrad's pickle.

    import pilot
    model = pilot.load("policy.pkl", device="cpu")      # device: the artifact's backend when None
    model.inputs["desire"][:] = desire                   # numpy views of pilot's own input buffers
    model.step()                                         # the GIL is released while the step runs
    plan = model.outputs["outputs"][0, model.output_slices["plan"]]

`model.inputs` and `model.outputs` are numpy arrays over pilot's buffers: writing an input writes what the
next step reads (in place where the device maps host memory), and each step rewrites the outputs, so copy an
output to keep it past the next step. Do not write inputs between `enqueue()` and `wait()`. Ctrl-C stops a
step on the devices that can stop one (`amd-emu`, `sim`); elsewhere the step ends first. Failures raise
`PilotError` (a RuntimeError) with the same one line `pilot run` prints; failed gates raise `GateError`.
"""

import os

import numpy as np

from ._pilot import GateError, PilotError, __version__
from . import _pilot

__all__ = ["load", "Model", "PilotError", "GateError", "__version__"]


def load(path, device=None, *, threads=None, profile=False, priority=None):
    """Opens the artifact at `path` on `device` ("cpu", "null", "cl", "qcom", "fake-kgsl"; None: the
    artifact's own backend). `threads`: CPU workers (None: all cores); `profile`: time each kernel;
    `priority`: the KGSL context priority 0..15 (None: $QCOM_PRIORITY, else the default)."""
    if priority is None and os.environ.get("QCOM_PRIORITY"):
        priority = int(os.environ["QCOM_PRIORITY"])
    return Model(_pilot.load(os.fspath(path), device, threads, profile, priority))


class Model:
    """An artifact loaded on a device. See the module docs."""

    def __init__(self, raw):
        self._raw = raw
        self._input_specs = {name: (i, np.dtype(dtype), tuple(shape), state)
                             for i, (name, dtype, shape, state) in enumerate(raw.inputs())}
        #: name -> writable numpy view of pilot's buffer for each input that is not device state
        self.inputs = {name: np.frombuffer(raw.input_view(i), dtype=dt).reshape(shape)
                       for name, (i, dt, shape, state) in self._input_specs.items() if not state}
        #: name -> read-only numpy view of pilot's buffer for each output, rewritten by every step
        self.outputs = {name: np.frombuffer(raw.output_view(i), dtype=np.dtype(dtype)).reshape(shape)
                        for i, (name, dtype, shape) in enumerate(raw.outputs())}
        # The native methods themselves, so a step costs one call: step() runs one step (inputs in, run,
        # outputs back) without the GIL; enqueue() and wait() are its two halves.
        self.step = raw.step
        self.enqueue = raw.enqueue
        self.wait = raw.wait
        self._slices = None
        self._bound = set()

    def __call__(self, **inputs):
        """Sets the given inputs (exact dtype and shape), steps, and returns `self.outputs`."""
        for name, value in inputs.items():
            self.set_input(name, value)
        self._raw.step()
        return self.outputs

    def set_input(self, name, value):
        """Copies `value` (exactly the input's dtype and shape) into input `name` for the next step. This is
        how a device-state input (not in `inputs`) is set; the device keeps its value otherwise."""
        index, a, state = self._checked(name, np.asarray(value))
        if state or name in self._bound:
            self._raw.set_input(index, np.ascontiguousarray(a).tobytes())
        else:
            np.copyto(self.inputs[name], a)

    def bind_input(self, name, array):
        """Binds input `name` to `array`'s memory (exactly the input's dtype and shape, C-contiguous; a camera
        frame, say): every later step reads it there, without a copy where the device maps host memory, until
        `unbind_input(name)`; `inputs[name]` no longer feeds the model meanwhile. Do not write `array` while a
        step is in flight. Returns whether the device reads it in place."""
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise PilotError(f"bind_input: input `{name}` needs a C-contiguous numpy array")
        index, a, _ = self._checked(name, array)
        zero_copy = self._raw.bind_input(index, a.reshape(-1).view(np.uint8))
        self._bound.add(name)
        return zero_copy

    def unbind_input(self, name):
        """Feeds input `name` from `inputs[name]`, pilot's own buffer, again."""
        zero_copy = self._raw.unbind_input(self._raw.input_index(name))
        self._bound.discard(name)
        return zero_copy

    def _checked(self, name, a):
        index = self._raw.input_index(name)
        _, dtype, shape, state = self._input_specs[name]
        if a.dtype != dtype or a.shape != shape:
            raise PilotError(f"{a.dtype} {list(a.shape)} given for input `{name}`, which is {dtype} {list(shape)}")
        return index, a, state

    def is_zero_copy(self, name):
        """Whether the device reads input `name` where it lies, without a copy per step."""
        return self._raw.is_mapped(self._raw.input_index(name))

    @property
    def output_slices(self):
        """openpilot's `output_slices`: name -> slice of the (flattened) output, decoded from the artifact's
        metadata without unpickling; {} when it has none."""
        if self._slices is None:
            self._slices = {name: slice(start, stop) for name, start, stop in self._raw.output_slices()}
        return dict(self._slices)

    @property
    def stats(self):
        """Step count, last/best step and last enqueue times (ms), and the load time (ms)."""
        steps, last, best, enqueue, load_ms = self._raw.stats()
        return {"steps": steps, "last_ms": last, "best_ms": best, "last_enqueue_ms": enqueue, "load_ms": load_ms}

    def counters(self):
        """The device's counters (QCOM: ioctls, submits, host and GPU time in submit, dwords per step)."""
        return dict(self._raw.counters())

    def profile(self):
        """[(kernel, seconds summed over all steps)] for a model loaded with profile=True."""
        return self._raw.profile()

    def assert_min_step_time(self, limit_ms=None):
        """The ASSERT_MIN_STEP_TIME gate as `pilot run` has it: raises GateError unless the fastest step so far
        took less than `limit_ms` (default: $ASSERT_MIN_STEP_TIME; nothing to check when neither is set)."""
        if limit_ms is None:
            env = os.environ.get("ASSERT_MIN_STEP_TIME")
            if not env:
                return
            limit_ms = float(env)
        self._raw.check_min_step_time(float(limit_ms))
