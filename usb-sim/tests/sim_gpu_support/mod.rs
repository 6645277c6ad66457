//! A register-level rig for the simulated GPU tests: the simulated bridge opened and brought up, with BAR
//! helpers the way a driver reaches the GPU (BAR5 dwords, BAR0 VRAM, BAR2 doorbells, SRAM staging).
#![allow(dead_code)]

pub mod boot;
pub mod pm4;
pub mod program;

use pilot_usb_bridge::pcie::{bring_up, Layout};
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{Board, SimConfig, Simulator};

pub const MB: u64 = 1 << 20;

pub struct Rig {
    /// The GPU address of the bridge SRAM the PSP is given (its bus address through AGP, or a page-table VA).
    pub staging: u64,
    pub sim: Simulator,
    pub b: Bridge,
    pub bar0: u64,
    pub bar2: u64,
    pub bar5: u64,
    /// The register whose write flushes HDP (what `BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL` reads, / 4): [`Rig::put_vram`]
    /// flushes after each write, as a driver must before the GPU reads. `None`: the rig never flushes.
    pub hdp_flush: Option<u32>,
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
        let mut rig = Rig { staging: 0x20_0000, sim, b, bar0, bar2, bar5, hdp_flush: None };
        // RCC_CONFIG_MEMSIZE (MB) locates the discovery table; NBIO (hardware id 108) segment 2 + 0x12D is
        // BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL.
        let vram = u64::from(rig.rreg(0xDE3)) << 20;
        let remap = discovery_bases(&mut rig, vram)[&108].1[2] + 0x12D;
        rig.hdp_flush = Some(rig.rreg(remap) / 4);
        rig
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

    /// Streams `data` to VRAM at physical `addr` through BAR0, then flushes HDP.
    pub fn put_vram(&mut self, addr: u64, data: &[u8]) {
        self.put_vram_unflushed(addr, data);
        if let Some(r) = self.hdp_flush {
            self.wreg(r, 0);
        }
    }

    /// Streams `data` to VRAM through BAR0 and leaves it in HDP's write buffer.
    pub fn put_vram_unflushed(&mut self, addr: u64, data: &[u8]) {
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

/// An IP's (major, minor, revision) and base segments.
pub type IpEntry = ((u8, u8, u8), Vec<u32>);

/// Per hardware id, its entry in the discovery table at VRAM end - 64 KB.
pub fn discovery_bases(rig: &mut Rig, vram: u64) -> std::collections::HashMap<u16, IpEntry> {
    let t = rig.vram(vram - (64 << 10), 10 << 10);
    let ip_off = u16_at(&t, 12) as usize;
    let die_off = u16_at(&t, ip_off + 16) as usize;
    let mut out = std::collections::HashMap::new();
    let mut at = die_off + 4;
    for _ in 0..u16_at(&t, die_off + 2) {
        let nb = t[at + 3] as usize;
        let bases = (0..nb).map(|i| u32_at(&t, at + 8 + 4 * i)).collect();
        out.insert(u16_at(&t, at), ((t[at + 4], t[at + 5], t[at + 6]), bases));
        at += 8 + 4 * nb;
    }
    out
}

/// The registers a bring-up touches, as absolute indices from the discovery table's bases and the offsets of
/// Linux's `*_offset.h` (what a driver would compute).
#[derive(Clone, Copy, Debug)]
pub struct Regs {
    pub gfx12: bool,
    pub psp: [u32; 8],
    pub smu_msg: u32,
    pub smu_arg: u32,
    pub smu_resp: u32,
    pub smu_dbg_msg: u32,
    pub smu_dbg_arg: u32,
    pub smu_dbg_resp: u32,
    pub mm_fb_base: u32,
    pub mm_ap_low: u32,
    pub mm_ap_high: u32,
    /// MC_VM_AGP_TOP; BOT and BASE follow it.
    pub mm_agp_top: u32,
    pub gc_agp_top: u32,
    /// Context 0's CNTL, PAGE_TABLE_START_ADDR_LO32, END_ADDR_LO32, BASE_ADDR_LO32 (HI32 follows each).
    pub mm_ctx0: [u32; 4],
    pub gc_ctx0: [u32; 4],
    pub gc_ap_low: u32,
    pub gc_ap_high: u32,
    pub scratch6: u32,
    pub scratch7: u32,
    pub bootload_status: u32,
    pub grbm_gfx_cntl: u32,
    pub grbm_soft_reset: u32,
    pub mec_cntl: u32,
    pub mec_pc: u32,
    pub mec_pc_hi: u32,
    pub hqd_active: u32,
    pub hqd_pq_base: u32,
    pub hqd_pq_base_hi: u32,
    pub hqd_rptr_report: u32,
    pub hqd_doorbell: u32,
    pub hqd_pq_control: u32,
    pub hqd_dequeue: u32,
    pub sdma_rb_cntl: u32,
    pub sdma_rb_base: u32,
    pub sdma_rptr_addr_lo: u32,
    pub sdma_rptr_addr_hi: u32,
    pub sdma_doorbell: u32,
    pub sdma_doorbell_offset: u32,
    pub sdma_engine_cntl: u32,
}

/// PSP register slots in [`Regs::psp`]: C2PMSG_35, 36, 64, 67, 69, 70, 71, 81.
pub const P35: usize = 0;
pub const P36: usize = 1;
pub const P64: usize = 2;
pub const P67: usize = 3;
pub const P69: usize = 4;
pub const P70: usize = 5;
pub const P71: usize = 6;
pub const P81: usize = 7;

impl Regs {
    pub fn new(rig: &mut Rig, vram: u64) -> Regs {
        let ips = discovery_bases(rig, vram);
        let gfx12 = ips[&11].0 .0 == 12;
        let (gc, mm, mp0, mp1) = (&ips[&11].1, &ips[&34].1, &ips[&255].1, &ips[&1].1);
        let c2p = |n: u32| mp0[0] + 0x40 + n;
        let mp1m = |n: u32| mp1[0] + 0x240 + n;
        let (mm_fb, mm_ap, gc_ap) = if gfx12 { (0x554, 0x559, 0x1619) } else { (0x8EC, 0x8F1, 0x167D) };
        let (mm_agp, gc_agp) = if gfx12 { (0x556, 0x1616) } else { (0x8EE, 0x167A) };
        let sdma = if gfx12 { (0x87, 0x8F, 0x91, 0x588E) } else { (0x89, 0x92, 0xAB, 0x589A) };
        Regs {
            gfx12,
            psp: [c2p(35), c2p(36), c2p(64), c2p(67), c2p(69), c2p(70), c2p(71), c2p(81)],
            smu_msg: mp1m(66),
            smu_arg: mp1m(82),
            smu_resp: mp1m(90),
            smu_dbg_msg: mp1m(75),
            smu_dbg_arg: mp1m(53),
            smu_dbg_resp: mp1m(54),
            mm_fb_base: mm[0] + mm_fb,
            mm_ap_low: mm[0] + mm_ap,
            mm_ap_high: mm[0] + mm_ap + 1,
            mm_agp_top: mm[0] + mm_agp,
            gc_agp_top: gc[0] + gc_agp,
            mm_ctx0: if gfx12 { [0x564, 0x5EF, 0x60F, 0x5CF] } else { [0x740, 0x7CB, 0x7EB, 0x7AB] }.map(|o| mm[0] + o),
            gc_ctx0: if gfx12 { [0x1624, 0x16AF, 0x16CF, 0x168F] } else { [0x1688, 0x1713, 0x1733, 0x16F3] }
                .map(|o| gc[0] + o),
            gc_ap_low: gc[0] + gc_ap,
            gc_ap_high: gc[0] + gc_ap + 1,
            scratch6: gc[1] + 0x2046,
            scratch7: gc[1] + 0x2047,
            bootload_status: gc[1] + if gfx12 { 0x4E7C } else { 0x4E82 },
            grbm_gfx_cntl: gc[1] + 0x900,
            grbm_soft_reset: gc[0] + 0xDA8,
            mec_cntl: gc[1] + 0x2904,
            mec_pc: gc[1] + 0x2900,
            mec_pc_hi: gc[1] + 0x2938,
            hqd_active: gc[0] + 0x1FAB,
            hqd_pq_base: gc[0] + 0x1FB1,
            hqd_pq_base_hi: gc[0] + 0x1FB2,
            hqd_rptr_report: gc[0] + 0x1FB4,
            hqd_doorbell: gc[0] + 0x1FB8,
            hqd_pq_control: gc[0] + 0x1FBA,
            hqd_dequeue: gc[0] + 0x1FC1,
            sdma_rb_cntl: gc[0] + 0x80,
            sdma_rb_base: gc[0] + 0x81,
            sdma_rptr_addr_lo: gc[0] + sdma.0,
            sdma_rptr_addr_hi: gc[0] + 0x88,
            sdma_doorbell: gc[0] + sdma.1,
            sdma_doorbell_offset: gc[0] + sdma.2,
            sdma_engine_cntl: gc[1] + sdma.3,
        }
    }
}
