//! [`QcomDevice`]: the `pilot_core` [`Device`] over KGSL on an Adreno 630 (after tinygrad's `QCOMDevice` in
//! `tinygrad/runtime/ops_qcom.py`), and over the fake KGSL. The hardware-neutral half (relocations, argument
//! arena, timeline signal) is [`pilot_core::hcq`].
//!
//! - Memory: every buffer and image is a KGSL GPU object mapped into this process (GPU address = CPU address);
//!   copies are CPU copies through the mapping, after waiting for in-flight work that uses the buffer.
//! - Programs: Qualcomm "lib" blobs ([`crate::blob`]) or Mesa ir3 code with its record ([`crate::ir3`]), one per
//!   kernel; the shader image is uploaded once.
//! - Steps: [`Device::link_step`] encodes a whole step once into one PM4 command stream (a CP_RUN_OPENCL or
//!   CP_EXEC_CS launch per dispatch, a memory barrier before the first and before each that touches what an earlier
//!   one touched since ([`pilot_core::hcq::hazard`]), then a timeline signal), and the shared linker
//!   ([`pilot_core::hcq::link`]) writes it to GPU memory with every address resolved and each dispatch's
//!   kernel-argument block (constant file, texture/IBO descriptors, samplers) written once.
//!   The only dword left symbolic is the timeline value, so [`Device::submit`] patches that one dword and issues
//!   exactly one `IOCTL_KGSL_GPU_COMMAND`, without heap allocation.
//! - Sync: the step's last packets write the timeline value to a signal page; [`Device::wait`] checks that memory
//!   and otherwise sleeps in `IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID` on the submission's KGSL timestamp.

use crate::blob::{self, ArgDesc, ArgKind, Const};
use crate::dispatch::{
    ArgsBlock, ArgsLayout, CmdStream, DispatchError, Exec, Image, ImageFormat, KernelInfo, Launch, ShaderKind,
    CONST_FILE_BYTES, SAMPLER_CLAMP_NEAREST,
};
use crate::ioctl::{KgslFd, KgslFile};
use crate::ir3::Ir3Layout;
use crate::kgsl::{Context, GpuObject, KgslDevice, KgslError, UserMapping, DEFAULT_PRIORITY, KGSL_PATH, PAGE};
use crate::reloc::{A6xx, Addr, Sym, ValueSlot, ValueSym, Word};
use pilot_core::bounds::check_range;
use pilot_core::device::{
    BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, ImageChannel, ImageDesc, ProgramFormat,
    ProgramId, ProgramSpec, StepId, StepOp,
};
use pilot_core::hcq::args::{ArgsArena, BlockExtent, BufferRef};
use pilot_core::hcq::hazard::Hazards;
use pilot_core::hcq::link::{Encoded, StepMemory};
use pilot_core::hcq::signal::SIGNAL_VALUE;
use pilot_core::timeline::Timeline;
use std::fmt;
use std::io;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shader kind of Qualcomm blobs (Qualcomm's OpenCL compiler, launched with CP_RUN_OPENCL); ir3 programs get theirs
/// from [`Ir3Layout`].
pub const SHADER_KIND: ShaderKind = ShaderKind::QcomCl;
/// How long [`Device::wait`] sleeps in the kernel before giving up, unless [`QcomDevice::with_wait_timeout`] says
/// otherwise (tinygrad's `HCQDEV_WAIT_TIMEOUT_MS` default).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Submissions whose KGSL timestamps are remembered for exact waits; older values wait for a later submission.
const TS_RING: usize = 64;

/// The fence of a submission: the KGSL timestamp `IOCTL_KGSL_GPU_COMMAND` returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct KgslTimestamp(u32);

impl fmt::Display for KgslTimestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KGSL timestamp {}", self.0)
    }
}

/// A [`KgslFile`] that counts the ioctls going through it.
struct CountingFile {
    inner: Arc<dyn KgslFile>,
    ioctls: AtomicU64,
}

impl KgslFile for CountingFile {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        self.ioctls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `KgslFile::ioctl`'s contract.
        unsafe { self.inner.ioctl(request, arg) }
    }

    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>> {
        self.inner.mmap(len, offset)
    }

    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()> {
        // SAFETY: forwarded unchanged; the caller upholds `KgslFile::munmap`'s contract.
        unsafe { self.inner.munmap(addr, len) }
    }
}

struct Buffer {
    obj: GpuObject,
    /// Bytes the caller asked for (the object is whole pages).
    size: u64,
    /// The descriptor data of an image.
    image: Option<Image>,
    /// Linked steps that reference the buffer; it cannot be freed while any does.
    links: u32,
}

/// How a loaded program's arguments reach it.
enum Binding {
    /// A Qualcomm blob: its argument records (in order) and compiler constants.
    Blob { args: Vec<ArgDesc>, consts: Vec<Const> },
    /// A Mesa ir3 program: where its record puts parameters, immediates, images and the local size.
    Ir3(Box<Ir3Layout>),
}

struct Loaded {
    name: String,
    kind: ShaderKind,
    kernel: KernelInfo,
    arg_count: usize,
    binding: Binding,
    layout: ArgsLayout,
    /// The uploaded shader image.
    image: GpuObject,
}

/// A dispatch argument resolved to its buffer.
struct BoundArg {
    index: usize,
    buffer: u32,
    offset: u64,
    size: u64,
    image: Option<Image>,
}

impl BoundArg {
    /// The address of a plain buffer argument (its offset inside the buffer). `tag` follows the argument's index
    /// in the message when it is an image.
    fn pointer(&self, tag: &str) -> Result<Addr, String> {
        if self.image.is_some() {
            return Err(format!(
                "argument {}{tag} needs a plain buffer, buffer {} is an image",
                self.index, self.buffer
            ));
        }
        if self.offset > self.size {
            return Err(format!(
                "argument {}: offset {} is past the end of buffer {} ({} bytes)",
                self.index, self.offset, self.buffer, self.size
            ));
        }
        Ok(Addr::base(Sym::Buffer(self.buffer)).add(self.offset))
    }

    /// The image of an image argument and its base (bound at offset 0). `tag` as for [`Self::pointer`].
    fn image(&self, tag: &str) -> Result<(&Image, Addr), String> {
        let Some(image) = &self.image else {
            return Err(format!(
                "argument {}{tag} needs an image, buffer {} is a plain buffer",
                self.index, self.buffer
            ));
        };
        if self.offset != 0 {
            return Err(format!("argument {}: image {} bound at offset {}", self.index, self.buffer, self.offset));
        }
        Ok((image, Addr::base(Sym::Buffer(self.buffer))))
    }
}

struct LinkedStep {
    /// The linked command stream; only the timeline dwords change between submissions.
    stream: GpuObject,
    ndwords: usize,
    /// The dwords of the stream that hold the timeline value.
    timeline_at: Vec<ValueSlot>,
    /// The last timeline value this step was submitted with (0 before the first submission).
    last_value: u64,
    /// Where each buffer's address sits in `args`, so an input bound to host memory is re-pointed without
    /// relinking.
    buffer_refs: Vec<BufferRef>,
    /// Inputs bound to host memory (KGSL user mappings), by buffer.
    bound: Vec<(u32, UserMapping)>,
    args: Option<GpuObject>,
    _stack: Option<GpuObject>,
}

/// The Adreno 630 device. See the module docs.
///
/// Dropping it waits for submitted work (logging a failure) and then frees every GPU object and the context.
pub struct QcomDevice {
    backend: String,
    steps: Vec<LinkedStep>,
    programs: Vec<Loaded>,
    buffers: Vec<Option<Buffer>>,
    dummy: GpuObject,
    border_color: GpuObject,
    timeline: GpuObject,
    ctx: Context,
    kgsl: KgslDevice,
    file: Arc<CountingFile>,
    /// The timeline values handed out and completed, with the KGSL timestamps of the last submissions.
    sync: Timeline<KgslTimestamp, TS_RING>,
    wait_timeout_ms: u32,
    /// Time spent in `submit`, and inside its GPU_COMMAND ioctl, in ns.
    submit_ns: u64,
    submit_ioctl_ns: u64,
}

impl std::fmt::Debug for QcomDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QcomDevice")
            .field("backend", &self.backend)
            .field("context", &self.ctx.id())
            .field("submitted", &self.sync.submitted())
            .finish_non_exhaustive()
    }
}

fn failed(op: &'static str, reason: impl Into<String>) -> DeviceError {
    DeviceError::Failed { op, reason: reason.into() }
}

/// Allocates a GPU object, reporting ENOMEM as [`DeviceError::OutOfMemory`].
fn alloc_obj(kgsl: &KgslDevice, size: u64) -> DeviceResult<GpuObject> {
    kgsl.alloc(size).map_err(|e| match e {
        KgslError::Ioctl { ref source, .. } if source.kind() == io::ErrorKind::OutOfMemory => {
            DeviceError::OutOfMemory { size: size as usize }
        }
        e => e.into(),
    })
}

impl QcomDevice {
    /// Opens `/dev/kgsl-3d0` with a context of `priority` (0 highest .. 15 lowest; tinygrad uses
    /// [`DEFAULT_PRIORITY`]). A missing or inaccessible node gives [`DeviceError::Unavailable`], and so does a GPU
    /// other than an a630. The backend name is `qcom`.
    pub fn open(priority: u8) -> DeviceResult<Self> {
        Self::open_path(Path::new(KGSL_PATH), priority)
    }

    /// [`QcomDevice::open`] on the device node at `path`.
    pub fn open_path(path: &Path, priority: u8) -> DeviceResult<Self> {
        let fd = KgslFd::open(path).map_err(|source| KgslError::Unavailable { path: path.to_owned(), source })?;
        Self::build(Arc::new(fd), "qcom", priority)
    }

    /// A device over `file` (normally a [`crate::fake::FakeKgsl`], backend name `fake-kgsl`) with the default
    /// priority. Refuses GPUs other than the a630 with [`DeviceError::Unavailable`].
    pub fn with_file(file: Box<dyn KgslFile>, backend_name: &str) -> DeviceResult<Self> {
        Self::build(Arc::from(file), backend_name, DEFAULT_PRIORITY)
    }

    fn build(inner: Arc<dyn KgslFile>, backend: &str, priority: u8) -> DeviceResult<Self> {
        let file = Arc::new(CountingFile { inner, ioctls: AtomicU64::new(0) });
        let kgsl = KgslDevice::from_file(file.clone()).map_err(|e| match e {
            e @ KgslError::UnsupportedGpu { .. } => DeviceError::Unavailable(e.to_string()),
            e => e.into(),
        })?;
        let ctx = kgsl.create_context(priority)?;
        ctx.set_max_power()?;
        let dummy = alloc_obj(&kgsl, PAGE)?;
        let border_color = alloc_obj(&kgsl, PAGE)?;
        let timeline = alloc_obj(&kgsl, PAGE)?;
        Ok(QcomDevice {
            backend: backend.to_string(),
            steps: Vec::new(),
            programs: Vec::new(),
            buffers: Vec::new(),
            dummy,
            border_color,
            timeline,
            ctx,
            kgsl,
            file,
            sync: Timeline::new(),
            wait_timeout_ms: DEFAULT_WAIT_TIMEOUT.as_millis() as u32,
            submit_ns: 0,
            submit_ioctl_ns: 0,
        })
    }

    /// Sets how long one [`Device::wait`] may sleep in the kernel before it fails (at most `u32::MAX` ms).
    pub fn with_wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout_ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        self
    }

    /// The length in dwords of a linked step's command stream (0 for an unknown step).
    pub fn step_dwords(&self, step: StepId) -> usize {
        self.steps.get(step.0 as usize).map_or(0, |s| s.ndwords)
    }

    /// The ioctls issued on the device file so far.
    pub fn ioctl_count(&self) -> u64 {
        self.file.ioctls.load(Ordering::Relaxed)
    }

    /// The KGSL draw context's id.
    pub fn context_id(&self) -> u32 {
        self.ctx.id()
    }

    /// The GPU address of a live buffer or image.
    pub fn buffer_va(&self, id: BufferId) -> Option<u64> {
        Some(self.buffers.get(id.0 as usize)?.as_ref()?.obj.va())
    }

    /// The GPU address of a loaded program's shader image.
    pub fn program_va(&self, id: ProgramId) -> Option<u64> {
        Some(self.programs.get(id.0 as usize)?.image.va())
    }

    /// The GPU address of the timeline signal (its value is the u32 at +0).
    pub fn timeline_va(&self) -> u64 {
        self.timeline.va()
    }

    fn buffer(&self, id: BufferId) -> DeviceResult<&Buffer> {
        self.buffers
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(DeviceError::InvalidHandle { kind: "buffer", id: id.0 })
    }

    fn push_buffer(&mut self, b: Buffer) -> DeviceResult<BufferId> {
        let id = u32::try_from(self.buffers.len()).map_err(|_| failed("alloc", "too many buffers"))?;
        self.buffers.push(Some(b));
        Ok(BufferId(id))
    }

    /// Waits for submitted work if `id` is referenced by a linked step, so CPU copies are ordered after it.
    fn settle(&mut self, id: BufferId) -> DeviceResult<()> {
        if self.buffer(id)?.links > 0 && self.sync.busy() {
            self.synchronize()?;
        }
        Ok(())
    }
}

/// Writes a compiler constant (validated at load: aligned to its size and inside the constant file).
fn write_const(block: &mut ArgsBlock, c: &Const) -> Result<(), DispatchError> {
    let word = c.byte_offset & !3;
    let v = if c.size == 4 {
        c.value
    } else {
        let shift = (c.byte_offset % 4) * 8;
        let old = block.buf().words()[word as usize / 4];
        (old & !(0xffff << shift)) | ((c.value & 0xffff) << shift)
    };
    block.set_u32(word, v)
}

/// Checks a parsed blob against `arg_count` and the hardware fields, and lays out its argument block.
fn blob_layout(p: &blob::Program, arg_count: usize) -> Result<ArgsLayout, String> {
    if p.args.len() != arg_count {
        return Err(format!("the blob has {} arguments, the program says {arg_count}", p.args.len()));
    }
    p.kernel.validate().map_err(|e| e.to_string())?;
    for (i, a) in p.args.iter().enumerate() {
        let at = a.offset_words as u64 * 4;
        if a.kind == ArgKind::Buffer && at + 8 > CONST_FILE_BYTES as u64 {
            return Err(format!("argument {i}: constant-file byte {at} is outside the {CONST_FILE_BYTES}"));
        }
    }
    for (i, c) in p.consts.iter().enumerate() {
        if !c.byte_offset.is_multiple_of(c.size) || c.byte_offset as u64 + c.size as u64 > CONST_FILE_BYTES as u64 {
            return Err(format!(
                "constant {i}: {} bytes at constant-file byte {} are unaligned or outside the {CONST_FILE_BYTES}",
                c.size, c.byte_offset
            ));
        }
    }
    let (tex, ibo) = p.image_counts();
    ArgsLayout::new(SHADER_KIND, tex, ibo, p.sampler_slots()).map_err(|e| e.to_string())
}

/// Fills a Qualcomm blob's argument block: compiler constants, buffer addresses (plus offsets) at the blob's
/// constant slots, the n-th texture (IBO) argument as texture (IBO) descriptor n, the declared sampler.
fn fill_blob(block: &mut ArgsBlock, descs: &[ArgDesc], consts: &[Const], args: &[BoundArg]) -> Result<(), String> {
    for c in consts {
        write_const(block, c).map_err(|e| e.0)?;
    }
    let (mut tex, mut ibo) = (0, 0);
    for (a, d) in args.iter().zip(descs) {
        let tag = format!(" ({:?})", d.kind);
        match d.kind {
            ArgKind::Buffer => block.set_ptr(d.offset_words * 4, a.pointer(&tag)?),
            ArgKind::Texture => {
                let (image, base) = a.image(&tag)?;
                tex += 1;
                block.set_texture(tex - 1, image, base)
            }
            ArgKind::Ibo => {
                let (image, base) = a.image(&tag)?;
                ibo += 1;
                block.set_ibo(ibo - 1, image, base)
            }
        }
        .map_err(|e| e.0)?;
    }
    if block.layout().samp_cnt > 0 {
        // The declared sampler; tinygrad's second slot stays zero.
        block.set_sampler(0, SAMPLER_CLAMP_NEAREST).map_err(|e| e.0)?;
    }
    Ok(())
}

/// Fills an ir3 program's argument block as tinygrad's `QCOMArgsState` (IR3 path) and `QCOMComputeQueue.exec` do:
/// immediates, buffer addresses in the kernel-parameter range, texture and IBO descriptors by state, a sampler per
/// texture, and the local size at const component `wgsz`.
fn fill_ir3(block: &mut ArgsBlock, l: &Ir3Layout, args: &[BoundArg], local: [u32; 3]) -> Result<(), String> {
    for (i, v) in l.immediates.iter().enumerate() {
        block.set_u32(l.immediates_at + 4 * i as u32, *v).map_err(|e| e.0)?;
    }
    for &(arg, at) in &l.params {
        block.set_ptr(at, args[arg].pointer("")?).map_err(|e| e.0)?;
    }
    for (state, &arg) in l.textures.iter().enumerate() {
        let (image, base) = args[arg].image("")?;
        block.set_texture(state as u32, image, base).map_err(|e| e.0)?;
        block.set_sampler(state as u32, SAMPLER_CLAMP_NEAREST).map_err(|e| e.0)?;
    }
    for (state, &arg) in l.ibos.iter().enumerate() {
        let (image, base) = args[arg].image("")?;
        block.set_ibo(state as u32, image, base).map_err(|e| e.0)?;
    }
    for &arg in &l.unbound_images {
        args[arg].image("")?;
    }
    block.set_local_size(l.kind, local).map_err(|e| e.0)
}

/// Step memory in KGSL GPU objects (whole pages, zero-filled, so the alignment always holds).
struct KgslMemory<'a>(&'a KgslDevice);

impl StepMemory for KgslMemory<'_> {
    type Mem = GpuObject;

    fn alloc(&mut self, bytes: u64, _align: u64) -> DeviceResult<GpuObject> {
        alloc_obj(self.0, bytes)
    }

    fn va(&self, mem: &GpuObject) -> u64 {
        mem.va()
    }

    fn write(&mut self, mem: &mut GpuObject, words: &[u32]) -> DeviceResult<()> {
        Ok(mem.write_u32s(0, words)?)
    }
}

/// The hazard resource of the stack: dispatches that use private memory share one stack object.
const STACK_RESOURCE: u32 = u32::MAX;

impl Device for QcomDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: self.backend.clone(), arch: self.kgsl.info().arch() }
    }

    /// `qcom` artifacts for this GPU, over KGSL or the fake (whose backend name is `fake-kgsl`).
    fn runs(&self, target: &pilot_core::Target) -> bool {
        target.backend == pilot_core::Backend::Qcom && target.arch == self.kgsl.info().arch().as_str()
    }

    /// A zero-filled GPU object of `size` bytes (whole pages underneath).
    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        let obj = alloc_obj(&self.kgsl, size as u64)?;
        self.push_buffer(Buffer { obj, size: size as u64, image: None, links: 0 })
    }

    /// A zero-filled GPU object of `desc.bytes()` plus the descriptor data (width, height, pitch, RGBA32F/RGBA16F)
    /// used when a dispatch binds it. Fails if the a630 cannot describe the image: width 1..=16384, height
    /// 1..=32767, pitch a multiple of 64 of at least one row.
    fn alloc_image(&mut self, desc: ImageDesc, _usage: BufferUse) -> DeviceResult<BufferId> {
        let format = match desc.channel {
            ImageChannel::F32 => ImageFormat::Rgba32F,
            ImageChannel::F16 => ImageFormat::Rgba16F,
        };
        let image = Image { format, width: desc.width, height: desc.height, pitch: desc.pitch };
        image.validate().map_err(|e| failed("alloc_image", e.0))?;
        let obj = alloc_obj(&self.kgsl, image.span())?;
        self.push_buffer(Buffer { obj, size: image.span(), image: Some(image), links: 0 })
    }

    /// Frees a buffer. Fails if a linked step references it (steps are never unlinked).
    /// Maps `host` as KGSL user memory (cleaning the D-cache for it on aarch64) and re-points every use of
    /// `buffer` in `step`'s argument blocks at it: O(uses), no relinking. Images cannot be bound.
    unsafe fn bind_host(&mut self, step: StepId, buffer: BufferId, host: *const u8, len: usize) -> DeviceResult<()> {
        let b = self.buffer(buffer)?;
        if b.image.is_some() || (len as u64) < b.size {
            return Err(failed(
                "bind_host",
                format!(
                    "buffer {} is {} and needs {} bytes; {len} given",
                    buffer.0,
                    if b.image.is_some() { "an image" } else { "a buffer" },
                    b.size
                ),
            ));
        }
        let last =
            self.steps.get(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?.last_value;
        if last > self.sync.completed() {
            self.wait(last)?;
        }
        // SAFETY: the caller keeps `host..host + len` valid and unwritten while submissions read it, as
        // `Device::bind_host` requires; the mapping lives in the step until rebound or dropped.
        let mapping = unsafe { self.kgsl.map_user(host, len) }?;
        let s = &mut self.steps[step.0 as usize];
        let args = s.args.as_mut().ok_or_else(|| failed("bind_host", "the step has no dispatches"))?;
        let mut uses = 0;
        for r in s.buffer_refs.iter().filter(|r| r.buffer == buffer.0) {
            args.write_u32s(r.at, &r.words(mapping.va()))?;
            uses += 1;
        }
        if uses == 0 {
            return Err(failed("bind_host", format!("step {} does not use buffer {}", step.0, buffer.0)));
        }
        s.bound.retain(|(id, _)| *id != buffer.0);
        s.bound.push((buffer.0, mapping));
        Ok(())
    }

    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        if self.buffer(buffer)?.links > 0 {
            return Err(failed("free", format!("buffer {} is referenced by a linked step", buffer.0)));
        }
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    /// Copies into the mapping, after waiting for submitted work if a linked step uses the buffer. Images take any
    /// range of their pitched bytes.
    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        check_range("copy_in", offset, src.len() as u64, self.buffer(dst)?.size)?;
        self.settle(dst)?;
        let b = self.buffers[dst.0 as usize].as_mut().expect("checked");
        Ok(b.obj.write(offset, src)?)
    }

    /// Copies out of the mapping, after waiting for submitted work if a linked step uses the buffer.
    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        let b = self.buffer(src)?;
        check_range("copy_out", offset, dst.len() as u64, b.size)?;
        self.settle(src)?;
        Ok(self.buffer(src)?.obj.read(offset, dst)?)
    }

    /// Loads one kernel. A Qualcomm blob ([`ProgramFormat::AdrenoBlob`]) is parsed for `spec.name`; its argument
    /// count is checked against `spec.arg_count`, its register/memory footprint and constant slots against the
    /// hardware fields. Mesa ir3 code ([`ProgramFormat::A6xxIr3`]) is laid out from `spec.ir3` ([`Ir3Layout`]).
    /// The shader image is uploaded (rounded up to 128 bytes).
    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        let bad = |reason: String| DeviceError::Program { name: spec.name.to_string(), reason };
        let id = u32::try_from(self.programs.len()).map_err(|_| bad("too many programs".into()))?;
        let (name, kind, kernel, binding, layout, code) = match spec.format {
            ProgramFormat::AdrenoBlob => {
                let p = blob::parse_named(spec.code, spec.name).map_err(|e| bad(e.to_string()))?;
                let layout = blob_layout(&p, spec.arg_count).map_err(bad)?;
                let code = std::borrow::Cow::Owned(p.image);
                (p.name, SHADER_KIND, p.kernel, Binding::Blob { args: p.args, consts: p.consts }, layout, code)
            }
            ProgramFormat::A6xxIr3 => {
                let record = spec.ir3.ok_or_else(|| bad("ir3 code without its `ir3` dispatch record".into()))?;
                let l = Ir3Layout::new(record, spec.arg_count, spec.code.len()).map_err(bad)?;
                let (kind, kernel, layout) = (l.kind, l.kernel, l.args);
                let code = std::borrow::Cow::Borrowed(spec.code);
                (spec.name.to_string(), kind, kernel, Binding::Ir3(Box::new(l)), layout, code)
            }
            f => return Err(bad(format!("format {f:?} cannot run on the a630 (it takes AdrenoBlob or A6xxIr3)"))),
        };
        let mut image = alloc_obj(&self.kgsl, (code.len() as u64).div_ceil(128) * 128)?;
        image.write(0, &code)?;
        self.programs.push(Loaded { name, kind, kernel, arg_count: spec.arg_count, binding, layout, image });
        Ok(ProgramId(id))
    }

    /// Encodes `ops` once as one command stream: per dispatch the a630 launch sequence (CP_RUN_OPENCL for blobs,
    /// CP_EXEC_CS for ir3) reading a kernel-argument block written now, after a memory barrier where
    /// [`Hazards`] puts one (always before the first), then the timeline signal. Dispatches that use private
    /// memory share the stack object and count as touching it. A blob's block holds buffer addresses plus their
    /// byte offsets at the blob's constant slots, compiler constants, IBO then texture descriptors and the
    /// clamp-to-border sampler; arguments bind in the blob's record order (the n-th texture (IBO) argument is
    /// texture (IBO) descriptor n). An ir3 program's block is [`Ir3Layout`]'s. Image arguments must be images with offset 0, buffer arguments plain buffers.
    ///
    /// [`StepOp::Copy`] is not supported: it returns [`DeviceError::Unsupported`].
    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        let step_id = u32::try_from(self.steps.len()).map_err(|_| failed("link_step", "too many steps"))?;
        let mut blocks = Vec::with_capacity(ops.len());
        let mut execs = Vec::with_capacity(ops.len());
        let mut used = Vec::new();
        let mut stack_bytes = 0;
        let mut hazards = Hazards::new();
        let mut barriers = Vec::with_capacity(ops.len());
        for (n, op) in ops.iter().enumerate() {
            let StepOp::Dispatch { program, args, global, local } = op else {
                return Err(DeviceError::Unsupported("copy ops in a qcom step"));
            };
            let p = self
                .programs
                .get(program.0 as usize)
                .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
            let fail = |reason: String| failed("link_step", format!("dispatch {n} (`{}`): {reason}", p.name));
            if args.len() != p.arg_count {
                return Err(fail(format!("{} arguments given, the kernel takes {}", args.len(), p.arg_count)));
            }
            let launch = Launch::from_global(*global, *local).map_err(|e| fail(e.0))?;
            let max = p.kernel.max_threads();
            if launch.threads_per_group() > max {
                return Err(fail(format!(
                    "local size {local:?} is {} work-items per group; the kernel's register footprint ({} full, {} \
                     half) allows at most {max}",
                    launch.threads_per_group(),
                    p.kernel.fregs,
                    p.kernel.hregs
                )));
            }
            let shares_stack = (p.kernel.pvtmem > 0).then_some(STACK_RESOURCE);
            let hazard = hazards.before(args.iter().map(|a| a.buffer.0).chain(shares_stack));
            barriers.push(n == 0 || hazard);
            let mut bound = Vec::with_capacity(args.len());
            for (index, a) in args.iter().enumerate() {
                let b = self.buffer(a.buffer)?;
                bound.push(BoundArg { index, buffer: a.buffer.0, offset: a.offset, size: b.size, image: b.image });
                used.push(a.buffer.0);
            }
            let mut block = ArgsBlock::new(p.layout);
            match &p.binding {
                Binding::Blob { args, consts } => fill_blob(&mut block, args, consts, &bound),
                Binding::Ir3(l) => fill_ir3(&mut block, l, &bound, launch.local),
            }
            .map_err(fail)?;
            stack_bytes = stack_bytes.max(p.kernel.stack_bytes());
            execs.push(Exec {
                kind: p.kind,
                kernel: p.kernel,
                launch,
                layout: p.layout,
                shader: Addr::base(Sym::Program(program.0)),
                args: Addr::base(Sym::Args(n as u32)),
                stack: Addr::base(Sym::Backend(A6xx::Stack)),
                border_color: Addr::base(Sym::Backend(A6xx::BorderColor)),
                dummy: Addr::base(Sym::Backend(A6xx::Dummy)),
            });
            blocks.push(block);
        }

        let dummy = Addr::base(Sym::Backend(A6xx::Dummy));
        let mut s = CmdStream::new();
        for (n, (e, barrier)) in execs.iter().zip(barriers).enumerate() {
            if barrier {
                s.memory_barrier(dummy);
            }
            s.exec(e).map_err(|e| failed("link_step", format!("dispatch {n}: {}", e.0)))?;
        }
        s.signal(Addr::base(Sym::Timeline), Word::Value(ValueSym::Timeline, 0), dummy);

        // Argument blocks back to back (each a multiple of 256 bytes); the allocation covers the 4 KiB constant
        // load of the last one.
        let arena = ArgsArena::new(
            blocks
                .iter()
                .map(|b| BlockExtent { stride: b.layout().size as u64, footprint: b.layout().footprint() as u64 }),
        );
        let stack = if execs.is_empty() { None } else { Some(alloc_obj(&self.kgsl, stack_bytes)?) };
        let stack_va = stack.as_ref().map(GpuObject::va);
        let step =
            Encoded { stream: s.into_buf(), blocks: blocks.into_iter().map(ArgsBlock::into_buf).collect(), arena };
        let placed = step.place(&mut KgslMemory(&self.kgsl), |sym| match sym {
            Sym::Buffer(i) => self.buffer_va(BufferId(i)),
            Sym::Program(i) => self.program_va(ProgramId(i)),
            Sym::Timeline => Some(self.timeline.va()),
            Sym::Backend(A6xx::Stack) => stack_va,
            Sym::Backend(A6xx::Dummy) => Some(self.dummy.va()),
            Sym::Backend(A6xx::BorderColor) => Some(self.border_color.va()),
            Sym::Args(_) => None,
        })?;

        used.sort_unstable();
        used.dedup();
        for id in used {
            if let Some(b) = self.buffers[id as usize].as_mut() {
                b.links += 1;
            }
        }
        self.steps.push(LinkedStep {
            stream: placed.stream,
            ndwords: placed.stream_dwords,
            timeline_at: placed.timeline_at,
            last_value: 0,
            buffer_refs: placed.buffer_refs,
            bound: Vec::new(),
            args: placed.args,
            _stack: stack,
        });
        Ok(StepId(step_id))
    }

    /// Patches the step's timeline value in place and issues one `IOCTL_KGSL_GPU_COMMAND`; no heap allocation.
    /// Resubmitting a step whose previous submission has not completed first waits for it (the stream is patched in
    /// place). Returns the timeline value the step signals when it completes.
    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        let t = Instant::now();
        let r = self.submit_step(step);
        self.submit_ns += t.elapsed().as_nanos() as u64;
        r
    }

    /// Benchmark counters: `ioctls` (issued so far), `submits`, `host_submit_ns` (time in `submit`
    /// outside its GPU_COMMAND ioctl: pilot's own host cost), `gpu_command_ns` (inside that ioctl: the
    /// kernel's, or the fake's decoding and execution) and `step_dwords` (of the last linked step).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("ioctls", self.ioctl_count()),
            ("submits", self.sync.submitted()),
            ("host_submit_ns", self.submit_ns.saturating_sub(self.submit_ioctl_ns)),
            ("gpu_command_ns", self.submit_ioctl_ns),
            ("step_dwords", self.steps.last().map_or(0, |s| s.ndwords as u64)),
        ]
    }

    /// Returns once the timeline signal holds `value` or more: at once if its memory shows it, otherwise after
    /// sleeping in `IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID` on the submission's KGSL timestamp (bounded by the wait
    /// timeout). Fails for a value never submitted, on a timeout or a faulted context, and when the submission
    /// retired without writing the signal.
    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        let (signal, ctx, timeout_ms) = (&self.timeline, &self.ctx, self.wait_timeout_ms);
        self.sync.wait(value, || Ok(signal.read_u32(SIGNAL_VALUE)?), |KgslTimestamp(ts)| ctx.wait(ts, timeout_ms))
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        if self.sync.busy() {
            self.wait(self.sync.submitted())?;
        }
        Ok(())
    }
}

impl Drop for QcomDevice {
    fn drop(&mut self) {
        if let Err(e) = self.synchronize() {
            log::warn!("{}: dropping the device with work in flight: {e}", self.backend);
        }
    }
}

impl QcomDevice {
    /// [`Device::submit`] without the timing.
    fn submit_step(&mut self, step: StepId) -> DeviceResult<u64> {
        let last = self.steps.get(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?;
        if last.last_value > self.sync.completed() {
            self.wait(last.last_value)?;
        }
        let value = self.sync.next_value();
        let s = &mut self.steps[step.0 as usize];
        for slot in &s.timeline_at {
            s.stream.write_u32s(slot.at as u64 * 4, &[slot.word(value)])?;
        }
        let t = Instant::now();
        // SAFETY: the stream lives in a GPU object owned by the step, which lives as long as the device, and Drop
        // waits for submitted work first. It only makes the GPU touch objects the device owns: buffers a linked step
        // references cannot be freed, programs and the step's argument/stack objects are never freed before drop,
        // and the CPU reads and writes them only by copying, after waiting for work that uses them.
        let ts = unsafe { self.ctx.submit(s.stream.va(), s.ndwords) };
        self.submit_ioctl_ns += t.elapsed().as_nanos() as u64;
        let ts = ts?;
        s.last_value = value;
        Ok(self.sync.record(KgslTimestamp(ts)))
    }
}
