//! [`Model`]: one artifact stepped on one device, with input buffers pilot owns, for embedding.
//!
//! Inputs: each input has a page-aligned host buffer owned by the model ([`Model::input_buffer_mut`]);
//! the caller writes it in place and steps. On devices that map host memory (QCOM) the buffer is
//! bound to the step and read where it lies; elsewhere each step copies it to the device. An input
//! may instead be bound to the caller's memory ([`Model::bind_input`]), read at every step the same
//! two ways. Inputs that are device state (a features queue kept on the device) are sent only on the
//! step after [`Model::set_input`]; otherwise the device keeps its value.
//!
//! Outputs: [`Model::output`] is the session's own buffer, rewritten by each finished step.
//!
//! Step path: [`Model::enqueue`], [`Model::wait`] and [`Model::step`] make no heap allocation.

use std::path::Path;
use std::time::{Duration, Instant};

use pilot_core::artifact::TensorSpec;
use pilot_core::device::{BufferUse, DeviceError};
use pilot_core::{Artifact, Session, SessionError};
use pilot_runtime::devices;

use crate::error::Error;
use crate::slices::{self, OutputSlice};

/// How to open the device (the `pilot run` options of the same names).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `cpu`, `null`, `cl`, `qcom`, `fake-kgsl`, ...; `None`: the artifact's own backend.
    pub device: Option<String>,
    /// CPU worker threads; `None`: all cores.
    pub threads: Option<usize>,
    /// Time each kernel ([`Model::profile`]).
    pub profile: bool,
    /// KGSL context priority 0..15; `None`: the default.
    pub priority: Option<u8>,
}

/// Step times so far (the `ASSERT_MIN_STEP_TIME` gate reads the fastest).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    pub steps: u64,
    /// Enqueue to finished outputs, last step and fastest step, in milliseconds.
    pub last_ms: f64,
    pub best_ms: f64,
    /// Time in enqueue of the last step, in milliseconds.
    pub last_enqueue_ms: f64,
}

const PAGE: usize = 4096;

/// One page; KGSL maps host memory by whole pages.
#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Page([u8; PAGE]);

/// Zeroed, page-aligned host memory of `len` bytes whose address never changes.
struct HostBuffer {
    pages: Vec<Page>,
    len: usize,
}

impl HostBuffer {
    fn new(len: usize) -> HostBuffer {
        HostBuffer { pages: vec![Page([0; PAGE]); len.div_ceil(PAGE).max(1)], len }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `pages` is `pages.len() * PAGE >= len` initialised bytes (Page is a plain byte array, no padding).
        unsafe { std::slice::from_raw_parts(self.pages.as_ptr().cast::<u8>(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.pages.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// See the module docs.
pub struct Model {
    session: Session,
    own: Vec<HostBuffer>,
    /// What each step hands [`Session::enqueue`] for each input: the model's own buffer, memory the caller
    /// bound, or nothing (device state kept). The `'static` is a lie the fields uphold: each slice points
    /// into `own` (heap pages that never move or shrink while the model lives) or into caller memory that
    /// [`Model::bind_input`]'s contract keeps valid until rebound or the model is dropped.
    feed: Vec<&'static [u8]>,
    /// The device reads the input in place (no copy per step).
    mapped: Vec<bool>,
    /// Bound to caller memory rather than the model's own buffer.
    external: Vec<bool>,
    /// The input is a device state buffer.
    state: Vec<bool>,
    in_flight: Option<(u64, Instant)>,
    stats: StepStats,
    load_time: Duration,
    /// A step on this device stops early when [`pilot_runtime::cancel::request`] asks.
    stoppable: bool,
}

fn is_unsupported(e: &SessionError) -> bool {
    matches!(e, SessionError::Device { source: DeviceError::Unsupported(_), .. })
}

/// Erases the lifetime of `data` for [`Model::feed`].
///
/// # Safety
/// `data` must stay valid while it is in `feed` (see the field's docs).
unsafe fn erase(data: &[u8]) -> &'static [u8] {
    // SAFETY: forwarded to the caller.
    unsafe { std::slice::from_raw_parts(data.as_ptr(), data.len()) }
}

impl Model {
    /// Opens the artifact at `path` on the device `opts` names, as `pilot run` does, and binds each input's
    /// host buffer where the device maps host memory. Errors carry the command's one-line text.
    pub fn load(path: &Path, opts: &Options) -> Result<Model, Error> {
        let st = Instant::now();
        let open = || -> anyhow::Result<Session> {
            let artifact = Artifact::open(path)?;
            let dev_opts = devices::DeviceOptions {
                threads: opts.threads,
                profile: opts.profile,
                priority: opts.priority,
                max_memory: None,
            };
            let device = devices::open(opts.device.as_deref(), &artifact.manifest.target, dev_opts)?;
            Ok(Session::new(artifact, device)?)
        };
        let session = open().map_err(|e| Error::from_cli(&e))?;
        let device = opts.device.as_deref().unwrap_or(session.artifact().manifest.target.backend.name());
        let stoppable = pilot_runtime::cancel::stoppable(device);
        let n = session.inputs().len();
        let mut model = Model {
            own: session.inputs().iter().map(|s| HostBuffer::new(s.nbytes())).collect(),
            feed: vec![&[]; n],
            mapped: vec![false; n],
            external: vec![false; n],
            state: session.inputs().iter().map(|s| buffer_use(&session, s) == BufferUse::State).collect(),
            session,
            in_flight: None,
            stats: StepStats::default(),
            load_time: Duration::ZERO,
            stoppable,
        };
        for i in 0..n {
            if !model.state[i] {
                model.feed_own(i).map_err(|e| Error::Load(e.to_string()))?;
            }
        }
        model.load_time = st.elapsed();
        Ok(model)
    }

    /// Feeds input `i` from the model's own buffer, bound in place where the device can.
    fn feed_own(&mut self, i: usize) -> Result<bool, Error> {
        let own = self.own[i].as_slice();
        // SAFETY: `own[i]`'s pages live as long as the model and never move (see `feed`).
        let data = unsafe { erase(own) };
        // SAFETY: as above; writes to the buffer during a step are the caller's documented responsibility.
        unsafe { self.bind(i, data) }
    }

    /// # Safety
    /// `data` stays valid until input `i` is rebound or the model is dropped.
    unsafe fn bind(&mut self, i: usize, data: &'static [u8]) -> Result<bool, Error> {
        let spec = &self.session.inputs()[i];
        let image = self.session.artifact().manifest.buffers[spec.buffer].image.is_some();
        let mapped = if image {
            false
        } else {
            // SAFETY: forwarded from this function's contract.
            match unsafe { self.session.bind_input(i, data) } {
                Ok(()) => true,
                Err(e) if is_unsupported(&e) => false,
                Err(e) => return Err(e.into()),
            }
        };
        self.mapped[i] = mapped;
        self.feed[i] = data;
        Ok(mapped)
    }

    pub fn inputs(&self) -> &[TensorSpec] {
        self.session.inputs()
    }

    pub fn outputs(&self) -> &[TensorSpec] {
        self.session.output_specs()
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Whether a running step on this model's device stops early when [`pilot_runtime::cancel::request`] asks
    /// (the emulator-backed devices); elsewhere a step always runs to its end.
    pub fn stoppable(&self) -> bool {
        self.stoppable
    }

    fn check(&self, kind: &'static str, index: usize, count: usize) -> Result<(), Error> {
        if index >= count {
            return Err(Error::Index { kind, index, count });
        }
        Ok(())
    }

    /// The index of input `name`.
    pub fn input_index(&self, name: &str) -> Result<usize, Error> {
        let specs = self.inputs();
        specs.iter().position(|s| s.name == name).ok_or_else(|| Error::NoInput {
            name: name.into(),
            available: specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// The index of output `name`.
    pub fn output_index(&self, name: &str) -> Result<usize, Error> {
        let specs = self.outputs();
        specs.iter().position(|s| s.name == name).ok_or_else(|| Error::NoOutput {
            name: name.into(),
            available: specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Whether input `i` is device state, sent only on the step after [`Model::set_input`].
    pub fn is_state(&self, i: usize) -> Result<bool, Error> {
        self.check("input", i, self.inputs().len())?;
        Ok(self.state[i])
    }

    /// Whether the device reads input `i` where it lies (no copy per step).
    pub fn is_mapped(&self, i: usize) -> Result<bool, Error> {
        self.check("input", i, self.inputs().len())?;
        Ok(self.mapped[i])
    }

    /// The model's own buffer of input `i` (exactly its bytes). Write it, then step; do not write it while a
    /// step is in flight.
    pub fn input_buffer_mut(&mut self, i: usize) -> Result<&mut [u8], Error> {
        self.check("input", i, self.inputs().len())?;
        Ok(self.own[i].as_mut_slice())
    }

    /// Copies `data` (exactly the input's bytes) into input `i` for the next step. Refused while a step is in
    /// flight and for an input bound to caller memory.
    /// Checks that input `i` exists and holds exactly `nbytes`: the C ABI asks before it makes a slice of the
    /// caller's pointer, so that a wrong size (e.g. SIZE_MAX) is an error, never a slice the pointer cannot back.
    pub fn check_input_size(&self, i: usize, nbytes: usize) -> Result<(), Error> {
        self.check("input", i, self.inputs().len())?;
        let spec = &self.inputs()[i];
        if nbytes != spec.nbytes() {
            return Err(Error::Size { name: spec.name.clone(), expected: spec.nbytes(), found: nbytes });
        }
        Ok(())
    }

    /// As [`Model::check_input_size`], for output `i`.
    pub fn check_output_size(&self, i: usize, nbytes: usize) -> Result<(), Error> {
        let out = self.output(i)?;
        if nbytes != out.len() {
            return Err(Error::Size { name: self.outputs()[i].name.clone(), expected: out.len(), found: nbytes });
        }
        Ok(())
    }

    pub fn set_input(&mut self, i: usize, data: &[u8]) -> Result<(), Error> {
        self.check_input_size(i, data.len())?;
        if self.in_flight.is_some() {
            return Err(Error::Order("set_input: a step is in flight; wait for it first"));
        }
        if self.external[i] {
            return Err(Error::Order("set_input: the input is bound to caller memory; write there or unbind it"));
        }
        self.own[i].as_mut_slice().copy_from_slice(data);
        if self.state[i] {
            // SAFETY: `own[i]` lives as long as the model (see `feed`); the copy path reads it at enqueue.
            self.feed[i] = unsafe { erase(self.own[i].as_slice()) };
        }
        Ok(())
    }

    /// Binds input `i` to `data` (exactly its bytes): every later step reads it there, in place where the device
    /// maps host memory (returns true) or copied at each enqueue (returns false). State inputs cannot be bound.
    ///
    /// # Safety
    /// `data` must stay valid until the input is rebound ([`Model::bind_input`], [`Model::unbind_input`]) or the
    /// model is dropped, and must not be written while a step is in flight.
    pub unsafe fn bind_input(&mut self, i: usize, data: &[u8]) -> Result<bool, Error> {
        self.check_input_size(i, data.len())?;
        if self.state[i] {
            return Err(Error::Order("bind_input: the input is device state; set it with set_input"));
        }
        // SAFETY: forwarded from this function's contract.
        let mapped = unsafe { self.bind(i, erase(data)) }?;
        self.external[i] = true;
        Ok(mapped)
    }

    /// Feeds input `i` from the model's own buffer again.
    pub fn unbind_input(&mut self, i: usize) -> Result<bool, Error> {
        self.check("input", i, self.inputs().len())?;
        if self.state[i] {
            return Err(Error::Order("unbind_input: the input is device state"));
        }
        self.external[i] = false;
        self.feed_own(i)
    }

    /// Copies the inputs that need it and submits the step. Allocation-free.
    pub fn enqueue(&mut self) -> Result<(), Error> {
        if self.in_flight.is_some() {
            return Err(Error::Order("enqueue: a step is already in flight; wait for it first"));
        }
        let st = Instant::now();
        let value = self.session.enqueue(&self.feed)?;
        for (feed, _) in self.feed.iter_mut().zip(&self.state).filter(|(_, &s)| s) {
            *feed = &[];
        }
        self.in_flight = Some((value, st));
        self.stats.last_enqueue_ms = st.elapsed().as_secs_f64() * 1e3;
        Ok(())
    }

    /// Waits for the step in flight and copies its outputs back. Allocation-free.
    pub fn wait(&mut self) -> Result<(), Error> {
        let Some((value, st)) = self.in_flight.take() else {
            return Err(Error::Order("wait: no step in flight; enqueue one first"));
        };
        self.session.finish(value)?;
        let ms = st.elapsed().as_secs_f64() * 1e3;
        let s = &mut self.stats;
        s.best_ms = if s.steps == 0 { ms } else { s.best_ms.min(ms) };
        s.last_ms = ms;
        s.steps += 1;
        Ok(())
    }

    /// One step: [`Model::enqueue`] then [`Model::wait`].
    pub fn step(&mut self) -> Result<(), Error> {
        self.enqueue()?;
        self.wait()
    }

    /// Output `i` of the last finished step: the session's own buffer (exactly the output's bytes).
    pub fn output(&self, i: usize) -> Result<&[u8], Error> {
        self.check("output", i, self.outputs().len())?;
        Ok(&self.session.outputs()[i])
    }

    /// Copies output `i` into `dst`, which must be exactly its size.
    pub fn get_output(&self, i: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.check_output_size(i, dst.len())?;
        dst.copy_from_slice(self.output(i)?);
        Ok(())
    }

    pub fn stats(&self) -> StepStats {
        self.stats
    }

    /// Time from the call to [`Model::load`] until it returned.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The device's counters (QCOM: ioctls, dwords per step, host and GPU time in submit); empty elsewhere.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.session.device_counters()
    }

    /// Per-kernel time summed over all steps, for a model opened with [`Options::profile`].
    pub fn profile(&self) -> Result<Vec<(String, Duration)>, Error> {
        self.session.profile().ok_or(Error::NoProfile)
    }

    /// The `ASSERT_MIN_STEP_TIME` gate: fails unless the fastest step so far took less than `limit_ms`.
    /// A limit that is not a positive finite number (NaN would pass every comparison) is an invalid argument.
    pub fn check_min_step_time(&self, limit_ms: f64) -> Result<(), Error> {
        if !(limit_ms.is_finite() && limit_ms > 0.0) {
            return Err(Error::GateLimit(limit_ms));
        }
        match self.stats {
            StepStats { steps: 0, .. } => Err(Error::NoSteps),
            StepStats { best_ms, .. } if best_ms >= limit_ms => Err(Error::StepGate { best: best_ms, limit: limit_ms }),
            _ => Ok(()),
        }
    }

    /// openpilot's `output_slices`: from the artifact's output specs when it records them, else decoded from
    /// the `output_slices` metadata property (empty when there is neither). Each must lie inside the first
    /// output's elements.
    pub fn output_slices(&self) -> Result<Vec<OutputSlice>, Error> {
        let m = &self.session.artifact().manifest;
        let recorded: Vec<OutputSlice> = m
            .outputs
            .iter()
            .flat_map(|o| &o.slices)
            .map(|(name, start, stop)| OutputSlice { name: name.clone(), start: *start, stop: *stop })
            .collect();
        if !recorded.is_empty() {
            return Ok(recorded);
        }
        let Some((_, prop)) = m.metadata.props.iter().find(|(k, _)| k == "output_slices") else {
            return Ok(Vec::new());
        };
        let decoded = slices::decode(prop).map_err(Error::Slices)?;
        let width = m.outputs.first().map_or(0, TensorSpec::elements);
        if let Some(s) = decoded.iter().find(|s| s.stop > width) {
            return Err(Error::Slices(format!(
                "`{}` ends at {}, past the first output's {width} elements",
                s.name, s.stop
            )));
        }
        Ok(decoded)
    }
}

fn buffer_use(session: &Session, spec: &TensorSpec) -> BufferUse {
    session.artifact().manifest.buffers[spec.buffer].kind
}
