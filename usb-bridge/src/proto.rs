//! The custom ASM2464PD firmware's wire protocol as data and pure encoders: vendor requests, TLP
//! fmt/type bytes, byte enables, completion decoding, SRAM (0xF2) arming, the copy-in sentinel.
//!
//! Sources: tinygrad `tinygrad/runtime/support/usb.py` (`USB3`, `CustomASM24Controller`,
//! `USBMMIOInterface`), `tinygrad/runtime/ops_amd.py` (`USBIface`, `AMDAllocator._copyin/_copyout`) and the
//! open firmware tinygrad/asm2464pd-firmware `handmade/src/main.c`. These are not our numbers and we cannot
//! change them. The simulator decodes with its own tables (`sim::consts`), so a wrong value here is caught.

use std::time::Duration;

/// bmRequestType of a vendor request to the device, host to device.
pub const VENDOR_OUT: u8 = 0x40;
/// bmRequestType of a vendor request to the device, device to host.
pub const VENDOR_IN: u8 = 0xC0;

/// The custom firmware's vendor requests (bRequest).
pub mod request {
    /// Read bridge XDATA: wValue = address, wIndex high byte = bank.
    pub const XDATA_READ: u8 = 0xE4;
    /// Write one byte of XDATA: wValue = address, wIndex = value | bank << 8.
    pub const XDATA_WRITE: u8 = 0xE5;
    /// The PCIe TLP engine (OUT: configure; IN: the 8-byte completion of a single TLP).
    pub const TLP: u8 = 0xF0;
    /// Arm the SRAM DMA engine for the next bulk transfer.
    pub const SRAM_DMA: u8 = 0xF2;
    /// Downstream PCIe power and link training.
    pub const PCIE_POWER: u8 = 0xF3;
}

/// USB identities of a bridge running the custom firmware, tried in this order (tinygrad `USBIface`).
pub const BRIDGE_IDS: [(u16, u16); 2] = [(0xADD1, 0x0001), (0x3801, 0x0001)];
/// Accepted prefixes of the iProduct string (tinygrad `USB3.__init__`).
pub const PRODUCT_PREFIXES: [&str; 2] = ["custom", "AS2462"];
/// Bulk OUT endpoint of interface 0 alt 0.
pub const EP_OUT: u8 = 0x02;
/// Bulk IN endpoint of interface 0 alt 0.
pub const EP_IN: u8 = 0x81;
/// The configuration, interface and alt setting the open sequence selects (alt 0 is the vendor alt).
pub const CONFIGURATION: u8 = 1;
pub const INTERFACE: u8 = 0;
pub const ALT_SETTING: u8 = 0;

/// libusb timeouts of tinygrad's `usb.py`, and the copy-in fence timeout of `ops_amd.py`.
pub mod timeout {
    use super::Duration;
    pub const CONTROL: Duration = Duration::from_millis(1000);
    pub const TLP: Duration = Duration::from_millis(5000);
    pub const PCIE_POWER: Duration = Duration::from_millis(10_000);
    pub const MMIO_BULK_IN: Duration = Duration::from_millis(30_000);
    pub const SRAM_BULK_IN: Duration = Duration::from_millis(10_000);
    pub const BULK_OUT: Duration = Duration::from_millis(10_000);
    /// How long the host waits for the GPU to drain a copy-in window ("hung GPU").
    pub const COPY_FENCE: Duration = Duration::from_millis(10_000);
}

/// Bridge XDATA addresses and values the host uses.
pub mod xdata {
    /// The downstream port's LTSSM state.
    pub const LTSSM: u16 = 0xB450;
    /// LTSSM value of a trained link (L0).
    pub const LTSSM_L0: u8 = 0x78;
    /// The copy-in drain fence (LE64), GPU-visible at [`super::bus::FENCE`].
    pub const FENCE: u16 = 0xA800;
    /// The host's E4 reads are chunked to this many bytes (the firmware clamps at 512 on USB3).
    pub const READ_CHUNK: usize = 255;
}

/// PCIe bus addresses of the bridge's windows as the GPU sees them (tinygrad `USBIface._dma_region`).
pub mod bus {
    /// The 512 KB SRAM the 0xF2 engine moves to and from USB.
    pub const SRAM: u64 = 0x20_0000;
    pub const SRAM_SIZE: usize = 0x8_0000;
    /// `sys_buf`, XDATA 0xA000..0xAFFF.
    pub const SYS_BUF: u64 = 0x82_0000;
    /// The copy-in drain fence inside `sys_buf`.
    pub const FENCE: u64 = SYS_BUF + 0x800;
    /// `cq_buf`: a GPU write anywhere here releases the armed SRAM-to-host bulk IN.
    pub const CQ_BUF: u64 = 0x82_2000;
    /// The word tinygrad's copy-out writes to release the read.
    pub const READ_TRIGGER: u64 = CQ_BUF + 12;
}

/// SRAM geometry of the 0xF2 engine.
pub mod sram {
    pub const SLOT: usize = 0x4000;
    pub const SLOTS: usize = 32;
    pub const SECTOR: usize = 512;
    /// wValue bit 15: SRAM to host (bulk IN) instead of host to SRAM.
    pub const DIR_TO_HOST: u16 = 0x8000;
    /// Largest sector count wValue can carry.
    pub const MAX_SECTORS: usize = 0x7FFF;
}

/// The copy-in pipeline's layout (tinygrad `AMDAllocator._copyin`).
pub mod copy {
    /// Two 256 KB windows in SRAM; chunk `seq` goes to window `seq & 1`.
    pub const WINDOW: usize = 0x4_0000;
    /// Payload per chunk: the window less the sentinel dword.
    pub const CHUNK: usize = WINDOW - 4;
    pub const SENTINEL_TAG: u32 = 0x5100_0000;
    /// Copy-out moves at most the whole SRAM per armed read.
    pub const OUT_PIECE: usize = super::bus::SRAM_SIZE;
}

/// A control transfer's setup packet less wLength (the buffer gives the length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub request_type: u8,
    pub request: u8,
    pub value: u16,
    pub index: u16,
}

impl Setup {
    pub const fn vendor_out(request: u8, value: u16, index: u16) -> Self {
        Setup { request_type: VENDOR_OUT, request, value, index }
    }
    pub const fn vendor_in(request: u8, value: u16, index: u16) -> Self {
        Setup { request_type: VENDOR_IN, request, value, index }
    }
}

/// TLP fmt/type bytes the host sends (tinygrad `pcie_cfg_req`, `pcie_mem_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Tlp {
    CfgRd0 = 0x04,
    CfgRd1 = 0x05,
    CfgWr0 = 0x44,
    CfgWr1 = 0x45,
    MRd64 = 0x20,
    MWr64 = 0x60,
}

impl Tlp {
    /// Config read or write; type 1 for any bus past the root (bus > 0).
    pub fn config(bus: u8, write: bool) -> Tlp {
        match (write, bus > 0) {
            (false, false) => Tlp::CfgRd0,
            (false, true) => Tlp::CfgRd1,
            (true, false) => Tlp::CfgWr0,
            (true, true) => Tlp::CfgWr1,
        }
    }
}

/// Posted requests (memory writes, messages) get no completion read (tinygrad `pcie_request`).
pub fn is_posted(fmt_type: u8) -> bool {
    (fmt_type & 0xDF) == 0x40 || (fmt_type & 0xB8) == 0x30
}

/// F0 wIndex bits [1:0].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum TlpMode {
    Single = 0,
    StreamWrite = 1,
    StreamRead = 2,
}

/// The F0 OUT setup: wValue = fmt_type | byte_enable << 8, wIndex = mode.
pub fn tlp_setup(fmt_type: u8, byte_enable: u8, mode: TlpMode) -> Setup {
    Setup::vendor_out(request::TLP, u16::from(fmt_type) | (u16::from(byte_enable) << 8), mode as u16)
}

/// The 12-byte F0 OUT data stage: addr_lo, addr_hi, value (or dword count when streaming), all LE32.
pub fn tlp_payload(addr: u64, value: u32) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[0..4].copy_from_slice(&(addr as u32).to_le_bytes());
    p[4..8].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
    p[8..12].copy_from_slice(&value.to_le_bytes());
    p
}

/// The F0 IN setup that reads a single TLP's completion (8 bytes).
pub const fn completion_setup() -> Setup {
    Setup::vendor_in(request::TLP, 0, 0)
}
pub const COMPLETION_LEN: usize = 8;

/// A PCIe function address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl std::fmt::Display for Bdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

/// Config-request address: `bus<<24 | dev<<19 | fn<<16 | reg`; `None` when a field is out of range.
pub fn config_address(bdf: Bdf, reg: u16) -> Option<u32> {
    (bdf.dev < 32 && bdf.func < 8 && reg < 0x1000)
        .then(|| (u32::from(bdf.bus) << 24) | (u32::from(bdf.dev) << 19) | (u32::from(bdf.func) << 16) | u32::from(reg))
}

/// Byte enables of a `size`-byte access at `addr` inside its dword; `None` when it does not fit one dword.
pub fn byte_enable(addr: u64, size: u8) -> Option<u8> {
    let off = (addr & 3) as u8;
    (matches!(size, 1..=4) && off + size <= 4).then(|| (((1u16 << size) - 1) << off) as u8)
}

/// A written value moved to its byte lanes: `value << 8*(addr&3)`.
pub fn shift_value(addr: u64, value: u32) -> u32 {
    value << (8 * (addr & 3))
}

/// The `size` bytes at `addr` out of a completion's dword.
pub fn unshift_value(addr: u64, size: u8, data: u32) -> u32 {
    let v = data >> (8 * (addr & 3));
    if size >= 4 {
        v
    } else {
        v & ((1u32 << (8 * size)) - 1)
    }
}

/// PCIe completion status, completion header bits [15:13].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CplStatus {
    Success,
    UnsupportedRequest,
    ConfigRetry,
    CompleterAbort,
    Reserved(u8),
}

impl std::fmt::Display for CplStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CplStatus::Success => f.write_str("successful completion"),
            CplStatus::UnsupportedRequest => f.write_str("unsupported request (UR)"),
            CplStatus::ConfigRetry => f.write_str("configuration request retry (CRS)"),
            CplStatus::CompleterAbort => f.write_str("completer abort (CA)"),
            CplStatus::Reserved(v) => write!(f, "reserved completion status 0b{v:03b}"),
        }
    }
}

/// The firmware's own verdict on a single TLP (reply byte 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FwStatus {
    Ok,
    Error,
    /// The engine polled ~500k times without a completion.
    Timeout,
    Unknown(u8),
}

impl std::fmt::Display for FwStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FwStatus::Ok => f.write_str("ok"),
            FwStatus::Error => f.write_str("error"),
            FwStatus::Timeout => f.write_str("timeout (no completion)"),
            FwStatus::Unknown(v) => write!(f, "unknown status 0x{v:02x}"),
        }
    }
}

/// The 8-byte F0 IN reply: data LE32, completion header (high byte first), status register, ret_status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub data: u32,
    pub header: u16,
    pub status_reg: u8,
    pub ret: u8,
}

impl Completion {
    pub fn decode(b: &[u8; COMPLETION_LEN]) -> Completion {
        Completion {
            data: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            header: u16::from_be_bytes([b[4], b[5]]),
            status_reg: b[6],
            ret: b[7],
        }
    }

    pub fn fw_status(&self) -> FwStatus {
        match self.ret {
            0 => FwStatus::Ok,
            1 => FwStatus::Error,
            0xFF => FwStatus::Timeout,
            v => FwStatus::Unknown(v),
        }
    }

    /// `(byte4 >> 5) & 7`, as tinygrad reads it.
    pub fn cpl_status(&self) -> CplStatus {
        match (self.header >> 13) & 7 {
            0 => CplStatus::Success,
            1 => CplStatus::UnsupportedRequest,
            2 => CplStatus::ConfigRetry,
            4 => CplStatus::CompleterAbort,
            v => CplStatus::Reserved(v as u8),
        }
    }
}

/// Number of 512-byte sectors covering `len` bytes.
pub fn sectors(len: usize) -> usize {
    len.div_ceil(sram::SECTOR)
}

/// The F2 setup arming the SRAM engine for `len` bytes from `start_slot`, `None` when it does not fit the SRAM.
/// wValue = sectors | direction bit, wIndex = start slot | slot count << 8.
pub fn sram_setup(start_slot: usize, len: usize, to_host: bool) -> Option<Setup> {
    let slots = len.div_ceil(sram::SLOT).max(1);
    let n = sectors(len);
    let fits = len > 0 && n <= sram::MAX_SECTORS && start_slot + slots <= sram::SLOTS;
    fits.then(|| {
        let dir = if to_host { sram::DIR_TO_HOST } else { 0 };
        Setup::vendor_out(request::SRAM_DMA, n as u16 | dir, start_slot as u16 | ((slots as u16) << 8))
    })
}

/// The F3 setup: wValue bit 0 = power on.
pub const fn power_setup(on: bool) -> Setup {
    Setup::vendor_out(request::PCIE_POWER, on as u16, 0)
}

/// The E4 setup reading XDATA at `addr` (bank 0).
pub const fn xdata_read_setup(addr: u16) -> Setup {
    Setup::vendor_in(request::XDATA_READ, addr, 0)
}

/// The E5 setup writing one XDATA byte (bank 0).
pub const fn xdata_write_setup(addr: u16, value: u8) -> Setup {
    Setup::vendor_out(request::XDATA_WRITE, addr, value as u16)
}

/// The copy-in sentinel of chunk `seq`, the last dword of its wire image.
pub const fn sentinel(seq: u64) -> u32 {
    copy::SENTINEL_TAG | (seq as u32 & 0x00FF_FFFF)
}

/// Bytes on the wire for a chunk of `payload` bytes: payload, sentinel, padded to a sector.
pub const fn chunk_wire_len(payload: usize) -> usize {
    (payload + 4).div_ceil(sram::SECTOR) * sram::SECTOR
}

/// SRAM start slot of copy-in window `seq & 1`.
pub const fn window_slot(seq: u64) -> usize {
    (seq as usize & 1) * (copy::WINDOW / sram::SLOT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tlp_setup_packets() {
        let s = tlp_setup(Tlp::CfgRd1 as u8, 0x0F, TlpMode::Single);
        assert_eq!((s.request_type, s.request, s.value, s.index), (0x40, 0xF0, 0x0F05, 0));
        let s = tlp_setup(Tlp::MWr64 as u8, 0x0F, TlpMode::StreamWrite);
        assert_eq!((s.value, s.index), (0x0F60, 1));
        let s = tlp_setup(Tlp::MRd64 as u8, 0x0F, TlpMode::StreamRead);
        assert_eq!((s.value, s.index), (0x0F20, 2));
        let c = completion_setup();
        assert_eq!((c.request_type, c.request, c.value, c.index), (0xC0, 0xF0, 0, 0));
    }

    #[test]
    fn tlp_payload_is_three_le_dwords() {
        let p = tlp_payload(0x0000_0008_1234_5678, 0xAABB_CCDD);
        assert_eq!(p, [0x78, 0x56, 0x34, 0x12, 0x08, 0, 0, 0, 0xDD, 0xCC, 0xBB, 0xAA]);
    }

    #[test]
    fn fmt_type_bytes() {
        assert_eq!(Tlp::config(0, false) as u8, 0x04);
        assert_eq!(Tlp::config(3, false) as u8, 0x05);
        assert_eq!(Tlp::config(0, true) as u8, 0x44);
        assert_eq!(Tlp::config(4, true) as u8, 0x45);
        assert_eq!(Tlp::MRd64 as u8, 0x20);
        assert_eq!(Tlp::MWr64 as u8, 0x60);
        assert!(is_posted(0x60) && is_posted(0x40) && is_posted(0x30) && is_posted(0x34));
        assert!(!is_posted(0x44) && !is_posted(0x45) && !is_posted(0x20) && !is_posted(0x04));
    }

    #[test]
    fn config_addresses() {
        let bdf = Bdf { bus: 4, dev: 0, func: 1 };
        assert_eq!(config_address(bdf, 0x10), Some(0x0401_0010));
        assert_eq!(config_address(Bdf { bus: 0xFF, dev: 31, func: 7 }, 0xFFF), Some(0xFFFF_0FFF));
        assert_eq!(config_address(Bdf { bus: 1, dev: 32, func: 0 }, 0), None);
        assert_eq!(config_address(Bdf { bus: 1, dev: 0, func: 8 }, 0), None);
        assert_eq!(config_address(bdf, 0x1000), None);
    }

    #[test]
    fn byte_enables_and_shifts() {
        assert_eq!(byte_enable(0x100, 4), Some(0x0F));
        assert_eq!(byte_enable(0x101, 1), Some(0x02));
        assert_eq!(byte_enable(0x102, 2), Some(0x0C));
        assert_eq!(byte_enable(0x103, 1), Some(0x08));
        assert_eq!(byte_enable(0x101, 2), Some(0x06));
        assert_eq!(byte_enable(0x103, 2), None);
        assert_eq!(byte_enable(0x100, 0), None);
        assert_eq!(byte_enable(0x100, 5), None);
        assert_eq!(shift_value(0x102, 0xBEEF), 0xBEEF_0000);
        assert_eq!(shift_value(0x103, 0xAB), 0xAB00_0000);
        assert_eq!(unshift_value(0x102, 2, 0xBEEF_1234), 0xBEEF);
        assert_eq!(unshift_value(0x101, 1, 0xBEEF_1234), 0x12);
        assert_eq!(unshift_value(0x100, 4, 0xBEEF_1234), 0xBEEF_1234);
    }

    #[test]
    fn completion_decoding() {
        let c = Completion::decode(&[0x02, 0x10, 0x00, 0x10, 0x20, 0x04, 0x00, 0x00]);
        assert_eq!(c.data, 0x1000_1002);
        assert_eq!(c.header, 0x2004);
        assert_eq!(c.cpl_status(), CplStatus::UnsupportedRequest);
        assert_eq!(c.fw_status(), FwStatus::Ok);
        let status = |b4: u8| Completion::decode(&[0, 0, 0, 0, b4, 0, 0, 0]).cpl_status();
        assert_eq!(status(0x00), CplStatus::Success);
        assert_eq!(status(0x40), CplStatus::ConfigRetry);
        assert_eq!(status(0x80), CplStatus::CompleterAbort);
        assert_eq!(status(0x1F), CplStatus::Success);
        assert_eq!(status(0x60), CplStatus::Reserved(3));
        let ret = |b7: u8| Completion::decode(&[0, 0, 0, 0, 0, 0, 0, b7]).fw_status();
        assert_eq!(ret(1), FwStatus::Error);
        assert_eq!(ret(0xFF), FwStatus::Timeout);
        assert_eq!(ret(7), FwStatus::Unknown(7));
    }

    #[test]
    fn sram_arming() {
        // tinygrad scsi_write of 256 KB at slot 16: 512 sectors, 16 slots.
        let s = sram_setup(16, 0x4_0000, false).unwrap();
        assert_eq!((s.request, s.value, s.index), (0xF2, 512, 16 | (16 << 8)));
        // A 1000-byte read from slot 0: 2 sectors, one slot, direction bit.
        let s = sram_setup(0, 1000, true).unwrap();
        assert_eq!((s.value, s.index), (0x8002, 0x0100));
        // The whole SRAM.
        let s = sram_setup(0, 0x8_0000, true).unwrap();
        assert_eq!((s.value, s.index), (0x8400, 0x2000));
        assert_eq!(sram_setup(16, 0x4_0001, false), None);
        assert_eq!(sram_setup(0, 0, false), None);
    }

    #[test]
    fn other_setups() {
        assert_eq!(power_setup(true), Setup { request_type: 0x40, request: 0xF3, value: 1, index: 0 });
        assert_eq!(power_setup(false).value, 0);
        assert_eq!(xdata_read_setup(0xB450), Setup { request_type: 0xC0, request: 0xE4, value: 0xB450, index: 0 });
        assert_eq!(
            xdata_write_setup(0xA801, 0x7F),
            Setup { request_type: 0x40, request: 0xE5, value: 0xA801, index: 0x7F }
        );
    }

    #[test]
    fn sentinels_and_wire_images() {
        assert_eq!(sentinel(0), 0x5100_0000);
        assert_eq!(sentinel(0x1234), 0x5100_1234);
        assert_eq!(sentinel(0x0100_0001), 0x5100_0001);
        assert_eq!(copy::CHUNK, 0x3_FFFC);
        assert_eq!(chunk_wire_len(copy::CHUNK), 0x4_0000);
        assert_eq!(chunk_wire_len(1), 512);
        assert_eq!(chunk_wire_len(508), 512);
        assert_eq!(chunk_wire_len(509), 1024);
        assert_eq!((window_slot(0), window_slot(1), window_slot(2)), (0, 16, 0));
    }
}
