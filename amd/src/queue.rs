//! The two queues pilot runs on the GPU, set up as tinygrad's `AM_GFX.setup_ring` / `AM_SDMA.setup_ring` do and fed
//! as `AMDComputeQueue._submit` / `AMDCopyQueue._submit` feed them on USB:
//!
//! - [`ComputeQueue`]: the compute HQD on ME1 pipe 0 queue 0 (VMID 0), its MQD in VRAM and the HQD registers
//!   written from the MQD's register mirror, then `CP_HQD_ACTIVE` and an HDP flush; doorbell `MEC_RING0` (3); the write pointer
//!   counts dwords.
//! - [`SdmaQueue`]: SDMA0 queue 0, ring base, read-pointer writeback and write-pointer poll addresses, doorbell
//!   `sDMA_ENGINE0` (0x100); the write pointer counts bytes.
//!
//! Each submission is one streaming write of the packets into the ring, one of the write-pointer shadow, an HDP flush
//! and one doorbell.
//! The flush makes the ring bytes (and whatever else the host wrote through BAR0: an indirect buffer, kernargs)
//! visible to the engine the doorbell wakes, as Linux flushes after CPU writes to VRAM the GPU reads
//! (`amdgpu_device.c` `amdgpu_device_flush_hdp`) and tinygrad's `AMDQueueDesc.signal_doorbell` flushes before the
//! doorbell on a PCIe-attached GPU (it skips the flush on USB; the write buffer's drain time is not documented, so
//! pilot does not rely on the bridge's latency to cover it). The rings never wrap inside a submission: the tail is padded (PM4 NOP, SDMA zero NOPs) and the
//! submission starts again at 0 — for the compute ring after the CP's read pointer has caught up, for the SDMA ring
//! without reading (see [`SdmaQueue::submit`]).

use super::bus::GpuBus;
use super::mqd::{self, HqdParams};
use super::pm4;
use super::regs::{gc, nbio, reg, HwIp, RegAddr};
use crate::firmware::Card;
use pilot_core::hcq::reloc::RelocBuf;
use pilot_usb_bridge::error::{Error, Result};
use std::time::Duration;

/// The GPU addresses the queues use: VRAM physical address `p` at MC address `vram + p` (inside both hubs'
/// system aperture), and each bridge window mapped in VMID 0's page table as system memory at its own VA
/// (tinygrad `USBIface._dma_region`: the SRAM copy buffers, `sys_buf`, `cq_buf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VaMap {
    pub vram: u64,
    /// (bus address, bytes, VA) of each mapped bridge window.
    pub windows: [(u64, u64, u64); 3],
}

impl VaMap {
    pub fn vram(&self, paddr: u64) -> u64 {
        self.vram + paddr
    }

    /// The VA of bridge bus address `bus`, which must lie in a mapped window (the copy code's fixed addresses).
    pub fn sys(&self, bus: u64) -> u64 {
        match self.windows.iter().find(|&&(b, n, _)| bus >= b && bus < b + n) {
            Some(&(b, _, va)) => va + (bus - b),
            None => panic!("bridge bus address {bus:#x} is in no mapped window"),
        }
    }
}

/// The bridge windows the copies reach: the SRAM (both copy-in windows, the copy-out target), `sys_buf` (the
/// drain fence) and `cq_buf` (the copy-out trigger).
pub const BRIDGE_WINDOWS: [(u64, u64); 3] = [
    (pilot_usb_bridge::proto::bus::SRAM, pilot_usb_bridge::proto::bus::SRAM_SIZE as u64),
    (pilot_usb_bridge::proto::bus::SYS_BUF, 0x1000),
    (pilot_usb_bridge::proto::bus::CQ_BUF, 0x1000),
];

/// The register a write to which flushes HDP, so the GPU sees what the host wrote through BAR0 (tinygrad
/// `AM_GMC.flush_hdp`: the register whose byte address `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` holds).
fn hdp_flush_reg(bus: &mut dyn GpuBus, regs: &dyn RegMap, card: Card) -> Result<u32> {
    let cntl = nbio!(card, m => reg!(HwIp::Nbio, m::BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL));
    Ok(rreg(bus, regs, cntl)? / 4)
}

/// A piece of VRAM: its physical address (the BAR0 offset), its GPU address and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mem {
    pub paddr: u64,
    pub va: u64,
    pub size: u64,
}

/// Absolute register addresses: the discovery table's IP base plus the table offset.
pub trait RegMap {
    fn addr(&self, r: RegAddr) -> Result<u32>;
}

impl RegMap for super::discovery::Discovery {
    fn addr(&self, r: RegAddr) -> Result<u32> {
        self.reg_addr(r.ip, r.base, r.offset).ok_or_else(|| {
            gpu_err(
                "registers",
                format!("{}: the discovery table gives {} no base segment {}", r.name, r.ip.name(), r.base),
            )
        })
    }
}

/// A one-line driver error at `op`.
pub(crate) fn gpu_err(op: &str, msg: impl Into<String>) -> Error {
    Error::Invalid { device: "amd".into(), op: op.into(), msg: msg.into() }
}

fn wreg(bus: &mut dyn GpuBus, regs: &dyn RegMap, r: RegAddr, v: u32) -> Result<()> {
    bus.write_reg(regs.addr(r)?, v)
}

fn rreg(bus: &mut dyn GpuBus, regs: &dyn RegMap, r: RegAddr) -> Result<u32> {
    bus.read_reg(regs.addr(r)?)
}

/// How long a ring may take to drain before a wrap is called a hang (tinygrad's 30 s HCQ wait timeout).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
const DRAIN_POLL: Duration = Duration::from_micros(100);

/// The 256-byte "gart" page of each queue: read pointer at +128, write pointer at +56 (tinygrad `create_queue`'s
/// `amd_queue_t.read_dispatch_id` / `write_dispatch_id` offsets).
pub const GART_BYTES: u64 = 0x100;
pub const RPTR_OFFSET: u64 = 128;
pub const WPTR_OFFSET: u64 = 56;

/// The most dwords a ring submission may have for [`Ring::push_words`] not to allocate: a step's ring submission
/// ([`super::step::RING_SUBMIT_MAX_DWORDS`]) and the compute ring's tail padding before it.
const SMALL_PUSH_DWORDS: usize = 128;

/// A ring, its pointers' page and where the host writes next.
#[derive(Debug)]
struct Ring {
    mem: Mem,
    gart: Mem,
    doorbell: u32,
    /// The HDP flush register ([`hdp_flush_reg`]).
    hdp_flush: u32,
    /// Bytes written since creation.
    put: u64,
}

impl Ring {
    /// [`Ring::push`] of dwords; up to [`SMALL_PUSH_DWORDS`] of them without allocating.
    fn push_words(&mut self, bus: &mut dyn GpuBus, words: &[u32], unit: u64) -> Result<()> {
        let mut small = [0u8; 4 * SMALL_PUSH_DWORDS];
        if words.len() <= SMALL_PUSH_DWORDS {
            for (chunk, w) in small.chunks_exact_mut(4).zip(words) {
                chunk.copy_from_slice(&w.to_le_bytes());
            }
            return self.push(bus, &small[..words.len() * 4], unit);
        }
        self.push(bus, &le_bytes(words), unit)
    }

    /// Writes `bytes` at the ring's current position (which must fit before the end), then the write pointer
    /// shadow (in `unit`s), flushes HDP, then rings the doorbell with the same value.
    fn push(&mut self, bus: &mut dyn GpuBus, bytes: &[u8], unit: u64) -> Result<()> {
        let at = self.put % self.mem.size;
        debug_assert!(at + bytes.len() as u64 <= self.mem.size);
        bus.write_vram(self.mem.paddr + at, bytes)?;
        self.put += bytes.len() as u64;
        let wptr = self.put / unit;
        bus.write_vram(self.gart.paddr + WPTR_OFFSET, &wptr.to_le_bytes())?;
        bus.write_reg(self.hdp_flush, 0)?;
        bus.ring_doorbell(self.doorbell, wptr)
    }

    /// Waits until the engine has read everything written (its read pointer, in `unit`s, equals the put value).
    fn drain(&self, bus: &mut dyn GpuBus, unit: u64, what: &str) -> Result<()> {
        let mut waited = Duration::ZERO;
        loop {
            let mut b = [0u8; 8];
            bus.read_vram(self.gart.paddr + RPTR_OFFSET, &mut b)?;
            let rptr = u64::from_le_bytes(b) * unit;
            // The engine reports its position modulo the ring on some parts: compare within one ring.
            if rptr == self.put || rptr % self.mem.size == self.put % self.mem.size {
                return Ok(());
            }
            if waited > DRAIN_TIMEOUT {
                return Err(gpu_err(
                    what,
                    format!(
                        "the ring did not drain before wrapping: read pointer 0x{rptr:x}, written 0x{:x}",
                        self.put
                    ),
                ));
            }
            bus.sleep(DRAIN_POLL);
            waited += DRAIN_POLL;
        }
    }

    /// Bytes left before the ring's end.
    fn tail(&self) -> u64 {
        self.mem.size - self.put % self.mem.size
    }
}

/// The compute queue (ME1 pipe 0 queue 0).
#[derive(Debug)]
pub struct ComputeQueue {
    ring: Ring,
}

/// The memory a compute queue needs, as [`ComputeQueue::MEMORY`] sizes it.
#[derive(Clone, Copy, Debug)]
pub struct ComputeMem {
    pub ring: Mem,
    pub eop: Mem,
    pub mqd: Mem,
    pub gart: Mem,
}

/// `AMDGPU_NAVI10_DOORBELL_MEC_RING0`.
pub const DOORBELL_MEC_RING0: u32 = 3;
/// `AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0`.
pub const DOORBELL_SDMA_ENGINE0: u32 = 0x100;

impl ComputeQueue {
    /// (size, alignment) of the ring, EOP buffer, MQD and gart page, in that order (tinygrad's USB sizes).
    pub const MEMORY: [(u64, u64); 4] = [(0x2000, 0x2000), (0x1000, 0x1000), (0x1000, 0x1000), (GART_BYTES, 0x100)];

    /// Writes the MQD and activates the HQD from it.
    pub fn create(bus: &mut dyn GpuBus, regs: &dyn RegMap, card: Card, mem: ComputeMem) -> Result<ComputeQueue> {
        bus.write_vram(mem.gart.paddr, &[0u8; GART_BYTES as usize])?;
        let p = HqdParams {
            mqd: mem.mqd.va,
            ring: mem.ring.va,
            ring_bytes: mem.ring.size,
            rptr_report: mem.gart.va + RPTR_OFFSET,
            wptr_poll: mem.gart.va + WPTR_OFFSET,
            eop: mem.eop.va,
            eop_bytes: mem.eop.size,
            doorbell: DOORBELL_MEC_RING0,
        };
        let (image, mirror) = mqd::build(card, &p);
        let bytes: Vec<u8> = image.iter().flat_map(|d| d.to_le_bytes()).collect();
        bus.write_vram(mem.mqd.paddr, &bytes)?;
        let (grbm, select, first, active) = gc!(card, m => (
            reg!(HwIp::Gc, m::GRBM_GFX_CNTL),
            m::GRBM_GFX_CNTL::new().with_meid(1).with_pipeid(0).with_queueid(0).bits(),
            reg!(HwIp::Gc, m::CP_MQD_BASE_ADDR),
            reg!(HwIp::Gc, m::CP_HQD_ACTIVE),
        ));
        wreg(bus, regs, grbm, select)?;
        let base = regs.addr(first)?;
        for (i, &v) in image[mirror].iter().enumerate() {
            bus.write_reg(base + i as u32, v)?;
        }
        wreg(bus, regs, active, 1)?;
        // tinygrad's `AM_GFX.setup_ring` flushes right after `CP_HQD_ACTIVE`, before releasing the GRBM selection: the
        // MQD and the pointer page were written through BAR0.
        let hdp_flush = hdp_flush_reg(bus, regs, card)?;
        bus.write_reg(hdp_flush, 0)?;
        wreg(bus, regs, grbm, 0)?;
        let ring = Ring { mem: mem.ring, gart: mem.gart, doorbell: DOORBELL_MEC_RING0, hdp_flush, put: 0 };
        Ok(ComputeQueue { ring })
    }

    /// Submits `packets` (whole PM4 packets, at most half the ring): pads the ring's tail with a NOP when they
    /// do not fit before its end, after the CP has read up to there.
    pub fn submit(&mut self, bus: &mut dyn GpuBus, packets: &[u32]) -> Result<()> {
        let bytes = packets.len() as u64 * 4;
        if packets.is_empty() || bytes > self.ring.mem.size / 2 {
            return Err(gpu_err("compute submit", format!("{} dwords do not fit half the ring", packets.len())));
        }
        if bytes > self.ring.tail() {
            // A tail shorter than a submission of at most SMALL_PUSH_DWORDS needs no allocation either.
            let n = (self.ring.tail() / 4) as usize;
            let mut pad = RelocBuf::new();
            let mut small = [0u32; SMALL_PUSH_DWORDS];
            let words = if n <= SMALL_PUSH_DWORDS {
                small[0] = if n == 1 { pm4::NOP_ONE_DWORD } else { pm4::header(pm4::op::NOP, n - 1) };
                &small[..n]
            } else {
                pm4::nop(&mut pad, n);
                pad.words()
            };
            self.ring.drain(bus, 4, "compute submit")?;
            self.ring.push_words(bus, words, 4)?;
        }
        self.ring.push_words(bus, packets, 4)
    }

    /// Dwords submitted so far (the write pointer).
    pub fn wptr(&self) -> u64 {
        self.ring.put / 4
    }

    pub fn ring(&self) -> Mem {
        self.ring.mem
    }
}

/// SDMA0 queue 0.
#[derive(Debug)]
pub struct SdmaQueue {
    ring: Ring,
}

impl SdmaQueue {
    /// (size, alignment) of the ring and the gart page (a 1 MB ring, as tinygrad's on USB).
    pub const MEMORY: [(u64, u64); 2] = [(1 << 20, 0x1000), (GART_BYTES, 0x100)];

    /// Programs SDMA0 queue 0 (tinygrad `AM_SDMA.setup_ring`).
    pub fn create(bus: &mut dyn GpuBus, regs: &dyn RegMap, card: Card, ring: Mem, gart: Mem) -> Result<SdmaQueue> {
        bus.write_vram(gart.paddr, &[0u8; GART_BYTES as usize])?;
        let (rptr, wptr) = (gart.va + RPTR_OFFSET, gart.va + WPTR_OFFSET);
        let rb_size = (ring.size / 4).ilog2();
        let rb_cntl = match card {
            Card::Gfx1100 => {
                use super::regs::gc_11_0_0 as m;
                m::SDMA0_QUEUE0_RB_CNTL::new()
                    .with_f32_wptr_poll_enable(true)
                    .with_rb_vmid(0)
                    .with_rptr_writeback_enable(true)
                    .with_rptr_writeback_timer(4)
                    .with_rb_enable(true)
                    .with_rb_priv(true)
                    .with_rb_size(rb_size)
                    .bits()
            }
            Card::Gfx1201 => {
                use super::regs::gc_12_0_0 as m;
                m::SDMA0_QUEUE0_RB_CNTL::new()
                    .with_mcu_wptr_poll_enable(true)
                    .with_rb_vmid(0)
                    .with_rptr_writeback_enable(true)
                    .with_rptr_writeback_timer(4)
                    .with_rb_enable(true)
                    .with_rb_priv(true)
                    .with_rb_size(rb_size)
                    .bits()
            }
        };
        let writes: Vec<(RegAddr, u32)> = gc!(card, m => vec![
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_MINOR_PTR_UPDATE), 1),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_RPTR), 0),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_RPTR_HI), 0),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_WPTR), 0),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_WPTR_HI), 0),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_BASE), (ring.va >> 8) as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_BASE_HI), (ring.va >> 40) as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_RPTR_ADDR_LO), rptr as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_RPTR_ADDR_HI), (rptr >> 32) as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO), wptr as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI), (wptr >> 32) as u32),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_DOORBELL_OFFSET),
                m::SDMA0_QUEUE0_DOORBELL_OFFSET::new().with_offset(DOORBELL_SDMA_ENGINE0 * 2).bits()),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_DOORBELL), m::SDMA0_QUEUE0_DOORBELL::new().with_enable(true).bits()),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_MINOR_PTR_UPDATE), 0),
            (reg!(HwIp::Gc, m::SDMA0_QUEUE0_RB_CNTL), rb_cntl),
        ]);
        for (r, v) in writes {
            wreg(bus, regs, r, v)?;
        }
        let (ib_cntl, enable) = gc!(card, m => (
            reg!(HwIp::Gc, m::SDMA0_QUEUE0_IB_CNTL),
            m::SDMA0_QUEUE0_IB_CNTL::new().with_ib_enable(true).bits(),
        ));
        let old = rreg(bus, regs, ib_cntl)?;
        wreg(bus, regs, ib_cntl, old | enable)?;
        let hdp_flush = hdp_flush_reg(bus, regs, card)?;
        Ok(SdmaQueue { ring: Ring { mem: ring, gart, doorbell: DOORBELL_SDMA_ENGINE0, hdp_flush, put: 0 } })
    }

    /// Submits `packets` (whole SDMA packets, at most half the ring): the tail is zero-filled (SDMA NOPs) when they
    /// do not fit before the ring's end, and they start again at 0.
    ///
    /// The wrap reads nothing (tinygrad `usb_push` zero-fills the tail and restarts at 0 the same way): a copy-out
    /// submits while its SRAM read is armed, and a read pointer poll then would be a bulk IN on the armed endpoint.
    /// Callers keep the SDMA work synchronous instead — every copy returns only once its last packet has acted (the
    /// drain fence, the released bulk IN) — so at any submission the engine has read everything before it.
    pub fn submit(&mut self, bus: &mut dyn GpuBus, packets: &[u32]) -> Result<()> {
        let bytes = packets.len() as u64 * 4;
        if packets.is_empty() || bytes > self.ring.mem.size / 2 {
            return Err(gpu_err("SDMA submit", format!("{} dwords do not fit half the ring", packets.len())));
        }
        if bytes > self.ring.tail() {
            let zeros = vec![0u8; self.ring.tail() as usize];
            self.ring.push(bus, &zeros, 1)?;
        }
        self.ring.push_words(bus, packets, 1)
    }

    /// Bytes submitted so far (the write pointer).
    pub fn wptr(&self) -> u64 {
        self.ring.put
    }
}

/// Dwords as little-endian bytes.
pub fn le_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
