//! A session runs one artifact on one device: load → verify → allocate → upload → link → ready,
//! then [`Session::step`] as often as needed.
//!
//! Step-path contract: [`Session::enqueue`], [`Session::finish`] and [`Session::step`] perform no heap
//! allocation on success (proved by a counting-allocator test). State buffers stay on the device across
//! steps; the step's copy ops carry recurrent values (such as a features queue) forward.

use std::time::{Duration, Instant};

use crate::artifact::{Artifact, TensorSpec};
use crate::device::{Arg, BufferId, BufferUse, Device, DeviceError, ProgramSpec, StepId, StepOp};

/// Why a session could not be built or stepped. Display is one line.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("artifact targets `{target}` but the device is `{device}`")]
    Incompatible { target: String, device: String },
    #[error("expected {expected} inputs, got {found}")]
    InputCount { expected: usize, found: usize },
    #[error("input {index} needs {expected} bytes, got {found}")]
    InputSize { index: usize, expected: usize, found: usize },
    #[error("{phase}: {source}")]
    Device { phase: &'static str, source: DeviceError },
    #[error("{what}: cannot allocate {bytes} bytes of host memory")]
    HostMemory { what: String, bytes: usize },
}

/// `bytes` zeros on the heap, or an error instead of the allocator's abort when memory runs out.
fn zeroed(bytes: usize, what: impl FnOnce() -> String) -> Result<Vec<u8>, SessionError> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes).map_err(|_| SessionError::HostMemory { what: what(), bytes })?;
    v.resize(bytes, 0);
    Ok(v)
}

/// How long each load phase took.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadTimes {
    pub allocate_upload: Duration,
    pub programs: Duration,
    pub link: Duration,
}

/// See the module docs.
pub struct Session {
    device: Box<dyn Device>,
    artifact: Artifact,
    /// Device handle of each artifact buffer.
    buffers: Vec<BufferId>,
    step: StepId,
    outputs: Vec<Vec<u8>>,
    load_times: LoadTimes,
    /// Inputs bound to host memory with [`Session::bind_input`]: read in place, never copied.
    bound: Vec<bool>,
}

impl Session {
    /// Allocates every buffer, uploads weights (straight from the artifact's map; every device keeps its own copy, so
    /// the model never reads the file again after this), loads the programs
    /// and links the step.
    pub fn new(artifact: Artifact, mut device: Box<dyn Device>) -> Result<Session, SessionError> {
        let m = &artifact.manifest;
        if !device.runs(&m.target) {
            let info = device.info();
            return Err(SessionError::Incompatible {
                target: m.target.to_string(),
                device: format!("{}:{}", info.backend, info.arch),
            });
        }
        let err = |phase| move |source| SessionError::Device { phase, source };

        let t0 = Instant::now();
        let mut buffers = Vec::with_capacity(m.buffers.len());
        for b in &m.buffers {
            let id = match (b.kind, b.blob) {
                _ if b.image.is_some() => {
                    let desc = b.image.expect("checked");
                    device.alloc_image(desc, b.kind).and_then(|id| match b.blob {
                        Some(r) => device.copy_in(id, 0, artifact.blob(r)).map(|()| id),
                        None => Ok(id),
                    })
                }
                (BufferUse::Weight, Some(r)) => device.import(artifact.blob_host_bytes(r), b.kind),
                (_, Some(r)) => {
                    device.alloc(b.size, b.kind).and_then(|id| device.copy_in(id, 0, artifact.blob(r)).map(|()| id))
                }
                (_, None) => device.alloc(b.size, b.kind),
            }
            .map_err(err("upload"))?;
            buffers.push(id);
        }
        let t1 = Instant::now();
        let programs = m
            .programs
            .iter()
            .map(|p| {
                device.load_program(&ProgramSpec {
                    name: &p.name,
                    format: p.format,
                    code: artifact.blob(p.blob),
                    arg_count: p.args,
                    amdgpu: p.amdgpu.as_ref(),
                    ir3: p.ir3.as_ref(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(err("load program"))?;
        let t2 = Instant::now();
        let resolve = |a: &Arg| Arg { buffer: buffers[a.buffer.0 as usize], offset: a.offset };
        let ops: Vec<StepOp> = m
            .step
            .iter()
            .map(|op| match op {
                StepOp::Dispatch { program, args, global, local } => StepOp::Dispatch {
                    program: programs[program.0 as usize],
                    args: args.iter().map(resolve).collect(),
                    global: *global,
                    local: *local,
                },
                StepOp::Copy { src, dst, len } => StepOp::Copy { src: resolve(src), dst: resolve(dst), len: *len },
            })
            .collect();
        let step = device.link_step(&ops).map_err(err("link"))?;
        let t3 = Instant::now();
        let outputs = m
            .outputs
            .iter()
            .map(|o| zeroed(o.nbytes(), || format!("output `{}`", o.name)))
            .collect::<Result<_, _>>()?;
        Ok(Session {
            device,
            buffers,
            step,
            outputs,
            load_times: LoadTimes { allocate_upload: t1 - t0, programs: t2 - t1, link: t3 - t2 },
            bound: vec![false; artifact.manifest.inputs.len()],
            artifact,
        })
    }

    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }

    pub fn inputs(&self) -> &[TensorSpec] {
        &self.artifact.manifest.inputs
    }

    pub fn output_specs(&self) -> &[TensorSpec] {
        &self.artifact.manifest.outputs
    }

    pub fn load_times(&self) -> LoadTimes {
        self.load_times
    }

    /// Binds input `i` to host memory without copying (camera frames that arrive as pointers): later
    /// steps read `data` in place, and the slice [`Session::enqueue`] is given for this input is
    /// ignored. Devices that cannot map host memory refuse ([`DeviceError::Unsupported`]).
    ///
    /// # Safety
    /// `data` must stay valid until the input is rebound or the session is dropped, and must not be
    /// written while a step is in flight.
    pub unsafe fn bind_input(&mut self, i: usize, data: &[u8]) -> Result<(), SessionError> {
        let m = &self.artifact.manifest;
        let spec = m.inputs.get(i).ok_or(SessionError::InputCount { expected: m.inputs.len(), found: i + 1 })?;
        if data.len() != spec.nbytes() {
            return Err(SessionError::InputSize { index: i, expected: spec.nbytes(), found: data.len() });
        }
        // SAFETY: forwarded: the caller keeps `data` valid and unwritten as this function requires.
        unsafe { self.device.bind_host(self.step, self.buffers[spec.buffer], data.as_ptr(), data.len()) }
            .map_err(|source| SessionError::Device { phase: "bind input", source })?;
        self.bound[i] = true;
        Ok(())
    }

    /// Copies `inputs` (one byte slice per model input, in order, exact size) to the device and
    /// submits the step. An input bound to a state buffer may be given as an empty slice to keep the
    /// device-resident value; the slice of an input bound with [`Session::bind_input`] is ignored.
    /// Returns the timeline value to pass to [`Session::finish`].
    pub fn enqueue(&mut self, inputs: &[&[u8]]) -> Result<u64, SessionError> {
        let m = &self.artifact.manifest;
        if inputs.len() != m.inputs.len() {
            return Err(SessionError::InputCount { expected: m.inputs.len(), found: inputs.len() });
        }
        for (index, (spec, data)) in m.inputs.iter().zip(inputs).enumerate() {
            let expected = spec.nbytes();
            if self.bound[index] || (data.is_empty() && m.buffers[spec.buffer].kind == BufferUse::State) {
                continue;
            }
            if data.len() != expected {
                return Err(SessionError::InputSize { index, expected, found: data.len() });
            }
            self.device
                .copy_in(self.buffers[spec.buffer], 0, data)
                .map_err(|source| SessionError::Device { phase: "copy in", source })?;
        }
        self.device.submit(self.step).map_err(|source| SessionError::Device { phase: "submit", source })
    }

    /// Waits for the step that `enqueue` returned and copies the outputs back.
    pub fn finish(&mut self, timeline: u64) -> Result<(), SessionError> {
        self.device.wait(timeline).map_err(|source| SessionError::Device { phase: "wait", source })?;
        for (spec, out) in self.artifact.manifest.outputs.iter().zip(&mut self.outputs) {
            self.device
                .copy_out(self.buffers[spec.buffer], 0, out)
                .map_err(|source| SessionError::Device { phase: "copy out", source })?;
        }
        Ok(())
    }

    /// One step: [`Session::enqueue`] then [`Session::finish`].
    pub fn step(&mut self, inputs: &[&[u8]]) -> Result<(), SessionError> {
        let v = self.enqueue(inputs)?;
        self.finish(v)
    }

    /// The outputs of the last finished step, in order.
    pub fn outputs(&self) -> &[Vec<u8>] {
        &self.outputs
    }

    /// Restores every state buffer to its initial contents (zero where the artifact has none).
    pub fn reset_state(&mut self) -> Result<(), SessionError> {
        let m = &self.artifact.manifest;
        for (i, b) in m.buffers.iter().enumerate() {
            if b.kind != BufferUse::State {
                continue;
            }
            let zeros;
            let data = match b.blob {
                Some(r) => self.artifact.blob(r),
                None => {
                    zeros = zeroed(b.size, || format!("resetting state buffer {i}"))?;
                    &zeros
                }
            };
            self.device
                .copy_in(self.buffers[i], 0, data)
                .map_err(|source| SessionError::Device { phase: "reset state", source })?;
        }
        Ok(())
    }

    /// The device's benchmark counters (see [`Device::counters`]).
    pub fn device_counters(&self) -> Vec<(&'static str, u64)> {
        self.device.counters()
    }

    /// Per-op times of the step summed over all steps so far, with the op names (program name or
    /// `copy`), when the device profiles; `None` otherwise.
    pub fn profile(&self) -> Option<Vec<(String, std::time::Duration)>> {
        let times = self.device.profile(self.step)?;
        let m = &self.artifact.manifest;
        Some(
            m.step
                .iter()
                .zip(times)
                .map(|(op, t)| match op {
                    StepOp::Dispatch { program, .. } => (m.programs[program.0 as usize].name.clone(), t),
                    StepOp::Copy { .. } => ("copy".to_string(), t),
                })
                .collect(),
        )
    }

    /// Blocks until all submitted work is done.
    pub fn synchronize(&mut self) -> Result<(), SessionError> {
        self.device.synchronize().map_err(|source| SessionError::Device { phase: "synchronize", source })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::artifact::{ArtifactWriter, BufferSpec, Manifest, Metadata, Placement, Target};
    use crate::null::NullDevice;
    use crate::target::Backend;
    use crate::DType;

    /// An artifact whose output (and so its host copy) is `bytes` long; the NULL device allocates
    /// nothing, so only the session's own host memory is at stake.
    fn with_output_of(bytes: usize) -> Artifact {
        let spec = |size, kind| BufferSpec {
            size,
            dtype: DType::U8,
            kind,
            placement: Placement::Device,
            blob: None,
            checksum: None,
            image: None,
        };
        let port = |name: &str, size, buffer| TensorSpec {
            name: name.into(),
            shape: vec![size],
            dtype: DType::U8,
            buffer,
            slices: vec![],
        };
        let mut m = Manifest {
            target: Target::default_for(Backend::Null).expect("a host the tests run on"),
            inputs: vec![port("x", 4, 0)],
            outputs: vec![port("y", bytes, 1)],
            buffers: vec![spec(4, BufferUse::Input), spec(bytes, BufferUse::Output)],
            programs: vec![],
            step: vec![],
            metadata: Metadata::default(),
            blob_count: 0,
            pads: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        ArtifactWriter::new().write(&path, &mut m).unwrap();
        Artifact::from_bytes(Arc::new(std::fs::read(&path).unwrap())).unwrap()
    }

    #[test]
    fn outputs_beyond_host_memory_are_an_error() {
        let err =
            Session::new(with_output_of(1 << 60), Box::new(NullDevice::new(std::env::consts::ARCH))).err().unwrap();
        assert!(matches!(err, SessionError::HostMemory { bytes, .. } if bytes == 1 << 60), "{err}");
        assert_eq!(err.to_string(), format!("output `y`: cannot allocate {} bytes of host memory", 1u64 << 60));
        let s = Session::new(with_output_of(8), Box::new(NullDevice::new(std::env::consts::ARCH))).unwrap();
        assert_eq!(s.outputs(), &[vec![0u8; 8]]);
    }
}
