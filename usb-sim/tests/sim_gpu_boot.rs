//! The simulated GPU's bring-up checks, driven at register level through the simulated bridge: the PSP takes
//! the real sOS components in order and refuses a wrong-order, truncated or wrong-card one; the KM ring's
//! commands check their images; the SMU answers only after its firmware; queues refuse to start before their
//! engine was brought up; a crash needs a mode-1 reset; a clean fini allows a partial boot.

mod sim_gpu_support;
use pilot_amd::firmware::{Card, FirmwareSet, PspStep};
use pilot_usb_sim::Board;
use sim_gpu_support::boot::*;
use sim_gpu_support::*;

const VRAM: u64 = 64 * MB;

/// The bootloader steps of `fw`: (command, image).
fn bl_steps(fw: &FirmwareSet) -> Vec<(u32, Vec<u8>)> {
    fw.psp_load_list()
        .into_iter()
        .filter_map(|s| match s {
            PspStep::Bootloader { command, file, range, .. } => Some((command, fw.bytes(&file, &range)?.to_vec())),
            _ => None,
        })
        .collect()
}

fn fault_text(rig: &Rig) -> String {
    rig.sim.gpu_faults().iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; ")
}

#[test]
fn cold_boot_of_both_boards_brings_up_the_queues() {
    for board in [Board::Navi31, Board::Navi48] {
        let Some((mut rig, r, fw)) = rig(board, VRAM) else { return };
        rig.cold_boot(&r, VRAM, &fw);
        assert!(rig.sim.gpu_faults().is_empty(), "{board:?}: {}", fault_text(&rig));
        // The clocks the driver sets after boot.
        let (resp, levels) = rig.smu(&r, 0x1F, 0xFF);
        assert_eq!((resp, levels), (1, 3));
        let (_, top) = rig.smu(&r, 0x1F, 2);
        assert_eq!(rig.smu(&r, 0x19, top).0, 1);
        assert_eq!(rig.smu(&r, 0x1A, top).0, 1);
    }
}

#[test]
fn psp_refuses_components_out_of_order() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, false);
    let steps = bl_steps(&fw);
    // SYS_DRV before the key database.
    let sys = steps.iter().find(|s| s.0 == 0x1_0000).unwrap();
    assert_eq!(rig.bl_load(&r, sys.0, &sys.1), 0x8000_FFFF);
    assert!(fault_text(&rig).contains("out of order"), "{}", fault_text(&rig));
    // Nothing loads after a failure, and sOS never starts.
    for (cmd, image) in &steps {
        let at = rig.stage(image);
        rig.wreg(r.psp[P36], (at >> 20) as u32);
        rig.wreg(r.psp[P35], *cmd);
    }
    assert_eq!(rig.rreg(r.psp[P81]), 0, "sOS must not be alive");
}

#[test]
fn psp_refuses_a_truncated_component() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, false);
    let (cmd, image) = bl_steps(&fw).remove(0);
    let mut cut = image[..image.len() / 2].to_vec();
    cut.resize(image.len(), 0);
    assert_eq!(rig.bl_load(&r, cmd, &cut), 0x8000_FFFF);
    assert!(fault_text(&rig).contains("are not part"), "{}", fault_text(&rig));
}

#[test]
fn psp_refuses_the_other_cards_component() {
    let Some(dir) = firmware_dir() else { return };
    let other = FirmwareSet::load(&dir, Card::Gfx1201).unwrap();
    let Some((mut rig, r, _)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, false);
    let (cmd, image) = bl_steps(&other).remove(0);
    assert_eq!(rig.bl_load(&r, cmd, &image), 0x8000_FFFF);
}

#[test]
fn psp_refuses_a_component_the_mm_hub_cannot_reach() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    // No MMHUB aperture programmed, component staged in VRAM: the PSP cannot read it.
    let (cmd, image) = bl_steps(&fw).remove(0);
    rig.put_vram(0x40_0000, &image);
    let at = rig.mc(&r, 0x40_0000);
    rig.wreg(r.psp[P36], (at >> 20) as u32);
    rig.wreg(r.psp[P35], cmd);
    assert_eq!(rig.rreg(r.psp[P35]), 0x8000_FFFF);
    assert!(fault_text(&rig).contains("system aperture"), "{}", fault_text(&rig));
}

/// Runs the bootloader and the ring up to (not including) the first LOAD_IP_FW; returns the remaining steps.
fn up_to_ip_fw(rig: &mut Rig, r: &Regs, fw: &FirmwareSet) -> Vec<PspStep> {
    rig.program_hub(r, VRAM, false);
    for (cmd, image) in bl_steps(fw) {
        rig.bl_load(r, cmd, &image);
    }
    assert_ne!(rig.rreg(r.psp[P81]), 0);
    rig.psp_ring_create(r);
    fw.psp_load_list().into_iter().filter(|s| !matches!(s, PspStep::Bootloader { .. })).collect()
}

#[test]
fn load_ip_fw_checks_type_and_image() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    let steps = up_to_ip_fw(&mut rig, &r, &fw);
    let PspStep::LoadToc { file, range } = &steps[0] else { panic!("TOC first: {steps:?}") };
    let at = rig.stage(fw.bytes(file, range).unwrap());
    let (status, tmr) = rig.psp_cmd(&r, 0x20, &[at as u32, 0, range.len() as u32]);
    assert_eq!(status, 0);
    assert!(tmr > 0 && tmr <= 0x130_0000, "TMR size {tmr:#x}");
    let PspStep::LoadIpFw { fw_type, file, range } = &steps[1] else { panic!("SMU next: {steps:?}") };
    let image = fw.bytes(file, range).unwrap().to_vec();
    // The SMU image announced as another type, then with a byte changed: both refused.
    let at = rig.stage(&image);
    assert_ne!(rig.psp_cmd(&r, 6, &[at as u32, 0, image.len() as u32, 71]).0, 0);
    let mut bad = image.clone();
    bad[1000] ^= 0xFF;
    let at = rig.stage(&bad);
    assert_ne!(rig.psp_cmd(&r, 6, &[at as u32, 0, bad.len() as u32, fw_type.0]).0, 0);
    // An unknown command is refused too; the real image is taken.
    assert_ne!(rig.psp_cmd(&r, 0x77, &[]).0, 0);
    let at = rig.stage(&image);
    assert_eq!(rig.psp_cmd(&r, 6, &[at as u32, 0, image.len() as u32, fw_type.0]).0, 0);
    // RLC autoload without the GC images: refused.
    assert_ne!(rig.psp_cmd(&r, 0x21, &[]).0, 0);
    assert_eq!(rig.rreg(r.bootload_status) >> 31, 0);
}

#[test]
fn smu_answers_only_after_its_firmware() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    assert_eq!(rig.smu(&r, 0x2, 0).0, 0, "no answer before the SMU firmware");
    rig.program_hub(&r, VRAM, false);
    rig.psp_boot(&r, &fw);
    // Features need the driver table first.
    assert_eq!(rig.smu(&r, 0x6, 0).0, 0xFF);
    rig.smu_init(&r);
    let (resp, version) = rig.smu(&r, 0x2, 0);
    assert_eq!(resp, 1);
    assert_ne!(version, 0);
    assert_eq!(rig.smu(&r, 0x1234, 0).0, 0xFE, "unknown message");
    assert_eq!(rig.smu(&r, 0x1F, 9 << 16 | 0xFF).0, 0xFF, "unknown clock");
}

#[test]
fn queues_refuse_to_start_before_bring_up() {
    let Some((mut rig, r, _)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, true);
    rig.queues_unchecked(&r);
    rig.wreg(r.grbm_gfx_cntl, 1 << 2);
    assert_eq!(rig.rreg(r.hqd_active), 0);
    let f = fault_text(&rig);
    assert!(f.contains("the MEC is not running"), "{f}");
    assert!(f.contains("the SDMA engine is not running"), "{f}");
    // Un-halting the MEC before the RLC autoload is refused too.
    rig.wreg(r.mec_cntl, 1 << 26);
    assert!(fault_text(&rig).contains("before the RLC autoload"));
}

#[test]
fn a_wrong_mec_start_address_keeps_the_queue_down() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, false);
    rig.psp_boot(&r, &fw);
    rig.smu_init(&r);
    rig.gfx_init(&r, VRAM, &fw);
    rig.wreg(r.mec_cntl, 1 << 30);
    rig.wreg(r.mec_pc, 0x1234);
    rig.wreg(r.mec_cntl, 1 << 26);
    assert!(fault_text(&rig).contains("program counter start"), "{}", fault_text(&rig));
    rig.queues_unchecked(&r);
    rig.wreg(r.grbm_gfx_cntl, 1 << 2);
    assert_eq!(rig.rreg(r.hqd_active), 0);
}

#[test]
fn a_crash_needs_a_mode1_reset_and_a_clean_fini_allows_a_partial_boot() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    rig.cold_boot(&r, VRAM, &fw);
    let sim = rig.sim.clone();
    // Crash: the driver is dropped without fini; SCRATCH_REG6 stays 1.
    drop(rig);
    let mut rig = Rig::open(sim.clone());
    assert_eq!(rig.rreg(r.scratch7), 0xA000_0008);
    assert_eq!(rig.rreg(r.scratch6), 1);
    assert_ne!(rig.rreg(r.psp[P81]), 0, "sOS still runs");
    assert_eq!(rig.rreg(r.psp[P35]) & 0x8000_0000, 0, "the bootloader does not answer while sOS runs");
    assert_eq!(rig.smu(&r, 0x2, 0).0, 1, "the SMU is alive");
    // Mode-1 reset through the debug mailbox, then a full boot again.
    assert_eq!(rig.smu_debug(&r, 2, 0), 1);
    assert_eq!(rig.rreg(r.psp[P81]), 0);
    assert_eq!(rig.rreg(r.scratch7), 0);
    let before = sim.gpu_faults().len();
    rig.cold_boot(&r, VRAM, &fw);
    assert_eq!(sim.gpu_faults().len(), before, "{}", fault_text(&rig));
    // Clean fini: dequeue, SDMA off, SCRATCH_REG6 = 0.
    rig.wreg(r.grbm_gfx_cntl, 1 << 2);
    rig.wreg(r.hqd_dequeue, 2);
    assert_eq!(rig.rreg(r.hqd_active), 0);
    rig.wreg(r.grbm_gfx_cntl, 0);
    rig.wreg(r.sdma_rb_cntl, 0);
    rig.wreg(r.scratch6, 0);
    drop(rig);
    // Partial boot: GC hub, reset_mec (soft reset CP, MEC again), SDMA, queues; no PSP, no SMU.
    let mut rig = Rig::open(sim.clone());
    assert_eq!((rig.rreg(r.scratch7), rig.rreg(r.scratch6)), (0xA000_0008, 0));
    rig.wreg(r.grbm_soft_reset, 1 | 1 << 18);
    rig.wreg(r.grbm_soft_reset, 0);
    rig.gfx_init(&r, VRAM, &fw);
    rig.queues(&r);
    assert_eq!(sim.gpu_faults().len(), before, "{}", fault_text(&rig));
}

#[test]
fn blind_spot_psp_load_order_an_image_after_rlc_g_is_refused_and_so_is_a_late_autoload() {
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    rig.program_hub(&r, VRAM, false);
    // The IMU images moved after RLC_G: the load order Linux (psp_load_non_psp_fw) and tinygrad share is broken.
    let (imu, mut steps): (Vec<_>, Vec<_>) = fw
        .psp_load_list()
        .into_iter()
        .partition(|s| matches!(s, PspStep::LoadIpFw { fw_type, .. } if fw_type.0 == 68 || fw_type.0 == 69));
    assert_eq!(imu.len(), 2);
    let autoload = steps.pop().unwrap();
    assert_eq!(autoload, PspStep::AutoloadRlc);
    steps.extend(imu);
    steps.push(autoload);
    let statuses = rig.psp_run(&r, &fw, steps);
    let n = statuses.len();
    assert!(statuses[..n - 3].iter().all(|&(_, st)| st == 0), "{statuses:x?}");
    assert_ne!(statuses[n - 3].1, 0, "IMU_I after RLC_G must be refused");
    assert_ne!(statuses[n - 2].1, 0, "IMU_D after RLC_G must be refused");
    let f = fault_text(&rig);
    assert!(f.contains("firmware type 68 (IMU) after a RLC_G image"), "{f}");
    // The autoload then lacks the IMU images.
    assert_ne!(statuses[n - 1].1, 0);
    assert_eq!(rig.rreg(r.bootload_status) >> 31, 0);
}
