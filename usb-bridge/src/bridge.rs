//! [`Bridge`]: the ASM2464PD running tinygrad's custom firmware, driven over a [`Transport`].
//!
//! - Open: product-string check, the open sequence, the PCIe link check (LTSSM, then F3 power-on).
//! - XDATA: E4 reads in 255-byte chunks, E5 writes one byte per request.
//! - Single TLPs (F0 mode 0): config reads/writes of type 0/1 and sub-dword memory accesses, with the
//!   completion decoded and the firmware's error/timeout retried 10 times 1 ms apart (tinygrad `pcie_request`).
//! - Streaming MMIO (F0 modes 1/2 + one bulk transfer): every dword-aligned BAR access.
//! - SRAM through the 0xF2 engine: host-to-SRAM writes and the armed SRAM-to-host read.

use crate::error::{Error, Result, TransferError};
use crate::lock::BridgeLock;
use crate::proto::{self, timeout, Bdf, Completion, CplStatus, FwStatus, Setup, Tlp, TlpMode, COMPLETION_LEN};
use crate::transport::{Ticket, Transport};
use std::time::Duration;

/// Tries of a single TLP whose completion reports a firmware error or timeout.
const TLP_TRIES: u32 = 10;
const TLP_RETRY_SLEEP: Duration = Duration::from_millis(1);
/// Bytes per F0 stream. The firmware streams one TLP per dword; keeping each stream short keeps every
/// bulk transfer far inside its timeout at the firmware's ~1.8 MB/s read rate.
const STREAM_MAX: usize = 0x1_0000;

/// USB transactions issued through a [`Bridge`] (one per control or bulk transfer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub control_out: u64,
    pub control_in: u64,
    pub bulk_out: u64,
    pub bulk_in: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

impl Stats {
    pub fn transactions(&self) -> u64 {
        self.control_out + self.control_in + self.bulk_out + self.bulk_in
    }
}

/// An open bridge with a trained PCIe link. Holds the device lock (hardware) until dropped.
pub struct Bridge {
    t: Box<dyn Transport>,
    stats: Stats,
    in_flight: Vec<Ticket>,
    /// The bulk IN of an SRAM read that is not whole sectors lands here first; kept to reuse.
    read_wire: Vec<u8>,
    _lock: Option<BridgeLock>,
}

impl Bridge {
    /// Opens the bridge behind `t`: product check, claim, link check (powering PCIe on when it is down).
    pub fn open(t: Box<dyn Transport>, lock: Option<BridgeLock>) -> Result<Bridge> {
        if !proto::PRODUCT_PREFIXES.iter().any(|p| t.product().starts_with(p)) {
            return Err(Error::WrongFirmware { device: t.name().to_string(), product: t.product().to_string() });
        }
        let mut b = Bridge { t, stats: Stats::default(), in_flight: Vec::new(), read_wire: Vec::new(), _lock: lock };
        b.t.claim().map_err(|kind| b.transfer_err("open (claim interface 0)", kind))?;
        b.ensure_link()?;
        Ok(b)
    }

    pub fn name(&self) -> &str {
        self.t.name()
    }

    pub fn product(&self) -> &str {
        self.t.product()
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The transport's clock (modelled time on the simulator).
    pub fn now(&self) -> Duration {
        self.t.now()
    }

    pub fn sleep(&mut self, d: Duration) {
        self.t.sleep(d)
    }

    /// The downstream port's LTSSM state (0x78 = L0).
    pub fn ltssm(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.xdata_read(proto::xdata::LTSSM, &mut b)?;
        Ok(b[0])
    }

    /// Checks the link is in L0; otherwise powers PCIe on (F3) and checks again.
    pub fn ensure_link(&mut self) -> Result<()> {
        if self.ltssm()? == proto::xdata::LTSSM_L0 {
            return Ok(());
        }
        self.set_pcie_power(true)?;
        match self.ltssm()? {
            proto::xdata::LTSSM_L0 => Ok(()),
            ltssm => Err(Error::LinkDown { device: self.name().to_string(), ltssm }),
        }
    }

    /// F3: downstream power, PERST# and link training on or off.
    pub fn set_pcie_power(&mut self, on: bool) -> Result<()> {
        self.control_out(proto::power_setup(on), &[], timeout::PCIE_POWER, "PCIe power (F3)")
    }

    /// Reads XDATA in 255-byte E4 requests.
    pub fn xdata_read(&mut self, addr: u16, buf: &mut [u8]) -> Result<()> {
        if usize::from(addr) + buf.len() > 0x1_0000 {
            return Err(self.invalid("XDATA read", format!("0x{addr:04x}+{} is past 64 KB", buf.len())));
        }
        for (i, chunk) in buf.chunks_mut(proto::xdata::READ_CHUNK).enumerate() {
            let a = addr + (i * proto::xdata::READ_CHUNK) as u16;
            self.control_in_exact(proto::xdata_read_setup(a), chunk, timeout::CONTROL, "XDATA read (E4)")?;
        }
        Ok(())
    }

    /// Writes XDATA one byte per E5 request.
    pub fn xdata_write(&mut self, addr: u16, data: &[u8]) -> Result<()> {
        if usize::from(addr) + data.len() > 0x1_0000 {
            return Err(self.invalid("XDATA write", format!("0x{addr:04x}+{} is past 64 KB", data.len())));
        }
        for (i, &v) in data.iter().enumerate() {
            self.control_out(proto::xdata_write_setup(addr + i as u16, v), &[], timeout::CONTROL, "XDATA write (E5)")?;
        }
        Ok(())
    }

    /// Reads `size` (1, 2 or 4) bytes of config space at `reg` of `bdf`.
    pub fn config_read(&mut self, bdf: Bdf, reg: u16, size: u8) -> Result<u32> {
        let addr = self.config_addr(bdf, reg)?;
        self.tlp(Tlp::config(bdf.bus, false) as u8, addr, size, None)
    }

    /// Writes `size` (1, 2 or 4) bytes of config space at `reg` of `bdf`; waits for its completion.
    pub fn config_write(&mut self, bdf: Bdf, reg: u16, size: u8, value: u32) -> Result<()> {
        let addr = self.config_addr(bdf, reg)?;
        self.tlp(Tlp::config(bdf.bus, true) as u8, addr, size, Some(value)).map(drop)
    }

    /// One memory read TLP of `size` (1, 2 or 4) bytes inside a dword.
    pub fn mem_read(&mut self, addr: u64, size: u8) -> Result<u32> {
        self.tlp(Tlp::MRd64 as u8, addr, size, None)
    }

    /// One posted memory write TLP of `size` (1, 2 or 4) bytes inside a dword.
    pub fn mem_write(&mut self, addr: u64, size: u8, value: u32) -> Result<()> {
        self.tlp(Tlp::MWr64 as u8, addr, size, Some(value)).map(drop)
    }

    /// Reads dword-aligned PCIe memory by F0 streaming (mode 2) and one bulk IN per stream.
    pub fn mmio_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.check_stream("MMIO read", addr, buf.len())?;
        for (i, chunk) in buf.chunks_mut(STREAM_MAX).enumerate() {
            let a = addr + (i * STREAM_MAX) as u64;
            let payload = proto::tlp_payload(a, (chunk.len() / 4) as u32);
            let setup = proto::tlp_setup(Tlp::MRd64 as u8, 0x0F, TlpMode::StreamRead);
            self.control_out(setup, &payload, timeout::TLP, "MMIO read (F0 stream)")?;
            self.bulk_in_exact(chunk, timeout::MMIO_BULK_IN, "MMIO read (bulk IN)")?;
        }
        Ok(())
    }

    /// Writes dword-aligned PCIe memory by F0 streaming (mode 1) and one bulk OUT per stream.
    pub fn mmio_write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.check_stream("MMIO write", addr, data.len())?;
        for (i, chunk) in data.chunks(STREAM_MAX).enumerate() {
            let a = addr + (i * STREAM_MAX) as u64;
            let payload = proto::tlp_payload(a, (chunk.len() / 4) as u32);
            let setup = proto::tlp_setup(Tlp::MWr64 as u8, 0x0F, TlpMode::StreamWrite);
            self.control_out(setup, &payload, timeout::TLP, "MMIO write (F0 stream)")?;
            self.bulk_out_all(chunk, "MMIO write (bulk OUT)")?;
        }
        Ok(())
    }

    pub fn read32(&mut self, addr: u64) -> Result<u32> {
        let mut b = [0u8; 4];
        self.mmio_read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn write32(&mut self, addr: u64, v: u32) -> Result<()> {
        self.mmio_write(addr, &v.to_le_bytes())
    }

    pub fn read64(&mut self, addr: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.mmio_read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn write64(&mut self, addr: u64, v: u64) -> Result<()> {
        self.mmio_write(addr, &v.to_le_bytes())
    }

    /// Host to SRAM: arms F2 for `data` at `start_slot`, then one bulk OUT padded to 512 bytes.
    pub fn sram_write(&mut self, start_slot: usize, data: &[u8]) -> Result<()> {
        let mut wire = data.to_vec();
        wire.resize(proto::sectors(data.len()) * proto::sram::SECTOR, 0);
        self.sram_write_sectors(start_slot, &wire)
    }

    /// [`Bridge::sram_write`] of `wire`, already whole sectors, sent as it is (no copy).
    pub fn sram_write_sectors(&mut self, start_slot: usize, wire: &[u8]) -> Result<()> {
        if wire.is_empty() || !wire.len().is_multiple_of(proto::sram::SECTOR) {
            return Err(self.invalid("SRAM write", format!("{} bytes is not a whole number of sectors", wire.len())));
        }
        let setup = self.sram_setup(start_slot, wire.len(), false)?;
        self.control_out(setup, &[], timeout::CONTROL, "SRAM write (F2)")?;
        self.bulk_out_all(wire, "SRAM write (bulk OUT)")
    }

    /// Like [`Bridge::sram_write`] with the bulk OUT left in flight; `wire` must be padded to 512 bytes.
    pub fn sram_write_async(&mut self, start_slot: usize, wire: Vec<u8>) -> Result<Ticket> {
        if !wire.len().is_multiple_of(proto::sram::SECTOR) {
            return Err(self.invalid("SRAM write", format!("{} bytes is not a whole number of sectors", wire.len())));
        }
        let setup = self.sram_setup(start_slot, wire.len(), false)?;
        self.control_out(setup, &[], timeout::CONTROL, "SRAM write (F2)")?;
        let n = wire.len() as u64;
        let ticket = self
            .t
            .submit_bulk_out(proto::EP_OUT, wire, timeout::BULK_OUT)
            .map_err(|k| self.transfer_err("SRAM write (bulk OUT submit)", k))?;
        self.stats.bulk_out += 1;
        self.stats.bytes_out += n;
        self.in_flight.push(ticket);
        Ok(ticket)
    }

    /// Waits for an asynchronous SRAM write; returns its buffer.
    pub fn reap(&mut self, ticket: Ticket) -> Result<Vec<u8>> {
        self.in_flight.retain(|t| *t != ticket);
        let (n, buf) = self.t.reap(ticket).map_err(|k| self.transfer_err("SRAM write (bulk OUT)", k))?;
        if n != buf.len() {
            return Err(self.short("SRAM write (bulk OUT)", buf.len(), n));
        }
        Ok(buf)
    }

    /// Arms the SRAM-to-host read of `len` bytes from slot 0 (F2 with the direction bit).
    /// The data comes with [`Bridge::sram_read_finish`] once the GPU has written to 0x822000.
    pub fn sram_read_arm(&mut self, len: usize) -> Result<()> {
        let setup = self.sram_setup(0, len, true)?;
        self.control_out(setup, &[], timeout::CONTROL, "SRAM read arm (F2)")
    }

    /// The bulk IN of an armed SRAM read: `buf.len()` bytes, read as whole sectors.
    pub fn sram_read_finish(&mut self, buf: &mut [u8]) -> Result<()> {
        let wire_len = proto::sectors(buf.len()) * proto::sram::SECTOR;
        if wire_len == buf.len() {
            return self.bulk_in_exact(buf, timeout::SRAM_BULK_IN, "SRAM read (bulk IN)");
        }
        let mut wire = std::mem::take(&mut self.read_wire);
        wire.resize(wire_len, 0);
        let r = self.bulk_in_exact(&mut wire, timeout::SRAM_BULK_IN, "SRAM read (bulk IN)");
        buf.copy_from_slice(&wire[..buf.len()]);
        self.read_wire = wire;
        r
    }

    /// Reaps every asynchronous transfer still in flight; the first error wins.
    pub fn drain(&mut self) -> Result<()> {
        let mut first = Ok(());
        for t in std::mem::take(&mut self.in_flight) {
            let r = self.t.reap(t).map_err(|k| self.transfer_err("SRAM write (bulk OUT)", k));
            if first.is_ok() {
                first = r.map(drop);
            }
        }
        first
    }

    fn tlp(&mut self, fmt: u8, addr: u64, size: u8, value: Option<u32>) -> Result<u32> {
        let op = || format!("TLP 0x{fmt:02x} at 0x{addr:x}");
        let be = proto::byte_enable(addr, size)
            .ok_or_else(|| self.invalid(&op(), format!("{size} bytes do not fit in one dword")))?;
        if let Some(v) = value {
            if size < 4 && v >> (8 * size) != 0 {
                return Err(self.invalid(&op(), format!("value 0x{v:x} is wider than {size} bytes")));
            }
        }
        let payload = proto::tlp_payload(addr & !3, value.map_or(0, |v| proto::shift_value(addr, v)));
        let setup = proto::tlp_setup(fmt, be, TlpMode::Single);
        let mut last = FwStatus::Ok;
        for attempt in 0..TLP_TRIES {
            if attempt > 0 {
                self.t.sleep(TLP_RETRY_SLEEP);
            }
            // The op's name is formatted only on an error: a register write allocates nothing.
            self.control_out(setup, &payload, timeout::TLP, "").map_err(|e| e.with_op(op()))?;
            if proto::is_posted(fmt) {
                return Ok(0);
            }
            let mut reply = [0u8; COMPLETION_LEN];
            self.control_in_exact(proto::completion_setup(), &mut reply, timeout::TLP, "")
                .map_err(|e| e.with_op(op()))?;
            let cpl = Completion::decode(&reply);
            last = cpl.fw_status();
            if last != FwStatus::Ok {
                continue;
            }
            return match cpl.cpl_status() {
                CplStatus::Success => Ok(proto::unshift_value(addr, size, cpl.data)),
                status => Err(Error::Completion { device: self.name().to_string(), op: op(), status }),
            };
        }
        Err(Error::Firmware { device: self.name().to_string(), op: op(), status: last, tries: TLP_TRIES })
    }

    fn config_addr(&self, bdf: Bdf, reg: u16) -> Result<u64> {
        proto::config_address(bdf, reg)
            .map(u64::from)
            .ok_or_else(|| self.invalid("config access", format!("{bdf} register 0x{reg:x} is out of range")))
    }

    fn sram_setup(&self, start_slot: usize, len: usize, to_host: bool) -> Result<Setup> {
        proto::sram_setup(start_slot, len, to_host).ok_or_else(|| {
            self.invalid("SRAM (F2)", format!("{len} bytes from slot {start_slot} do not fit the 512 KB SRAM"))
        })
    }

    fn check_stream(&self, op: &str, addr: u64, len: usize) -> Result<()> {
        if !addr.is_multiple_of(4) || !len.is_multiple_of(4) {
            return Err(self.invalid(op, format!("0x{addr:x}+{len} is not dword-aligned")));
        }
        Ok(())
    }

    fn control_out(&mut self, setup: Setup, data: &[u8], timeout: Duration, op: &str) -> Result<()> {
        self.stats.control_out += 1;
        self.stats.bytes_out += data.len() as u64;
        self.t.control_out(setup, data, timeout).map_err(|k| self.transfer_err(op, k))
    }

    fn control_in_exact(&mut self, setup: Setup, buf: &mut [u8], timeout: Duration, op: &str) -> Result<()> {
        self.stats.control_in += 1;
        let n = self.t.control_in(setup, buf, timeout).map_err(|k| self.transfer_err(op, k))?;
        self.stats.bytes_in += n as u64;
        if n != buf.len() {
            return Err(self.short(op, buf.len(), n));
        }
        Ok(())
    }

    fn bulk_in_exact(&mut self, buf: &mut [u8], timeout: Duration, op: &str) -> Result<()> {
        self.stats.bulk_in += 1;
        let n = self.t.bulk_in(proto::EP_IN, buf, timeout).map_err(|k| self.transfer_err(op, k))?;
        self.stats.bytes_in += n as u64;
        if n != buf.len() {
            return Err(self.short(op, buf.len(), n));
        }
        Ok(())
    }

    fn bulk_out_all(&mut self, data: &[u8], op: &str) -> Result<()> {
        self.stats.bulk_out += 1;
        self.stats.bytes_out += data.len() as u64;
        let n = self.t.bulk_out(proto::EP_OUT, data, timeout::BULK_OUT).map_err(|k| self.transfer_err(op, k))?;
        if n != data.len() {
            return Err(self.short(op, data.len(), n));
        }
        Ok(())
    }

    fn transfer_err(&self, op: &str, kind: TransferError) -> Error {
        Error::Transfer { device: self.name().to_string(), op: op.to_string(), kind }
    }

    fn short(&self, op: &str, expected: usize, got: usize) -> Error {
        Error::Short { device: self.name().to_string(), op: op.to_string(), expected, got }
    }

    /// An [`Error::Invalid`] naming this bridge and `op`.
    pub fn invalid(&self, op: &str, msg: String) -> Error {
        Error::Invalid { device: self.name().to_string(), op: op.to_string(), msg }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Transfers still in flight own their buffers; let them finish before the handle closes.
        let _ = self.drain();
    }
}
