//! pilot's bring-up (`amd::boot`) against the simulated GPU behind the simulated bridge, through `BridgeBus`:
//! cold boot of both cards, fini, a partial boot, a boot after a crash (no fini: mode-1 reset), and firmware
//! folders that are truncated or for the other card (one-line errors).
//!
//! Firmware: `PILOT_AMD_FIRMWARE`, else `target/amd-firmware/...` (`scripts/setup.sh`); skipped when absent, a
//! failure under `PILOT_REQUIRE=1`.

use pilot_amd::boot::{boot, fini, BootError, BootKind, BootOptions, Booted, TINYGRAD_VERSION, VERSION};
use pilot_amd::bridge_bus::{BridgeBus, BusMap, Indirect};
use pilot_amd::bus::GpuBus;
use pilot_amd::regs::HwIp;
use pilot_usb_bridge::error::Result;
use pilot_usb_bridge::pcie::{bring_up, Layout};
use pilot_usb_bridge::proto::Bdf;
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::{Board, SimConfig, Simulator};
use std::path::Path;
use std::time::Duration;

const VRAM: u64 = 512 << 20;

use pilot_test_support::amd_firmware_dir as firmware_dir;

/// The bridge brought up, and `BridgeBus` over it with the two things the bus seam asks beyond BridgeBus
/// today: the RSMU pair (set when boot names it) and the GPU's bus-master bit (PCI COMMAND of 4:0.0).
struct SimBus {
    b: Bridge,
    map: BusMap,
    master_changes: Vec<bool>,
}

impl SimBus {
    fn open(sim: &Simulator) -> SimBus {
        let mut b = Bridge::open(sim.transport(), None).unwrap();
        let topo = bring_up(&mut b, &Layout::default()).unwrap();
        let map = BusMap::from_topology("sim", &topo).unwrap();
        SimBus { b, map, master_changes: Vec::new() }
    }

    fn bus(&mut self) -> BridgeBus<'_> {
        BridgeBus::new(&mut self.b, self.map)
    }
}

impl GpuBus for SimBus {
    fn read_reg(&mut self, reg: u32) -> Result<u32> {
        self.bus().read_reg(reg)
    }
    fn write_reg(&mut self, reg: u32, value: u32) -> Result<()> {
        self.bus().write_reg(reg, value)
    }
    fn read_vram(&mut self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.bus().read_vram(addr, buf)
    }
    fn write_vram(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        self.bus().write_vram(addr, data)
    }
    fn ring_doorbell(&mut self, index: u32, value: u64) -> Result<()> {
        self.bus().ring_doorbell(index, value)
    }
    fn write_staging(&mut self, data: &[u8]) -> Result<u64> {
        self.bus().write_staging(data)
    }
    fn sleep(&mut self, d: Duration) {
        self.b.sleep(d)
    }
    fn set_indirect_pair(&mut self, index: u32, data: u32) {
        self.map.indirect = Some(Indirect { index, data });
    }
    fn set_bus_master(&mut self, enable: bool) -> Result<()> {
        let gpu = Bdf { bus: 4, dev: 0, func: 0 };
        let cmd = self.b.config_read(gpu, 0x04, 2)?;
        let cmd = if enable { cmd | 4 } else { cmd & !4 };
        self.b.config_write(gpu, 0x04, 2, cmd)?;
        self.master_changes.push(enable);
        Ok(())
    }
}

fn sim(board: Board, dir: &Path) -> Simulator {
    Simulator::new(SimConfig { vram_bytes: VRAM, board, firmware_dir: Some(dir.to_path_buf()), ..Default::default() })
}

fn boot_ok(bus: &mut SimBus, sim: &Simulator, dir: &Path) -> Booted {
    boot(bus, dir, BootOptions::default()).unwrap_or_else(|e| panic!("{e}; GPU faults: {:?}", sim.gpu_faults()))
}

/// The bus addresses of SCRATCH_REG6 and SCRATCH_REG7 (GC segment 1, Linux `gc_11_0_0_offset.h` and
/// `gc_12_0_0_offset.h`: 0x2046 and 0x2047).
fn scratch(booted: &Booted) -> (u32, u32) {
    let gc1 = booted.discovery.ips[&HwIp::Gc].bases[1] as u32;
    (gc1 + 0x2046, gc1 + 0x2047)
}

fn cold_boot_then_fini(board: Board) {
    let Some(dir) = firmware_dir() else { return };
    let sim = sim(board, &dir);
    let mut bus = SimBus::open(&sim);
    let booted = boot_ok(&mut bus, &sim, &dir);
    assert_eq!(booted.kind, BootKind::Cold);
    assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
    assert_eq!(booted.layout.vram_size, VRAM);
    let gc = booted.discovery.gc;
    assert!(gc.num_se > 0 && gc.cu_count() > 0 && gc.lds_size > 0, "{gc:?}");
    assert!(bus.master_changes.is_empty(), "a cold chip needs no reset");
    // The GPU holds the driver's version and the "running" flag; fini clears the flag.
    let (r6, r7) = scratch(&booted);
    assert_eq!((bus.read_reg(r6).unwrap(), bus.read_reg(r7).unwrap()), (1, VERSION));
    fini(&mut bus, &booted, false).unwrap();
    assert_eq!(bus.read_reg(r6).unwrap(), 0);
    assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
}

/// Also guards issue 25 item A (HDP): the PSP reads its command and ring frame from VRAM, so the driver flushes HDP
/// before moving the KM ring's write pointer; without it the simulated PSP refuses the frame (`pilot_usb_sim::gpu::hdp`).
#[test]
fn cold_boot_gfx1100() {
    cold_boot_then_fini(Board::Navi31);
}

#[test]
fn cold_boot_gfx1201() {
    cold_boot_then_fini(Board::Navi48);
}

#[test]
fn partial_boot_after_a_clean_fini() {
    let Some(dir) = firmware_dir() else { return };
    let sim = sim(Board::Navi31, &dir);
    let mut bus = SimBus::open(&sim);
    let first = boot_ok(&mut bus, &sim, &dir);
    fini(&mut bus, &first, false).unwrap();
    drop(bus);
    // A new session on the same (still powered) GPU.
    let mut bus = SimBus::open(&sim);
    let again = boot_ok(&mut bus, &sim, &dir);
    assert_eq!(again.kind, BootKind::Partial);
    // Boot memory is laid out the same on every boot, so the partial boot finds the full boot's rings and MQDs.
    assert_eq!(again.boot_memory.mqd, first.boot_memory.mqd);
    assert_eq!(again.boot_memory.psp.ring, first.boot_memory.psp.ring);
    assert_eq!(again.boot_memory.ih, first.boot_memory.ih);
    assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
}

/// Item 5 of #25: a chip another driver left cleanly (tinygrad's marker in SCRATCH_REG7, SCRATCH_REG6 = 0) is not
/// partial-booted: its boot memory is laid out by that driver, not this one.
#[test]
fn a_chip_tinygrad_left_gets_a_full_boot() {
    let Some(dir) = firmware_dir() else { return };
    let sim = sim(Board::Navi31, &dir);
    let mut bus = SimBus::open(&sim);
    let first = boot_ok(&mut bus, &sim, &dir);
    fini(&mut bus, &first, false).unwrap();
    let (_, r7) = scratch(&first);
    bus.write_reg(r7, TINYGRAD_VERSION).unwrap();
    drop(bus);
    let mut bus = SimBus::open(&sim);
    let again = boot_ok(&mut bus, &sim, &dir);
    assert_eq!(again.kind, BootKind::AfterReset, "a chip left by tinygrad was trusted");
    assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
}

#[test]
fn boot_after_a_crash_takes_a_mode1_reset() {
    let Some(dir) = firmware_dir() else { return };
    for board in [Board::Navi31, Board::Navi48] {
        let sim = sim(board, &dir);
        let mut bus = SimBus::open(&sim);
        let _crashed = boot_ok(&mut bus, &sim, &dir);
        drop(bus); // no fini: SCRATCH_REG6 stays 1
        let mut bus = SimBus::open(&sim);
        let booted = boot_ok(&mut bus, &sim, &dir);
        assert_eq!(booted.kind, BootKind::AfterReset, "{board:?}");
        assert_eq!(bus.master_changes, [false, true]);
        assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
    }
}

fn one_line(e: BootError) -> String {
    let m = e.to_string();
    assert!(!m.contains('\n'), "{m}");
    m
}

#[test]
fn wrong_card_and_truncated_firmware_are_one_line_errors() {
    let Some(dir) = firmware_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // gfx1201's files under gfx1100's names: the headers say IP 12/14, the names need 11/13.
    for (ours, theirs) in
        pilot_amd::firmware::Card::Gfx1100.files().iter().zip(pilot_amd::firmware::Card::Gfx1201.files().iter())
    {
        std::fs::copy(dir.join(&theirs.name), tmp.path().join(&ours.name)).unwrap();
    }
    let sim = sim(Board::Navi31, &dir);
    let mut bus = SimBus::open(&sim);
    let m = one_line(boot(&mut bus, tmp.path(), BootOptions::default()).unwrap_err());
    assert!(m.starts_with("firmware: psp_13_0_0_sos.bin: ip_version: the header is for IP 14.0"), "{m}");

    for f in pilot_amd::firmware::Card::Gfx1100.files() {
        std::fs::copy(dir.join(&f.name), tmp.path().join(&f.name)).unwrap();
    }
    let rlc = tmp.path().join("gc_11_0_0_rlc.bin");
    let bytes = std::fs::read(&rlc).unwrap();
    std::fs::write(&rlc, &bytes[..bytes.len() / 2]).unwrap();
    let m = one_line(boot(&mut bus, tmp.path(), BootOptions::default()).unwrap_err());
    assert!(m.starts_with("firmware: gc_11_0_0_rlc.bin: size_bytes:") && m.contains("truncated"), "{m}");
    // Nothing was sent to the GPU's firmware before the files were checked.
    assert!(sim.gpu_faults().is_empty(), "{:?}", sim.gpu_faults());
}
