//! The bridge's custom firmware, simulated: vendor requests and bulk endpoints, byte for byte, with a modelled clock.
//!
//! Where the sources leave the firmware's behaviour open, the model is strict and says so: it stalls the
//! request (as the firmware does for requests it does not handle) rather than guessing a lenient outcome.
//!
//! The 0xF0 modes drive one TLP engine (tinygrad/asm2464pd-firmware `handmade/src/main.c` `handle_usb_control`):
//! every mode loads format, byte enables and address from the request; mode 0 fires one TLP with the request's data
//! and any byte enables, a stream fires one per dword with byte enables 0x0F (`handmade/src/pcie_pio.h`
//! `pcie_write_chunk`, `pcie_read_chunk`). So a memory access here is served by the same code whichever mode asked
//! for it ([`BridgeFirmware::mem_read32`], [`BridgeFirmware::mem_write32`]). What differs is modelled: a stream
//! takes only whole dwords, and only mode 0 reports a failed completion (UR); a streamed read that nothing decodes
//! is refused, because `pcie_read_chunk` reports nothing and what its data registers then hold is not documented.

use super::consts::*;
use super::dma::DmaEngine;
use super::gpu::board::Board;
use super::gpu::hdp;
use super::gpu::mem::Fabric;
use super::gpu::Gpu;
use super::pcie::{Pcie, Region};
use super::timing::Timing;
use pilot_usb_bridge::error::TransferError;
use pilot_usb_bridge::proto::Setup;
use std::path::PathBuf;
use std::time::Duration;

/// What the next bulk transfer serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    TlpWrite { addr: u64, bytes: usize },
    TlpRead { addr: u64, bytes: usize },
    SramWrite { offset: usize, bytes: usize },
}

/// A firmware-level fault: every single-TLP completion carries this ret_status until the next claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlpFault {
    Error,
    NeverCompletes,
}

pub struct BridgeFirmware {
    pub timing: Timing,
    pub now: Duration,
    bulk_out_free: Duration,
    xdata: Vec<u8>,
    sram: Vec<u8>,
    pub pcie: Pcie,
    vram_bytes: u64,
    link_up: bool,
    pending: Pending,
    reply: Option<[u8; F0_IN_LEN]>,
    /// When the device-side write that releases the armed SRAM read happened.
    read_released: Option<Duration>,
    /// An armed SRAM-to-host read, (offset, bytes): it waits for the device-side release while TLPs go on
    /// (tinygrad's copy-out arms the read, then submits the SDMA work that releases it over F0).
    armed_read: Option<(usize, usize)>,
    /// Device-side XDATA writes, visible to the host from their time on.
    deferred: Vec<(Duration, usize, Vec<u8>)>,
    pub dma: DmaEngine,
    pub tlp_fault: Option<TlpFault>,
    board: Board,
    firmware_dir: PathBuf,
    /// The GPU model; taken out while it runs so it can reach the rest of the firmware as its [`Fabric`].
    gpu: Option<Box<Gpu>>,
    /// Draws which reads an enabled ASPM L1 corrupts (seeded: one seed, one sequence of outcomes).
    link_noise: LinkNoise,
    /// Seeds the GPU model's random choices at each power-on.
    seed: u64,
    /// The host's BAR0 writes the GPU's engines do not see yet.
    pub hdp: hdp::WriteBuffer,
}

/// While the GPU endpoint leaves ASPM L1 enabled, one memory read in [`ASPM_FLAKY_ONE_IN`] through the link
/// completes as 0xffffffff (tinygrad `AMDev._disable_aspm`: "L1 across retimers makes reads oscillate to
/// 0xffffffff"; the rate is the model's assumption, no source measures it). Config reads are left exact, so
/// the driver can walk the capability list and turn ASPM off before it reads a BAR.
pub const ASPM_FLAKY_ONE_IN: u64 = 8;

/// A xorshift64* stream: deterministic per seed.
struct LinkNoise(u64);

impl LinkNoise {
    fn new(seed: u64) -> LinkNoise {
        LinkNoise(seed | 1)
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32 < (1 << 32) / n
    }
}

fn stall<T>() -> Result<T, TransferError> {
    Err(TransferError::Stall)
}

impl BridgeFirmware {
    pub fn new(
        timing: Timing,
        vram_bytes: u64,
        pcie_on_at_boot: bool,
        board: Board,
        firmware_dir: PathBuf,
        seed: u64,
    ) -> BridgeFirmware {
        let mut fw = BridgeFirmware {
            timing,
            now: Duration::ZERO,
            bulk_out_free: Duration::ZERO,
            xdata: vec![0; XDATA_BYTES],
            sram: vec![0; SRAM_BYTES],
            pcie: Pcie::new(vram_bytes),
            vram_bytes,
            link_up: pcie_on_at_boot,
            pending: Pending::None,
            reply: None,
            read_released: None,
            armed_read: None,
            deferred: Vec::new(),
            dma: DmaEngine::default(),
            tlp_fault: None,
            board,
            firmware_dir,
            gpu: None,
            link_noise: LinkNoise::new(seed),
            seed,
            hdp: hdp::WriteBuffer::default(),
        };
        fw.power_on_gpu();
        fw
    }

    /// A GPU at power-on: fresh registers and its discovery table at VRAM end - 64 KB.
    fn power_on_gpu(&mut self) {
        let gpu = Gpu::new(self.board, self.vram_bytes, self.timing, self.firmware_dir.clone(), self.seed);
        let (at, table) = gpu.discovery_table();
        self.pcie.vram[at..at + table.len()].copy_from_slice(&table);
        self.gpu = Some(Box::new(gpu));
    }

    /// Runs `f` on the GPU model with the rest of the firmware as its fabric.
    pub fn with_gpu<R>(&mut self, f: impl FnOnce(&mut Gpu, &mut BridgeFirmware) -> R) -> R {
        let mut gpu = self.gpu.take().expect("the GPU model is not re-entered");
        let r = f(&mut gpu, self);
        self.gpu = Some(gpu);
        r
    }

    /// A host read of the dword at bus address `addr`; `None` when nothing decodes it.
    fn mem_read32(&mut self, addr: u64) -> Option<u32> {
        let (region, off) = self.pcie.decode(addr, 4)?;
        if self.pcie.gpu_aspm_l1() && self.link_noise.one_in(ASPM_FLAKY_ONE_IN) {
            return Some(0xFFFF_FFFF);
        }
        Some(match region {
            Region::Vram => {
                self.wait_gpu();
                self.hdp.host_read32(&self.pcie.vram, off as usize)
            }
            Region::Mmio => {
                self.wait_gpu();
                self.with_gpu(|g, fw| g.host_read_reg((off / 4) as u32, fw.now, fw))
            }
            Region::Doorbell => self.with_gpu(|g, _| g.read_doorbell(off as u32)),
        })
    }

    /// A host write of the byte lanes `be` of the dword at `addr`; false when nothing decodes it.
    fn mem_write32(&mut self, addr: u64, be: u8, value: u32) -> bool {
        let Some((region, off)) = self.pcie.decode(addr, 4) else { return false };
        let merge = |old: u32| {
            (0..4).fold(old, |v, i| {
                if be & (1 << i) != 0 {
                    (v & !(0xFF << (8 * i))) | (value & (0xFF << (8 * i)))
                } else {
                    v
                }
            })
        };
        match region {
            Region::Vram => self.hdp.host_write32(&self.pcie.vram, off as usize, be, value),
            Region::Mmio => {
                let flushes = self.hdp.flushes();
                self.with_gpu(|g, fw| {
                    let index = (off / 4) as u32;
                    let now = fw.now;
                    let v = if be == 0x0F { value } else { merge(g.host_read_reg(index, now, fw)) };
                    g.host_write_reg(index, v, now, fw);
                });
                // Host writes the flush made visible may be what a stalled queue waits for.
                if self.hdp.flushes() != flushes {
                    self.poll_gpu();
                }
            }
            Region::Doorbell => self.with_gpu(|g, fw| {
                let v = merge(g.read_doorbell(off as u32));
                g.host_write_doorbell(off as u32, v, fw.now, fw);
            }),
        }
        true
    }

    /// A host read of GPU memory or registers observes the GPU's work only once it is done: the clock moves
    /// to when the engines finish what they were given.
    fn wait_gpu(&mut self) {
        let idle = self.gpu.as_ref().map_or(Duration::ZERO, |g| g.idle_at());
        self.now = self.now.max(idle);
    }

    /// Host data landed (VRAM or SRAM): queues waiting on memory look again.
    fn poll_gpu(&mut self) {
        self.with_gpu(|g, fw| g.poll(fw.now, fw));
    }

    /// SET_CONFIGURATION / SET_INTERFACE: raw vendor-bulk mode, both bulk endpoints cleared, streaming cancelled.
    pub fn reset_endpoints(&mut self) {
        self.pending = Pending::None;
        self.reply = None;
        self.read_released = None;
        self.armed_read = None;
        self.tlp_fault = None;
    }

    pub fn control_out(&mut self, s: Setup, data: &[u8]) -> Result<(), TransferError> {
        self.now += self.timing.control;
        match (s.request_type, s.request) {
            (RT_STANDARD_OUT_DEVICE, REQ_SET_CONFIGURATION) => {
                self.reset_endpoints();
                Ok(())
            }
            (RT_VENDOR_OUT, REQ_E5_WRITE) if data.is_empty() && s.index >> 8 == 0 => {
                self.flush_deferred();
                let addr = usize::from(s.value);
                // LTSSM is a status register; a host write does not change the link.
                if addr != REG_LTSSM {
                    self.xdata[addr] = s.index as u8;
                }
                Ok(())
            }
            (RT_VENDOR_OUT, REQ_F0_TLP) if data.len() == F0_OUT_LEN => self.tlp_out(s, data),
            (RT_VENDOR_OUT, REQ_F2_SRAM) if data.is_empty() => self.sram_arm(s),
            (RT_VENDOR_OUT, REQ_F3_POWER) if data.is_empty() && s.index == 0 => {
                self.set_power(s.value & 1 != 0);
                Ok(())
            }
            _ => stall(),
        }
    }

    pub fn control_in(&mut self, s: Setup, buf: &mut [u8]) -> Result<usize, TransferError> {
        self.now += self.timing.control;
        match (s.request_type, s.request) {
            // Bank 1 (the PHY, through DPX) is not modelled.
            (RT_VENDOR_IN, REQ_E4_READ) if s.index == 0 => {
                self.flush_deferred();
                let addr = usize::from(s.value);
                let n = buf.len().min(E4_MAX_SS);
                // Whether the firmware wraps past 0xFFFF is not known: refuse.
                if addr + n > XDATA_BYTES {
                    return stall();
                }
                buf[..n].copy_from_slice(&self.xdata[addr..addr + n]);
                if (addr..addr + n).contains(&REG_LTSSM) {
                    buf[REG_LTSSM - addr] = if self.link_up { LTSSM_L0 } else { LTSSM_DOWN };
                }
                Ok(n)
            }
            (RT_VENDOR_IN, REQ_F0_TLP) if s.value == 0 && s.index == 0 => {
                // A completion is read once per F0 OUT; reading without one is not defined: refuse.
                let Some(reply) = self.reply.take() else { return stall() };
                let n = buf.len().min(F0_IN_LEN);
                buf[..n].copy_from_slice(&reply[..n]);
                Ok(n)
            }
            _ => stall(),
        }
    }

    fn tlp_out(&mut self, s: Setup, data: &[u8]) -> Result<(), TransferError> {
        let fmt = s.value as u8;
        let be = (s.value >> 8) as u8;
        let addr = u64::from(u32::from_le_bytes(data[0..4].try_into().unwrap()))
            | u64::from(u32::from_le_bytes(data[4..8].try_into().unwrap())) << 32;
        let value = u32::from_le_bytes(data[8..12].try_into().unwrap());
        // A new request while a stream waits for its bulk data: the firmware's behaviour is not known; refuse.
        if self.pending != Pending::None {
            return stall();
        }
        match s.index {
            F0_SINGLE => self.single_tlp(fmt, be, addr, value),
            F0_STREAM_WRITE | F0_STREAM_READ => {
                let write = s.index == F0_STREAM_WRITE;
                let want = if write { TLP_MWR64 } else { TLP_MRD64 };
                if fmt != want || be != 0x0F || !addr.is_multiple_of(4) || value == 0 || !self.link_up {
                    return stall();
                }
                let bytes = value as usize * 4;
                self.pending = if write { Pending::TlpWrite { addr, bytes } } else { Pending::TlpRead { addr, bytes } };
                Ok(())
            }
            _ => stall(),
        }
    }

    fn single_tlp(&mut self, fmt: u8, be: u8, addr: u64, value: u32) -> Result<(), TransferError> {
        if be == 0 || be > 0x0F || !addr.is_multiple_of(4) {
            return stall();
        }
        let byte_count =
            if matches!(fmt, TLP_CFGRD0 | TLP_CFGRD1 | TLP_CFGWR0 | TLP_CFGWR1) { 4 } else { be.count_ones() as u16 };
        let fault = match self.tlp_fault {
            Some(TlpFault::Error) => Some(RET_ERROR),
            Some(TlpFault::NeverCompletes) => Some(RET_TIMEOUT),
            None if !self.link_up => Some(RET_TIMEOUT),
            None => None,
        };
        if let Some(ret) = fault {
            if ret == RET_TIMEOUT {
                self.now += self.timing.tlp_timeout;
            }
            self.reply = Some([0, 0, 0, 0, 0, 0, 0, ret]);
            return Ok(());
        }
        let (status, data) = match fmt {
            TLP_CFGRD0 | TLP_CFGRD1 => match self.pcie.config_read(fmt == TLP_CFGRD1, addr as u32) {
                Some(d) => (CPL_SC, d),
                None => (CPL_UR, 0),
            },
            TLP_CFGWR0 | TLP_CFGWR1 => {
                let ok = self.pcie.config_write(fmt == TLP_CFGWR1, addr as u32, be, value);
                (if ok { CPL_SC } else { CPL_UR }, 0)
            }
            TLP_MRD64 => match self.mem_read32(addr) {
                Some(d) => (CPL_SC, d),
                None => (CPL_UR, 0),
            },
            TLP_MWR64 => {
                // Posted: no completion; a write nothing decodes is dropped, as on any PCIe fabric.
                if self.mem_write32(addr, be, value)
                    && self.pcie.decode(addr, 4).is_some_and(|(r, _)| r == Region::Vram)
                {
                    self.poll_gpu();
                }
                return Ok(());
            }
            _ => return stall(),
        };
        let header = u16::from(status) << 13 | byte_count;
        let [h_hi, h_lo] = header.to_be_bytes();
        let d = data.to_le_bytes();
        self.reply = Some([d[0], d[1], d[2], d[3], h_hi, h_lo, 0, RET_OK]);
        Ok(())
    }

    fn sram_arm(&mut self, s: Setup) -> Result<(), TransferError> {
        let to_host = s.value & F2_TO_HOST != 0;
        let bytes = usize::from(s.value & !F2_TO_HOST) * F2_SECTOR;
        let start = usize::from(s.index & 0xFF);
        let slots = usize::from(s.index >> 8).max(1);
        let offset = start * F2_SLOT;
        // Whether the firmware checks the slot count against the length is not known: require them to agree.
        let consistent = bytes > 0 && bytes.div_ceil(F2_SLOT) == slots && offset + bytes <= SRAM_BYTES;
        // A second arm before the first one's bulk transfer: not known; refuse. (Asynchronous bulk OUTs are
        // served at submission here, so the pipelined copy-in never overlaps two arms in this model.)
        if !consistent || self.pending != Pending::None || self.armed_read.is_some() {
            return stall();
        }
        if to_host {
            self.read_released = None;
            self.armed_read = Some((offset, bytes));
        } else {
            self.pending = Pending::SramWrite { offset, bytes };
        }
        Ok(())
    }

    fn set_power(&mut self, on: bool) {
        self.pending = Pending::None;
        self.armed_read = None;
        self.reply = None;
        if on && !self.link_up {
            self.now += self.timing.power_on;
            self.link_up = true;
        } else if !on && self.link_up {
            // Power off loses everything downstream.
            self.link_up = false;
            self.pcie = Pcie::new(self.vram_bytes);
            self.hdp = hdp::WriteBuffer::default();
            self.power_on_gpu();
        }
    }

    /// Bulk OUT on `ep`, its data served against the arm in force now, its transfer time counted from
    /// `submitted`; returns the modelled time the data has landed (the transfer's completion).
    pub fn bulk_out(&mut self, ep: u8, data: &[u8], submitted: Duration) -> Result<(usize, Duration), TransferError> {
        if ep != EP_DATA_OUT {
            return stall();
        }
        let start = submitted.max(self.bulk_out_free);
        let land = match self.pending {
            Pending::TlpWrite { addr, bytes } if bytes == data.len() => {
                for (i, dw) in data.chunks(4).enumerate() {
                    let v = u32::from_le_bytes(dw.try_into().expect("whole dwords"));
                    self.mem_write32(addr + 4 * i as u64, 0x0F, v);
                }
                start + self.timing.bulk + self.timing.usb(data.len(), self.timing.f0_write)
            }
            Pending::SramWrite { offset, bytes } if bytes == data.len() => {
                self.sram[offset..offset + bytes].copy_from_slice(data);
                start + self.timing.bulk + self.timing.usb(data.len(), self.timing.sram)
            }
            // No armed transfer, or a length that differs from the armed one.
            _ => return stall(),
        };
        self.pending = Pending::None;
        self.bulk_out_free = land;
        self.poll_gpu();
        let mut dma = std::mem::take(&mut self.dma);
        dma.poll(self, land);
        self.dma = dma;
        Ok((data.len(), land))
    }

    /// A bulk OUT the firmware receives and then loses (fault injection): the armed transfer is used up and
    /// nothing is written.
    pub fn lose_bulk_out(&mut self, len: usize) {
        if matches!(self.pending, Pending::TlpWrite { bytes, .. } | Pending::SramWrite { bytes, .. } if bytes == len) {
            self.pending = Pending::None;
        }
    }

    /// Bulk IN on `ep`; a transfer nothing will serve waits out `timeout`.
    pub fn bulk_in(&mut self, ep: u8, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        if ep != EP_DATA_IN {
            return stall();
        }
        match self.pending {
            // EP 0x81 carries both a streamed read and the armed SRAM read; which one a bulk IN gets while both
            // wait is not known, and tinygrad never reads while a copy-out is armed (`AMDAllocator._copyout` arms,
            // submits, then takes the bulk IN; `usb_ib`/`usb_push` zero-fill a ring tail instead of polling the read
            // pointer). Refuse it: the armed read is lost with it.
            Pending::TlpRead { .. } if self.armed_read.is_some() => {
                self.pending = Pending::None;
                self.armed_read = None;
                return stall();
            }
            Pending::TlpRead { addr, bytes } if bytes == buf.len() => {
                for (i, dw) in buf.chunks_mut(4).enumerate() {
                    // A streamed read of an address nothing decodes: the firmware's behaviour is not known; refuse.
                    let Some(v) = self.mem_read32(addr + 4 * i as u64) else {
                        self.pending = Pending::None;
                        return stall();
                    };
                    dw.copy_from_slice(&v.to_le_bytes());
                }
                self.now += self.timing.bulk + self.timing.usb(buf.len(), self.timing.f0_read);
            }
            Pending::None if self.armed_read.is_some_and(|(_, bytes)| bytes == buf.len()) => {
                let (offset, bytes) = self.armed_read.expect("checked");
                let Some(released) = self.read_released else {
                    self.now += timeout;
                    return Err(TransferError::Timeout(timeout));
                };
                if released > self.now + timeout {
                    self.now += timeout;
                    return Err(TransferError::Timeout(timeout));
                }
                buf.copy_from_slice(&self.sram[offset..offset + bytes]);
                self.now = self.now.max(released) + self.timing.bulk + self.timing.usb(bytes, self.timing.sram);
                self.armed_read = None;
            }
            // An armed read of another length.
            Pending::None if self.armed_read.is_some() => return stall(),
            Pending::None => {
                self.now += timeout;
                return Err(TransferError::Timeout(timeout));
            }
            _ => return stall(),
        }
        self.pending = Pending::None;
        Ok(buf.len())
    }

    fn flush_deferred(&mut self) {
        let now = self.now;
        let xdata = &mut self.xdata;
        self.deferred.retain(|(t, addr, bytes)| {
            let due = *t <= now;
            if due {
                xdata[*addr..*addr + bytes.len()].copy_from_slice(bytes);
            }
            !due
        });
    }

    /// A device-side read of bridge memory (SRAM or an XDATA window) at bus address `addr`.
    pub fn device_read(&mut self, addr: u64, len: usize) -> Option<Vec<u8>> {
        if addr >= SRAM_BUS && addr + len as u64 <= SRAM_BUS + SRAM_BYTES as u64 {
            let off = (addr - SRAM_BUS) as usize;
            return Some(self.sram[off..off + len].to_vec());
        }
        let x = xdata_alias(addr, len)?;
        Some(self.xdata[x..x + len].to_vec())
    }

    /// A device-side write at bus address `addr`, landing at time `at`; false when nothing decodes it.
    pub fn device_write(&mut self, addr: u64, data: &[u8], at: Duration) -> bool {
        if addr >= SRAM_BUS && addr + data.len() as u64 <= SRAM_BUS + SRAM_BYTES as u64 {
            let off = (addr - SRAM_BUS) as usize;
            self.sram[off..off + data.len()].copy_from_slice(data);
            return true;
        }
        let Some(x) = xdata_alias(addr, data.len()) else { return false };
        if (TRIGGER_BUS..TRIGGER_BUS + TRIGGER_BYTES).contains(&addr) {
            // Only an armed read is released; a write with nothing armed releases nothing later.
            if self.armed_read.is_some() {
                self.read_released = Some(at);
            }
        }
        self.deferred.push((at, x, data.to_vec()));
        true
    }

    pub fn link_up(&self) -> bool {
        self.link_up
    }
}

/// The XDATA offset a bus address in one of the bridge's windows aliases.
fn xdata_alias(addr: u64, len: usize) -> Option<usize> {
    XDATA_WINDOWS.iter().find_map(|&(x, bus, size)| {
        (addr >= bus && addr + len as u64 <= bus + size as u64).then(|| x + (addr - bus) as usize)
    })
}

impl Fabric for BridgeFirmware {
    fn vram(&mut self) -> &mut [u8] {
        &mut self.pcie.vram
    }

    fn bridge_read(&mut self, addr: u64, len: usize) -> Option<Vec<u8>> {
        self.device_read(addr, len)
    }

    fn bridge_write(&mut self, addr: u64, data: &[u8], at: Duration) -> bool {
        self.device_write(addr, data, at)
    }

    fn hdp_flush(&mut self) {
        self.hdp.flush(&mut self.pcie.vram);
    }

    fn hdp_held(&self, off: usize, len: usize) -> Option<usize> {
        self.hdp.held(off, len)
    }
}
