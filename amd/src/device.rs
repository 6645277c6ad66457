//! `--device usb+amd`: a [`Device`] for an AMD GPU behind the bridge, booted by [`super::boot`] and fed through
//! the compute and SDMA queues ([`super::queue`]).
//!
//! - Open: PCIe bring-up behind the bridge, the boot (cold, partial or after a mode-1 reset), the queues.
//!   Dropping the device ends the session cleanly ([`super::boot::fini`]), so the next open boots partially.
//! - GPU addresses are VAs in VMID 0's page table: VRAM at the window's VA plus its physical address, each
//!   allocation mapped while it lives with an unmapped guard page after it ([`super::boot::vram`]), and the
//!   bridge's windows, mapped at open. Nothing handed to the GPU after boot is an MC (system-aperture) address.
//! - Every buffer lives in VRAM (tinygrad `USBIface.alloc`: the GPU cannot reach host memory over the bridge).
//!   Host copies are the pipelined SRAM copies ([`pilot_usb_bridge::copy`]) with SDMA on the GPU side ([`super::dma`]),
//!   ordered after all submitted work (the host waits for the timeline first).
//! - [`Device::load_program`] reads the code object with pilot's reader, checks the artifact's `amdgpu` record
//!   against what the code object says, and uploads the code object's image once per artifact.
//! - Scratch: a kernel that needs private memory gets it at load, when the device's one scratch region
//!   ([`super::scratch`]) grows to serve it; a step is linked with the region as it is then, so a region outgrown
//!   later stays allocated for the steps already linked.
//! - A small copy-in (whole dwords, up to [`super::stage::STAGE_BYTES`] staged in all) is staged in host memory
//!   ([`super::stage`]) and lands with the next submission: one 0xF2 write of every staged input, and CP DMA copies
//!   at the head of the ring submission. A copy-out or a copy-in of a staged range, and a free, submit the staged
//!   copies first (a ring submission without a step) and wait for them.
//! - [`Device::link_step`] encodes the step once ([`super::step`], barriers from [`pilot_core::hcq::hazard`]) and
//!   the shared linker ([`pilot_core::hcq::link`]) writes the indirect buffer and the kernarg blocks to VRAM; [`Device::submit`] is one ring write and one doorbell (after the staged inputs' SRAM write);
//!   [`Device::wait`] polls the timeline signal in VRAM (no interrupts over USB). A step allocates nothing on the
//!   host once the first has run (`amd/tests/amd_no_alloc_sim.rs`).
//! - `counters()` reports the bridge's USB transactions and bytes, and the transport's clock (modelled time on
//!   the simulator).

use super::boot::gmc;
use super::boot::hw::Hw;
use super::boot::vram::GpuVram;
use super::boot::{self, BootError, BootKind, BootOptions, Booted};
use super::bridge_bus::{BridgeBus, BusMap};
use super::bus::GpuBus;
use super::discovery::Discovery;
use super::dma::SdmaDma;
use super::queue::{gpu_err, ComputeMem, ComputeQueue, Mem, SdmaQueue, VaMap, BRIDGE_WINDOWS};
use super::scratch;
use super::stage::{self, Staged};
use super::step::{self, Kernel, Launch, RingSubmit, Scratch, ShRegs};
use crate::firmware::Card;
use pilot_amd_codeobj::CodeObject;
use pilot_core::artifact::AmdDispatch;
use pilot_core::device::{
    BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, ProgramFormat, ProgramId, ProgramSpec, StepId,
    StepOp,
};
use pilot_core::hcq::link::StepMemory;
use pilot_core::hcq::reloc::Sym;
use pilot_core::hcq::signal;
use pilot_core::target::{Arch, Backend, Target};
use pilot_core::timeline::Timeline;
use pilot_usb_bridge::bridge::Bridge;
use pilot_usb_bridge::copy::Copier;
use pilot_usb_bridge::pcie::{self, Layout};
use std::path::Path;
use std::time::Duration;

/// Why the device did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Bridge(#[from] pilot_usb_bridge::Error),
    #[error("GPU bring-up: {0}")]
    Boot(#[from] BootError),
}

/// How long a step may take before the wait calls the GPU hung (tinygrad's `HCQDEV_WAIT_TIMEOUT_MS`).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(30);
const WAIT_POLL: Duration = Duration::from_micros(50);
/// Buffer alignment in VRAM (the allocator's page).
const ALIGN: u64 = 0x1000;

/// See the module docs.
pub struct AmdDevice {
    bridge: Bridge,
    bars: BusMap,
    booted: Booted,
    card: Card,
    va: VaMap,
    sh: ShRegs,
    compute: ComputeQueue,
    sdma: SdmaQueue,
    copier: Copier,
    /// The SDMA packets of the copy in progress, built in place.
    dma_packets: Vec<u32>,
    /// Small copy-ins waiting for the next ring submission.
    staged: Staged,
    signal: Mem,
    buffers: Vec<Option<Mem>>,
    programs: Vec<Kernel>,
    /// The last code object uploaded: its bytes, where its image lies, and the parse.
    code: Option<(Vec<u8>, Mem, CodeObject)>,
    steps: Vec<(Mem, usize)>,
    /// The scratch region the next step is linked with, once a loaded kernel needed one.
    scratch: Option<ScratchRegion>,
    /// Values handed out; complete when the signal in VRAM shows them (polled: no interrupts over USB).
    timeline: Timeline,
    /// Set when the session ended (cleanly or not): nothing more is sent to the GPU.
    closed: bool,
}

/// The scratch region: its shape and GPU address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchRegion {
    pub layout: scratch::Layout,
    pub va: u64,
}

fn failed(op: &'static str) -> impl Fn(pilot_usb_bridge::Error) -> DeviceError {
    move |e| DeviceError::Failed { op, reason: e.to_string() }
}

fn program_err(name: &str, reason: impl std::fmt::Display) -> DeviceError {
    DeviceError::Program { name: name.to_string(), reason: reason.to_string() }
}

/// The two rings' sizes in bytes. The default is tinygrad's on USB (an 8 KB compute ring, a 1 MB SDMA ring);
/// tests shrink them to wrap them often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSizes {
    pub compute: u64,
    pub sdma: u64,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes { compute: ComputeQueue::MEMORY[0].0, sdma: SdmaQueue::MEMORY[0].0 }
    }
}

impl RingSizes {
    /// The smallest ring either queue takes: room for two of the largest submissions (a step's ring packets, a
    /// copy-in chunk's SDMA packets) and a power of two, as both engines' size fields are log2.
    pub const MIN: u64 = 0x400;

    fn check(&self) -> Result<(), BootError> {
        for (what, n) in [("compute", self.compute), ("SDMA", self.sdma)] {
            if !n.is_power_of_two() || !(Self::MIN..=1 << 22).contains(&n) {
                return Err(BootError::Invalid {
                    step: "queues",
                    msg: format!("a {what} ring of {n:#x} bytes is not a power of two from {:#x} to 4 MB", Self::MIN),
                });
            }
        }
        Ok(())
    }
}

impl AmdDevice {
    /// Brings up PCIe behind `bridge`, boots the GPU with the firmware in `firmware_dir`, creates the queues and
    /// the timeline signal.
    pub fn open(bridge: Bridge, firmware_dir: &Path, opts: BootOptions) -> Result<AmdDevice, OpenError> {
        AmdDevice::open_with_rings(bridge, firmware_dir, opts, RingSizes::default())
    }

    /// [`AmdDevice::open`] with rings of the given sizes.
    pub fn open_with_rings(
        mut bridge: Bridge,
        firmware_dir: &Path,
        opts: BootOptions,
        rings: RingSizes,
    ) -> Result<AmdDevice, OpenError> {
        rings.check()?;
        let topo = pcie::bring_up(&mut bridge, &Layout::default())?;
        let mut bars = BusMap::from_topology(bridge.name(), &topo)?;
        let mut booted = {
            let mut bus = BridgeBus::new(&mut bridge, bars);
            let booted = boot::boot(&mut bus, firmware_dir, opts)?;
            bars = *bus.map();
            booted
        };
        let card = booted.card();
        let va = map_windows(&mut BridgeBus::new(&mut bridge, bars), &mut booted)?;
        let sh = ShRegs::resolve(card, &booted.discovery)?;
        let mut bus = BridgeBus::new(&mut bridge, bars);
        let Booted { discovery, vram, boot_memory, .. } = &mut booted;
        let mut hw = Hw { bus: &mut bus, disc: discovery, step: "queues" };
        let mut alloc = |(size, align): (u64, u64)| -> Result<Mem, BootError> {
            let paddr = vram.alloc(&mut hw, size, align)?;
            Ok(Mem { paddr, va: va.vram(paddr), size })
        };
        let [(_, ring_align), eop, _, gart] = ComputeQueue::MEMORY;
        let mqd = boot_memory.mqd[0];
        let compute_mem = ComputeMem {
            ring: alloc((rings.compute, ring_align.max(rings.compute)))?,
            eop: alloc(eop)?,
            mqd: Mem { paddr: mqd, va: va.vram(mqd), size: ComputeQueue::MEMORY[2].0 },
            gart: alloc(gart)?,
        };
        let [(_, sdma_align), sdma_gart] = SdmaQueue::MEMORY;
        let (sdma_ring, sdma_gart) = (alloc((rings.sdma, sdma_align))?, alloc(sdma_gart)?);
        let signal = alloc((0x100, 0x100))?;
        vram.flush(&mut hw)?;
        bus.write_vram(signal.paddr, &[0u8; 0x100])?;
        let compute = ComputeQueue::create(&mut bus, &booted.discovery, card, compute_mem)?;
        let sdma = SdmaQueue::create(&mut bus, &booted.discovery, card, sdma_ring, sdma_gart)?;
        Ok(AmdDevice {
            bridge,
            bars,
            booted,
            card,
            va,
            sh,
            compute,
            sdma,
            copier: Copier::new(),
            dma_packets: Vec::new(),
            staged: Staged::default(),
            signal,
            buffers: Vec::new(),
            programs: Vec::new(),
            code: None,
            steps: Vec::new(),
            scratch: None,
            timeline: Timeline::new(),
            closed: false,
        })
    }

    /// The dispatch facts program `id` is linked with. Tests alter them to show that a wrong dispatch encoding
    /// (a kernarg offset, the user SGPR count) gives wrong outputs or a GPU fault, never silence.
    pub fn program_mut(&mut self, id: ProgramId) -> Option<&mut Kernel> {
        self.programs.get_mut(id.0 as usize)
    }

    /// The scratch region steps are linked with. Tests alter it to show that a wrong scratch setup (no
    /// TMPRING_SIZE, a short slot, a region larger than its allocation) is a GPU fault or wrong outputs.
    pub fn scratch_mut(&mut self) -> Option<&mut ScratchRegion> {
        self.scratch.as_mut()
    }

    /// Grows the scratch region to serve `per_item` bytes per work-item (see [`super::scratch`]).
    fn ensure_scratch(&mut self, name: &str, per_item: u32) -> DeviceResult<()> {
        if self.scratch.is_some_and(|s| s.layout.per_item >= per_item) {
            return Ok(());
        }
        let general = self.booted.layout.usable_end().saturating_sub(boot::memory::BOOT_SIZE);
        let layout = scratch::Layout::new(self.card, &self.booted.discovery.gc, per_item, scratch::budget(general))
            .map_err(|e| program_err(name, e))?;
        let mem = self.alloc_mem(layout.bytes(), 0x1000)?;
        self.scratch = Some(ScratchRegion { layout, va: mem.va });
        Ok(())
    }

    /// How this session's boot went.
    pub fn boot_kind(&self) -> BootKind {
        self.booted.kind
    }

    /// Ends the session: queues down, clocks low, and the "clean" mark that lets the next open boot partially.
    pub fn close(mut self) -> Result<(), OpenError> {
        self.finish(false)
    }

    /// Leaves the GPU as a crashed process would (no fini): the next open resets it (tests).
    pub fn abandon(mut self) {
        self.closed = true;
    }

    fn finish(&mut self, err_state: bool) -> Result<(), OpenError> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let mut bus = BridgeBus::new(&mut self.bridge, self.bars);
        Ok(boot::fini(&mut bus, &self.booted, err_state)?)
    }

    pub fn bridge(&self) -> &Bridge {
        &self.bridge
    }

    fn alloc_mem(&mut self, size: u64, align: u64) -> DeviceResult<Mem> {
        let Booted { discovery, vram, .. } = &mut self.booted;
        let mut bus = BridgeBus::new(&mut self.bridge, self.bars);
        let mut hw = Hw { bus: &mut bus, disc: discovery, step: "VRAM" };
        alloc_vram(vram, &mut hw, self.va, size, align)
    }

    fn buffer(&self, b: BufferId) -> DeviceResult<Mem> {
        self.buffers.get(b.0 as usize).copied().flatten().ok_or(DeviceError::InvalidHandle { kind: "buffer", id: b.0 })
    }

    fn range(&self, op: &'static str, b: BufferId, offset: u64, len: u64) -> DeviceResult<Mem> {
        let m = self.buffer(b)?;
        pilot_core::bounds::check_range(op, offset, len, m.size)?;
        Ok(Mem { paddr: m.paddr + offset, va: m.va + offset, size: len })
    }

    /// Invalidates the GPU's TLB if a mapping changed since the last time ([`super::boot::vram`]): before every
    /// use of memory by the GPU.
    fn flush_tlb(&mut self) -> pilot_usb_bridge::Result<()> {
        let Booted { discovery, vram, .. } = &mut self.booted;
        let mut bus = BridgeBus::new(&mut self.bridge, self.bars);
        vram.flush(&mut Hw { bus: &mut bus, disc: discovery, step: "TLB" }).map_err(|e| gpu_err("TLB", e.to_string()))
    }

    /// Host bytes into VRAM at physical `paddr` through the pipelined copy.
    fn upload(&mut self, paddr: u64, data: &[u8]) -> pilot_usb_bridge::Result<()> {
        self.flush_tlb()?;
        let mut dma = SdmaDma { queue: &mut self.sdma, bars: self.bars, va: self.va, packets: &mut self.dma_packets };
        self.copier.copy_in(&mut self.bridge, &mut dma, paddr, data)
    }

    fn download(&mut self, paddr: u64, buf: &mut [u8]) -> pilot_usb_bridge::Result<()> {
        self.flush_tlb()?;
        let mut dma = SdmaDma { queue: &mut self.sdma, bars: self.bars, va: self.va, packets: &mut self.dma_packets };
        self.copier.copy_out(&mut self.bridge, &mut dma, paddr, buf)
    }

    /// One ring submission: the staged copy-ins (their image sent to the SRAM first), then the indirect buffer
    /// `ib` when given, then the next timeline value. Returns that value.
    fn submit_ring(&mut self, ib: Option<(u64, usize)>) -> DeviceResult<u64> {
        self.flush_tlb().map_err(failed("submit"))?;
        let mut copies = heapless::Vec::new();
        if !self.staged.is_empty() {
            // A submission in flight may still be copying out of the SRAM image.
            self.synchronize()?;
            let wire = self.staged.wire();
            self.copier.write_staged(&mut self.bridge, stage::SRAM_OFFSET, wire).map_err(failed("submit"))?;
            let image = self.va.sys(pilot_usb_bridge::proto::bus::SRAM + stage::SRAM_OFFSET as u64);
            copies = self.staged.copies(image);
            self.staged.clear();
        }
        let value = self.timeline.next_value();
        let ring = RingSubmit::new(&copies, ib, self.signal.va + signal::SIGNAL_VALUE, value);
        self.compute
            .submit(&mut BridgeBus::new(&mut self.bridge, self.bars), ring.words())
            .map_err(failed("submit"))?;
        self.timeline.record(());
        Ok(value)
    }

    /// Lands the staged copy-ins when one writes any of `len` bytes at GPU address `va`.
    fn land_staged(&mut self, va: u64, len: u64) -> DeviceResult<()> {
        if self.staged.overlaps(va, len) {
            let v = self.submit_ring(None)?;
            self.wait(v)?;
        }
        Ok(())
    }

    /// The VM protection fault GC latched, as text for the hang error ("" when none): the status and the page.
    fn vm_fault(&mut self) -> Result<String, BootError> {
        let mut bus = BridgeBus::new(&mut self.bridge, self.bars);
        let mut hw = Hw { bus: &mut bus, disc: &self.booted.discovery, step: "wait" };
        let status = hw.read(gmc::gc_fault_status(self.card))?;
        if status == 0 {
            return Ok(String::new());
        }
        let [lo, hi] = gmc::gc_fault_addr(self.card);
        let page = u64::from(hw.read(lo)?) | u64::from(hw.read(hi)?) << 32;
        Ok(format!("; VM protection fault (status {status:#x}) at page {:#x}", page << 12))
    }

    fn read_signal(&mut self) -> pilot_usb_bridge::Result<u32> {
        let mut b = [0u8; 4];
        BridgeBus::new(&mut self.bridge, self.bars).read_vram(self.signal.paddr + signal::SIGNAL_VALUE, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Uploads `code` once (every program of an artifact shares one code object) and returns its parse and image.
    fn code_object(&mut self, name: &str, code: &[u8]) -> DeviceResult<(Mem, &CodeObject)> {
        if self.code.as_ref().is_none_or(|(bytes, _, _)| bytes != code) {
            let obj = CodeObject::parse(code).map_err(|e| program_err(name, e))?;
            let want = match self.card {
                Card::Gfx1100 => Arch::Gfx1100,
                Card::Gfx1201 => Arch::Gfx1201,
            };
            if obj.arch != want {
                return Err(program_err(
                    name,
                    format!("the code object is for {}, the GPU is {}", obj.arch.name(), want.name()),
                ));
            }
            let image = self.alloc_mem(obj.image.len() as u64, 0x1000)?;
            self.upload(image.paddr, &obj.image).map_err(failed("load_program"))?;
            self.code = Some((code.to_vec(), image, obj));
        }
        let (_, image, obj) = self.code.as_ref().expect("set above");
        Ok((*image, obj))
    }

    fn link(&mut self, ops: &[StepOp]) -> DeviceResult<(Mem, usize)> {
        let mut launches = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                StepOp::Dispatch { program, args, global, local } => {
                    let kernel = self
                        .programs
                        .get(program.0 as usize)
                        .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
                    for a in args {
                        self.range("link_step", a.buffer, a.offset, 0)?;
                    }
                    let args = args.iter().map(|a| (a.buffer.0, a.offset)).collect();
                    launches.push(Launch { kernel, args, global: *global, local: *local });
                }
                StepOp::Copy { .. } => return Err(DeviceError::Unsupported("an in-step buffer copy on usb+amd")),
            }
        }
        let scratch = self.scratch.map_or(Scratch::default(), |s| Scratch {
            tmpring_size: s.layout.tmpring_size(),
            va: s.va,
            per_item: s.layout.per_item,
        });
        let enc = step::encode(self.card, &self.sh, &launches, scratch).map_err(failed("link_step"))?;
        let buffers = &self.buffers;
        let Booted { discovery, vram, .. } = &mut self.booted;
        let mut memory =
            VramMemory { vram, disc: discovery, va: self.va, bus: BridgeBus::new(&mut self.bridge, self.bars) };
        let placed = enc.step.place(&mut memory, |s| match s {
            Sym::Buffer(i) => buffers.get(i as usize).copied().flatten().map(|m| m.va),
            _ => None,
        })?;
        // The step's memory is mapped now, so its submissions never wait for an invalidation.
        self.flush_tlb().map_err(failed("link_step"))?;
        Ok((placed.stream, placed.stream_dwords))
    }
}

/// Step memory in VRAM, written over the bridge.
struct VramMemory<'a> {
    vram: &'a mut GpuVram,
    disc: &'a Discovery,
    va: VaMap,
    bus: BridgeBus<'a>,
}

impl StepMemory for VramMemory<'_> {
    type Mem = Mem;

    fn alloc(&mut self, bytes: u64, align: u64) -> DeviceResult<Mem> {
        let mut hw = Hw { bus: &mut self.bus, disc: self.disc, step: "link_step" };
        alloc_vram(self.vram, &mut hw, self.va, bytes, align)
    }

    fn va(&self, mem: &Mem) -> u64 {
        mem.va
    }

    fn write(&mut self, mem: &mut Mem, words: &[u32]) -> DeviceResult<()> {
        self.bus.write_vram(mem.paddr, &super::queue::le_bytes(words)).map_err(failed("link_step"))
    }
}

/// `size` bytes of VRAM at an `align`-aligned physical address, mapped ([`super::boot::vram`]).
fn alloc_vram(vram: &mut GpuVram, hw: &mut Hw, va: VaMap, size: u64, align: u64) -> DeviceResult<Mem> {
    let paddr = vram.alloc(hw, size, align).map_err(|e| match e {
        BootError::OutOfMemory { .. } => DeviceError::OutOfMemory { size: size as usize },
        e => DeviceError::Failed { op: "alloc", reason: e.to_string() },
    })?;
    Ok(Mem { paddr, va: va.vram(paddr), size })
}

/// The artifact's record against what pilot's reader derives from the code object: `None` when equal.
fn record_mismatch(recorded: &AmdDispatch, k: &pilot_amd_codeobj::Kernel) -> Option<String> {
    let derived = k.dispatch_record();
    (recorded != &derived)
        .then(|| format!("the artifact's amdgpu record {recorded:?} differs from the code object's {derived:?}"))
}

impl Device for AmdDevice {
    fn info(&self) -> DeviceInfo {
        let arch = match self.card {
            Card::Gfx1100 => Arch::Gfx1100,
            Card::Gfx1201 => Arch::Gfx1201,
        };
        DeviceInfo { backend: Backend::UsbAmd.name().into(), arch: arch.name().into() }
    }

    fn runs(&self, target: &Target) -> bool {
        target.backend == Backend::UsbAmd && target.arch.name() == self.info().arch
    }

    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        let m = self.alloc_mem(size as u64, ALIGN)?;
        self.buffers.push(Some(m));
        Ok(BufferId(self.buffers.len() as u32 - 1))
    }

    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        let m = self.buffer(buffer)?;
        self.land_staged(m.va, m.size.max(1))?;
        self.buffers[buffer.0 as usize] = None;
        let Booted { discovery, vram, .. } = &mut self.booted;
        let mut bus = BridgeBus::new(&mut self.bridge, self.bars);
        let mut hw = Hw { bus: &mut bus, disc: discovery, step: "free" };
        vram.free(&mut hw, m.paddr).map_err(|e| DeviceError::Failed { op: "free", reason: e.to_string() })
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        let m = self.range("copy_in", dst, offset, src.len() as u64)?;
        if self.staged.push(m.va, src) {
            return Ok(());
        }
        self.land_staged(m.va, m.size)?;
        self.synchronize()?;
        self.upload(m.paddr, src).map_err(failed("copy_in"))
    }

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        let m = self.range("copy_out", src, offset, dst.len() as u64)?;
        self.land_staged(m.va, m.size)?;
        self.synchronize()?;
        self.download(m.paddr, dst).map_err(failed("copy_out"))
    }

    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        let name = spec.name;
        if spec.format != ProgramFormat::AmdCodeObject {
            return Err(program_err(name, format!("{:?} is not an AMD code object", spec.format)));
        }
        let Some(recorded) = spec.amdgpu else {
            return Err(program_err(name, "the artifact carries no amdgpu dispatch record"));
        };
        let (image, obj) = self.code_object(name, spec.code)?;
        let k = obj.kernel(name).ok_or_else(|| program_err(name, "not in the code object"))?;
        if let Some(msg) = record_mismatch(recorded, k) {
            return Err(program_err(name, msg));
        }
        if recorded.arg_offsets.len() != spec.arg_count {
            return Err(program_err(
                name,
                format!("takes {} arguments, the artifact says {}", recorded.arg_offsets.len(), spec.arg_count),
            ));
        }
        let workgroup = k
            .reqd_workgroup_size
            .ok_or_else(|| program_err(name, "the code object records no reqd_work_group_size"))?;
        if recorded.scratch > 0 {
            self.ensure_scratch(name, recorded.scratch)?;
        }
        let kernel = Kernel {
            name: name.to_string(),
            code_va: image.va + recorded.code,
            rsrc: recorded.rsrc,
            user_sgprs: recorded.user_sgprs,
            kernarg_size: recorded.kernarg_size,
            kernarg_align: recorded.kernarg_align,
            arg_offsets: recorded.arg_offsets.clone(),
            lds: recorded.lds,
            scratch: recorded.scratch,
            workgroup,
        };
        self.programs.push(kernel);
        Ok(ProgramId(self.programs.len() as u32 - 1))
    }

    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        let linked = self.link(ops)?;
        self.steps.push(linked);
        Ok(StepId(self.steps.len() as u32 - 1))
    }

    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        let (ib, dwords) =
            *self.steps.get(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?;
        self.submit_ring(Some((ib.va, dwords)))
    }

    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        if self.timeline.check(value)? {
            return Ok(());
        }
        let start = self.bridge.now();
        loop {
            let seen = self.read_signal().map_err(failed("wait"))?;
            if self.timeline.observe(value, seen) {
                return Ok(());
            }
            let waited = self.bridge.now().saturating_sub(start);
            if waited > WAIT_TIMEOUT {
                let fault = self.vm_fault().map_err(|e| DeviceError::Failed { op: "wait", reason: e.to_string() })?;
                return Err(DeviceError::Failed {
                    op: "wait",
                    reason: format!(
                        "the GPU did not reach timeline value {value} within {} s (signal holds {seen}): hung or faulted{fault}",
                        waited.as_secs()
                    ),
                });
            }
            self.bridge.sleep(WAIT_POLL);
        }
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        if self.timeline.busy() {
            self.wait(self.timeline.submitted())?;
        }
        Ok(())
    }

    /// USB transactions and bytes through the bridge so far, and the bridge clock in nanoseconds (modelled time
    /// on the simulator).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.bridge.stats();
        vec![
            ("usb_transactions", s.transactions()),
            ("usb_bytes", s.bytes_in + s.bytes_out),
            ("bridge_clock_ns", self.bridge.now().as_nanos() as u64),
        ]
    }
}

/// Maps the bridge windows the copies use into VMID 0 as uncached system memory (tinygrad
/// `USBIface._dma_region`) and returns the address map.
fn map_windows(bus: &mut BridgeBus<'_>, booted: &mut Booted) -> Result<VaMap, BootError> {
    let Booted { discovery, vram, .. } = booted;
    let mut hw = Hw { bus, disc: discovery, step: "VM" };
    let mut windows = [(0, 0, 0); 3];
    for (slot, &(bus_addr, size)) in windows.iter_mut().zip(&BRIDGE_WINDOWS) {
        *slot = (bus_addr, size, vram.map_system(&mut hw, bus_addr, size)?);
    }
    vram.flush(&mut hw)?;
    Ok(VaMap { vram: vram.va(0), windows })
}

impl Drop for AmdDevice {
    fn drop(&mut self) {
        if let Err(e) = self.finish(false) {
            log::warn!("usb+amd: ending the session: {e}");
        }
    }
}
