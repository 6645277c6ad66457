//! The compute queue's memory queue descriptor (MQD): the v11/v12 compute MQD image tinygrad's `AM_GFX.setup_ring`
//! builds (Linux `v11_structs.h` / `v12_structs.h` `struct v1x_compute_mqd`). From dword 0x80 on it mirrors the HQD
//! registers `CP_MQD_BASE_ADDR..=CP_HQD_PQ_WPTR_HI` in register order, which is what is written to the hardware.

use super::regs::gc;
use crate::firmware::Card;

/// Bytes of the MQD image (512 dwords).
pub const MQD_BYTES: usize = 2048;
/// Dword of the MQD where the register mirror starts (`cp_mqd_base_addr_lo`).
pub const REG_MIRROR: usize = 0x80;
/// `header` of a compute MQD.
const HEADER: u32 = 0xC031_0800;
/// Dwords of `compute_static_thread_mgmt_se0..7` (every CU enabled).
const STATIC_THREAD_MGMT: [usize; 8] = [23, 24, 26, 27, 44, 45, 46, 47];

/// Where the queue's pieces live (GPU virtual addresses) and its doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HqdParams {
    pub mqd: u64,
    /// The ring: 256-byte aligned, a power of two of at least 256 bytes.
    pub ring: u64,
    pub ring_bytes: u64,
    /// Where the CP reports its read pointer and polls the write pointer.
    pub rptr_report: u64,
    pub wptr_poll: u64,
    /// The end-of-pipe buffer: 256-byte aligned, a power of two.
    pub eop: u64,
    pub eop_bytes: u64,
    /// The 64-bit doorbell slot (BAR2 byte offset = 8 × this).
    pub doorbell: u32,
}

/// `log2(bytes / 4) - 1`, the size encoding of PQ_CONTROL.QUEUE_SIZE and EOP_CONTROL.EOP_SIZE.
fn size_field(bytes: u64) -> u32 {
    (bytes / 4).ilog2() - 1
}

/// The MQD image for `p`, and the registers `CP_MQD_BASE_ADDR..=CP_HQD_PQ_WPTR_HI` it mirrors (what is written
/// to the HQD, in order, starting at register `CP_MQD_BASE_ADDR`).
pub fn build(card: Card, p: &HqdParams) -> (Vec<u32>, std::ops::Range<usize>) {
    let mut d = vec![0u32; MQD_BYTES / 4];
    d[0] = HEADER;
    for i in STATIC_THREAD_MGMT {
        d[i] = 0xFFFF_FFFF;
    }
    let lo = |a: u64| a as u32;
    let hi = |a: u64| (a >> 32) as u32;
    gc!(card, m => {
        let at = |reg: u32| REG_MIRROR + (reg - m::offset::CP_MQD_BASE_ADDR) as usize;
        let o = |name: u32| at(name);
        d[o(m::offset::CP_MQD_BASE_ADDR)] = lo(p.mqd);
        d[o(m::offset::CP_MQD_BASE_ADDR_HI)] = hi(p.mqd);
        d[o(m::offset::CP_HQD_PIPE_PRIORITY)] = 2;
        d[o(m::offset::CP_HQD_QUEUE_PRIORITY)] = 0xF;
        d[o(m::offset::CP_HQD_QUANTUM)] = 0x111;
        d[o(m::offset::CP_HQD_PERSISTENT_STATE)] =
            m::CP_HQD_PERSISTENT_STATE::new().with_preload_size(0x55).with_preload_req(true).bits();
        d[o(m::offset::CP_HQD_PQ_BASE)] = lo(p.ring >> 8);
        d[o(m::offset::CP_HQD_PQ_BASE_HI)] = hi(p.ring >> 8);
        d[o(m::offset::CP_HQD_PQ_RPTR_REPORT_ADDR)] = lo(p.rptr_report);
        d[o(m::offset::CP_HQD_PQ_RPTR_REPORT_ADDR_HI)] = hi(p.rptr_report);
        d[o(m::offset::CP_HQD_PQ_WPTR_POLL_ADDR)] = lo(p.wptr_poll);
        d[o(m::offset::CP_HQD_PQ_WPTR_POLL_ADDR_HI)] = hi(p.wptr_poll);
        d[o(m::offset::CP_HQD_PQ_DOORBELL_CONTROL)] =
            m::CP_HQD_PQ_DOORBELL_CONTROL::new().with_doorbell_offset(p.doorbell * 2).with_doorbell_en(true).bits();
        d[o(m::offset::CP_HQD_PQ_CONTROL)] = m::CP_HQD_PQ_CONTROL::new()
            .with_rptr_block_size(5)
            .with_unord_dispatch(false)
            .with_queue_size(size_field(p.ring_bytes))
            .bits();
        d[o(m::offset::CP_HQD_IB_CONTROL)] = m::CP_HQD_IB_CONTROL::new().with_min_ib_avail_size(3).bits();
        d[o(m::offset::CP_HQD_HQ_SCHEDULER0)] = 0x2000_4000;
        d[o(m::offset::CP_MQD_CONTROL)] = m::CP_MQD_CONTROL::new().with_priv_state(true).bits();
        d[o(m::offset::CP_HQD_EOP_BASE_ADDR)] = lo(p.eop >> 8);
        d[o(m::offset::CP_HQD_EOP_BASE_ADDR_HI)] = hi(p.eop >> 8);
        d[o(m::offset::CP_HQD_EOP_CONTROL)] = m::CP_HQD_EOP_CONTROL::new().with_eop_size(size_field(p.eop_bytes)).bits();
        (d, REG_MIRROR..at(m::offset::CP_HQD_PQ_WPTR_HI) + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> HqdParams {
        HqdParams {
            mqd: 0x80_0010_0000,
            ring: 0x80_0020_0000,
            ring_bytes: 0x2000,
            rptr_report: 0x80_0030_0080,
            wptr_poll: 0x80_0030_0038,
            eop: 0x80_0040_0000,
            eop_bytes: 0x1000,
            doorbell: 3,
        }
    }

    /// Dwords of the v11 compute MQD (Linux `v11_structs.h`; tinygrad `am.struct_v11_compute_mqd` offsets / 4).
    #[test]
    fn gfx1100_image_puts_each_field_where_v11_structs_has_it() {
        let (d, regs) = build(Card::Gfx1100, &params());
        assert_eq!(d.len(), 512);
        assert_eq!(regs, 128..184, "CP_MQD_BASE_ADDR..=CP_HQD_PQ_WPTR_HI");
        assert_eq!(d[0], 0xC031_0800);
        assert_eq!((d[128], d[129]), (0x0010_0000, 0x80), "cp_mqd_base_addr");
        assert_eq!(d[130], 0, "cp_hqd_active is set after the registers");
        assert_eq!((d[133], d[134], d[135]), (2, 0xF, 0x111), "priorities, quantum");
        assert_eq!(d[132], 0x55 << 8 | 1, "persistent_state: preload_size 0x55, preload_req");
        assert_eq!((d[136], d[137]), (0x8000_2000, 0), "pq_base = ring >> 8");
        assert_eq!((d[139], d[141]), (0x0030_0080, 0x0030_0038), "rptr report, wptr poll");
        assert_eq!(d[143], 1 << 30 | 6 << 2, "doorbell_en, doorbell_offset = 3 * 2");
        assert_eq!(d[145], 5 << 8 | 10, "rptr_block_size 5, queue_size log2(0x2000/4)-1");
        assert_eq!(d[149], 3 << 20, "min_ib_avail_size");
        assert_eq!((d[160], d[162]), (0x2000_4000, 1 << 8), "hq_status0, mqd_control.priv_state");
        assert_eq!((d[165], d[166], d[167]), (0x8000_4000, 0, 9), "eop base >> 8, eop_size log2(0x1000/4)-1");
        assert!([23, 24, 26, 27, 44, 45, 46, 47].iter().all(|&i| d[i] == !0));
    }
}
