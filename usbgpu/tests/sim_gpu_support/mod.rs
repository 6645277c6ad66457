//! A register-level rig for the simulated GPU tests: the simulated bridge opened and brought up, with BAR
//! helpers the way a driver reaches the GPU (BAR5 dwords, BAR0 VRAM, BAR2 doorbells, SRAM staging).
#![allow(dead_code)]

use pilot_usbgpu::pcie::{bring_up, Layout};
use pilot_usbgpu::sim::{Board, SimConfig, Simulator};
use pilot_usbgpu::Bridge;

pub const MB: u64 = 1 << 20;

pub struct Rig {
    pub sim: Simulator,
    pub b: Bridge,
    pub bar0: u64,
    pub bar2: u64,
    pub bar5: u64,
}

impl Rig {
    pub fn new(board: Board, vram: u64) -> Rig {
        let sim = Simulator::new(SimConfig { vram_bytes: vram, board, ..SimConfig::default() });
        Rig::open(sim)
    }

    /// Opens (again) the bridge of `sim` and brings the PCIe side up.
    pub fn open(sim: Simulator) -> Rig {
        let mut b = Bridge::open(sim.transport(), None).unwrap();
        let topo = bring_up(&mut b, &Layout::default()).unwrap();
        let bar = |i| topo.bar(i).unwrap().addr;
        let (bar0, bar2, bar5) = (bar(0), bar(2), bar(5));
        Rig { sim, b, bar0, bar2, bar5 }
    }

    pub fn rreg(&mut self, index: u32) -> u32 {
        self.b.mem_read(self.bar5 + 4 * u64::from(index), 4).unwrap()
    }

    pub fn wreg(&mut self, index: u32, v: u32) {
        self.b.mem_write(self.bar5 + 4 * u64::from(index), 4, v).unwrap()
    }

    /// Streams `n` bytes of VRAM at physical `addr` through BAR0.
    pub fn vram(&mut self, addr: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.b.mmio_read(self.bar0 + addr, &mut v).unwrap();
        v
    }

    pub fn put_vram(&mut self, addr: u64, data: &[u8]) {
        self.b.mmio_write(self.bar0 + addr, data).unwrap()
    }

    pub fn doorbell(&mut self, index: u32, value: u64) {
        self.b.write64(self.bar2 + 8 * u64::from(index), value).unwrap()
    }
}

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
