//! The register and memory access every bring-up step shares: registers by [`RegAddr`] resolved through the
//! discovery table's bases, read-modify-write, polling with a timeout, and errors that name the step.

use super::BootError;
use crate::bus::GpuBus;
use crate::discovery::Discovery;
use crate::firmware::Card;
use crate::regs::RegAddr;
use std::time::Duration;

/// How long a poll sleeps between reads (tinygrad's `wait_cond` spins; over USB every read is a round trip,
/// so a short sleep costs nothing and keeps simulated time moving).
pub const POLL: Duration = Duration::from_micros(100);

/// The GPU as the bring-up sees it: the bus, the card and its register bases, and the step being run.
pub struct Hw<'a> {
    pub bus: &'a mut dyn GpuBus,
    pub disc: &'a Discovery,
    /// The step errors name (`"PSP"`, `"GMC"`, ...).
    pub step: &'static str,
}

impl Hw<'_> {
    pub fn card(&self) -> Card {
        self.disc.card
    }

    /// The dword address of `r` on this GPU.
    pub fn addr(&self, r: RegAddr) -> Result<u32, BootError> {
        self.disc.reg_addr(r.ip, r.base, r.offset).ok_or_else(|| BootError::Invalid {
            step: self.step,
            msg: format!("{}: the discovery table gives {} no base segment {}", r.name, r.ip.name(), r.base),
        })
    }

    pub fn read(&mut self, r: RegAddr) -> Result<u32, BootError> {
        let a = self.addr(r)?;
        self.bus.read_reg(a).map_err(|source| BootError::Bus { step: self.step, source })
    }

    pub fn write(&mut self, r: RegAddr, v: u32) -> Result<(), BootError> {
        let a = self.addr(r)?;
        self.bus.write_reg(a, v).map_err(|source| BootError::Bus { step: self.step, source })
    }

    /// Reads `r`, applies `f` (the typed packers keep the other fields) and writes the result back.
    pub fn update(&mut self, r: RegAddr, f: impl FnOnce(u32) -> u32) -> Result<(), BootError> {
        let v = self.read(r)?;
        self.write(r, f(v))
    }

    /// Writes a 64-bit value to a lo/hi register pair.
    pub fn write64(&mut self, lo: RegAddr, hi: RegAddr, v: u64) -> Result<(), BootError> {
        self.write(lo, v as u32)?;
        self.write(hi, (v >> 32) as u32)
    }

    /// Polls `r` until `read & mask == value`, for at most `timeout`; the error names `what`, the register and
    /// the last value read.
    pub fn wait(&mut self, r: RegAddr, mask: u32, value: u32, timeout: Duration, what: &str) -> Result<u32, BootError> {
        self.wait_for(r, timeout, what, |v| v & mask == value)
    }

    /// Polls `r` until `done(read)`, for at most `timeout`.
    pub fn wait_for(
        &mut self,
        r: RegAddr,
        timeout: Duration,
        what: &str,
        done: impl Fn(u32) -> bool,
    ) -> Result<u32, BootError> {
        let mut waited = Duration::ZERO;
        loop {
            let v = self.read(r)?;
            if done(v) {
                return Ok(v);
            }
            if waited >= timeout {
                return Err(BootError::Timeout {
                    step: self.step,
                    what: what.to_string(),
                    reg: r.name,
                    value: v,
                    ms: timeout.as_millis() as u64,
                });
            }
            self.bus.sleep(POLL);
            waited += POLL;
        }
    }

    pub fn write_vram(&mut self, addr: u64, data: &[u8]) -> Result<(), BootError> {
        self.bus.write_vram(addr, data).map_err(|source| BootError::Bus { step: self.step, source })
    }

    pub fn read_vram(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BootError> {
        self.bus.read_vram(addr, buf).map_err(|source| BootError::Bus { step: self.step, source })
    }

    pub fn read_vram_u32(&mut self, addr: u64) -> Result<u32, BootError> {
        let mut b = [0u8; 4];
        self.read_vram(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn sleep(&mut self, d: Duration) {
        self.bus.sleep(d)
    }
}
