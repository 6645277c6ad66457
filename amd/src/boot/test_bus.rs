//! A scripted [`GpuBus`] for the bring-up's unit tests: it records every register write, VRAM write, staging
//! write and bus-master change in order, keeps registers and VRAM as plain storage, and answers the handful of
//! handshakes boot waits for the way the firmware does (bootloader ready bit, sOS alive after LOAD_SOSDRV, KM
//! ring status, PSP fences with a status, SMU responses, TLB acks). Knobs make any of them fail.

use crate::bus::GpuBus;
use crate::discovery::{self, Discovery, TABLE_FROM_END};
use crate::firmware::Card;
use crate::regs::{gc, mmhub, psp_msg, reg, HwIp, PspMsg, SmuMailbox, RCC_CONFIG_MEMSIZE};
use pilot_usb_bridge::error::Result;
use std::collections::HashMap;
use std::time::Duration;

pub const VRAM_SIZE: u64 = 1 << 30;
pub const FB_BASE: u64 = 0x80_0000_0000;
pub const STAGING: u64 = 0x20_0000;

/// One thing the driver did, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Write(u32, u32),
    Vram(u64, usize),
    Staged(Vec<u8>),
    Doorbell(u32, u64),
    BusMaster(bool),
    Sleep(Duration),
}

/// A PSP ring command the fake PSP saw: id, the first 4 dwords of its body, and msg1's bytes at the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenCommand {
    pub id: u32,
    pub body: [u32; 4],
    pub staged: Vec<u8>,
}

pub struct ScriptedBus {
    pub card: Card,
    pub disc: Discovery,
    pub regs: HashMap<u32, u32>,
    pages: HashMap<u64, Box<[u8; 4096]>>,
    pub events: Vec<Event>,
    pub staging: Vec<u8>,
    pub commands: Vec<SeenCommand>,
    /// Bootloader commands (`C2PMSG_35` writes) with the staged bytes at the time.
    pub bootloader: Vec<(u32, u32, Vec<u8>)>,
    /// SMU messages (mailbox msg register, message, argument).
    pub smu: Vec<(u32, u32, u32)>,
    /// Knobs: the PSP answers this command id with this status; the SMU never answers; the fence never moves.
    pub fail_command: Option<(u32, u32, u32)>,
    pub smu_dead: bool,
    pub psp_hung: bool,
}

impl ScriptedBus {
    pub fn new(card: Card) -> ScriptedBus {
        let table = discovery::tests::table(card);
        let disc = discovery::parse(&table, VRAM_SIZE).expect("the test table parses");
        let mut bus = ScriptedBus {
            card,
            disc,
            regs: HashMap::new(),
            pages: HashMap::new(),
            events: Vec::new(),
            staging: Vec::new(),
            commands: Vec::new(),
            bootloader: Vec::new(),
            smu: Vec::new(),
            fail_command: None,
            smu_dead: false,
            psp_hung: false,
        };
        bus.regs.insert(RCC_CONFIG_MEMSIZE, (VRAM_SIZE >> 20) as u32);
        bus.put(VRAM_SIZE - TABLE_FROM_END, &table);
        let (base, top) = mmhub!(card, m => (reg!(HwIp::Mmhub, m::MMMC_VM_FB_LOCATION_BASE), reg!(HwIp::Mmhub, m::MMMC_VM_FB_LOCATION_TOP)));
        bus.set(base, (FB_BASE >> 24) as u32);
        bus.set(top, ((FB_BASE + VRAM_SIZE - 1) >> 24) as u32);
        bus
    }

    pub fn addr(&self, r: crate::regs::RegAddr) -> u32 {
        self.disc.reg_addr(r.ip, r.base, r.offset).expect("a base for every register")
    }

    pub fn set(&mut self, r: crate::regs::RegAddr, v: u32) {
        let a = self.addr(r);
        self.regs.insert(a, v);
    }

    pub fn get(&self, r: crate::regs::RegAddr) -> u32 {
        self.regs.get(&self.addr(r)).copied().unwrap_or(0)
    }

    /// The values written to `r`, in order.
    pub fn writes_to(&self, r: crate::regs::RegAddr) -> Vec<u32> {
        let a = self.addr(r);
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Write(x, v) if *x == a => Some(*v),
                _ => None,
            })
            .collect()
    }

    /// The index of the first write to `r`.
    pub fn first_write(&self, r: crate::regs::RegAddr) -> Option<usize> {
        let a = self.addr(r);
        self.events.iter().position(|e| matches!(e, Event::Write(x, _) if *x == a))
    }

    fn put(&mut self, addr: u64, data: &[u8]) {
        for (i, b) in data.iter().enumerate() {
            let a = addr + i as u64;
            self.pages.entry(a >> 12).or_insert_with(|| Box::new([0; 4096]))[(a & 0xfff) as usize] = *b;
        }
    }

    /// VRAM `0..n` (`n` a multiple of 4 KB), page by page.
    pub fn snapshot(&self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        for (i, page) in v.chunks_mut(4096).enumerate() {
            if let Some(p) = self.pages.get(&(i as u64)) {
                page.copy_from_slice(&p[..]);
            }
        }
        v
    }

    pub fn peek(&self, addr: u64, n: usize) -> Vec<u8> {
        (0..n as u64)
            .map(|i| self.pages.get(&((addr + i) >> 12)).map_or(0, |p| p[((addr + i) & 0xfff) as usize]))
            .collect()
    }

    fn u32_at(&self, addr: u64) -> u32 {
        u32::from_le_bytes(self.peek(addr, 4).try_into().unwrap())
    }

    /// The fake PSP: runs the frame the driver just queued.
    fn psp_frame(&mut self, old_wptr: u32) {
        let ring_mc = u64::from(self.get(psp_msg(self.card, PspMsg::RingLo69)))
            | u64::from(self.get(psp_msg(self.card, PspMsg::RingHi70))) << 32;
        let frame = self.peek(ring_mc - FB_BASE + u64::from(old_wptr) * 4, 64);
        let dw = |i: usize| u32::from_le_bytes(frame[i * 4..i * 4 + 4].try_into().unwrap());
        let cmd = (u64::from(dw(0)) | u64::from(dw(1)) << 32) - FB_BASE;
        let fence = (u64::from(dw(3)) | u64::from(dw(4)) << 32) - FB_BASE;
        let id = self.u32_at(cmd + 8);
        let body = [0, 1, 2, 3].map(|i| self.u32_at(cmd + 28 + i * 4));
        self.commands.push(SeenCommand { id, body, staged: self.staging.clone() });
        let status = match self.fail_command {
            Some((fid, ftype, status)) if fid == id && (id != 6 || body[3] == ftype) => status,
            _ => 0,
        };
        self.put(cmd + 864, &status.to_le_bytes());
        if id == 0x20 {
            self.put(cmd + 880, &0x40_0000u32.to_le_bytes());
        }
        if !self.psp_hung {
            self.put(fence, &dw(5).to_le_bytes());
        }
    }

    fn smu_message(&mut self, mailbox: SmuMailbox, msg: u32) {
        let arg = self.get(mailbox.arg);
        self.smu.push((self.addr(mailbox.msg), msg, arg));
        if self.smu_dead {
            return;
        }
        // GetDpmFreqByIndex: two levels, 100 and 200 MHz.
        if msg == 0x1f {
            let answer = if arg & 0xffff == 0xff { 2 } else { 100 * ((arg & 0xffff) + 1) };
            self.set(mailbox.arg, answer);
        }
        self.set(mailbox.resp, 1);
        if mailbox == SmuMailbox::debug() && msg == 2 {
            // Mode-1 reset: sOS and the SMU stop; the scratch registers clear.
            self.set(psp_msg(self.card, PspMsg::Sos81), 0);
            let (r6, r7) = gc!(self.card, m => (reg!(HwIp::Gc, m::SCRATCH_REG6), reg!(HwIp::Gc, m::SCRATCH_REG7)));
            self.set(r6, 0);
            self.set(r7, 0);
        }
    }
}

impl GpuBus for ScriptedBus {
    fn read_reg(&mut self, reg_addr: u32) -> Result<u32> {
        let card = self.card;
        let v = self.regs.get(&reg_addr).copied().unwrap_or(0);
        if reg_addr == self.addr(psp_msg(card, PspMsg::Bl35)) || reg_addr == self.addr(psp_msg(card, PspMsg::Ring64)) {
            return Ok(0x8000_0000);
        }
        let (sem, ack, safe) = (
            mmhub!(card, m => reg!(HwIp::Mmhub, m::MMVM_INVALIDATE_ENG17_SEM)),
            [
                mmhub!(card, m => reg!(HwIp::Mmhub, m::MMVM_INVALIDATE_ENG17_ACK)),
                gc!(card, m => reg!(HwIp::Gc, m::GCVM_INVALIDATE_ENG17_ACK)),
            ],
            gc!(card, m => reg!(HwIp::Gc, m::RLC_SAFE_MODE)),
        );
        if reg_addr == self.addr(sem) || ack.iter().any(|r| self.addr(*r) == reg_addr) {
            return Ok(1);
        }
        if reg_addr == self.addr(safe) {
            return Ok(v & !1);
        }
        Ok(v)
    }

    fn write_reg(&mut self, reg_addr: u32, value: u32) -> Result<()> {
        self.events.push(Event::Write(reg_addr, value));
        let card = self.card;
        let wptr = self.addr(psp_msg(card, PspMsg::Wptr67));
        let old = self.regs.insert(reg_addr, value).unwrap_or(0);
        if reg_addr == wptr {
            self.psp_frame(old);
        } else if reg_addr == self.addr(psp_msg(card, PspMsg::Bl35)) {
            let at = self.get(psp_msg(card, PspMsg::Bl36));
            self.bootloader.push((value, at, self.staging.clone()));
            if value == crate::firmware::bootloader::LOAD_SOSDRV {
                self.set(psp_msg(card, PspMsg::Sos81), 0x1);
            }
        } else {
            for mb in [SmuMailbox::regular(), SmuMailbox::debug()] {
                if reg_addr == self.addr(mb.msg) {
                    self.smu_message(mb, value);
                }
            }
        }
        Ok(())
    }

    fn read_vram(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        buf.copy_from_slice(&self.peek(addr, buf.len()));
        Ok(())
    }

    fn write_vram(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.events.push(Event::Vram(addr, data.len()));
        self.put(addr, data);
        Ok(())
    }

    fn ring_doorbell(&mut self, index: u32, value: u64) -> Result<()> {
        self.events.push(Event::Doorbell(index, value));
        Ok(())
    }

    fn write_staging(&mut self, data: &[u8]) -> Result<u64> {
        self.events.push(Event::Staged(data.to_vec()));
        self.staging = data.to_vec();
        Ok(STAGING)
    }

    fn sleep(&mut self, d: Duration) {
        if let Some(Event::Sleep(t)) = self.events.last_mut() {
            *t += d;
        } else {
            self.events.push(Event::Sleep(d));
        }
    }

    fn set_bus_master(&mut self, enable: bool) -> Result<()> {
        self.events.push(Event::BusMaster(enable));
        Ok(())
    }
}
