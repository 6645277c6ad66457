//! The bridge driver, PCIe bring-up and big copies end to end against the simulator.

use pilot_usb_bridge::copy::Copier;
use pilot_usb_bridge::pcie::{bring_up, Layout, Topology};
use pilot_usb_bridge::proto::{self, Bdf};
use pilot_usb_bridge::{Bridge, Error, TransferError};
use pilot_usb_sim::{Fault, SimConfig, Simulator};
use std::time::{Duration, Instant};

const MB: u64 = 1 << 20;

fn sim(vram: u64) -> Simulator {
    Simulator::new(SimConfig { vram_bytes: vram, ..SimConfig::default() })
}

fn open(sim: &Simulator) -> Bridge {
    Bridge::open(sim.transport(), None).unwrap()
}

fn up(sim: &Simulator) -> (Bridge, Topology) {
    let mut b = open(sim);
    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    (b, topo)
}

/// Deterministic bytes (xorshift64*).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

#[test]
fn open_powers_the_link_when_it_is_down() {
    let s = sim(16 * MB);
    assert!(!s.link_up());
    let mut b = open(&s);
    assert!(s.link_up());
    assert_eq!(b.ltssm().unwrap(), 0x78);
    assert_eq!(b.product(), "custom sim");
}

#[test]
fn config_walk_and_bar_assignment() {
    let s = sim(512 * MB);
    let mut b = open(&s);
    // Before bring-up nothing past bus 0 is reachable and BAR space decodes nowhere.
    let err = b.config_read(Bdf { bus: 4, dev: 0, func: 0 }, 0, 4).unwrap_err();
    assert!(matches!(err, Error::Completion { status: proto::CplStatus::UnsupportedRequest, .. }), "{err}");
    assert_eq!(b.config_read(Bdf { bus: 0, dev: 0, func: 0 }, 0, 4).unwrap(), 0x2461_1B21);

    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    let ids: Vec<_> = topo.bridges.iter().map(|f| (f.bdf.bus, f.vendor, f.device, f.class)).collect();
    assert_eq!(
        ids,
        [
            (0, 0x1B21, 0x2461, 0x060400),
            (1, 0x1B21, 0x2461, 0x060400),
            (2, 0x1002, 0x1478, 0x060400),
            (3, 0x1002, 0x1479, 0x060400)
        ]
    );
    assert_eq!((topo.gpu.vendor, topo.gpu.device, topo.gpu.class), (0x1002, 0x744C, 0x030000));
    assert_eq!(topo.rebar, Some((256 * MB, 512 * MB)));
    let bars: Vec<_> = topo.bars.iter().map(|b| (b.index, b.addr, b.size, b.is64, b.prefetchable)).collect();
    assert_eq!(
        bars,
        [
            (0, 32 << 30, 512 * MB, true, true),
            (2, (32 << 30) + 512 * MB, 0x2000, true, true),
            (5, 0x1000_0000, 2 * MB, false, false)
        ]
    );
    // The registers hold what was assigned; bridges forward, decoding is on.
    let gpu = topo.gpu.bdf;
    assert_eq!(b.config_read(gpu, 0x10, 4).unwrap(), 0x0000_000C);
    assert_eq!(b.config_read(gpu, 0x14, 4).unwrap(), 8);
    assert_eq!(b.config_read(gpu, 0x24, 4).unwrap(), 0x1000_0000);
    assert_eq!(b.config_read(gpu, 0x04, 2).unwrap() & 7, 7);
    assert_eq!(b.config_read(Bdf { bus: 2, dev: 0, func: 0 }, 0x18, 4).unwrap(), 0x04_03_02);
    // Sub-dword config reads pick their bytes.
    assert_eq!(b.config_read(gpu, 0x02, 2).unwrap(), 0x744C);
    assert_eq!(b.config_read(gpu, 0x0B, 1).unwrap(), 0x03);
    let bar0 = topo.bar(0).unwrap().addr;
    b.write32(bar0 + 0x1000, 0xDEAD_BEEF).unwrap();
    assert_eq!(s.vram(0x1000, 4), 0xDEAD_BEEFu32.to_le_bytes());
    // Below the prefetchable window: no bridge forwards it.
    let err = b.read32(bar0 - 4).unwrap_err();
    assert_eq!(err.transfer_kind(), Some(&TransferError::Stall), "{err}");
}

#[test]
fn missing_functions_are_unsupported_requests() {
    let (mut b, _) = up(&sim(16 * MB));
    for bdf in [Bdf { bus: 4, dev: 0, func: 1 }, Bdf { bus: 4, dev: 1, func: 0 }, Bdf { bus: 5, dev: 0, func: 0 }] {
        let err = b.config_read(bdf, 0, 4).unwrap_err();
        assert!(err.to_string().contains("unsupported request (UR)"), "{err}");
    }
}

#[test]
fn mmio_every_width_and_alignment() {
    let s = sim(16 * MB);
    let (mut b, topo) = up(&s);
    let bar0 = topo.bar(0).unwrap().addr;
    let bar5 = topo.bar(5).unwrap().addr;
    let mut model = vec![0u8; 0x3_0000];
    // Streaming: 1, 2, 3 dwords, a page, and more than one stream.
    for (off, len) in [(0usize, 4usize), (8, 8), (20, 12), (0x100, 0x1000), (0x2000, 0x1_0000 + 12)] {
        let data = bytes(len, off as u64 + 1);
        b.mmio_write(bar0 + off as u64, &data).unwrap();
        model[off..off + len].copy_from_slice(&data);
        let mut back = vec![0u8; len];
        b.mmio_read(bar0 + off as u64, &mut back).unwrap();
        assert_eq!(back, data, "stream at {off:#x}+{len}");
    }
    // 64-bit accessors (doorbell-style).
    b.write64(bar0 + 0x2_0000, 0x0123_4567_89AB_CDEF).unwrap();
    model[0x2_0000..0x2_0008].copy_from_slice(&0x0123_4567_89AB_CDEFu64.to_le_bytes());
    assert_eq!(b.read64(bar0 + 0x2_0000).unwrap(), 0x0123_4567_89AB_CDEF);
    // Single TLPs: every size at every offset it fits in a dword.
    let mut v = 0x11u32;
    for size in [1u8, 2, 4] {
        for lane in 0..=(4 - size) {
            let addr = 0x2_1000 + 16 * u64::from(size) + u64::from(lane);
            let value = v & (u32::MAX >> (32 - 8 * u32::from(size)));
            b.mem_write(bar0 + addr, size, value).unwrap();
            model[addr as usize..addr as usize + usize::from(size)]
                .copy_from_slice(&value.to_le_bytes()[..usize::from(size)]);
            assert_eq!(b.mem_read(bar0 + addr, size).unwrap(), value, "size {size} lane {lane}");
            v = v.wrapping_mul(0x0101_0101).wrapping_add(0x1357_9BDF);
        }
    }
    let mut all = vec![0u8; model.len()];
    b.mmio_read(bar0, &mut all).unwrap();
    assert_eq!(all, model);
    assert_eq!(s.vram(0, model.len()), model);
    // The register BAR is memory too.
    b.write32(bar5 + 0x40, 0x1234_5678).unwrap();
    assert_eq!(b.mem_read(bar5 + 0x42, 2).unwrap(), 0x1234);
    // What the driver refuses before anything reaches the wire.
    let before = b.stats();
    for err in [
        b.mmio_write(bar0 + 2, &[0; 4]).unwrap_err(),
        b.mmio_read(bar0, &mut [0; 6]).unwrap_err(),
        b.mem_write(bar0 + 3, 2, 0).unwrap_err(),
        b.mem_write(bar0, 1, 0x100).unwrap_err(),
        b.config_read(Bdf { bus: 4, dev: 32, func: 0 }, 0, 4).unwrap_err(),
    ] {
        assert!(matches!(err, Error::Invalid { .. }), "{err}");
    }
    assert_eq!(b.stats(), before);
}

#[test]
fn xdata_reads_chunk_and_the_firmware_clamps_e4() {
    let s = sim(16 * MB);
    let mut b = open(&s);
    let data = bytes(600, 7);
    b.xdata_write(0xA000, &data).unwrap();
    let mut back = vec![0u8; 600];
    let before = b.stats().control_in;
    b.xdata_read(0xA000, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(b.stats().control_in - before, 3);
    // The firmware answers at most 512 bytes per E4.
    let mut t = s.transport();
    let mut big = vec![0u8; 1024];
    let n = t.control_in(proto::xdata_read_setup(0xA000), &mut big, proto::timeout::CONTROL).unwrap();
    assert_eq!(n, 512);
    assert_eq!(big[..512], data[..512]);
    // Past the end of XDATA.
    assert!(b.xdata_read(0xFFFF, &mut [0; 2]).is_err());
}

#[test]
fn copy_64_mb_in_and_back_out() {
    let s = sim(128 * MB);
    let (mut b, topo) = up(&s);
    let mut dma = s.dma();
    let mut c = Copier::new();
    let data = bytes(64_000_000, 42);
    c.copy_in(&mut b, &mut dma, 0x100, &data).unwrap();
    assert!(s.vram(0x100, data.len()) == data, "VRAM differs after copy-in");
    let mut back = vec![0u8; data.len()];
    c.copy_out(&mut b, &mut dma, 0x100, &mut back).unwrap();
    assert!(back == data, "copy-out differs");
    // The CPU's BAR view sees the same bytes.
    let bar0 = topo.bar(0).unwrap().addr;
    assert_eq!(b.read32(bar0 + 0x100 + 0x3_FFFC).unwrap().to_le_bytes(), data[0x3_FFFC..0x4_0000]);
    // A second copy-in after a copy-out re-zeroes the windows and goes on with the sequence.
    let small = bytes(1000, 3);
    c.copy_in(&mut b, &mut dma, 0x10, &small).unwrap();
    assert_eq!(s.vram(0x10, 1000), small);
}

#[test]
fn copy_in_transactions_per_chunk() {
    let s = sim(64 * MB);
    let (mut b, _) = up(&s);
    let mut dma = s.dma();
    let mut c = Copier::new();
    c.copy_in(&mut b, &mut dma, 0, &bytes(1000, 1)).unwrap();
    let before = b.stats();
    let n = 40 * proto::copy::CHUNK;
    c.copy_in(&mut b, &mut dma, 0, &bytes(n, 2)).unwrap();
    let st = b.stats();
    // Per chunk: an F2 arm, a bulk OUT and at most one fence read (the window's previous transfer has been
    // reaped, so the GPU only has its copy left); then the final drain spins while the last two chunks land.
    assert_eq!(st.bulk_out - before.bulk_out, 40);
    assert_eq!(st.control_out - before.control_out, 40);
    let fence_reads = st.control_in - before.control_in;
    assert!((38..=46).contains(&fence_reads), "{fence_reads} fence reads");
}

#[test]
fn stale_sentinel_slot_pads_the_last_chunk() {
    let s = sim(16 * MB);
    let (mut b, _) = up(&s);
    let mut dma = s.dma();
    let mut c = Copier::new();
    // Chunk 0 of the second copy is short and goes to window 0, where the first copy's chunk 0 left a payload
    // dword equal to sentinel(2) at the short chunk's sentinel slot.
    let mut first = bytes(2 * proto::copy::CHUNK, 5);
    first[508..512].copy_from_slice(&proto::sentinel(2).to_le_bytes());
    c.copy_in(&mut b, &mut dma, 0, &first).unwrap();
    let second = bytes(100, 6);
    c.copy_in(&mut b, &mut dma, 0x10_0000, &second).unwrap();
    assert_eq!(s.vram(0x10_0000, 100), second);
}

/// Runs `f` after injecting `fault`; checks the error, its modelled and wall time, and that a new open works.
fn fault_case(
    fault: Fault,
    after: u64,
    limit: Duration,
    f: impl Fn(&mut Bridge, &Simulator) -> Result<(), Error>,
) -> String {
    let s = sim(16 * MB);
    let (mut b, _) = up(&s);
    s.inject(fault, after);
    let (t0, wall) = (s.now(), Instant::now());
    let err = f(&mut b, &s).expect_err("the fault must surface");
    assert!(s.now() - t0 <= limit, "{fault:?}: took {:?} modelled", s.now() - t0);
    assert!(wall.elapsed() < Duration::from_secs(5), "{fault:?}: took {:?} wall", wall.elapsed());
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    drop(b);
    let (mut b, topo) = up(&s);
    let bar0 = topo.bar(0).unwrap().addr;
    b.write32(bar0, 7).unwrap();
    assert_eq!(b.read32(bar0).unwrap(), 7, "after {fault:?}");
    msg
}

fn read_reg(b: &mut Bridge, _: &Simulator) -> Result<(), Error> {
    b.read32((32 << 30) + 0x40).map(drop)
}

#[test]
fn unplug_is_one_line_and_the_next_open_works() {
    let msg = fault_case(Fault::Unplug, 1, Duration::from_millis(1), read_reg);
    assert_eq!(msg, "sim: MMIO read (bulk IN): device unplugged");
}

#[test]
fn stalled_endpoint() {
    let msg = fault_case(Fault::Stall, 0, Duration::from_millis(1), read_reg);
    assert_eq!(msg, "sim: MMIO read (F0 stream): endpoint stalled");
    let msg = fault_case(Fault::Stall, 1, Duration::from_millis(1), read_reg);
    assert_eq!(msg, "sim: MMIO read (bulk IN): endpoint stalled");
}

#[test]
fn short_transfer() {
    let msg = fault_case(Fault::ShortRead, 0, Duration::from_millis(1), read_reg);
    assert_eq!(msg, "sim: MMIO read (bulk IN): short transfer: 2 of 4 bytes");
    let msg = fault_case(Fault::ShortRead, 0, Duration::from_millis(1), |b, _| b.ltssm().map(drop));
    assert_eq!(msg, "sim: XDATA read (E4): short transfer: 0 of 1 bytes");
}

#[test]
fn transfer_timeout() {
    let msg = fault_case(Fault::Timeout, 0, Duration::from_millis(1001), |b, _| b.ltssm().map(drop));
    assert_eq!(msg, "sim: XDATA read (E4): timed out after 1000 ms");
    let msg = fault_case(Fault::Timeout, 1, Duration::from_millis(30_001), read_reg);
    assert_eq!(msg, "sim: MMIO read (bulk IN): timed out after 30000 ms");
}

#[test]
fn firmware_never_completes() {
    let cfg_read = |b: &mut Bridge, _: &Simulator| b.config_read(Bdf { bus: 4, dev: 0, func: 0 }, 0, 4).map(drop);
    let msg = fault_case(Fault::FirmwareNeverCompletes, 0, Duration::from_secs(10), cfg_read);
    assert_eq!(msg, "sim: TLP 0x05 at 0x4000000: firmware reported timeout (no completion) on each of 10 tries");
    let msg = fault_case(Fault::FirmwareError, 0, Duration::from_millis(100), cfg_read);
    assert_eq!(msg, "sim: TLP 0x05 at 0x4000000: firmware reported error on each of 10 tries");
}

#[test]
fn dropped_copy_chunk_is_a_hung_copy() {
    // Setup is 12 transactions (8 E5 fence bytes, two F2 + bulk window zeroings); chunk 0's F2 is the 13th.
    // The first chunk's bulk OUT is lost: the GPU never sees its sentinel and the fence never moves.
    let msg = fault_case(Fault::Drop, 13, Duration::from_secs(11), |b, s| {
        let mut c = Copier::new();
        c.copy_in(b, &mut s.dma(), 0, &bytes(3 * proto::copy::CHUNK, 9))
    });
    assert!(msg.starts_with("sim: copy-in: the GPU did not drain chunk 0 within 100"), "{msg}");
}

#[test]
fn armed_read_without_the_gpu_trigger_times_out() {
    let msg = fault_case(Fault::Drop, 1000, Duration::from_millis(10_001), |b, _| {
        b.sram_read_arm(4096)?;
        b.sram_read_finish(&mut [0u8; 4096])
    });
    assert_eq!(msg, "sim: SRAM read (bulk IN): timed out after 10000 ms");
}

#[test]
fn sram_round_trip_through_the_trigger() {
    let s = sim(16 * MB);
    let (mut b, _) = up(&s);
    let data = bytes(3000, 11);
    b.sram_write(0, &data).unwrap();
    // Device-side copy from VRAM with the trigger: put the data in VRAM first through BAR0.
    let mut dma = s.dma();
    let mut c = Copier::new();
    c.copy_in(&mut b, &mut dma, 0x5000, &data).unwrap();
    let mut back = vec![0u8; 3000];
    c.copy_out(&mut b, &mut dma, 0x5000, &mut back).unwrap();
    assert_eq!(back, data);
    // Misuse the driver refuses.
    assert!(matches!(b.sram_write(31, &[0; 0x4001]).unwrap_err(), Error::Invalid { .. }));
}

#[test]
fn power_off_loses_the_pcie_side_and_power_on_recovers() {
    let s = sim(16 * MB);
    let (mut b, _) = up(&s);
    b.set_pcie_power(false).unwrap();
    assert_ne!(b.ltssm().unwrap(), 0x78);
    let err = b.config_read(Bdf { bus: 0, dev: 0, func: 0 }, 0, 4).unwrap_err();
    assert!(err.to_string().contains("timeout (no completion)"), "{err}");
    b.ensure_link().unwrap();
    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    assert_eq!(topo.gpu.device, 0x744C);
}

#[test]
fn firmware_refuses_what_it_does_not_know() {
    let s = sim(16 * MB);
    let (_b, topo) = up(&s);
    let bar0 = topo.bar(0).unwrap().addr;
    let mut t = s.transport();
    let c = proto::timeout::CONTROL;
    let stalled = |r: Result<(), TransferError>| assert_eq!(r, Err(TransferError::Stall));
    let out = |v: u16, i: u16| proto::Setup::vendor_out(proto::request::TLP, v, i);
    // A stream write announced with the read fmt byte, partial byte enables, a misaligned address, mode 3.
    stalled(t.control_out(out(0x0F20, 1), &proto::tlp_payload(bar0, 1), c));
    stalled(t.control_out(out(0x0760, 1), &proto::tlp_payload(bar0, 1), c));
    stalled(t.control_out(out(0x0F60, 1), &proto::tlp_payload(bar0 + 2, 1), c));
    stalled(t.control_out(out(0x0F60, 3), &proto::tlp_payload(bar0, 1), c));
    // An unknown fmt byte on a single TLP; an F0 OUT with a short data stage.
    stalled(t.control_out(out(0x0F21, 0), &proto::tlp_payload(bar0, 0), c));
    stalled(t.control_out(out(0x0F60, 0), &[0; 8], c));
    // A completion read with no request behind it.
    assert_eq!(t.control_in(proto::completion_setup(), &mut [0; 8], c), Err(TransferError::Stall));
    // XDATA bank 1 (the PHY) is not modelled; E5 with a data stage.
    let e4_bank1 = proto::Setup::vendor_in(proto::request::XDATA_READ, 0xB450, 0x0100);
    assert_eq!(t.control_in(e4_bank1, &mut [0; 1], c), Err(TransferError::Stall));
    stalled(t.control_out(proto::xdata_write_setup(0xA000, 1), &[1], c));
    // F2 whose slot count disagrees with its length, or that runs past the SRAM.
    stalled(t.control_out(proto::Setup::vendor_out(proto::request::SRAM_DMA, 64, 1 << 8), &[], c));
    stalled(t.control_out(proto::Setup::vendor_out(proto::request::SRAM_DMA, 64, 31 | (2 << 8)), &[], c));
    // A bulk OUT whose length differs from the armed one, and one with nothing armed.
    t.control_out(proto::sram_setup(0, 1024, false).unwrap(), &[], c).unwrap();
    assert_eq!(t.bulk_out(proto::EP_OUT, &[0; 512], c), Err(TransferError::Stall));
    // A second arm while the first still waits for its data.
    assert_eq!(t.control_out(proto::sram_setup(0, 512, false).unwrap(), &[], c), Err(TransferError::Stall));
    t.bulk_out(proto::EP_OUT, &[0; 1024], c).unwrap();
    assert_eq!(t.bulk_out(proto::EP_OUT, &[0; 512], c), Err(TransferError::Stall));
    // A bulk IN with nothing armed waits out its timeout.
    assert_eq!(t.bulk_in(proto::EP_IN, &mut [0; 4], c), Err(TransferError::Timeout(c)));
}

#[test]
fn timing_model_follows_the_firmware_figures() {
    let s = sim(16 * MB);
    let (mut b, topo) = up(&s);
    let bar0 = topo.bar(0).unwrap().addr;
    let elapsed = |s: &Simulator, t0: Duration| (s.now() - t0).as_secs_f64();
    // F0 streaming: ~1.8 MB/s read, ~3.6 MB/s write.
    let t0 = s.now();
    b.mmio_read(bar0, &mut vec![0u8; 0x1_0000]).unwrap();
    let read = elapsed(&s, t0);
    assert!((0.036..0.037).contains(&read), "64 KB stream read took {read} s");
    let t0 = s.now();
    b.mmio_write(bar0, &vec![0u8; 0x1_0000]).unwrap();
    let write = elapsed(&s, t0);
    assert!((0.018..0.019).contains(&write), "64 KB stream write took {write} s");
    // 0xF2: ~700 MB/s for a 256 KB window, plus one control and one bulk overhead.
    let t0 = s.now();
    b.sram_write(0, &vec![0u8; 0x4_0000]).unwrap();
    let sram = elapsed(&s, t0);
    assert!((0.000_55..0.000_56).contains(&sram), "256 KB SRAM write took {sram} s");
}

#[test]
fn a_failed_copy_leaves_the_copier_usable() {
    let s = sim(16 * MB);
    let (mut b, _) = up(&s);
    let mut dma = s.dma();
    let mut c = Copier::new();
    c.copy_in(&mut b, &mut dma, 0, &bytes(1000, 1)).unwrap();
    // Chunk 1's bulk OUT of the next copy is lost (chunk 0's F2 and bulk, chunk 1's F2, then its bulk; the
    // fence already covers both windows, so no fence read comes between).
    s.inject(Fault::Drop, 3);
    let err = c.copy_in(&mut b, &mut dma, 0, &bytes(3 * proto::copy::CHUNK, 2)).unwrap_err();
    assert!(matches!(err, Error::HungCopy { .. }), "{err}");
    let data = bytes(2 * proto::copy::CHUNK + 77, 3);
    c.copy_in(&mut b, &mut dma, 0x1000, &data).unwrap();
    assert!(s.vram(0x1000, data.len()) == data);
}
