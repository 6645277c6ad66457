//! `BridgeBus` against the bridge simulator: what each GPU access costs in USB transactions and where it lands.

use pilot_amd::bridge_bus::{BridgeBus, BusMap, Indirect};
use pilot_amd::bus::GpuBus;
use pilot_usb_bridge::pcie::{bring_up, Layout};
use pilot_usb_bridge::{proto, Bridge};
use pilot_usb_sim::{SimConfig, Simulator};

fn up() -> (Simulator, Bridge, BusMap) {
    let sim = Simulator::new(SimConfig { vram_bytes: 64 << 20, ..SimConfig::default() });
    let mut b = Bridge::open(sim.transport(), None).unwrap();
    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    let map = BusMap::from_topology("sim", &topo).unwrap();
    (sim, b, map)
}

#[test]
fn the_map_names_the_three_bars() {
    let (_sim, _b, map) = up();
    assert_eq!(map.vram, (32 << 30, 64 << 20));
    assert_eq!(map.doorbell, ((32 << 30) + (64 << 20), 0x2000));
    assert_eq!(map.mmio, (0x1000_0000, 2 << 20));
    assert_eq!(map.mmio_regs(), 0x8_0000);
}

#[test]
fn register_writes_are_one_transaction_and_reads_two() {
    let (_sim, mut b, map) = up();
    let mut bus = BridgeBus::new(&mut b, map);
    let t0 = bus.bridge().stats().transactions();
    bus.write_reg(0x1234, 0xDEAD_BEEF).unwrap();
    let t1 = bus.bridge().stats().transactions();
    assert_eq!(t1 - t0, 1, "a register write is one posted TLP");
    bus.read_reg(0x1234).unwrap();
    assert_eq!(bus.bridge().stats().transactions() - t1, 2, "a register read is a TLP and its completion");
}

#[test]
fn bus_master_is_the_gpus_command_bit() {
    let (_sim, mut b, map) = up();
    let gpu = map.gpu;
    let mut bus = BridgeBus::new(&mut b, map);
    bus.set_bus_master(false).unwrap();
    assert_eq!(bus.bridge().config_read(gpu, 4, 2).unwrap() & 0x7, 0b011);
    bus.set_bus_master(true).unwrap();
    assert_eq!(bus.bridge().config_read(gpu, 4, 2).unwrap() & 0x7, 0b111);
}

#[test]
fn registers_past_bar5_need_the_indirect_pair() {
    let (_sim, mut b, map) = up();
    let past = map.mmio_regs() as u32 + 5;
    let err = BridgeBus::new(&mut b, map).read_reg(past).unwrap_err().to_string();
    assert!(err.contains(&format!("register 0x{past:x} lies past BAR5")), "{err}");
    let mut bus = BridgeBus::new(&mut b, map);
    bus.set_indirect_pair(0x14, 0x15);
    assert_eq!(bus.map().indirect, Some(Indirect { index: 0x14, data: 0x15 }));
    let t0 = bus.bridge().stats().transactions();
    bus.write_reg(past, 7).unwrap();
    assert_eq!(bus.bridge().stats().transactions() - t0, 2, "index write, data write");
    let t1 = bus.bridge().stats().transactions();
    bus.read_reg(past).unwrap();
    assert_eq!(bus.bridge().stats().transactions() - t1, 3, "index write, data read");
}

#[test]
fn vram_round_trips_at_any_alignment() {
    let (sim, mut b, map) = up();
    let mut bus = BridgeBus::new(&mut b, map);
    bus.write_vram(0x1000, &[0xAA; 64]).unwrap();
    let data: Vec<u8> = (1..=11).collect();
    bus.write_vram(0x1003, &data).unwrap();
    let mut back = [0u8; 16];
    bus.read_vram(0x1000, &mut back).unwrap();
    let mut want = [0xAAu8; 16];
    want[3..14].copy_from_slice(&data);
    assert_eq!(back, want, "unaligned edges keep their neighbours");
    let mut mid = [0u8; 5];
    bus.read_vram(0x1005, &mut mid).unwrap();
    assert_eq!(mid, [3, 4, 5, 6, 7]);
    assert_eq!(sim.vram(0x1000, 16), want);
    let err = bus.write_vram((64 << 20) - 2, &[0; 4]).unwrap_err().to_string();
    assert!(err.contains("outside BAR0"), "{err}");
}

#[test]
fn doorbells_are_one_64_bit_write_into_bar2() {
    let (_sim, mut b, map) = up();
    let mut bus = BridgeBus::new(&mut b, map);
    let s0 = bus.bridge().stats();
    bus.ring_doorbell(3, 0x1_0000_0040).unwrap();
    let s1 = bus.bridge().stats();
    assert_eq!((s1.control_out - s0.control_out, s1.bulk_out - s0.bulk_out), (1, 1));
    assert_eq!(s1.bytes_out - s0.bytes_out, 12 + 8, "the F0 header and one 64-bit value");
    let err = bus.ring_doorbell(0x400, 1).unwrap_err().to_string();
    assert!(err.contains("outside BAR2"), "{err}");
}

#[test]
fn staging_lands_in_bridge_sram_at_its_bus_address() {
    let (_sim, mut b, map) = up();
    let mut bus = BridgeBus::new(&mut b, map);
    assert_eq!(bus.write_staging(&[1, 2, 3]).unwrap(), proto::bus::SRAM);
    let err = bus.write_staging(&vec![0; proto::bus::SRAM_SIZE + 1]).unwrap_err().to_string();
    assert!(err.contains("do not fit the 512 KB SRAM"), "{err}");
    let t = bus.bridge().now();
    bus.sleep(std::time::Duration::from_millis(5));
    assert_eq!(bus.bridge().now() - t, std::time::Duration::from_millis(5));
}
