//! Property: any sequence of MMIO accesses and big copies through the simulated bridge leaves GPU memory, and
//! returns data, exactly as the same operations on a plain byte array.

use pilot_usb_bridge::copy::Copier;
use pilot_usb_bridge::pcie::{bring_up, Layout};
use pilot_usb_bridge::proto::copy::CHUNK;
use pilot_usb_bridge::Bridge;
use pilot_usb_sim::gpu::HDP_FLUSH_REMAP_BYTES;
use pilot_usb_sim::{SimConfig, Simulator};
use proptest::prelude::*;

const VRAM: usize = 4 << 20;

#[derive(Clone, Debug)]
enum Op {
    /// Streamed dword write of `len_dw` dwords.
    Write {
        dw: usize,
        data: Vec<u8>,
    },
    Read {
        dw: usize,
        len_dw: usize,
    },
    /// A single TLP of `size` bytes at byte offset `at`.
    WriteSized {
        at: usize,
        size: u8,
        value: u32,
    },
    ReadSized {
        at: usize,
        size: u8,
    },
    CopyIn {
        at: usize,
        data: Vec<u8>,
    },
    CopyOut {
        at: usize,
        len: usize,
    },
}

fn sized() -> impl Strategy<Value = (usize, u8)> {
    (0..VRAM / 4 - 1, prop_oneof![Just(1u8), Just(2), Just(4)])
        .prop_flat_map(|(dw, size)| (Just(dw), Just(size), 0..=(4 - size as usize)))
        .prop_map(|(dw, size, lane)| (dw * 4 + lane, size))
}

fn op() -> impl Strategy<Value = Op> {
    let copy_len = prop_oneof![1usize..2048, (CHUNK - 8)..(CHUNK + 8), 1usize..(2 * CHUNK + 9000)];
    prop_oneof![
        (0..VRAM / 4 - 64, prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(dw, mut data)| {
            data.truncate(data.len() / 4 * 4);
            if data.is_empty() {
                data = vec![0xA5; 4];
            }
            Op::Write { dw, data }
        }),
        (0..VRAM / 4 - 64, 1usize..64).prop_map(|(dw, len_dw)| Op::Read { dw, len_dw }),
        (sized(), any::<u32>()).prop_map(|((at, size), v)| Op::WriteSized {
            at,
            size,
            value: if size == 4 { v } else { v & ((1 << (8 * size)) - 1) }
        }),
        sized().prop_map(|(at, size)| Op::ReadSized { at, size }),
        copy_len
            .clone()
            .prop_flat_map(|len| (0..VRAM - len, prop::collection::vec(any::<u8>(), len)))
            .prop_map(|(at, data)| Op::CopyIn { at, data }),
        copy_len.prop_flat_map(|len| (0..VRAM - len, Just(len))).prop_map(|(at, len)| Op::CopyOut { at, len }),
    ]
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let sim = Simulator::new(SimConfig { vram_bytes: VRAM as u64, ..SimConfig::default() });
    let mut b = Bridge::open(sim.transport(), None).unwrap();
    let topo = bring_up(&mut b, &Layout::default()).unwrap();
    let bar0 = topo.bar(0).unwrap().addr;
    // The copies are GPU-side: the host's BAR0 writes reach them through an HDP flush, as a driver issues before
    // GPU work.
    let hdp_flush = topo.bar(5).unwrap().addr + u64::from(HDP_FLUSH_REMAP_BYTES);
    let mut dma = sim.dma();
    let mut copier = Copier::new();
    // VRAM at power-on: zeros, and the GPU's IP discovery table at its end.
    let mut model = sim.vram(0, VRAM);
    for op in ops {
        match op {
            Op::Write { dw, data } => {
                b.mmio_write(bar0 + 4 * *dw as u64, data).unwrap();
                model[4 * dw..4 * dw + data.len()].copy_from_slice(data);
            }
            Op::Read { dw, len_dw } => {
                let mut got = vec![0u8; 4 * len_dw];
                b.mmio_read(bar0 + 4 * *dw as u64, &mut got).unwrap();
                prop_assert_eq!(&got[..], &model[4 * dw..4 * dw + got.len()]);
            }
            Op::WriteSized { at, size, value } => {
                b.mem_write(bar0 + *at as u64, *size, *value).unwrap();
                model[*at..*at + *size as usize].copy_from_slice(&value.to_le_bytes()[..*size as usize]);
            }
            Op::ReadSized { at, size } => {
                let got = b.mem_read(bar0 + *at as u64, *size).unwrap();
                let mut want = [0u8; 4];
                want[..*size as usize].copy_from_slice(&model[*at..*at + *size as usize]);
                prop_assert_eq!(got, u32::from_le_bytes(want));
            }
            Op::CopyIn { at, data } => {
                b.mem_write(hdp_flush, 4, 0).unwrap();
                copier.copy_in(&mut b, &mut dma, *at as u64, data).unwrap();
                model[*at..*at + data.len()].copy_from_slice(data);
            }
            Op::CopyOut { at, len } => {
                b.mem_write(hdp_flush, 4, 0).unwrap();
                let mut got = vec![0u8; *len];
                copier.copy_out(&mut b, &mut dma, *at as u64, &mut got).unwrap();
                prop_assert!(got == model[*at..*at + len], "copy-out at {:#x}+{} differs", at, len);
            }
        }
    }
    prop_assert!(sim.vram(0, VRAM) == model, "VRAM differs from the model");
    Ok(())
}

proptest! {
    // Each case builds a simulator and moves up to a few MB; keep the default case count modest.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn mmio_and_copies_match_a_memory_model(ops in prop::collection::vec(op(), 1..12)) {
        run(&ops)?;
    }
}
