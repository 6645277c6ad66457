//! An in-process KGSL implementing [`KgslFile`], so the backend's real code path runs without the hardware, as an
//! independent witness of the streams the encoder writes.
//!
//! It keeps GPU objects (host memory; GPU VA = host address, as with `KGSL_MEMFLAGS_USE_CPU_MAP`), user-memory
//! mappings, draw contexts and their timestamps. `IOCTL_KGSL_GPU_COMMAND` decodes every packet of every command
//! object with the fake's own tables ([`regs`], [`descriptors`]; none of the encoder's constants or parsers) and
//! checks it before accepting it: parity, opcodes, payload layouts, writes only to registers in its table, at each
//! launch every register the dispatch depends on and base registers equal to what CP_LOAD_STATE6 loaded, and every
//! address inside a GPU allocation. Errors name the command object and the packet's dword offset.
//! Accepted streams execute in order per context: CP_EVENT_WRITE stores its value, CP_REG_TO_MEM stores the
//! always-on counter (19.2 MHz), CP_WAIT_REG_MEM stalls the context until memory satisfies it (re-checked at every
//! later ioctl), and each CP_RUN_OPENCL / CP_EXEC_CS becomes a [`Dispatch`] (registers, constant file, descriptors
//! and samplers decoded) handed to the [`Executor`], after the ordering check of [`order`]: a dispatch touching
//! memory an earlier one wrote needs CACHE_INVALIDATE and CP_WAIT_FOR_IDLE between them. A failing dispatch faults
//! its context: later submissions and waits on it report the fault. [`FakeKgsl::with_rd_capture`] records a submission as Mesa's `.rd` capture ([`rd`]).

mod cp;
pub mod descriptors;
pub mod order;
mod packets;
pub mod rd;
pub mod regs;

pub use cp::{Dispatch, LaunchPacket};

use crate::ioctl::KgslFile;
use crate::sys::*;
use bytemuck::Pod;
use cp::{CpState, Progress, Step, Visible};
use order::Ordering;
use rd::RdCapture;
use std::alloc::Layout;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// A GPU access outside every allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("GPU access {va:#x}+{len:#x} is outside any GPU allocation")]
pub struct MemError {
    pub va: u64,
    pub len: u64,
}

/// GPU memory as the fake command processor sees it, for executors. `Send`, so an executor may share it between
/// its threads behind a lock.
pub trait GpuMemory: Send {
    /// Whether `va .. va + len` lies inside one GPU allocation.
    fn check(&self, va: u64, len: u64) -> Result<(), MemError>;
    fn read(&self, va: u64, out: &mut [u8]) -> Result<(), MemError>;
    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemError>;
}

/// Runs the dispatches the fake decodes (for example on OpenCL). An error faults the submitting context.
/// It is called with the fake locked, from inside an ioctl, so it must not call back into the fake.
pub trait Executor: Send {
    fn dispatch(&mut self, dispatch: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String>;
}

/// An executor that runs nothing; dispatches are still checked and logged.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExecutor;

impl Executor for NoExecutor {
    fn dispatch(&mut self, _: &Dispatch, _: &mut dyn GpuMemory) -> Result<(), String> {
        Ok(())
    }
}

/// The a630's chip id.
pub const A630_CHIP_ID: u32 = 0x0603_0001;
/// Largest allocation the fake accepts.
pub const MAX_ALLOC: u64 = 1 << 32;
const PAGE: u64 = 0x1000;

#[derive(Debug)]
struct Object {
    size: u64,
    flags: u64,
    va: Option<u64>,
}

/// A GPU-visible range.
#[derive(Clone, Copy, Debug)]
struct Region {
    len: u64,
    object: Option<u32>,
}

struct Pending {
    ts: u32,
    steps: Vec<Step>,
    pc: usize,
}

#[derive(Default)]
struct Ctx {
    flags: u32,
    queued: u32,
    retired: u32,
    cp: CpState,
    ordering: Ordering,
    pending: VecDeque<Pending>,
    stall: Option<String>,
    fault: Option<String>,
}

struct State {
    chip_id: u32,
    next_object: u32,
    objects: BTreeMap<u32, Object>,
    /// Host memory the fake allocated for mmaps: address -> (length, object id).
    host: BTreeMap<u64, (usize, u32)>,
    regions: BTreeMap<u64, Region>,
    next_context: u32,
    contexts: BTreeMap<u32, Ctx>,
    dispatches: Vec<Dispatch>,
    executor: Box<dyn Executor>,
    power_level: Option<u32>,
    start: Instant,
    capture: Option<RdCapture>,
}

/// The fake KGSL device. See the module docs.
pub struct FakeKgsl {
    state: Mutex<State>,
}

impl Default for FakeKgsl {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FakeKgsl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeKgsl").finish_non_exhaustive()
    }
}

fn einval(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

fn with_arg<T: Pod>(arg: &mut [u8], f: impl FnOnce(&mut T) -> io::Result<()>) -> io::Result<()> {
    let mut v: T = bytemuck::pod_read_unaligned(arg);
    f(&mut v)?;
    arg.copy_from_slice(bytemuck::bytes_of(&v));
    Ok(())
}

/// `a` is at or after `b` in KGSL's wrapping timestamp order.
fn ts_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

fn page_layout(len: usize) -> Layout {
    Layout::from_size_align(len, PAGE as usize).expect("page-aligned layout")
}

impl FakeKgsl {
    /// An a630 with no executor.
    pub fn new() -> Self {
        FakeKgsl {
            state: Mutex::new(State {
                chip_id: A630_CHIP_ID,
                next_object: 1,
                objects: BTreeMap::new(),
                host: BTreeMap::new(),
                regions: BTreeMap::new(),
                next_context: 1,
                contexts: BTreeMap::new(),
                dispatches: Vec::new(),
                executor: Box::new(NoExecutor),
                power_level: None,
                start: Instant::now(),
                capture: None,
            }),
        }
    }

    /// Reports `chip_id` from DEVICE_INFO instead of the a630's.
    pub fn with_chip_id(self, chip_id: u32) -> Self {
        self.lock().chip_id = chip_id;
        self
    }

    /// Hands every dispatch to `executor`.
    pub fn with_executor(self, executor: Box<dyn Executor>) -> Self {
        self.lock().executor = executor;
        self
    }

    /// Captures the next submission into `capture` as an `.rd` file (see [`rd`]).
    pub fn with_rd_capture(self, capture: RdCapture) -> Self {
        self.lock().capture = Some(capture);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The dispatches executed so far, oldest first; the log is emptied.
    pub fn take_dispatches(&self) -> Vec<Dispatch> {
        std::mem::take(&mut self.lock().dispatches)
    }

    /// Live GPU objects, host mappings and contexts, for leak checks.
    pub fn live(&self) -> (usize, usize, usize) {
        let s = self.lock();
        (s.objects.len(), s.host.len(), s.contexts.len())
    }

    /// The context's flags at creation, if it exists.
    pub fn context_flags(&self, id: u32) -> Option<u32> {
        self.lock().contexts.get(&id).map(|c| c.flags)
    }

    /// The power level last requested through `KGSL_PROP_PWR_CONSTRAINT`.
    pub fn power_level(&self) -> Option<u32> {
        self.lock().power_level
    }
}

/// GPU memory over the fake's regions.
struct Mem<'a> {
    regions: &'a BTreeMap<u64, Region>,
}

impl Visible for Mem<'_> {
    fn visible(&self, va: u64, len: u64) -> bool {
        self.check(va, len).is_ok()
    }
}

impl GpuMemory for Mem<'_> {
    fn check(&self, va: u64, len: u64) -> Result<(), MemError> {
        let end = va.checked_add(len).ok_or(MemError { va, len })?;
        match self.regions.range(..=va).next_back() {
            Some((start, r)) if end <= start + r.len => Ok(()),
            _ => Err(MemError { va, len }),
        }
    }

    fn read(&self, va: u64, out: &mut [u8]) -> Result<(), MemError> {
        self.check(va, out.len() as u64)?;
        // SAFETY: the range lies in one region: either host memory the fake allocated (freed only after its region
        // is removed) or user memory the MAP_USER_MEM caller keeps valid until SHAREDMEM_FREE.
        unsafe { std::ptr::copy_nonoverlapping(va as *const u8, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemError> {
        self.check(va, data.len() as u64)?;
        // SAFETY: as for `read`; GPU writes must not race CPU borrows, which the GPU_COMMAND contract excludes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), va as *mut u8, data.len()) };
        Ok(())
    }
}

impl State {
    fn ctx(&mut self, id: u32) -> io::Result<&mut Ctx> {
        self.contexts.get_mut(&id).ok_or_else(|| einval(format!("no context {id}")))
    }

    fn no_fault(&mut self, id: u32) -> io::Result<()> {
        match &self.ctx(id)?.fault {
            Some(f) => Err(io::Error::other(format!("context {id} faulted: {f}"))),
            None => Ok(()),
        }
    }

    /// # Safety
    /// `a.value` must point to `a.sizebytes` writable bytes.
    unsafe fn get_property(&mut self, a: &mut kgsl_device_getproperty) -> io::Result<()> {
        if a.type_ != KGSL_PROP_DEVICE_INFO {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("property {:#x}", a.type_)));
        }
        if a.sizebytes != std::mem::size_of::<kgsl_devinfo>() as u64 || a.value == 0 {
            return Err(einval(format!("DEVICE_INFO needs 40 bytes, got {}", a.sizebytes)));
        }
        let gpu_id = self.gpu_id();
        let info = kgsl_devinfo {
            device_id: 1,
            chip_id: self.chip_id,
            mmu_enabled: 1,
            gpu_id,
            gmem_sizebytes: 1 << 20,
            ..Default::default()
        };
        // SAFETY: the caller guarantees `value` points to 40 writable bytes.
        unsafe { std::ptr::write_unaligned(a.value as *mut kgsl_devinfo, info) };
        Ok(())
    }

    /// # Safety
    /// `a.value` must point to a readable `kgsl_device_constraint` whose `data` points to `size` readable bytes.
    unsafe fn set_property(&mut self, a: &mut kgsl_device_getproperty) -> io::Result<()> {
        if a.type_ != KGSL_PROP_PWR_CONSTRAINT || a.sizebytes != 24 || a.value == 0 {
            return Err(einval(format!(
                "SETPROPERTY type {:#x} size {} is not a power constraint",
                a.type_, a.sizebytes
            )));
        }
        // SAFETY: the caller guarantees `value` points to a constraint.
        let c = unsafe { std::ptr::read_unaligned(a.value as *const kgsl_device_constraint) };
        self.ctx(c.context_id)?;
        if c.type_ != KGSL_CONSTRAINT_PWRLEVEL || c.size != 4 || c.data == 0 {
            return Err(einval(format!("constraint type {} size {} is not a power level", c.type_, c.size)));
        }
        // SAFETY: the caller guarantees `data` points to `size` (4) bytes.
        let level = unsafe { std::ptr::read_unaligned(c.data as *const u32) };
        self.power_level = Some(level);
        Ok(())
    }

    fn gpuobj_alloc(&mut self, a: &mut kgsl_gpuobj_alloc) -> io::Result<()> {
        if a.size == 0 || a.size > MAX_ALLOC {
            return Err(einval(format!("allocation of {} bytes", a.size)));
        }
        if a.flags & KGSL_MEMFLAGS_USE_CPU_MAP == 0 {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "only USE_CPU_MAP allocations are supported"));
        }
        if a.metadata_len != 0 {
            return Err(einval("allocation metadata is not supported"));
        }
        let size = a.size.div_ceil(PAGE) * PAGE;
        let id = self.next_object;
        self.next_object += 1;
        self.objects.insert(id, Object { size, flags: a.flags, va: None });
        a.mmapsize = size;
        a.id = id;
        Ok(())
    }

    fn gpuobj_free(&mut self, a: &mut kgsl_gpuobj_free) -> io::Result<()> {
        if a.priv_ != 0 || a.flags != 0 {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "only immediate frees are supported"));
        }
        let obj = self.objects.remove(&a.id).ok_or_else(|| einval(format!("no GPU object {}", a.id)))?;
        if let Some(va) = obj.va {
            self.regions.remove(&va);
        }
        Ok(())
    }

    fn gpuobj_info(&mut self, a: &mut kgsl_gpuobj_info) -> io::Result<()> {
        let obj = self.objects.get(&a.id).ok_or_else(|| einval(format!("no GPU object {}", a.id)))?;
        let va = obj.va.unwrap_or(0);
        *a = kgsl_gpuobj_info {
            gpuaddr: va,
            flags: obj.flags,
            size: obj.size,
            va_len: obj.size,
            va_addr: va,
            id: a.id,
            _pad0: 0,
        };
        Ok(())
    }

    fn overlaps(&self, va: u64, len: u64) -> bool {
        self.regions.range(..va + len).next_back().is_some_and(|(s, r)| s + r.len > va)
    }

    fn map_user_mem(&mut self, a: &mut kgsl_map_user_mem) -> io::Result<()> {
        if a.memtype != KGSL_USER_MEM_TYPE_ADDR || a.offset != 0 {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("user memory type {}", a.memtype)));
        }
        if a.hostptr == 0 || !a.hostptr.is_multiple_of(PAGE) || a.len == 0 || !a.len.is_multiple_of(PAGE) {
            return Err(einval(format!("user range {:#x}+{:#x} is not whole pages", a.hostptr, a.len)));
        }
        if self.overlaps(a.hostptr, a.len) {
            return Err(einval(format!("user range {:#x}+{:#x} is already mapped", a.hostptr, a.len)));
        }
        self.regions.insert(a.hostptr, Region { len: a.len, object: None });
        a.gpuaddr = a.hostptr;
        Ok(())
    }

    fn sharedmem_free(&mut self, a: &mut kgsl_sharedmem_free) -> io::Result<()> {
        match self.regions.get(&a.gpuaddr) {
            Some(r) if r.object.is_none() => {
                self.regions.remove(&a.gpuaddr);
                Ok(())
            }
            _ => Err(einval(format!("no user mapping at {:#x}", a.gpuaddr))),
        }
    }

    /// # Safety
    /// `a.cmdlist` must point to `a.numcmds` readable command objects.
    unsafe fn gpu_command(&mut self, a: &mut kgsl_gpu_command) -> io::Result<()> {
        let id = a.context_id;
        self.no_fault(id)?;
        if a.flags != 0 || a.numobjs != 0 || a.numsyncs != 0 {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "flags, object lists and sync lists"));
        }
        if a.cmdsize as usize != std::mem::size_of::<kgsl_command_object>() || a.numcmds == 0 || a.cmdlist == 0 {
            return Err(einval(format!("cmdsize {} numcmds {}", a.cmdsize, a.numcmds)));
        }
        if self.capture.as_ref().is_some_and(RdCapture::armed) {
            // SAFETY: as for this function.
            unsafe { self.capture(a) };
        }
        let mut cp = self.ctx(id)?.cp.clone();
        let mem = Mem { regions: &self.regions };
        let mut steps = Vec::new();
        for i in 0..a.numcmds as usize {
            // SAFETY: the caller guarantees `cmdlist` points to `numcmds` command objects.
            let obj = unsafe { std::ptr::read_unaligned((a.cmdlist as *const kgsl_command_object).add(i)) };
            let va = obj.gpuaddr.wrapping_add(obj.offset);
            if obj.flags != KGSL_CMDLIST_IB || obj.size == 0 || !obj.size.is_multiple_of(4) || !va.is_multiple_of(4) {
                return Err(einval(format!("command object {i}: flags {} size {} at {va:#x}", obj.flags, obj.size)));
            }
            let mut words = vec![0u32; obj.size as usize / 4];
            mem.read(va, bytemuck::cast_slice_mut(&mut words))
                .map_err(|e| einval(format!("command object {i}: {e}")))?;
            let more = cp.validate(id, &words, &mem).map_err(|e| einval(format!("command object {i}: {e}")))?;
            steps.extend(more);
        }
        let ctx = self.ctx(id)?;
        ctx.cp = cp;
        ctx.queued = ctx.queued.wrapping_add(1);
        let ts = ctx.queued;
        ctx.pending.push_back(Pending { ts, steps, pc: 0 });
        a.timestamp = ts;
        self.progress();
        self.no_fault(id)
    }

    /// Fills the armed capture with the submission `a` and every GPU-visible range as it is now.
    ///
    /// # Safety
    /// `a.cmdlist` must point to `a.numcmds` readable command objects.
    unsafe fn capture(&self, a: &kgsl_gpu_command) {
        let Some(capture) = &self.capture else { return };
        let mem = Mem { regions: &self.regions };
        let contents = self.regions.iter().map(|(&va, r)| {
            let mut bytes = vec![0u8; r.len as usize];
            mem.read(va, &mut bytes).map(|()| (va, bytes)).map_err(|e| e.to_string())
        });
        let streams = (0..a.numcmds as usize).map(|i| {
            // SAFETY: the caller guarantees `cmdlist` points to `numcmds` command objects.
            let obj = unsafe { std::ptr::read_unaligned((a.cmdlist as *const kgsl_command_object).add(i)) };
            let dwords =
                u32::try_from(obj.size / 4).map_err(|_| format!("command object {i} of {} bytes", obj.size))?;
            Ok(rd::Stream { va: obj.gpuaddr.wrapping_add(obj.offset), dwords })
        });
        let file = contents.collect::<Result<Vec<_>, String>>().and_then(|contents| {
            let buffers: Vec<rd::Buffer> = contents.iter().map(|(va, bytes)| rd::Buffer { va: *va, bytes }).collect();
            rd::encode(self.gpu_id(), &buffers, &streams.collect::<Result<Vec<_>, String>>()?)
        });
        capture.fill(file);
    }

    /// The GPU id DEVICE_INFO reports (630 for the a630).
    fn gpu_id(&self) -> u32 {
        (self.chip_id >> 24) * 100 + ((self.chip_id >> 16) & 0xff) * 10 + ((self.chip_id >> 8) & 0xff)
    }

    /// Runs pending work of every context until nothing moves.
    fn progress(&mut self) {
        let ticks = (self.start.elapsed().as_nanos() * 24 / 1250) as u64;
        let State { contexts, regions, executor, dispatches, .. } = self;
        let mut mem = Mem { regions };
        loop {
            let mut moved = false;
            for ctx in contexts.values_mut() {
                while let Some(p) = ctx.pending.front_mut() {
                    let before = p.pc;
                    let ordering = &mut ctx.ordering;
                    match cp::run(&p.steps, &mut p.pc, p.ts, &mut mem, &mut **executor, ordering, dispatches, ticks) {
                        Ok(Progress::Done) => {
                            ctx.retired = p.ts;
                            ctx.stall = None;
                            ctx.pending.pop_front();
                            moved = true;
                        }
                        Ok(Progress::Stalled(why)) => {
                            moved |= p.pc != before;
                            ctx.stall = Some(why);
                            break;
                        }
                        Err(e) => {
                            ctx.fault = Some(e);
                            ctx.retired = ctx.queued;
                            ctx.pending.clear();
                            moved = true;
                        }
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn wait_timestamp(&mut self, a: &mut kgsl_device_waittimestamp_ctxtid) -> io::Result<()> {
        self.progress();
        self.no_fault(a.context_id)?;
        let ctx = self.ctx(a.context_id)?;
        if ts_ge(ctx.retired, a.timestamp) {
            return Ok(());
        }
        if !ts_ge(ctx.queued, a.timestamp) {
            return Err(einval(format!(
                "timestamp {} was never submitted on context {} (last is {})",
                a.timestamp, a.context_id, ctx.queued
            )));
        }
        let why = ctx.stall.clone().unwrap_or_default();
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("timestamp {} of context {} cannot retire: {why}", a.timestamp, a.context_id),
        ))
    }

    fn read_timestamp(&mut self, a: &mut kgsl_cmdstream_readtimestamp_ctxtid) -> io::Result<()> {
        if a.type_ != KGSL_TIMESTAMP_RETIRED {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("timestamp type {}", a.type_)));
        }
        self.progress();
        a.timestamp = self.ctx(a.context_id)?.retired;
        Ok(())
    }
}

impl KgslFile for FakeKgsl {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        if arg.len() != ioc_size(request) {
            return Err(einval(format!("argument of {} bytes for request {request:#x}", arg.len())));
        }
        let mut s = self.lock();
        match request {
            // SAFETY: the caller of `ioctl` guarantees the pointers inside `arg`.
            IOCTL_KGSL_DEVICE_GETPROPERTY => with_arg(arg, |a| unsafe { s.get_property(a) }),
            // SAFETY: as above.
            IOCTL_KGSL_SETPROPERTY => with_arg(arg, |a| unsafe { s.set_property(a) }),
            // SAFETY: as above.
            IOCTL_KGSL_GPU_COMMAND => with_arg(arg, |a| unsafe { s.gpu_command(a) }),
            IOCTL_KGSL_DRAWCTXT_CREATE => with_arg(arg, |a: &mut kgsl_drawctxt_create| {
                let id = s.next_context;
                s.next_context += 1;
                s.contexts.insert(id, Ctx { flags: a.flags, ..Default::default() });
                a.drawctxt_id = id;
                Ok(())
            }),
            IOCTL_KGSL_DRAWCTXT_DESTROY => with_arg(arg, |a: &mut kgsl_drawctxt_destroy| {
                s.progress();
                s.contexts
                    .remove(&a.drawctxt_id)
                    .map(drop)
                    .ok_or_else(|| einval(format!("no context {}", a.drawctxt_id)))
            }),
            IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID => with_arg(arg, |a| s.wait_timestamp(a)),
            IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID => with_arg(arg, |a| s.read_timestamp(a)),
            IOCTL_KGSL_GPUOBJ_ALLOC => with_arg(arg, |a| s.gpuobj_alloc(a)),
            IOCTL_KGSL_GPUOBJ_FREE => with_arg(arg, |a| s.gpuobj_free(a)),
            IOCTL_KGSL_GPUOBJ_INFO => with_arg(arg, |a| s.gpuobj_info(a)),
            IOCTL_KGSL_MAP_USER_MEM => with_arg(arg, |a| s.map_user_mem(a)),
            IOCTL_KGSL_SHAREDMEM_FREE => with_arg(arg, |a| s.sharedmem_free(a)),
            _ => Err(io::Error::new(io::ErrorKind::Unsupported, format!("ioctl request {request:#x}"))),
        }
    }

    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>> {
        let mut s = self.lock();
        if !offset.is_multiple_of(PAGE) {
            return Err(einval(format!("mmap offset {offset:#x} is not a page multiple")));
        }
        let id = (offset / PAGE) as u32;
        let obj = s.objects.get(&id).ok_or_else(|| einval(format!("mmap of unknown GPU object {id}")))?;
        if obj.va.is_some() || len as u64 != obj.size {
            return Err(einval(format!("mmap of GPU object {id}: {len} bytes, object has {} (mapped once)", obj.size)));
        }
        // SAFETY: the layout has a nonzero size (objects are at least a page).
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(page_layout(len)) })
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "host memory for a GPU object"))?;
        let va = ptr.as_ptr() as u64;
        s.host.insert(va, (len, id));
        s.regions.insert(va, Region { len: len as u64, object: Some(id) });
        if let Some(o) = s.objects.get_mut(&id) {
            o.va = Some(va);
        }
        Ok(ptr)
    }

    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()> {
        let mut s = self.lock();
        let va = addr.as_ptr() as u64;
        match s.host.get(&va) {
            Some(&(l, id)) if l == len => {
                s.host.remove(&va);
                if s.regions.get(&va).is_some_and(|r| r.object == Some(id)) {
                    s.regions.remove(&va);
                }
                if let Some(o) = s.objects.get_mut(&id) {
                    o.va = None;
                }
                // SAFETY: allocated in `mmap` with this layout; its region is gone, so the fake no longer touches it,
                // and the caller promises not to use it either.
                unsafe { std::alloc::dealloc(addr.as_ptr(), page_layout(len)) };
                Ok(())
            }
            _ => Err(einval(format!("munmap of {va:#x}+{len:#x}, which is not a mapping"))),
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for (va, (len, _)) in std::mem::take(&mut self.host) {
            // SAFETY: allocated in `mmap` with this layout; the fake is being dropped, so no KgslFile user is left.
            unsafe { std::alloc::dealloc(va as *mut u8, page_layout(len)) };
        }
    }
}

#[cfg(test)]
mod tests;
