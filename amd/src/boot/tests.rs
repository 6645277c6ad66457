//! The bring-up against the scripted bus: order and values of what it writes, the three boot kinds, fini,
//! and failures as one-line errors. Firmware is the real Debian files (`PILOT_AMD_FIRMWARE`, else
//! `target/amd-firmware/...`; skipped without them, a failure under `PILOT_REQUIRE=1`).

use super::test_bus::{Event, ScriptedBus, FB_BASE, STAGING};
use super::*;
use crate::firmware::{bootloader, Card, FwType, PspStep};
use crate::regs::{gc, psp_msg, PspMsg, SmuMailbox};

use pilot_test_support::amd_firmware_dir as fw_dir;

/// The 16-byte padding (with 4 zero bytes at least) tinygrad gives msg1.
fn padded(b: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    v.resize((b.len() + 4).div_ceil(16) * 16, 0);
    v
}

fn scratch(card: Card) -> (RegAddr, RegAddr) {
    gc!(card, m => (reg!(HwIp::Gc, m::SCRATCH_REG6), reg!(HwIp::Gc, m::SCRATCH_REG7)))
}

#[test]
fn cold_boot_loads_every_image_in_order_byte_exact() {
    let Some(dir) = fw_dir() else { return };
    for card in Card::ALL {
        let mut bus = ScriptedBus::new(card);
        let booted = boot(&mut bus, &dir, BootOptions::default()).unwrap_or_else(|e| panic!("{card:?}: {e}"));
        assert_eq!(booted.kind, BootKind::Cold);
        let fw = FirmwareSet::load(&dir, card).unwrap();
        let steps = fw.psp_load_list();
        let msg1_va = vm::VA_BASE;

        // The bootloader took each sOS component, staged byte for byte, at msg1's VA.
        let want: Vec<(u32, u32, Vec<u8>)> = steps
            .iter()
            .filter_map(|s| match s {
                PspStep::Bootloader { command, file, range, .. } => {
                    Some((*command, (msg1_va >> 20) as u32, padded(fw.bytes(file, range).unwrap())))
                }
                _ => None,
            })
            .collect();
        assert!(want.len() >= 4, "{card:?}: {} sOS components", want.len());
        assert_eq!(bus.bootloader.len(), want.len());
        for (got, want) in bus.bootloader.iter().zip(&want) {
            assert_eq!((got.0, got.1), (want.0, want.1), "{card:?}");
            assert!(got.2 == want.2, "{card:?}: component {:#x} staged differently", want.0);
        }
        assert_eq!(bus.bootloader.last().unwrap().0, bootloader::LOAD_SOSDRV);

        // Then the ring commands, one per remaining step, each image staged byte for byte.
        let ring_steps: Vec<&PspStep> = steps.iter().filter(|s| !matches!(s, PspStep::Bootloader { .. })).collect();
        assert_eq!(bus.commands.len(), ring_steps.len(), "{card:?}");
        for (seen, step) in bus.commands.iter().zip(&ring_steps) {
            match step {
                PspStep::LoadToc { file, range } => {
                    let toc = fw.bytes(file, range).unwrap();
                    assert_eq!(seen.id, psp::cmd::LOAD_TOC);
                    assert_eq!(seen.body[..3], [msg1_va as u32, (msg1_va >> 32) as u32, toc.len() as u32]);
                    assert!(seen.staged == padded(toc));
                }
                PspStep::LoadIpFw { fw_type, file, range } => {
                    let img = fw.bytes(file, range).unwrap();
                    assert_eq!(seen.id, psp::cmd::LOAD_IP_FW);
                    assert_eq!(seen.body, [msg1_va as u32, (msg1_va >> 32) as u32, img.len() as u32, fw_type.0]);
                    assert!(seen.staged == padded(img), "{card:?}: {} staged differently", fw_type.name());
                }
                PspStep::SetupTmr => {
                    assert_eq!(seen.id, psp::cmd::SETUP_TMR);
                    let tmr = booted.boot_memory.psp.tmr.expect("gfx1100 has a driver TMR");
                    let mc = FB_BASE + tmr;
                    assert_eq!(seen.body, [mc as u32, (mc >> 32) as u32, 0x40_0000, 2]);
                }
                PspStep::AutoloadRlc => assert_eq!(seen.id, psp::cmd::AUTOLOAD_RLC),
                PspStep::Bootloader { .. } => unreachable!(),
            }
        }
        // The SMU image goes before the TMR; gfx1201's PSP sets its TMR up itself.
        let ids: Vec<u32> = bus.commands.iter().map(|c| c.id).collect();
        let smu_at = bus.commands.iter().position(|c| c.id == 6 && c.body[3] == FwType::SMU.0).unwrap();
        match card {
            Card::Gfx1100 => assert_eq!(ids.iter().position(|i| *i == psp::cmd::SETUP_TMR), Some(smu_at + 1)),
            Card::Gfx1201 => assert!(!ids.contains(&psp::cmd::SETUP_TMR)),
        }

        // The KM ring: address, size, then the KM ring type.
        let mem = &booted.boot_memory;
        let ring_mc = FB_BASE + mem.psp.ring;
        assert_eq!(bus.writes_to(psp_msg(card, PspMsg::RingLo69)), [ring_mc as u32]);
        assert_eq!(bus.writes_to(psp_msg(card, PspMsg::RingHi70)), [(ring_mc >> 32) as u32]);
        assert_eq!(bus.writes_to(psp_msg(card, PspMsg::RingSize71)), [0x1_0000]);
        assert_eq!(bus.writes_to(psp_msg(card, PspMsg::Ring64)), [2 << 16]);
        assert!(bus.first_write(psp_msg(card, PspMsg::RingSize71)) < bus.first_write(psp_msg(card, PspMsg::Ring64)));

        // The SMU: driver table high, low, then all features; clocks at the highest level (200 MHz) last.
        let table_mc = FB_BASE + mem.smu_driver_table;
        let regular = bus.addr(SmuMailbox::regular().msg);
        let smu: Vec<(u32, u32)> = bus.smu.iter().filter(|m| m.0 == regular).map(|m| (m.1, m.2)).collect();
        assert_eq!(smu[..3], [(0xe, (table_mc >> 32) as u32), (0xf, table_mc as u32), (0x6, 0)]);
        assert!(smu.contains(&(0x1a, 200)) && !smu.contains(&(0x1a, 100)), "{smu:?}");

        // MEC starts at the header's ucode start (in dwords); GC 12 also starts PFP and ME.
        let mec = booted.ucode_starts.mec;
        let mec_reg = gc!(card, m => reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START));
        assert_eq!(bus.writes_to(mec_reg), [(mec >> 2) as u32]);
        if card == Card::Gfx1201 {
            use crate::regs::gc_12_0_0 as m;
            let pfp = booted.ucode_starts.pfp.unwrap();
            assert_eq!(bus.writes_to(reg!(HwIp::Gc, m::CP_PFP_PRGRM_CNTR_START)), [(pfp >> 2) as u32]);
        }

        // The IPs in tinygrad's order: SOC, MM hub, IH, PSP, SMU, GC hub, SDMA; the scratch registers last.
        let first = |r: RegAddr| bus.first_write(r).unwrap_or_else(|| panic!("{card:?}: {} never written", r.name));
        let nb = crate::regs::nbio!(card, m => reg!(HwIp::Nbio, m::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN));
        let mm = crate::regs::mmhub!(card, m => reg!(HwIp::Mmhub, m::MMVM_CONTEXT0_CNTL));
        let ih = crate::regs::osssys!(card, m => reg!(HwIp::Osssys, m::IH_RB_CNTL));
        let gcvm = gc!(card, m => reg!(HwIp::Gc, m::GCVM_CONTEXT0_CNTL));
        let sdma = gc!(card, m => reg!(HwIp::Gc, m::SDMA0_CNTL));
        let order = [
            first(nb),
            first(mm),
            first(ih),
            first(psp_msg(card, PspMsg::Bl36)),
            first(SmuMailbox::regular().msg),
            first(gcvm),
            first(mec_reg),
            first(sdma),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{card:?}: {order:?}");
        let (r6, r7) = scratch(card);
        let writes: Vec<&Event> = bus.events.iter().filter(|e| matches!(e, Event::Write(..))).collect();
        assert_eq!(writes[writes.len() - 2..], [&Event::Write(bus.addr(r7), VERSION), &Event::Write(bus.addr(r6), 1)]);

        // msg1 is mapped into VMID 0 as uncached system memory (128 4 KB pages at the staging window).
        let root = bus.peek(mem.root_page_table, 8);
        assert_eq!(root[0] & 1, 1, "the root's first entry is valid");
        let root_base = gc!(card, m => reg!(HwIp::Gc, m::GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32));
        assert_eq!(bus.writes_to(root_base), [(mem.root_page_table | 1) as u32]);
        assert_eq!(booted.va(0x1000), booted.va(0) + 0x1000);
        assert!(booted.va(0) >= vm::VA_BASE + psp::MSG1_SIZE);
        assert!(bus.events.iter().any(|e| matches!(e, Event::Staged(_))));
        let _ = STAGING;
    }
}

#[test]
fn partial_boot_skips_psp_and_resets_mec() {
    let Some(dir) = fw_dir() else { return };
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    let booted = boot(&mut bus, &dir, BootOptions::default()).unwrap();
    fini(&mut bus, &booted, false).unwrap();
    let (r6, r7) = scratch(Card::Gfx1100);
    assert_eq!((bus.get(r6), bus.get(r7)), (0, VERSION));

    bus.events.clear();
    bus.commands.clear();
    bus.bootloader.clear();
    bus.smu.clear();
    let again = boot(&mut bus, &dir, BootOptions::default()).unwrap();
    assert_eq!(again.kind, BootKind::Partial);
    assert!(bus.commands.is_empty() && bus.bootloader.is_empty(), "a partial boot runs no PSP command");
    assert_eq!(bus.first_write(psp_msg(Card::Gfx1100, PspMsg::Ring64)), None);
    // Same boot memory as the full boot.
    assert_eq!(again.boot_memory.mqd, booted.boot_memory.mqd);
    use crate::regs::gc_11_0_0 as m;
    let soft = bus.writes_to(reg!(HwIp::Gc, m::GRBM_SOFT_RESET));
    assert_eq!(soft, [m::GRBM_SOFT_RESET::new().with_soft_reset_cp(true).with_soft_reset_cpc(true).bits(), 0]);
    assert_eq!(bus.writes_to(reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START)), [(again.ucode_starts.mec >> 2) as u32]);
    assert_eq!(bus.get(r6), 1);

    // force_reset: a full boot even after a clean fini.
    fini(&mut bus, &again, false).unwrap();
    bus.set(psp_msg(Card::Gfx1100, PspMsg::Sos81), 1);
    let forced = boot(&mut bus, &dir, BootOptions { force_reset: true }).unwrap();
    assert_eq!(forced.kind, BootKind::AfterReset);
}

#[test]
fn boot_after_a_crash_resets_through_the_debug_mailbox() {
    let Some(dir) = fw_dir() else { return };
    for card in Card::ALL {
        let mut bus = ScriptedBus::new(card);
        let _ = boot(&mut bus, &dir, BootOptions::default()).unwrap();
        // No fini: SCRATCH_REG6 stays 1; sOS and the SMU still run.
        bus.events.clear();
        bus.smu.clear();
        let booted = boot(&mut bus, &dir, BootOptions::default()).unwrap();
        assert_eq!(booted.kind, BootKind::AfterReset);
        let masters: Vec<bool> =
            bus.events.iter().filter_map(|e| if let Event::BusMaster(b) = e { Some(*b) } else { None }).collect();
        assert_eq!(masters, [false, true]);
        let debug = bus.addr(SmuMailbox::debug().msg);
        let regular = bus.addr(SmuMailbox::regular().msg);
        // The liveness probe (GetSmuVersion), then Mode1Reset on the debug mailbox, then the full boot's messages.
        assert_eq!(bus.smu[0], (regular, 0x2, 0));
        assert_eq!(bus.smu[1], (debug, 0x2, 0));
        let reset_at = bus.events.iter().position(|e| *e == Event::BusMaster(false)).unwrap();
        assert!(bus.events[reset_at..].iter().any(|e| matches!(e, Event::Sleep(d) if d.as_millis() >= 500)));
        assert!(
            bus.bootloader.iter().any(|b| b.0 == bootloader::LOAD_SOSDRV),
            "{card:?}: sOS reloaded after the reset"
        );
    }
}

#[test]
fn fini_records_the_error_state() {
    let Some(dir) = fw_dir() else { return };
    let mut bus = ScriptedBus::new(Card::Gfx1201);
    let booted = boot(&mut bus, &dir, BootOptions::default()).unwrap();
    bus.smu.clear();
    fini(&mut bus, &booted, true).unwrap();
    let (r6, _) = scratch(Card::Gfx1201);
    assert_eq!(bus.get(r6), 1, "an error leaves REG6 set, forcing a full boot next time");
    assert!(bus.smu.iter().any(|m| (m.1, m.2) == (0x1a, 100)), "clocks down to the lowest level");
    use crate::regs::gc_12_0_0 as m;
    let soft = bus.writes_to(reg!(HwIp::Gc, m::GRBM_SOFT_RESET));
    assert_eq!(soft, [m::GRBM_SOFT_RESET::new().with_soft_reset_sdma0(true).bits(), 0]);
}

fn one_line(e: BootError) -> String {
    let m = e.to_string();
    assert!(!m.contains('\n'), "{m}");
    m
}

#[test]
fn failures_are_one_line_errors_naming_the_step() {
    let Some(dir) = fw_dir() else { return };
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    bus.fail_command = Some((6, FwType::SMU.0, 0xffff_0007));
    let m = one_line(boot(&mut bus, &dir, BootOptions::default()).unwrap_err());
    assert_eq!(m, "PSP: LOAD_IP_FW(SMU) failed: status 0xffff0007");

    let mut bus = ScriptedBus::new(Card::Gfx1100);
    bus.smu_dead = true;
    let m = one_line(boot(&mut bus, &dir, BootOptions::default()).unwrap_err());
    assert_eq!(
        m,
        "SMU: timed out after 10000 ms waiting for the SMU to answer message 0xe (MP1_SMN_C2PMSG_90 reads 0x0)"
    );

    let mut bus = ScriptedBus::new(Card::Gfx1201);
    bus.psp_hung = true;
    let m = one_line(boot(&mut bus, &dir, BootOptions::default()).unwrap_err());
    assert!(m.starts_with("PSP: LOAD_TOC: no answer: fence 0x0, expected 0x1"), "{m}");

    // The wrong card's firmware: a folder with only gfx1201's files for a gfx1100.
    let tmp = tempfile::tempdir().unwrap();
    for f in Card::Gfx1201.files() {
        std::fs::copy(dir.join(&f.name), tmp.path().join(&f.name)).unwrap();
    }
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    let m = one_line(boot(&mut bus, tmp.path(), BootOptions::default()).unwrap_err());
    assert!(m.starts_with("firmware: ") && m.contains("psp_13_0_0_sos.bin: cannot read"), "{m}");
    // A truncated file.
    for f in Card::Gfx1100.files() {
        std::fs::copy(dir.join(&f.name), tmp.path().join(&f.name)).unwrap();
    }
    let mec = tmp.path().join("gc_11_0_0_mec.bin");
    let bytes = std::fs::read(&mec).unwrap();
    std::fs::write(&mec, &bytes[..bytes.len() - 100]).unwrap();
    let m = one_line(boot(&mut bus, tmp.path(), BootOptions::default()).unwrap_err());
    assert!(m.contains("gc_11_0_0_mec.bin: size_bytes:") && m.contains("truncated"), "{m}");
}

#[test]
fn a_dead_link_or_missing_table_stops_before_any_write() {
    let Some(dir) = fw_dir() else { return };
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    bus.regs.insert(crate::regs::RCC_CONFIG_MEMSIZE, u32::MAX);
    let m = one_line(boot(&mut bus, &dir, BootOptions::default()).unwrap_err());
    assert!(m.starts_with("discovery: RCC_CONFIG_MEMSIZE reads 0xffffffff MB: no usable VRAM"), "{m}");
    // VRAM present but no table where it should be.
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    bus.regs.insert(crate::regs::RCC_CONFIG_MEMSIZE, 2048);
    let m = one_line(boot(&mut bus, &dir, BootOptions::default()).unwrap_err());
    assert!(m.contains("binary_signature is 0x00000000"), "{m}");
    assert!(!bus.events.iter().any(|e| matches!(e, Event::Write(..) | Event::Vram(..))), "nothing written");
}

#[test]
fn recover_resets_and_restarts_mec_only() {
    let Some(dir) = fw_dir() else { return };
    let mut bus = ScriptedBus::new(Card::Gfx1100);
    let booted = boot(&mut bus, &dir, BootOptions::default()).unwrap();
    use crate::regs::gc_11_0_0 as m;
    // An active compute queue is dequeued first.
    bus.set(reg!(HwIp::Gc, m::CP_HQD_ACTIVE), 1);
    bus.events.clear();
    recover(&mut bus, &booted).unwrap();
    let dequeue = bus.first_write(reg!(HwIp::Gc, m::CP_HQD_DEQUEUE_REQUEST)).expect("dequeued");
    let reset = bus.first_write(reg!(HwIp::Gc, m::GRBM_SOFT_RESET)).expect("soft reset");
    let start = bus.first_write(reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START)).expect("MEC restarted");
    assert!(dequeue < reset && reset < start);
    assert_eq!(bus.writes_to(reg!(HwIp::Gc, m::CP_MEC_RS64_PRGRM_CNTR_START)), [(booted.ucode_starts.mec >> 2) as u32]);
    assert!(bus.first_write(psp_msg(Card::Gfx1100, PspMsg::Wptr67)).is_none(), "no PSP work");
}
