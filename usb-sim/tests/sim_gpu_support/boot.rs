//! A register-level bring-up for the simulated GPU tests, in tinygrad's order (`amdev.py`, `ip.py`): MMHUB
//! apertures, the PSP's sOS components and KM ring commands from pilot's firmware load list, the SMU, the GC
//! hub, MEC and SDMA, then one compute HQD and the SDMA queue. Every step checks what the GPU answers.

use super::*;
use pilot_amd::firmware::PspStep;
use pilot_amd::firmware::{Card, FirmwareSet};

/// Physical VRAM layout the test driver uses (inside the first MBs).
pub const PSP_RING: u64 = 0x10_0000;
pub const PSP_CMD: u64 = 0x11_0000;
pub const PSP_FENCE: u64 = 0x11_1000;
/// 16 MB at 32 MB: clear of everything the tests put in VRAM (the simulated GPU refuses kernels the TMR).
pub const TMR: u64 = 0x200_0000;
pub const SMU_TABLE: u64 = 0x13_0000;
pub const COMPUTE_RING: u64 = 0x14_0000;
pub const COMPUTE_RING_BYTES: u64 = 0x2000;
pub const SDMA_RING: u64 = 0x18_0000;
pub const SDMA_RING_BYTES: u64 = 0x1_0000;
pub const RPTR: u64 = 0x13_8000;
pub const SDMA_RPTR: u64 = 0x13_8100;
/// BAR2 byte offsets of the two doorbells (tinygrad: MEC ring 0 = index 3, sDMA engine 0 = 0x100; byte = 2 * index * 4).
pub const COMPUTE_DOORBELL: u32 = 3 * 2;
pub const SDMA_DOORBELL: u32 = 0x100 * 2;

pub use pilot_test_support::amd_firmware_dir as firmware_dir;

pub fn card(board: Board) -> Card {
    match board {
        Board::Navi31 => Card::Gfx1100,
        Board::Navi48 => Card::Gfx1201,
    }
}

/// A rig with the firmware folder set; `None` when the firmware is absent and optional.
pub fn rig(board: Board, vram: u64) -> Option<(Rig, Regs, FirmwareSet)> {
    let dir = firmware_dir()?;
    let fw = FirmwareSet::load(&dir, card(board)).unwrap();
    let sim = pilot_usb_sim::Simulator::new(pilot_usb_sim::SimConfig {
        vram_bytes: vram,
        board,
        firmware_dir: Some(dir),
        ..Default::default()
    });
    let mut rig = Rig::open(sim);
    let regs = Regs::new(&mut rig, vram);
    Some((rig, regs, fw))
}

impl Rig {
    /// The GPU's MC address of VRAM byte `paddr` (FB base << 24 + paddr).
    pub fn mc(&mut self, r: &Regs, paddr: u64) -> u64 {
        (u64::from(self.rreg(r.mm_fb_base) & 0xFF_FFFF) << 24) + paddr
    }

    /// Stages `data` in the bridge SRAM (bus 0x200000), padded as tinygrad pads msg1.
    pub fn stage(&mut self, data: &[u8]) -> u64 {
        let mut v = data.to_vec();
        v.resize((data.len() + 4).div_ceil(16) * 16, 0);
        self.b.sram_write(0, &v).unwrap();
        self.staging
    }

    /// MMHUB (`gc` false) or GC hub (`true`): the system aperture over the whole frame buffer, and the AGP
    /// aperture over the first 16 MB of bus addresses (the bridge windows at their bus addresses).
    pub fn program_hub(&mut self, r: &Regs, vram: u64, gc: bool) {
        let base = self.mc(r, 0);
        let (lo, hi, agp) =
            if gc { (r.gc_ap_low, r.gc_ap_high, r.gc_agp_top) } else { (r.mm_ap_low, r.mm_ap_high, r.mm_agp_top) };
        self.wreg(lo, (base >> 18) as u32);
        self.wreg(hi, ((base + vram - 1) >> 18) as u32);
        self.wreg(agp, 0); // TOP
        self.wreg(agp + 1, 0); // BOT
        self.wreg(agp + 2, 0); // BASE
    }

    /// One bootloader component; returns C2PMSG_35 afterwards.
    pub fn bl_load(&mut self, r: &Regs, cmd: u32, image: &[u8]) -> u32 {
        assert_eq!(self.rreg(r.psp[P35]) & 0x8000_0000, 0x8000_0000, "bootloader not ready");
        let at = self.stage(image);
        self.wreg(r.psp[P36], (at >> 20) as u32);
        self.wreg(r.psp[P35], cmd);
        self.rreg(r.psp[P35])
    }

    pub fn psp_ring_create(&mut self, r: &Regs) {
        let ring = self.mc(r, PSP_RING);
        self.wreg(r.psp[P69], ring as u32);
        self.wreg(r.psp[P70], (ring >> 32) as u32);
        self.wreg(r.psp[P71], 0x1_0000);
        self.wreg(r.psp[P64], 2 << 16);
        assert_eq!(self.rreg(r.psp[P64]) & 0x8000_FFFF, 0x8000_0000, "KM ring not created");
    }

    /// Submits one PSP command (`cmd_id`, command dwords); returns (resp.status, resp.tmr_size).
    pub fn psp_cmd(&mut self, r: &Regs, id: u32, args: &[u32]) -> (u32, u32) {
        let mut cmd = vec![0u8; 1024];
        cmd[8..12].copy_from_slice(&id.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            cmd[28 + 4 * i..32 + 4 * i].copy_from_slice(&a.to_le_bytes());
        }
        cmd[864..868].copy_from_slice(&0xDEADu32.to_le_bytes());
        self.put_vram(PSP_CMD, &cmd);
        let wptr = self.rreg(r.psp[P67]);
        let fence_value = wptr + 1;
        let (c, f) = (self.mc(r, PSP_CMD), self.mc(r, PSP_FENCE));
        let mut frame = vec![0u8; 64];
        for (i, v) in [c as u32, (c >> 32) as u32, 1024, f as u32, (f >> 32) as u32, fence_value].iter().enumerate() {
            frame[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        self.put_vram(PSP_RING + 4 * u64::from(wptr), &frame);
        self.wreg(r.psp[P67], wptr + 16);
        assert_eq!(u32_at(&self.vram(PSP_FENCE, 4), 0), fence_value, "PSP fence not written");
        let resp = self.vram(PSP_CMD + 864, 20);
        (u32_at(&resp, 0), u32_at(&resp, 16))
    }

    /// SMU mailbox: (response, argument read back).
    pub fn smu(&mut self, r: &Regs, msg: u32, arg: u32) -> (u32, u32) {
        self.wreg(r.smu_resp, 0);
        self.wreg(r.smu_arg, arg);
        self.wreg(r.smu_msg, msg);
        (self.rreg(r.smu_resp), self.rreg(r.smu_arg))
    }

    pub fn smu_debug(&mut self, r: &Regs, msg: u32, arg: u32) -> u32 {
        self.wreg(r.smu_dbg_resp, 0);
        self.wreg(r.smu_dbg_arg, arg);
        self.wreg(r.smu_dbg_msg, msg);
        self.rreg(r.smu_dbg_resp)
    }

    /// Every PSP step of a cold boot; panics on the first refusal.
    pub fn psp_boot(&mut self, r: &Regs, fw: &FirmwareSet) {
        for (id, status) in self.psp_run(r, fw, fw.psp_load_list()) {
            assert_eq!(status, 0, "PSP command {id:#x}: {:?}", self.sim.gpu_faults());
        }
    }

    /// Runs `steps` (a load list, possibly altered); returns each KM-ring command's id and status. A bootloader step
    /// that fails panics.
    pub fn psp_run(&mut self, r: &Regs, fw: &FirmwareSet, steps: Vec<PspStep>) -> Vec<(u32, u32)> {
        let mut ring = false;
        let mut out = Vec::new();
        for step in steps {
            let bytes = |file: &str, range: &std::ops::Range<usize>| fw.bytes(file, range).unwrap().to_vec();
            match step {
                PspStep::Bootloader { command, file, range, component } => {
                    let st = self.bl_load(r, command, &bytes(&file, &range));
                    let ok = if command == 0x2_0000 { 0 } else { 0x8000_0000 };
                    assert_eq!(st, ok, "bootloader {component:?}");
                }
                other => {
                    if !ring {
                        assert_ne!(self.rreg(r.psp[P81]), 0, "sOS alive");
                        self.psp_ring_create(r);
                        ring = true;
                    }
                    let (id, args) = match other {
                        PspStep::LoadToc { file, range } => {
                            let at = self.stage(&bytes(&file, &range));
                            (0x20, vec![at as u32, (at >> 32) as u32, range.len() as u32])
                        }
                        PspStep::LoadIpFw { fw_type, file, range } => {
                            let at = self.stage(&bytes(&file, &range));
                            (6, vec![at as u32, (at >> 32) as u32, range.len() as u32, fw_type.0])
                        }
                        PspStep::SetupTmr => {
                            let t = self.mc(r, TMR);
                            (5, vec![t as u32, (t >> 32) as u32, 0x100_0000, 0, TMR as u32, 0])
                        }
                        PspStep::AutoloadRlc => (0x21, vec![]),
                        PspStep::Bootloader { .. } => unreachable!(),
                    };
                    out.push((id, self.psp_cmd(r, id, &args).0));
                }
            }
        }
        out
    }

    /// SMU driver table and features.
    pub fn smu_init(&mut self, r: &Regs) {
        let t = self.mc(r, SMU_TABLE);
        assert_eq!(self.smu(r, 0xE, (t >> 32) as u32).0, 1);
        assert_eq!(self.smu(r, 0xF, t as u32).0, 1);
        assert_eq!(self.smu(r, 0x6, 0).0, 1);
    }

    /// GC hub, MEC from the firmware's start address, SDMA un-halted.
    pub fn gfx_init(&mut self, r: &Regs, vram: u64, fw: &FirmwareSet) {
        assert_eq!(self.rreg(r.bootload_status) >> 31, 1, "RLC autoload complete");
        self.program_hub(r, vram, true);
        let mec = fw.files.iter().find(|f| f.spec.name.ends_with("_mec.bin")).unwrap();
        let lo = u32_at(&mec.data, 52);
        let hi = u32_at(&mec.data, 56);
        let start = (u64::from(lo) | u64::from(hi) << 32) >> 2;
        self.wreg(r.grbm_gfx_cntl, 1 << 2); // me 1
        self.wreg(r.mec_pc, start as u32);
        self.wreg(r.mec_pc_hi, (start >> 32) as u32);
        self.wreg(r.grbm_gfx_cntl, 0);
        self.wreg(r.mec_cntl, 1 << 16 | 1 << 30);
        self.wreg(r.mec_cntl, 1 << 26);
        self.wreg(r.sdma_engine_cntl, 0);
    }

    /// One compute HQD (ME1 pipe 0 queue 0) and the SDMA queue.
    pub fn queues(&mut self, r: &Regs) {
        let ring = self.mc(r, COMPUTE_RING) >> 8;
        self.wreg(r.grbm_gfx_cntl, 1 << 2);
        self.wreg(r.hqd_pq_base, ring as u32);
        self.wreg(r.hqd_pq_base_hi, (ring >> 32) as u32);
        let rptr = self.mc(r, RPTR);
        self.wreg(r.hqd_rptr_report, rptr as u32);
        self.wreg(r.hqd_rptr_report + 1, (rptr >> 32) as u32);
        self.wreg(r.hqd_doorbell, COMPUTE_DOORBELL << 2 | 1 << 30);
        let qsize = (COMPUTE_RING_BYTES / 4).trailing_zeros() - 1;
        self.wreg(r.hqd_pq_control, qsize | 5 << 8);
        self.wreg(r.hqd_active, 1);
        assert_eq!(self.rreg(r.hqd_active), 1, "HQD active: {:?}", self.sim.gpu_faults());
        self.wreg(r.grbm_gfx_cntl, 0);
        let sring = self.mc(r, SDMA_RING) >> 8;
        self.wreg(r.sdma_rb_base, sring as u32);
        self.wreg(r.sdma_rb_base + 1, (sring >> 32) as u32);
        let srptr = self.mc(r, SDMA_RPTR);
        self.wreg(r.sdma_rptr_addr_lo, srptr as u32);
        self.wreg(r.sdma_rptr_addr_hi, (srptr >> 32) as u32);
        self.wreg(r.sdma_doorbell_offset, SDMA_DOORBELL << 2);
        self.wreg(r.sdma_doorbell, 1 << 28);
        let rb_size = (SDMA_RING_BYTES / 4).trailing_zeros();
        self.wreg(r.sdma_rb_cntl, 1 | rb_size << 1 | 1 << 12);
    }

    /// The whole cold boot.
    pub fn cold_boot(&mut self, r: &Regs, vram: u64, fw: &FirmwareSet) {
        self.program_hub(r, vram, false);
        self.psp_to_queues(r, vram, fw);
    }

    /// The cold boot after the MM hub is programmed.
    pub fn psp_to_queues(&mut self, r: &Regs, vram: u64, fw: &FirmwareSet) {
        self.psp_boot(r, fw);
        self.smu_init(r);
        self.gfx_init(r, vram, fw);
        self.queues(r);
        self.wreg(r.scratch7, 0xA000_0008);
        self.wreg(r.scratch6, 1);
    }
}

impl Rig {
    /// [`Rig::queues`] without checking that the HQD came up.
    pub fn queues_unchecked(&mut self, r: &Regs) {
        let ring = self.mc(r, COMPUTE_RING) >> 8;
        self.wreg(r.grbm_gfx_cntl, 1 << 2);
        self.wreg(r.hqd_pq_base, ring as u32);
        self.wreg(r.hqd_doorbell, COMPUTE_DOORBELL << 2 | 1 << 30);
        self.wreg(r.hqd_pq_control, 10);
        self.wreg(r.hqd_active, 1);
        self.wreg(r.grbm_gfx_cntl, 0);
        let sring = self.mc(r, SDMA_RING) >> 8;
        self.wreg(r.sdma_rb_base, sring as u32);
        self.wreg(r.sdma_doorbell_offset, SDMA_DOORBELL << 2);
        self.wreg(r.sdma_doorbell, 1 << 28);
        self.wreg(r.sdma_rb_cntl, 1 | 14 << 1);
    }
}

/// The compute and SDMA queues' producers, as a driver keeps them.
#[derive(Default)]
pub struct Producer {
    pub compute_wptr: u64,
    pub sdma_wptr: u64,
}

impl Rig {
    /// Writes `dws` into the compute ring at the producer's position and rings its doorbell (dwords).
    pub fn submit_compute(&mut self, p: &mut Producer, dws: &[u32]) {
        for (i, d) in dws.iter().enumerate() {
            let at = (p.compute_wptr + i as u64) * 4 % COMPUTE_RING_BYTES;
            self.put_vram(COMPUTE_RING + at, &d.to_le_bytes());
        }
        p.compute_wptr += dws.len() as u64;
        self.doorbell(COMPUTE_DOORBELL / 2, p.compute_wptr);
    }

    /// Writes `dws` into the SDMA ring and rings its doorbell (bytes).
    pub fn submit_sdma(&mut self, p: &mut Producer, dws: &[u32]) {
        for (i, d) in dws.iter().enumerate() {
            let at = (p.sdma_wptr + 4 * i as u64) % SDMA_RING_BYTES;
            self.put_vram(SDMA_RING + at, &d.to_le_bytes());
        }
        p.sdma_wptr += 4 * dws.len() as u64;
        self.doorbell(SDMA_DOORBELL / 2, p.sdma_wptr);
    }

    pub fn u32_at(&mut self, paddr: u64) -> u32 {
        u32_at(&self.vram(paddr, 4), 0)
    }
}

/// Context 0's page tables the page-table tests build: VA_BASE.. maps VRAM 1:1 in 2 MB pages; VA_BASE + 1 GB
/// maps the bridge SRAM (128 4 KB system pages), then sys_buf (0x820000) and cq_buf (0x822000).
pub const VA_BASE: u64 = 0x2000_0000_0000;
pub const VA_SRAM: u64 = VA_BASE + (1 << 30);
pub const VA_SYS_BUF: u64 = VA_SRAM + 128 * 4096;
pub const VA_CQ_BUF: u64 = VA_SYS_BUF + 4096;
const PT_ROOT: u64 = 0x30_0000;

impl Rig {
    /// Writes the page tables and programs context 0 of both hubs (no AGP, no system-aperture use needed).
    pub fn page_tables(&mut self, r: &Regs, vram: u64) {
        let valid_rwx = 1 | 0x70;
        let leaf = if r.gfx12 { 1u64 << 63 } else { 1u64 << 54 };
        let (pdb1, pdb0, pdb0b, ptb) = (PT_ROOT + 0x1000, PT_ROOT + 0x2000, PT_ROOT + 0x3000, PT_ROOT + 0x4000);
        let put = |rig: &mut Rig, table: u64, i: u64, e: u64| rig.put_vram(table + 8 * i, &e.to_le_bytes());
        put(self, PT_ROOT, 0, pdb1 | 1);
        put(self, pdb1, 0, pdb0 | 1);
        put(self, pdb1, 1, pdb0b | 1);
        for i in 0..vram / (2 << 20) {
            put(self, pdb0, i, (i << 21) | valid_rwx | leaf);
        }
        put(self, pdb0b, 0, ptb | 1);
        let gfx12_pte = if r.gfx12 { 1u64 << 63 } else { 0 };
        for j in 0..128 {
            put(self, ptb, j, (0x20_0000 + (j << 12)) | valid_rwx | 2 | gfx12_pte);
        }
        put(self, ptb, 128, 0x82_0000 | valid_rwx | 2 | gfx12_pte);
        put(self, ptb, 129, 0x82_2000 | valid_rwx | 2 | gfx12_pte);
        let end = (VA_BASE + (2 << 30) - 1) >> 12;
        for ctx in [r.mm_ctx0, r.gc_ctx0] {
            let [cntl, start, endr, base] = ctx;
            self.wreg(start, (VA_BASE >> 12) as u32);
            self.wreg(start + 1, (VA_BASE >> 44) as u32);
            self.wreg(endr, end as u32);
            self.wreg(endr + 1, (end >> 32) as u32);
            self.wreg(base, PT_ROOT as u32 | 1);
            self.wreg(base + 1, 0);
            self.wreg(cntl, 1 | 3 << 1);
        }
        self.staging = VA_SRAM;
    }
}
