//! What a real bridge and link do that the simulator models so that a driver which ignores it fails (issue 25):
//! each test names the item it guards.

use pilot_usb_bridge::copy::Copier;
use pilot_usb_bridge::pcie::{bring_up, cfg, Layout, Topology};
use pilot_usb_bridge::proto::{self, copy};
use pilot_usb_bridge::{Bridge, TransferError};
use pilot_usb_sim::{SimConfig, Simulator};

const MB: u64 = 1 << 20;
/// Where the model puts the GPU's PCI Express capability (the driver walks the list to find it).
const PCIE_CAP: u16 = 0x64;

fn sim(seed: u64) -> Simulator {
    Simulator::new(SimConfig { vram_bytes: 16 * MB, seed, ..SimConfig::default() })
}

fn up(s: &Simulator) -> (Bridge, Topology) {
    let mut b = Bridge::open(s.transport(), None).unwrap();
    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    (b, topo)
}

/// 512 reads of one VRAM dword holding 0x12345678; the indices of those that came back as 0xffffffff.
fn flaky_reads(b: &mut Bridge, bar0: u64) -> Vec<usize> {
    b.write32(bar0 + 0x40, 0x1234_5678).unwrap();
    (0..512)
        .filter(|i| match b.read32(bar0 + 0x40).unwrap() {
            0x1234_5678 => false,
            0xFFFF_FFFF => true,
            v => panic!("read {i} returned {v:#x}"),
        })
        .collect()
}

#[test]
fn item1_aspm_bring_up_turns_l1_off_so_reads_are_stable() {
    let s = sim(1);
    assert!(s.aspm_l1(), "the link comes out of power-on with ASPM L1 enabled");
    let (mut b, topo) = up(&s);
    assert_eq!(topo.link_control, Some(0x0A), "Link Control as found: L1 and RCB 128");
    assert!(!s.aspm_l1());
    let lnkctl = b.config_read(topo.gpu.bdf, PCIE_CAP + cfg::PCIE_LINK_CONTROL, 2).unwrap();
    assert_eq!(lnkctl, 0x08, "only the ASPM bits are cleared");
    assert_eq!(flaky_reads(&mut b, topo.bar(0).unwrap().addr), Vec::<usize>::new());
}

#[test]
fn item1_aspm_l1_left_on_corrupts_reads_the_same_way_for_one_seed() {
    let run = |seed| {
        let s = sim(seed);
        let (mut b, topo) = up(&s);
        // What a driver that never clears ASPM leaves: L1 enabled on the endpoint.
        b.config_write(topo.gpu.bdf, PCIE_CAP + cfg::PCIE_LINK_CONTROL, 2, 0x0A).unwrap();
        assert!(s.aspm_l1());
        flaky_reads(&mut b, topo.bar(0).unwrap().addr)
    };
    let a = run(7);
    // One read in eight, give or take what 512 draws give.
    assert!((32..=96).contains(&a.len()), "{} of 512 reads were 0xffffffff", a.len());
    assert_eq!(a, run(7), "one seed, one sequence");
    assert_ne!(a, run(8));
}

#[test]
fn item2_copy_in_ordering_an_arm_sent_before_the_previous_chunks_data_started_is_refused() {
    let s = sim(1);
    let (mut b, _) = up(&s);
    // Chunk 0's bulk OUT is queued; its data starts no earlier than its reap in the model.
    let t = b.sram_write_async(0, vec![0u8; copy::WINDOW]).unwrap();
    let err = b.sram_write_async(proto::window_slot(1), vec![0u8; copy::WINDOW]).unwrap_err();
    assert_eq!(err.transfer_kind(), Some(&TransferError::Stall), "{err}");
    let _ = b.reap(t);
    drop(b);
    // The copier reaps each chunk before arming the next: a many-chunk copy arrives whole.
    let (mut b, _) = up(&s);
    let mut dma = s.dma();
    let data: Vec<u8> = (0..7 * copy::CHUNK + 300).map(|i| (i * 31 % 251) as u8).collect();
    Copier::new().copy_in(&mut b, &mut dma, 0x1000, &data).unwrap();
    assert!(s.vram(0x1000, data.len()) == data);
}

#[test]
fn item4_a_streamed_read_while_an_sram_read_is_armed_is_refused() {
    let s = sim(1);
    let (mut b, topo) = up(&s);
    let bar0 = topo.bar(0).unwrap().addr;
    b.sram_read_arm(4096).unwrap();
    let err = b.read32(bar0).unwrap_err();
    assert_eq!(err.transfer_kind(), Some(&TransferError::Stall), "{err}");
    // Without an armed read the same read is served.
    b.write32(bar0, 5).unwrap();
    assert_eq!(b.read32(bar0).unwrap(), 5);
}

/// Item 3 (register access mode): a BAR5 register written or read by one single TLP (mode 0) and by a one-dword stream
/// (modes 1/2, as tinygrad does) is the same TLP to the GPU, so either path sees the other's value; mode 0 costs one
/// USB transaction per write where the stream costs two, both cost two per read, and only mode 0 reports a failed
/// completion.
#[test]
fn item3_a_register_is_the_same_tlp_by_single_tlp_or_stream_and_mode_0_writes_cost_one_transaction() {
    let s = sim(1);
    let (mut b, topo) = up(&s);
    let bar5 = topo.bar(5).unwrap().addr;
    // A register without behaviour in the model (plain storage), at dword 0x100.
    let reg = bar5 + 0x400;
    let count = |b: &Bridge| b.stats().transactions();

    let t = count(&b);
    b.mem_write(reg, 4, 0xA5A5_0001).unwrap();
    assert_eq!(count(&b) - t, 1, "a mode-0 write is one control OUT (posted: no completion read)");
    let t = count(&b);
    assert_eq!(b.read32(reg).unwrap(), 0xA5A5_0001, "the stream reads what mode 0 wrote");
    assert_eq!(count(&b) - t, 2, "a streamed read: control OUT + bulk IN");

    let t = count(&b);
    b.write32(reg, 0x5A5A_0002).unwrap();
    assert_eq!(count(&b) - t, 2, "a streamed write: control OUT + bulk OUT");
    let t = count(&b);
    assert_eq!(b.mem_read(reg, 4).unwrap(), 0x5A5A_0002, "mode 0 reads what the stream wrote");
    assert_eq!(count(&b) - t, 2, "a mode-0 read: control OUT + the completion's control IN");

    // The GPU acts on a register the same way from either path: the HDP flush register lands held BAR0 writes.
    let bar0 = topo.bar(0).unwrap().addr;
    let flush = bar5 + u64::from(pilot_usb_sim::gpu::HDP_FLUSH_REMAP_BYTES);
    for (v, streamed) in [(0x1000u32, false), (0x1001, true)] {
        let before = s.vram_gpu_view(0x80, 4);
        b.write32(bar0 + 0x80, v).unwrap();
        assert_eq!(s.vram_gpu_view(0x80, 4), before, "held in HDP's write buffer");
        if streamed {
            b.write32(flush, 0).unwrap();
        } else {
            b.mem_write(flush, 4, 0).unwrap();
        }
        assert_eq!(s.vram_gpu_view(0x80, 4), v.to_le_bytes());
    }

    // What differs: a read nothing decodes. Mode 0's completion says Unsupported Request; the firmware's streamed read
    // (`pcie_read_chunk`) reports nothing, so the model refuses it rather than invent the data.
    let nowhere = bar5 + topo.bar(5).unwrap().size;
    let e = b.mem_read(nowhere, 4).unwrap_err().to_string();
    assert!(e.contains("unsupported request (UR)"), "{e}");
    let e = b.read32(nowhere).unwrap_err();
    assert_eq!(e.transfer_kind(), Some(&TransferError::Stall), "{e}");
}
