//! `--device amd-emu`: a [`Device`] that runs `usb+amd` gfx1100 or gfx1201 artifacts on the emulator
//! ([`crate`]), so the code objects pilot ships are executed without a GPU. One device runs one card's artifacts
//! ([`EmuDevice::with_arch`]; gfx1100 by default).
//!
//! It does what the USB device does, in process:
//! - every buffer lives in one flat VRAM at a GPU address ([`VRAM_BASE`] up, page aligned, a page left
//!   unused after each); host copies are bounds-checked per buffer, kernel accesses confined to the live
//!   buffers and kernarg segments in whole pages ([`crate::confine`], as the `usb+amd` driver maps them), so
//!   a kernel that runs past its buffer or into a freed one fails;
//! - [`Device::load_program`] reads the kernel out of the code object twice, with pilot's reader
//!   ([`pilot_amd_codeobj`], which produced the artifact's `amdgpu` record) and the emulator's loader, and
//!   refuses a kernel on which they disagree; [`EmuDevice::dispatch_record`] gives the record the
//!   reader derives, for comparison with the artifact's;
//! - [`Device::link_step`] writes each dispatch's kernarg segment into VRAM once (the buffers'
//!   addresses plus offsets at the kernel's argument offsets) and fixes its registers, like a prebuilt
//!   step; [`Device::submit`] runs the dispatches in order and completes before it returns. It is a
//!   test device: unlike the trait's contract for the step path, the emulator allocates (waves, LDS,
//!   host threads) on every dispatch.
//!
//! The artifact's `amdgpu` dispatch record must equal the one pilot's reader derives, as on the `usb+amd`
//! device. VRAM is an anonymous host mapping that grows as buffers are allocated, capped by
//! [`EmuDevice::with_max_vram`] (`--max-memory`; default: half the host's memory): the host commits a page when it
//! is first written (weights at load, results as kernels write them), so a buffer declared but never written
//! costs address space, not memory. An allocation past the cap, or past what the host lets the process map
//! (`ulimit -v`), is [`DeviceError::OutOfMemory`]. Dispatches run under [`crate::Budget::from_env`].
//!
//! A code object for the other card is refused in one line.

use pilot_core::artifact::AmdDispatch;
use pilot_core::device::{
    BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, ProgramFormat, ProgramId, ProgramSpec, StepId,
    StepOp,
};
use pilot_core::target::{Arch, Backend, Target};

use crate::confine::{Confined, Live, PAGE};
use crate::{dispatch_parallel, CodeObjectKernel, Dispatch, SharedMemory, SharedVecMemory, Stats};
use pilot_amd_codeobj::{CodeObject, Kernel};

/// GPU address of the first VRAM byte (not 0, so a null pointer faults).
pub const VRAM_BASE: u64 = 0x1_0000_0000;

/// See the module docs.
pub struct EmuDevice {
    /// 32-bit atomic words, so workgroups on several host threads write different bytes of one word
    /// without losing each other's.
    vram: SharedVecMemory,
    /// `(address, size)` of each buffer; `None` once freed (VRAM is not reused).
    buffers: Vec<Option<(u64, u64)>>,
    /// What kernels may reach: live buffers and kernarg segments.
    live: Live,
    programs: Vec<Program>,
    steps: Vec<Vec<Op>>,
    threads: usize,
    /// Values handed out by `submit`, each complete at once (the emulator runs the step inside it).
    timeline: pilot_core::timeline::Timeline,
    /// What the emulator ran, over every submission.
    ran: Stats,
    dispatches: u64,
    /// The last code object parsed (every program of an artifact shares one).
    parsed: Option<(Vec<u8>, CodeObject)>,
    /// The most VRAM (host memory) the device hands out.
    max_vram: u64,
    /// The card whose artifacts it runs (gfx1100 or gfx1201).
    arch: Arch,
}

struct Program {
    kernel: CodeObjectKernel,
    record: AmdDispatch,
    workgroup: [u32; 3],
}

enum Op {
    Dispatch { program: usize, dispatch: Dispatch },
    Copy { src: u64, dst: u64, len: usize },
}

impl EmuDevice {
    /// An empty device whose dispatches run their workgroups on `threads` host threads, with at most
    /// half the host's memory (and at most [`MAX_VRAM`]) as VRAM.
    pub fn new(threads: usize) -> EmuDevice {
        EmuDevice::with_max_vram(threads, host_memory().map_or(MAX_VRAM, |m| m / 2))
    }

    /// [`EmuDevice::new`] handing out at most `max_vram` bytes of VRAM (capped at [`MAX_VRAM`]); an
    /// allocation past it is [`DeviceError::OutOfMemory`].
    pub fn with_max_vram(threads: usize, max_vram: u64) -> EmuDevice {
        EmuDevice {
            vram: SharedVecMemory::new(VRAM_BASE, 0, &[]),
            buffers: Vec::new(),
            live: Live::default(),
            programs: Vec::new(),
            steps: Vec::new(),
            threads: threads.max(1),
            timeline: Default::default(),
            ran: Stats::default(),
            dispatches: 0,
            parsed: None,
            max_vram: max_vram.min(MAX_VRAM),
            arch: Arch::Gfx1100,
        }
    }

    /// The device for `arch`'s artifacts: gfx1100 (RDNA3) or gfx1201 (RDNA4); any other arch runs nothing
    /// ([`Device::runs`] is false, a session refuses the artifact).
    pub fn with_arch(mut self, arch: Arch) -> EmuDevice {
        self.arch = arch;
        self
    }

    /// The dispatch record of a loaded program as pilot's code-object reader derives it (what the
    /// compiler records under the program's `amdgpu` key).
    pub fn dispatch_record(&self, program: ProgramId) -> Option<&AmdDispatch> {
        self.programs.get(program.0 as usize).map(|p| &p.record)
    }

    /// GPU address and size of a live buffer.
    pub fn address(&self, b: BufferId) -> DeviceResult<(u64, u64)> {
        self.buffers.get(b.0 as usize).copied().flatten().ok_or(DeviceError::InvalidHandle { kind: "buffer", id: b.0 })
    }

    fn range(&self, op: &'static str, b: BufferId, offset: u64, len: u64) -> DeviceResult<u64> {
        let (addr, size) = self.address(b)?;
        pilot_core::bounds::check_range(op, offset, len, size)?;
        Ok(addr + offset)
    }

    /// Reserves `size` bytes of VRAM at a page, zero-filled, live for kernels in whole pages, with an unused
    /// page after them.
    fn reserve(&mut self, size: u64) -> DeviceResult<u64> {
        let addr = (VRAM_BASE + self.vram.size() as u64).next_multiple_of(PAGE);
        let pages = size.max(1).checked_next_multiple_of(PAGE);
        let end =
            pages.and_then(|p| addr.checked_add(p)?.checked_add(PAGE)).filter(|&e| e - VRAM_BASE <= self.max_vram);
        let Some(end) = end else { return Err(DeviceError::OutOfMemory { size: size as usize }) };
        self.vram.grow((end - VRAM_BASE) as usize).map_err(|_| DeviceError::OutOfMemory { size: size as usize })?;
        self.live.insert(addr, size);
        Ok(addr)
    }

    fn code_object(&mut self, name: &str, code: &[u8]) -> DeviceResult<&CodeObject> {
        if self.parsed.as_ref().is_none_or(|(bytes, _)| bytes != code) {
            let obj = CodeObject::parse(code).map_err(|e| program_err(name, e))?;
            self.parsed = Some((code.to_vec(), obj));
        }
        Ok(&self.parsed.as_ref().expect("parsed above").1)
    }
}

/// Largest VRAM the device hands out (a 24 GiB RX 7900 XTX).
pub const MAX_VRAM: u64 = 24 << 30;

/// The host's physical memory in bytes (`MemTotal` of /proc/meminfo), where it can be read.
fn host_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?.checked_mul(1024)
}

fn program_err(name: &str, reason: impl std::fmt::Display) -> DeviceError {
    DeviceError::Program { name: name.to_string(), reason: reason.to_string() }
}

/// Where the emulator's loader and pilot's reader disagree about `k`, if anywhere.
fn disagreement(k: &Kernel, e: &CodeObjectKernel) -> Option<String> {
    let (d, kd) = (&k.descriptor, &e.descriptor);
    let pairs = [
        ("COMPUTE_PGM_RSRC1", d.compute_pgm_rsrc1, kd.rsrc1),
        ("COMPUTE_PGM_RSRC2", d.compute_pgm_rsrc2, kd.rsrc2),
        ("COMPUTE_PGM_RSRC3", d.compute_pgm_rsrc3, kd.rsrc3),
        ("LDS bytes", k.lds_bytes, kd.group_segment_fixed_size),
        ("scratch bytes", k.scratch_bytes, kd.private_segment_fixed_size),
        ("kernarg bytes", k.kernarg_size, kd.kernarg_size),
        ("code offset", (k.code_offset - k.descriptor_offset) as u32, kd.entry_offset as u32),
    ];
    if let Some((what, a, b)) = pairs.into_iter().find(|(_, a, b)| a != b) {
        return Some(format!("{what}: {a:#x} in pilot's reader, {b:#x} in the emulator's loader"));
    }
    (k.wave32 != kd.wave32()).then(|| "wave32 differs between pilot's reader and the emulator's loader".into())
}

impl Device for EmuDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: "amd-emu".into(), arch: self.arch.name().into() }
    }

    /// `usb+amd` artifacts for the device's card (gfx1100 or gfx1201).
    fn runs(&self, target: &Target) -> bool {
        target.backend == Backend::UsbAmd
            && target.arch == self.arch
            && matches!(self.arch, Arch::Gfx1100 | Arch::Gfx1201)
    }

    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        let addr = self.reserve(size as u64)?;
        self.buffers.push(Some((addr, size as u64)));
        Ok(BufferId(self.buffers.len() as u32 - 1))
    }

    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        let (addr, _) = self.address(buffer)?;
        self.buffers[buffer.0 as usize] = None;
        self.live.remove(addr);
        Ok(())
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        let addr = self.range("copy_in", dst, offset, src.len() as u64)?;
        self.vram.write(addr, src).map_err(|_| unreachable_vram("copy_in"))
    }

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        let addr = self.range("copy_out", src, offset, dst.len() as u64)?;
        self.vram.read(addr, dst).map_err(|_| unreachable_vram("copy_out"))
    }

    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        let name = spec.name;
        if spec.format != ProgramFormat::AmdCodeObject {
            return Err(program_err(name, format!("{:?} is not an AMD code object", spec.format)));
        }
        let arch = self.arch;
        let obj = self.code_object(name, spec.code)?;
        if obj.arch != arch {
            return Err(program_err(
                name,
                format!("the code object is for {}; this amd-emu device runs {}", obj.arch.name(), arch.name()),
            ));
        }
        let k = obj.kernel(name).ok_or_else(|| program_err(name, "not in the code object"))?;
        let record = k.dispatch_record();
        match spec.amdgpu {
            None => return Err(program_err(name, "the artifact carries no amdgpu dispatch record")),
            Some(r) if *r != record => {
                return Err(program_err(
                    name,
                    format!("the artifact's amdgpu record {r:?} differs from the code object's {record:?}"),
                ))
            }
            Some(_) => {}
        }
        if k.arg_offsets.len() != spec.arg_count {
            return Err(program_err(
                name,
                format!("takes {} arguments, the artifact says {}", k.arg_offsets.len(), spec.arg_count),
            ));
        }
        let workgroup = k
            .reqd_workgroup_size
            .ok_or_else(|| program_err(name, "the code object records no reqd_work_group_size"))?;
        if record.scratch > crate::dispatch::MAX_SCRATCH_PER_ITEM {
            return Err(program_err(
                name,
                format!(
                    "{} scratch bytes per work-item exceed the {} the emulator provides",
                    record.scratch,
                    crate::dispatch::MAX_SCRATCH_PER_ITEM
                ),
            ));
        }
        let kernel = CodeObjectKernel::load(spec.code, name).map_err(|e| program_err(name, e))?;
        if let Some(msg) = disagreement(k, &kernel) {
            return Err(program_err(name, msg));
        }
        self.programs.push(Program { kernel, record, workgroup });
        Ok(ProgramId(self.programs.len() as u32 - 1))
    }

    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        let fail = |reason: String| DeviceError::Failed { op: "link_step", reason };
        let mut linked = Vec::with_capacity(ops.len());
        for op in ops {
            linked.push(match op {
                StepOp::Dispatch { program, args, global, local } => {
                    let p = self
                        .programs
                        .get(program.0 as usize)
                        .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
                    let name = &p.kernel.name;
                    if args.len() != p.record.arg_offsets.len() {
                        return Err(fail(format!(
                            "`{name}`: the dispatch passes {} arguments, the program takes {}",
                            args.len(),
                            p.record.arg_offsets.len()
                        )));
                    }
                    if *local != p.workgroup {
                        return Err(fail(format!("`{name}`: launched with {local:?}, built for {:?}", p.workgroup)));
                    }
                    if (0..3).any(|d| local[d] == 0 || global[d] % local[d] != 0) {
                        return Err(fail(format!("`{name}`: global {global:?} is not whole work-groups of {local:?}")));
                    }
                    let grid = [0, 1, 2].map(|d| global[d] / local[d]);
                    let mut kernarg = vec![0u8; p.record.kernarg_size as usize];
                    for (a, &off) in args.iter().zip(&p.record.arg_offsets) {
                        let addr = self.range("link_step", a.buffer, a.offset, 0)?;
                        kernarg[off as usize..off as usize + 8].copy_from_slice(&addr.to_le_bytes());
                    }
                    let program = program.0 as usize;
                    let at = self.reserve(kernarg.len() as u64)?;
                    self.vram.write(at, &kernarg).map_err(|_| unreachable_vram("link_step"))?;
                    let p = &self.programs[program];
                    let mut dispatch = Dispatch::for_kernel(&p.kernel, grid, *local, at)
                        .map_err(|e| fail(format!("`{}`: {e}", p.kernel.name)))?;
                    dispatch.budget = crate::Budget::from_env().map_err(fail)?;
                    Op::Dispatch { program, dispatch }
                }
                StepOp::Copy { src, dst, len } => Op::Copy {
                    src: self.range("link_step", src.buffer, src.offset, *len)?,
                    dst: self.range("link_step", dst.buffer, dst.offset, *len)?,
                    len: *len as usize,
                },
            });
        }
        self.steps.push(linked);
        Ok(StepId(self.steps.len() as u32 - 1))
    }

    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        let ops = self.steps.get(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?;
        for op in ops.iter() {
            match op {
                Op::Dispatch { program, dispatch } => {
                    let kernel = &self.programs[*program].kernel;
                    let vram = Confined { mem: &self.vram, live: &self.live };
                    let ran = dispatch_parallel(kernel, dispatch, &vram, self.threads)
                        .map_err(|e| DeviceError::Failed { op: "submit", reason: e.to_string() })?;
                    self.dispatches += 1;
                    self.ran.workgroups += ran.workgroups;
                    self.ran.waves += ran.waves;
                    self.ran.instructions += ran.instructions;
                }
                Op::Copy { src, dst, len } => {
                    let mut bytes = vec![0u8; *len];
                    self.vram.read(*src, &mut bytes).map_err(|_| unreachable_vram("submit"))?;
                    self.vram.write(*dst, &bytes).map_err(|_| unreachable_vram("submit"))?;
                }
            }
        }
        Ok(self.timeline.record_complete())
    }

    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        self.timeline.check(value).map(drop)
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        Ok(())
    }

    /// Dispatches, workgroups, waves and wave instructions emulated over every submission so far.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("dispatches", self.dispatches),
            ("workgroups", self.ran.workgroups),
            ("waves", self.ran.waves),
            ("wave_instructions", self.ran.instructions),
        ]
    }
}

/// A range checked against its buffer yet outside VRAM: a bug in this device, reported not panicked.
fn unreachable_vram(op: &'static str) -> DeviceError {
    DeviceError::Failed { op, reason: "a checked buffer range lies outside the emulated VRAM".into() }
}
