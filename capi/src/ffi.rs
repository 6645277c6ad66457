//! The C ABI (`include/pilot.h`, generated from this file by cbindgen).
//!
//! Every function returns a [`PilotStatus`] (or a plain value for queries that cannot fail); on failure the
//! one-line message is [`pilot_last_error`]'s until the next failing call on the same thread. No panic
//! crosses the boundary: each entry catches it and reports [`PilotStatus::Panic`]. Pointers handed out
//! (names, shapes, buffers) stay valid until the model is closed.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;

use pilot_core::DType;

use crate::error::{Error, PilotStatus};
use crate::model::{Model, Options};

/// An open model. Created by [`pilot_model_open`], freed by [`pilot_model_close`]. Not thread-safe: use
/// one model from one thread at a time.
pub struct PilotModel {
    model: Model,
    input_names: Vec<CString>,
    output_names: Vec<CString>,
    /// Names handed out by [`pilot_model_counter`] and [`pilot_model_profile_entry`], kept until close.
    names: Vec<CString>,
}

/// Element types of inputs and outputs (numpy names: float32, float16, ..., bool).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PilotDtype {
    F32 = 0,
    F16 = 1,
    F64 = 2,
    I8 = 3,
    I16 = 4,
    I32 = 5,
    I64 = 6,
    U8 = 7,
    U16 = 8,
    U32 = 9,
    U64 = 10,
    Bool = 11,
    BF16 = 12,
}

impl From<DType> for PilotDtype {
    fn from(d: DType) -> PilotDtype {
        match d {
            DType::F32 => PilotDtype::F32,
            DType::F16 => PilotDtype::F16,
            DType::F64 => PilotDtype::F64,
            DType::I8 => PilotDtype::I8,
            DType::I16 => PilotDtype::I16,
            DType::I32 => PilotDtype::I32,
            DType::I64 => PilotDtype::I64,
            DType::U8 => PilotDtype::U8,
            DType::U16 => PilotDtype::U16,
            DType::U32 => PilotDtype::U32,
            DType::U64 => PilotDtype::U64,
            DType::Bool => PilotDtype::Bool,
            DType::BF16 => PilotDtype::BF16,
        }
    }
}

/// How to open a model; a null pointer means all defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PilotOptions {
    /// CPU worker threads; 0: all cores.
    pub threads: u32,
    /// Time each kernel (see [`pilot_model_profile_entry`]).
    pub profile: bool,
    /// KGSL context priority 0 (highest) .. 15; negative: the default.
    pub priority: i32,
}

/// An input or output: its name, element type, shape and size in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PilotTensorInfo {
    pub name: *const c_char,
    pub dtype: PilotDtype,
    pub ndim: usize,
    pub shape: *const usize,
    pub nbytes: usize,
}

/// Step times so far, in milliseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PilotStats {
    pub steps: u64,
    pub last_ms: f64,
    pub best_ms: f64,
    pub last_enqueue_ms: f64,
    pub load_ms: f64,
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(e: &Error) {
    let text = CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
}

/// Runs `f`, turning its error or panic into a status and the thread's last error.
fn guard(f: impl FnOnce() -> Result<(), Error>) -> PilotStatus {
    let e = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return PilotStatus::Ok,
        Ok(Err(e)) => e,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown payload".into());
            Error::Panic(text)
        }
    };
    set_last_error(&e);
    e.status()
}

/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn out<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T, Error> {
    // SAFETY: forwarded to the caller.
    unsafe { p.as_mut() }.ok_or(Error::Null(what))
}

/// The addresses of the models [`pilot_model_open`] handed out and [`pilot_model_close`] has not freed: a handle
/// closed twice, or used after its close, is refused with an error instead of touching freed memory (as long as
/// the allocator has not handed the same address to a newer model).
static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn is_open(m: *const PilotModel) -> bool {
    OPEN.lock().unwrap_or_else(|e| e.into_inner()).contains(&(m as usize))
}

/// # Safety
/// `m` is null or a model from [`pilot_model_open`], used by one thread at a time.
unsafe fn model<'a>(m: *mut PilotModel) -> Result<&'a mut PilotModel, Error> {
    if m.is_null() {
        return Err(Error::Null("model"));
    }
    if !is_open(m) {
        return Err(Error::Closed);
    }
    // SAFETY: an open model (checked above) is a live allocation from pilot_model_open.
    Ok(unsafe { &mut *m })
}

/// # Safety
/// `s` is null or a NUL-terminated string.
unsafe fn string<'a>(s: *const c_char, what: &'static str) -> Result<&'a str, Error> {
    if s.is_null() {
        return Err(Error::Null(what));
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(s) }.to_str().map_err(|_| Error::Utf8 { what })
}

/// # Safety
/// `data` is null only with `len` 0, else valid for `len` bytes.
unsafe fn bytes<'a>(data: *const c_void, len: usize, what: &'static str) -> Result<&'a [u8], Error> {
    if data.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Error::Null(what)) };
    }
    // SAFETY: non-null and valid for `len` bytes per the caller.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

fn c_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<Vec<CString>, Error> {
    names.map(|n| CString::new(n).map_err(|_| Error::Load(format!("tensor name `{n}` contains NUL")))).collect()
}

/// The message of the last failing call on this thread ("" if none). Valid until the next failing call on
/// this thread.
#[no_mangle]
pub extern "C" fn pilot_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// pilot's version, e.g. "0.1.0".
#[no_mangle]
pub extern "C" fn pilot_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Opens the artifact at `path` on `device` ("cpu", "null", "cl", "qcom", "fake-kgsl"; null: the artifact's
/// own backend), as `pilot run` does, and stores the model in `*out`.
///
/// # Safety
/// `path` and `device` (when not null) are NUL-terminated; `options` is null or valid; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_open(
    path: *const c_char,
    device: *const c_char,
    options: *const PilotOptions,
    out: *mut *mut PilotModel,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (out, path) = unsafe { (self::out(out, "out")?, string(path, "path")?) };
        // SAFETY: per this function's contract.
        let device = if device.is_null() { None } else { Some(unsafe { string(device, "device") }?.to_string()) };
        // SAFETY: null or valid per this function's contract.
        let o =
            unsafe { options.as_ref() }.copied().unwrap_or(PilotOptions { threads: 0, profile: false, priority: -1 });
        let opts = Options {
            device,
            threads: (o.threads > 0).then_some(o.threads as usize),
            profile: o.profile,
            priority: u8::try_from(o.priority).ok(),
        };
        let model = Model::load(Path::new(path), &opts)?;
        let input_names = c_names(model.inputs().iter().map(|s| s.name.as_str()))?;
        let output_names = c_names(model.outputs().iter().map(|s| s.name.as_str()))?;
        let m = Box::into_raw(Box::new(PilotModel { model, input_names, output_names, names: Vec::new() }));
        OPEN.lock().unwrap_or_else(|e| e.into_inner()).push(m as usize);
        *out = m;
        Ok(())
    })
}

/// Frees a model (null is ignored: `PILOT_OK`). Waits for nothing: finish a step in flight first. A model
/// already closed is refused (`PILOT_INVALID_ARGUMENT`), not freed twice.
///
/// # Safety
/// `m` is null or a model from [`pilot_model_open`].
#[no_mangle]
pub unsafe extern "C" fn pilot_model_close(m: *mut PilotModel) -> PilotStatus {
    guard(|| {
        if m.is_null() {
            return Ok(());
        }
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        let at = open.iter().position(|&p| p == m as usize).ok_or(Error::Closed)?;
        open.swap_remove(at);
        drop(open);
        // SAFETY: `m` came from Box::into_raw in pilot_model_open and was still open (removed above, once).
        drop(unsafe { Box::from_raw(m) });
        Ok(())
    })
}

/// The number of inputs (0 for a null or closed model).
///
/// # Safety
/// `m` is null or an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_input_count(m: *const PilotModel) -> usize {
    // SAFETY: per this function's contract.
    unsafe { model(m.cast_mut()) }.map_or(0, |m| m.model.inputs().len())
}

/// The number of outputs (0 for a null or closed model).
///
/// # Safety
/// `m` is null or an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_output_count(m: *const PilotModel) -> usize {
    // SAFETY: per this function's contract.
    unsafe { model(m.cast_mut()) }.map_or(0, |m| m.model.outputs().len())
}

fn info(spec: &pilot_core::artifact::TensorSpec, name: &CString) -> PilotTensorInfo {
    PilotTensorInfo {
        name: name.as_ptr(),
        dtype: spec.dtype.into(),
        ndim: spec.shape.len(),
        shape: spec.shape.as_ptr(),
        nbytes: spec.nbytes(),
    }
}

/// Describes input `index`.
///
/// # Safety
/// `m` is an open model; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_input_info(
    m: *mut PilotModel,
    index: usize,
    out: *mut PilotTensorInfo,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, out) = unsafe { (model(m)?, self::out(out, "out")?) };
        m.model.is_state(index)?;
        *out = info(&m.model.inputs()[index], &m.input_names[index]);
        Ok(())
    })
}

/// Describes output `index`.
///
/// # Safety
/// `m` is an open model; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_output_info(
    m: *mut PilotModel,
    index: usize,
    out: *mut PilotTensorInfo,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, out) = unsafe { (model(m)?, self::out(out, "out")?) };
        m.model.output(index)?;
        *out = info(&m.model.outputs()[index], &m.output_names[index]);
        Ok(())
    })
}

/// The index of the input named `name`.
///
/// # Safety
/// `m` is an open model; `name` is NUL-terminated; `index` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_input_index(
    m: *mut PilotModel,
    name: *const c_char,
    index: *mut usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, name, index) = unsafe { (model(m)?, string(name, "name")?, out(index, "index")?) };
        *index = m.model.input_index(name)?;
        Ok(())
    })
}

/// The index of the output named `name`.
///
/// # Safety
/// `m` is an open model; `name` is NUL-terminated; `index` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_output_index(
    m: *mut PilotModel,
    name: *const c_char,
    index: *mut usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, name, index) = unsafe { (model(m)?, string(name, "name")?, out(index, "index")?) };
        *index = m.model.output_index(name)?;
        Ok(())
    })
}

/// pilot's own host buffer of input `index` (`*nbytes` bytes): write it, then step. Do not write it while a
/// step is in flight. Where the device maps host memory it reads this buffer in place.
///
/// # Safety
/// `m` is an open model; `data` and `nbytes` are valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_input_buffer(
    m: *mut PilotModel,
    index: usize,
    data: *mut *mut c_void,
    nbytes: *mut usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, data, nbytes) = unsafe { (model(m)?, out(data, "data")?, out(nbytes, "nbytes")?) };
        let buf = m.model.input_buffer_mut(index)?;
        (*data, *nbytes) = (buf.as_mut_ptr().cast(), buf.len());
        Ok(())
    })
}

/// Copies `nbytes` (exactly the input's size) from `data` into input `index` for the next step.
///
/// # Safety
/// `m` is an open model; `data` is valid for `nbytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_set_input(
    m: *mut PilotModel,
    index: usize,
    data: *const c_void,
    nbytes: usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { model(m)? };
        m.model.check_input_size(index, nbytes)?;
        // SAFETY: per this function's contract; `nbytes` is the input's size, which pilot allocated itself.
        let data = unsafe { bytes(data, nbytes, "data")? };
        m.model.set_input(index, data)
    })
}

/// Binds input `index` to the caller's `nbytes` bytes at `data`: every later step reads them there, in place
/// where the device maps host memory (`*zero_copy` true: QCOM) or copied at each enqueue. A null `data`
/// binds pilot's own buffer again. `zero_copy` may be null.
///
/// # Safety
/// `m` is an open model; `data` stays valid, and unwritten while a step is in flight, until the input is
/// rebound or the model is closed.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_bind_input(
    m: *mut PilotModel,
    index: usize,
    data: *const c_void,
    nbytes: usize,
    zero_copy: *mut bool,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { model(m)? };
        let mapped = if data.is_null() {
            m.model.unbind_input(index)?
        } else {
            m.model.check_input_size(index, nbytes)?;
            // SAFETY: per this function's contract (valid for `nbytes`, kept valid until rebound or closed).
            unsafe { m.model.bind_input(index, bytes(data, nbytes, "data")?) }?
        };
        // SAFETY: null or valid per this function's contract.
        if let Some(z) = unsafe { zero_copy.as_mut() } {
            *z = mapped;
        }
        Ok(())
    })
}

/// One step: copies the inputs that need it, runs, waits and copies the outputs back. Allocation-free.
///
/// # Safety
/// `m` is an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_step(m: *mut PilotModel) -> PilotStatus {
    // SAFETY: per this function's contract.
    guard(|| unsafe { model(m) }?.model.step())
}

/// Asks (`stop` true) every step now running on a device that can stop early ([`pilot_model_stoppable`]) to
/// stop: it fails with `PILOT_STATUS_STEP` and "interrupted" soon after, and the model stays usable. The request
/// is process-wide and stays until cleared (`stop` false); clear it before the next step. Safe to call from any
/// thread and from a signal handler (one atomic store).
#[no_mangle]
pub extern "C" fn pilot_request_stop(stop: bool) {
    pilot_runtime::cancel::request(stop);
}

/// Whether a step of `m` stops early on [`pilot_request_stop`] (the emulator-backed devices: `amd-emu`, `sim`);
/// elsewhere a step runs to its end. False for a null or closed model.
///
/// # Safety
/// `m` is null or an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_stoppable(m: *const PilotModel) -> bool {
    // SAFETY: per this function's contract.
    unsafe { model(m.cast_mut()) }.is_ok_and(|m| m.model.stoppable())
}

/// The first half of a step: copies the inputs that need it and submits. Allocation-free.
///
/// # Safety
/// `m` is an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_enqueue(m: *mut PilotModel) -> PilotStatus {
    // SAFETY: per this function's contract.
    guard(|| unsafe { model(m) }?.model.enqueue())
}

/// The second half: waits for the step in flight and copies its outputs back. Allocation-free.
///
/// # Safety
/// `m` is an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_wait(m: *mut PilotModel) -> PilotStatus {
    // SAFETY: per this function's contract.
    guard(|| unsafe { model(m) }?.model.wait())
}

/// pilot's own buffer of output `index` (`*nbytes` bytes), rewritten by each finished step.
///
/// # Safety
/// `m` is an open model; `data` and `nbytes` are valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_output(
    m: *mut PilotModel,
    index: usize,
    data: *mut *const c_void,
    nbytes: *mut usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, data, nbytes) = unsafe { (model(m)?, out(data, "data")?, out(nbytes, "nbytes")?) };
        let buf = m.model.output(index)?;
        (*data, *nbytes) = (buf.as_ptr().cast(), buf.len());
        Ok(())
    })
}

/// Copies output `index` into `dst`, whose `nbytes` must be exactly the output's size.
///
/// # Safety
/// `m` is an open model; `dst` is valid for `nbytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_get_output(
    m: *mut PilotModel,
    index: usize,
    dst: *mut c_void,
    nbytes: usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let m = unsafe { model(m)? };
        if dst.is_null() {
            return Err(Error::Null("dst"));
        }
        m.model.check_output_size(index, nbytes)?;
        // SAFETY: non-null and valid for `nbytes` bytes per this function's contract.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), nbytes) };
        m.model.get_output(index, dst)
    })
}

/// Step times so far and the load time.
///
/// # Safety
/// `m` is an open model; `out` is valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_stats(m: *mut PilotModel, out: *mut PilotStats) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, out) = unsafe { (model(m)?, self::out(out, "out")?) };
        let s = m.model.stats();
        *out = PilotStats {
            steps: s.steps,
            last_ms: s.last_ms,
            best_ms: s.best_ms,
            last_enqueue_ms: s.last_enqueue_ms,
            load_ms: m.model.load_time().as_secs_f64() * 1e3,
        };
        Ok(())
    })
}

/// The `ASSERT_MIN_STEP_TIME` gate: [`PilotStatus::Gate`] unless the fastest step so far took less than
/// `limit_ms` (the message is the command's).
///
/// # Safety
/// `m` is an open model.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_check_min_step_time(m: *mut PilotModel, limit_ms: f64) -> PilotStatus {
    // SAFETY: per this function's contract.
    guard(|| unsafe { model(m) }?.model.check_min_step_time(limit_ms))
}

/// Device counter `index` (QCOM: ioctls, submits, host_submit_ns, gpu_command_ns, step_dwords):
/// [`PilotStatus::InvalidArgument`] past the last one. The name stays valid until close.
///
/// # Safety
/// `m` is an open model; `name` and `value` are valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_counter(
    m: *mut PilotModel,
    index: usize,
    name: *mut *const c_char,
    value: *mut u64,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, name, value) = unsafe { (model(m)?, out(name, "name")?, out(value, "value")?) };
        let counters = m.model.counters();
        let &(n, v) = counters.get(index).ok_or(Error::Index { kind: "counter", index, count: counters.len() })?;
        *name = m.keep_name(n);
        *value = v;
        Ok(())
    })
}

/// Kernel `index` of the step's profile (a model opened with `profile`): its name and its time summed over
/// all steps, in nanoseconds; [`PilotStatus::InvalidArgument`] past the last op.
///
/// # Safety
/// `m` is an open model; `name` and `total_ns` are valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_profile_entry(
    m: *mut PilotModel,
    index: usize,
    name: *mut *const c_char,
    total_ns: *mut u64,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, name, total_ns) = unsafe { (model(m)?, out(name, "name")?, out(total_ns, "total_ns")?) };
        let ops = m.model.profile()?;
        let (n, t) = ops.get(index).ok_or(Error::Index { kind: "profile entry", index, count: ops.len() })?;
        *name = m.keep_name(n);
        *total_ns = t.as_nanos() as u64;
        Ok(())
    })
}

/// Slice `index` of openpilot's `output_slices` (from the artifact's outputs or its metadata, decoded without
/// unpickling): its name and the elements `start..stop` of the flattened first output;
/// [`PilotStatus::InvalidArgument`] past the last one, [`PilotStatus::Metadata`] when the metadata is invalid.
///
/// # Safety
/// `m` is an open model; `name`, `start` and `stop` are valid.
#[no_mangle]
pub unsafe extern "C" fn pilot_model_output_slice(
    m: *mut PilotModel,
    index: usize,
    name: *mut *const c_char,
    start: *mut usize,
    stop: *mut usize,
) -> PilotStatus {
    guard(|| {
        // SAFETY: per this function's contract.
        let (m, name, start, stop) =
            unsafe { (model(m)?, out(name, "name")?, out(start, "start")?, out(stop, "stop")?) };
        let slices = m.model.output_slices()?;
        let s = slices.get(index).ok_or(Error::Index { kind: "output slice", index, count: slices.len() })?;
        *name = m.keep_name(&s.name);
        (*start, *stop) = (s.start, s.stop);
        Ok(())
    })
}

impl PilotModel {
    /// A NUL-terminated copy of `name` that lives until close (reused when asked again).
    fn keep_name(&mut self, name: &str) -> *const c_char {
        if let Some(c) = self.names.iter().find(|c| c.as_bytes() == name.as_bytes()) {
            return c.as_ptr();
        }
        self.names.push(CString::new(name.replace('\0', " ")).unwrap_or_default());
        self.names.last().expect("just pushed").as_ptr()
    }
}
