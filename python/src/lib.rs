//! `pilot._pilot`: the native half of the `pilot` Python module (the package's `__init__.py` is the other).
//!
//! It wraps [`pilot_capi::Model`]: inputs and outputs are exported through the buffer protocol as the
//! model's own host buffers (numpy views them without a copy), and every step runs with the GIL released.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pilot_capi::{Error, Model, Options, PilotStatus};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::{create_exception, ffi};

create_exception!(_pilot, PilotError, PyRuntimeError, "A pilot call failed; the message is the command's one line.");
create_exception!(_pilot, GateError, PilotError, "A gate (ASSERT_MIN_STEP_TIME) failed.");

fn py_err(e: Error) -> PyErr {
    match e.status() {
        PilotStatus::Gate => GateError::new_err(e.to_string()),
        _ => PilotError::new_err(e.to_string()),
    }
}

/// One artifact on one device. The model sits behind a mutex so that a step running without the GIL is
/// never entered twice: a second thread gets an error instead of waiting while holding the GIL.
#[pyclass(module = "pilot._pilot", name = "Model")]
struct PyModel {
    model: Mutex<Model>,
    /// The caller's buffers bound to inputs (`bind_input`), held until rebound or dropped after the model.
    bound: Mutex<Vec<Option<PyBuffer<u8>>>>,
}

impl PyModel {
    fn with<T>(&self, f: impl FnOnce(&mut Model) -> Result<T, Error>) -> PyResult<T> {
        let mut guard =
            self.model.try_lock().map_err(|_| PilotError::new_err("the model is busy in another thread"))?;
        f(&mut guard).map_err(py_err)
    }

    /// Like [`PyModel::with`], with the GIL released while `f` runs, and Ctrl-C stops it on a device that can stop a step
    /// ([`Model::stoppable`]): `f` runs on a scoped thread while this one checks for signals every
    /// [`SIGNAL_POLL`]. On a signal (a `KeyboardInterrupt`, or whatever the handler raised) the stop request is set,
    /// the step is awaited (the device ends it within milliseconds) and the request cleared before the exception
    /// propagates. Elsewhere `f` runs on this thread, without the thread's cost, and a signal is handled once it
    /// returns.
    fn stoppable<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Model) -> Result<T, Error> + Send) -> PyResult<T> {
        let mut guard =
            self.model.try_lock().map_err(|_| PilotError::new_err("the model is busy in another thread"))?;
        let model: &mut Model = &mut guard;
        if !model.stoppable() {
            return py.detach(|| f(model)).map_err(py_err);
        }
        let (done, waiter) = (AtomicBool::new(false), std::thread::current());
        std::thread::scope(|s| {
            let step = s.spawn(|| {
                let r = f(model);
                done.store(true, Ordering::Release);
                waiter.unpark();
                r
            });
            let finished = |py: Python<'_>| {
                py.detach(|| {
                    let until = Instant::now() + SIGNAL_POLL;
                    while !done.load(Ordering::Acquire) && Instant::now() < until {
                        std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
                    }
                    done.load(Ordering::Acquire)
                })
            };
            let mut signal = None;
            while !finished(py) {
                if let Err(e) = py.check_signals() {
                    pilot_runtime::cancel::request(true);
                    signal = Some(e);
                    break;
                }
            }
            let r = py.detach(|| step.join());
            if signal.is_some() {
                pilot_runtime::cancel::request(false);
            }
            match (signal, r) {
                (Some(e), _) => Err(e),
                (None, Ok(r)) => r.map_err(py_err),
                (None, Err(_)) => Err(PilotError::new_err("the step panicked")),
            }
        })
    }
}

/// How often a step that can be stopped checks for Ctrl-C (the longest a `KeyboardInterrupt` waits, plus the
/// device's time to stop).
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// (name, numpy dtype name, shape).
type Spec = (String, &'static str, Vec<usize>);
/// (name, numpy dtype name, shape, is device state).
type InputSpec = (String, &'static str, Vec<usize>, bool);

#[pymethods]
impl PyModel {
    /// Inputs as (name, numpy dtype name, shape, is device state).
    fn inputs(&self) -> PyResult<Vec<InputSpec>> {
        self.with(|m| {
            (0..m.inputs().len())
                .map(|i| {
                    let s = &m.inputs()[i];
                    Ok((s.name.clone(), s.dtype.name(), s.shape.clone(), m.is_state(i)?))
                })
                .collect()
        })
    }

    /// Outputs as (name, numpy dtype name, shape).
    fn outputs(&self) -> PyResult<Vec<Spec>> {
        self.with(|m| Ok(m.outputs().iter().map(|s| (s.name.clone(), s.dtype.name(), s.shape.clone())).collect()))
    }

    fn input_index(&self, name: &str) -> PyResult<usize> {
        self.with(|m| m.input_index(name))
    }

    /// The model's own buffer of input `i`, writable, through the buffer protocol.
    fn input_view(slf: Bound<'_, Self>, i: usize) -> PyResult<HostView> {
        let (ptr, len) = slf.borrow().with(|m| {
            let b = m.input_buffer_mut(i)?;
            Ok((b.as_mut_ptr() as usize, b.len()))
        })?;
        Ok(HostView { _owner: slf.unbind(), ptr, len, readonly: false })
    }

    /// The session's own buffer of output `i`, read-only, through the buffer protocol.
    fn output_view(slf: Bound<'_, Self>, i: usize) -> PyResult<HostView> {
        let (ptr, len) = slf.borrow().with(|m| {
            let b = m.output(i)?;
            Ok((b.as_ptr() as usize, b.len()))
        })?;
        Ok(HostView { _owner: slf.unbind(), ptr, len, readonly: true })
    }

    /// Copies `data` (exactly the input's bytes) into input `i` for the next step.
    fn set_input(&self, i: usize, data: &[u8]) -> PyResult<()> {
        self.with(|m| m.set_input(i, data))
    }

    /// Binds input `i` to the caller's C-contiguous bytes `data` (exactly the input's size), held here until
    /// rebound: every later step reads them there. Returns whether the device reads them in place.
    fn bind_input(&self, i: usize, data: PyBuffer<u8>) -> PyResult<bool> {
        if !data.is_c_contiguous() {
            return Err(PilotError::new_err("bind_input: the array must be C-contiguous"));
        }
        let (ptr, len) = (data.buf_ptr() as *const u8, data.len_bytes());
        let mapped = self.with(|m| {
            // SAFETY: `data` holds the exporter's buffer (an exporting numpy array cannot be resized or freed)
            // and is kept in `bound[i]` until the input is rebound or the model, dropped first, is gone. Not
            // writing it during a step in flight is the caller's documented duty, as for pilot's own buffers.
            unsafe { m.bind_input(i, std::slice::from_raw_parts(ptr, len)) }
        })?;
        self.bound.lock().map_err(|_| PilotError::new_err("bind_input: poisoned"))?[i] = Some(data);
        Ok(mapped)
    }

    /// Feeds input `i` from the model's own buffer again and lets go of the caller's.
    fn unbind_input(&self, i: usize) -> PyResult<bool> {
        let mapped = self.with(|m| m.unbind_input(i))?;
        self.bound.lock().map_err(|_| PilotError::new_err("unbind_input: poisoned"))?[i] = None;
        Ok(mapped)
    }

    /// Whether the device reads input `i` in place (no copy per step).
    fn is_mapped(&self, i: usize) -> PyResult<bool> {
        self.with(|m| m.is_mapped(i))
    }

    /// One step (inputs in, run, outputs back), without the GIL; Ctrl-C stops it where the device can stop
    /// ([`PyModel::stoppable`]).
    fn step(&self, py: Python<'_>) -> PyResult<()> {
        self.stoppable(py, Model::step)
    }

    /// The first half of a step, without the GIL.
    fn enqueue(&self, py: Python<'_>) -> PyResult<()> {
        self.stoppable(py, Model::enqueue)
    }

    /// The second half of a step, without the GIL.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        self.stoppable(py, Model::wait)
    }

    /// (steps, last ms, best ms, last enqueue ms, load ms).
    fn stats(&self) -> PyResult<(u64, f64, f64, f64, f64)> {
        self.with(|m| {
            let s = m.stats();
            Ok((s.steps, s.last_ms, s.best_ms, s.last_enqueue_ms, m.load_time().as_secs_f64() * 1e3))
        })
    }

    fn counters(&self) -> PyResult<Vec<(&'static str, u64)>> {
        self.with(|m| Ok(m.counters()))
    }

    /// Per-kernel (name, seconds) summed over all steps, for a model loaded with profile=True.
    fn profile(&self) -> PyResult<Vec<(String, f64)>> {
        self.with(|m| Ok(m.profile()?.into_iter().map(|(n, t)| (n, t.as_secs_f64())).collect()))
    }

    fn check_min_step_time(&self, limit_ms: f64) -> PyResult<()> {
        self.with(|m| m.check_min_step_time(limit_ms))
    }

    /// openpilot's output_slices as (name, start, stop).
    fn output_slices(&self) -> PyResult<Vec<(String, usize, usize)>> {
        self.with(|m| Ok(m.output_slices()?.into_iter().map(|s| (s.name, s.start, s.stop)).collect()))
    }
}

/// Host memory of a model exported through the buffer protocol; holds the model alive.
#[pyclass(module = "pilot._pilot", frozen)]
struct HostView {
    _owner: Py<PyModel>,
    /// Address and length of a buffer the model owns: fixed for the model's life.
    ptr: usize,
    len: usize,
    readonly: bool,
}

#[pymethods]
impl HostView {
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let (ptr, len, readonly) = {
            let v = slf.get();
            (v.ptr, v.len, v.readonly)
        };
        // SAFETY: `view` is the interpreter's to fill; `ptr..ptr + len` is memory the model owns at a fixed
        // address, and the view references `slf`, which holds the model alive. PyBuffer_FillInfo sets the
        // exception (and returns -1) when a writable view of read-only memory is asked for.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr as *mut c_void, len as isize, c_int::from(readonly), flags)
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

/// Opens an artifact as `pilot run` does (the device defaults to the artifact's backend), without the GIL.
#[pyfunction]
#[pyo3(signature = (path, device=None, threads=None, profile=false, priority=None))]
fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    device: Option<String>,
    threads: Option<usize>,
    profile: bool,
    priority: Option<u8>,
) -> PyResult<PyModel> {
    let opts = Options { device, threads, profile, priority };
    let model = py.detach(|| Model::load(&path, &opts)).map_err(py_err)?;
    let bound = Mutex::new((0..model.inputs().len()).map(|_| None).collect());
    Ok(PyModel { model: Mutex::new(model), bound })
}

#[pymodule]
fn _pilot(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_class::<PyModel>()?;
    m.add_class::<HostView>()?;
    m.add("PilotError", m.py().get_type::<PilotError>())?;
    m.add("GateError", m.py().get_type::<GateError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
