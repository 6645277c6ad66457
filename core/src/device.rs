//! The narrow device interface every backend implements.
//!
//! It is shaped after tinygrad's HCQ queues and IREE's HAL queue verbs, so that the Adreno/KGSL backend
//! (prebuilt PM4 command buffers with a relocation table, one `IOCTL_KGSL_GPU_COMMAND` per step, a
//! timeline signal written by `CP_EVENT_WRITE`) and the USB+AMD backend (PM4 compute and SDMA rings
//! behind the ASM2464 bridge) fit it unchanged:
//!
//! - memory: [`Device::alloc`], [`Device::import`] (zero-copy where the device can map host memory),
//!   [`Device::free`], [`Device::copy_in`], [`Device::copy_out`];
//! - code: [`Device::load_program`];
//! - work: [`Device::link_step`] encodes a whole step once (addresses patched at link time), then
//!   [`Device::submit`] replays it and returns the timeline value it will signal;
//! - sync: [`Device::wait`] on a timeline value, [`Device::synchronize`] for all submitted work.
//!
//! Handles are small `Copy` ids owned by the device; the [`crate::Session`] owns the device and is the
//! only holder of handles, so a freed handle is never used again.

use std::ops::Range;
use std::sync::Arc;

use crate::target::Target;

/// A device buffer, as assigned by the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

/// A loaded program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProgramId(pub u32);

/// A linked (prebuilt) step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StepId(pub u32);

/// What a buffer is for; backends may place or map buffers differently by use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferUse {
    /// Read-only constants uploaded at load.
    Weight,
    /// Written by the host before each step.
    Input,
    /// Read by the host after each step.
    Output,
    /// Device-resident across steps (recurrent inputs such as a features queue).
    State,
    /// Intermediate values, dead between steps.
    Scratch,
}

/// The code format of a program, as recorded in the artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgramFormat {
    /// A relocatable ELF object for the host CPU (x86_64 or aarch64), freestanding.
    Elf,
    /// OpenCL C source, built at load time (desktop OpenCL only).
    OpenClSource,
    /// An Adreno shader blob from Qualcomm's OpenCL compiler.
    AdrenoBlob,
    /// An AMD HSA code object.
    AmdCodeObject,
    /// Adreno 630 (a6xx) machine code from Mesa's ir3, with its dispatch facts in the program's record.
    A6xxIr3,
}

/// The channel type of an RGBA image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageChannel {
    /// 32-bit float per channel (`CL_FLOAT`, a6xx `FMT6_32_32_32_32_FLOAT`).
    F32,
    /// 16-bit float per channel (`CL_HALF_FLOAT`, a6xx `FMT6_16_16_16_16_FLOAT`); kernels read it as float.
    F16,
}

impl ImageChannel {
    /// Bytes per channel.
    pub fn size(self) -> usize {
        match self {
            ImageChannel::F32 => 4,
            ImageChannel::F16 => 2,
        }
    }
}

/// A 2-D RGBA image in linear memory: `height` rows `pitch` bytes apart, each row `width` pixels of four
/// channels. Its bytes, as [`Device::copy_in`] and [`Device::copy_out`] see them, are exactly that
/// pitched layout (`pitch * height` bytes); a kernel addresses it by pixel, never by byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageDesc {
    pub width: u32,
    pub height: u32,
    /// Row pitch in bytes: at least `width * 4 * channel.size()`.
    pub pitch: u32,
    pub channel: ImageChannel,
}

impl ImageDesc {
    /// Bytes the image occupies.
    pub fn bytes(&self) -> usize {
        self.pitch as usize * self.height as usize
    }

    /// Bytes of one row's pixels (without the pitch padding).
    pub fn row_bytes(&self) -> usize {
        self.width as usize * 4 * self.channel.size()
    }
}

/// A program to load: the artifact's entry plus its code bytes (a slice of the artifact's map).
#[derive(Clone, Copy, Debug)]
pub struct ProgramSpec<'a> {
    /// The kernel's entry symbol.
    pub name: &'a str,
    pub format: ProgramFormat,
    pub code: &'a [u8],
    /// Number of buffer arguments the kernel takes.
    pub arg_count: usize,
    /// What the compiler recorded for dispatching an `amdgpu` program (the artifact's `"amdgpu"` key); devices
    /// that load code objects check it against the code object itself.
    pub amdgpu: Option<&'a crate::artifact::AmdDispatch>,
    /// What Mesa's ir3 reported for dispatching an `ir3` program (the artifact's `"ir3"` key): register
    /// footprint, const-file layout, texture/IBO bindings. Devices that load [`ProgramFormat::A6xxIr3`] need it.
    pub ir3: Option<&'a crate::artifact::Ir3Program>,
}

/// One buffer argument of a dispatch: a buffer and a byte offset into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    pub buffer: BufferId,
    pub offset: u64,
}

/// One unit of work in a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// Run a program. On GPUs `global`/`local` are the NDRange in work-items and the work-group size.
    /// On the CPU `global[0]` is the number of independent parts the kernel's outer loop splits into;
    /// the thread pool runs `min(parts, threads)` of them at once.
    Dispatch { program: ProgramId, args: Vec<Arg>, global: [u32; 3], local: [u32; 3] },
    /// Copy `len` bytes between device buffers (for example, shifting a state queue).
    Copy { src: Arg, dst: Arg, len: u64 },
}

impl StepOp {
    /// The buffers the op reads or writes (a buffer may repeat).
    pub fn buffers(&self) -> impl Iterator<Item = BufferId> + '_ {
        let (args, pair) = match self {
            StepOp::Dispatch { args, .. } => (&args[..], None),
            StepOp::Copy { src, dst, .. } => (&[][..], Some([src.buffer, dst.buffer])),
        };
        args.iter().map(|a| a.buffer).chain(pair.into_iter().flatten())
    }
}

/// Host bytes that outlive the call: a range of a shared memory map (or any owned bytes).
/// Backends that can address host memory keep it and read the weights in place.
#[derive(Clone)]
pub struct HostBytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    range: Range<usize>,
}

impl HostBytes {
    /// Bytes `range` of `owner`. Fails if the range is not inside it.
    pub fn new(owner: Arc<dyn AsRef<[u8]> + Send + Sync>, range: Range<usize>) -> Option<HostBytes> {
        let len = (*owner).as_ref().len();
        (range.start <= range.end && range.end <= len).then_some(HostBytes { owner, range })
    }

    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.range.clone()]
    }

    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl std::fmt::Debug for HostBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBytes({:?})", self.range)
    }
}

/// What a device says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Backend name as used by `--device` (`cpu`, `null`, `qcom`, `fake-kgsl`, `usb+amd`, `cl`).
    pub backend: String,
    /// Architecture (`x86_64`, `aarch64`, `a630`, `gfx1100`, ...).
    pub arch: String,
}

/// A device failure. Messages are one line and name the operation.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("device not available: {0}")]
    Unavailable(String),
    #[error("out of device memory allocating {size} bytes")]
    OutOfMemory { size: usize },
    #[error("invalid {kind} handle {id}")]
    InvalidHandle { kind: &'static str, id: u32 },
    #[error("{op}: range {offset}+{len} outside buffer of {size} bytes")]
    OutOfBounds { op: &'static str, offset: u64, len: u64, size: u64 },
    #[error("program `{name}`: {reason}")]
    Program { name: String, reason: String },
    #[error("{op} failed: {reason}")]
    Failed { op: &'static str, reason: String },
    #[error("{0} is not supported by this device")]
    Unsupported(&'static str),
}

pub type DeviceResult<T> = Result<T, DeviceError>;

/// A compute device. See the module docs for the model.
///
/// Contract: `submit` and `copy_in`/`copy_out` on the step path must not allocate on the heap.
/// `copy_in`/`copy_out` are ordered after all previously submitted work that touches the buffer.
pub trait Device: Send {
    fn info(&self) -> DeviceInfo;

    /// Whether this device runs artifacts compiled for `target`. The default: the device's backend
    /// and architecture are the target's. Devices that run more (the NULL device runs anything, an
    /// OpenCL device any `cl` artifact) or name themselves differently (QCOM over the fake KGSL) say so.
    fn runs(&self, target: &Target) -> bool {
        let info = self.info();
        target.backend == info.backend.as_str() && target.arch == info.arch.as_str()
    }

    /// Allocates `size` bytes, zero-filled.
    fn alloc(&mut self, size: usize, usage: BufferUse) -> DeviceResult<BufferId>;

    /// Makes `bytes` available as a read-only device buffer. The default copies them into a new
    /// buffer; backends that can address host memory keep `bytes` and read it in place.
    fn import(&mut self, bytes: HostBytes, usage: BufferUse) -> DeviceResult<BufferId> {
        let id = self.alloc(bytes.len(), usage)?;
        self.copy_in(id, 0, bytes.as_slice())?;
        Ok(id)
    }

    /// Allocates a zero-filled 2-D image (see [`ImageDesc`]). Dispatch arguments refer to it with
    /// offset 0; `copy_in`/`copy_out` move its whole pitched contents. Devices without images refuse.
    fn alloc_image(&mut self, _desc: ImageDesc, _usage: BufferUse) -> DeviceResult<BufferId> {
        Err(DeviceError::Unsupported("images"))
    }

    fn free(&mut self, buffer: BufferId) -> DeviceResult<()>;

    /// Makes the `len` bytes of host memory at `host` the contents of `buffer` for later submissions of
    /// `step`, without copying, on devices that map host memory (QCOM: KGSL user memory, the D-cache
    /// cleaned first on aarch64). Rebinding replaces the previous binding; it first waits for the
    /// step's submission in flight. Other devices refuse with [`DeviceError::Unsupported`].
    ///
    /// # Safety
    /// `host..host + len` must stay valid, and not be written while a submission of `step` that reads
    /// it is in flight, until it is rebound or the device is dropped.
    unsafe fn bind_host(
        &mut self,
        _step: StepId,
        _buffer: BufferId,
        _host: *const u8,
        _len: usize,
    ) -> DeviceResult<()> {
        Err(DeviceError::Unsupported("binding host memory without a copy"))
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()>;

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()>;

    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId>;

    /// Encodes `ops` once, resolving every buffer address now (link time), and returns a step that
    /// [`Device::submit`] replays without re-encoding.
    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId>;

    /// Enqueues a linked step; returns the timeline value the device signals when it completes.
    fn submit(&mut self, step: StepId) -> DeviceResult<u64>;

    /// Blocks until the timeline reaches `value`.
    fn wait(&mut self, value: u64) -> DeviceResult<()>;

    /// Blocks until all submitted work has completed.
    fn synchronize(&mut self) -> DeviceResult<()>;

    /// Time spent in each op of `step`, summed over every submission so far, when the device was
    /// created with profiling on; `None` otherwise.
    fn profile(&self, _step: StepId) -> Option<Vec<std::time::Duration>> {
        None
    }

    /// Device-specific counters for benchmarks, as `(name, value)` (e.g. ioctls issued, dwords per
    /// step); empty by default. Not for the step path.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
