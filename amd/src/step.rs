//! The prebuilt step: every dispatch of a step encoded once into one PM4 indirect buffer, with a kernarg block
//! per dispatch (tinygrad `AMDComputeQueue.exec` and `bind`, `HCQProgram.fill_kernargs`).
//!
//! Per dispatch, in tinygrad's order: SET_SH_REG of COMPUTE_PGM_LO/HI, RSRC1/2, RSRC3, TMPRING_SIZE,
//! DISPATCH_SCRATCH_BASE_LO/HI (the step's [`Scratch`], the same for every dispatch), RESTART_X..Z,
//! USER_DATA_0.. (the kernarg address, a relocation to the dispatch's block, then zeros up to the kernel's user
//! SGPR count), RESOURCE_LIMITS, START_X..Z with NUM_THREAD_X..Z; DISPATCH_DIRECT; and, before a dispatch that
//! touches a buffer an earlier one since the last barrier touched, the barrier: EVENT_WRITE CS_PARTIAL_FLUSH and
//! ACQUIRE_MEM. The buffer starts with the CP's HDP flush and a full ACQUIRE_MEM, as tinygrad's
//! `AMDComputeQueue.memory_barrier` (the inputs were written by SDMA; what the host wrote through BAR0, the buffer and
//! the kernargs included, the host's flush before the doorbell already made visible: [`super::queue`]).
//!
//! The timeline signal is not in the buffer: the ring submission is INDIRECT_BUFFER, then RELEASE_MEM of the
//! timeline value ([`ring_packets`]), so no dword of the prebuilt buffer changes between steps and a step costs
//! one ring write and one doorbell.

use super::pm4;
use super::queue::{gpu_err, RegMap};
use super::regs::{gc, nbio, reg, HwIp};
use crate::firmware::Card;
use pilot_core::hcq::args::{ArgsArena, BlockExtent};
use pilot_core::hcq::hazard::Hazards;
use pilot_core::hcq::link;
use pilot_core::hcq::reloc::{Addr, NoSym, RelocBuf, Sym, Word};
use pilot_usb_bridge::error::Result;

/// The compute registers a dispatch sets, as absolute dword addresses on this GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShRegs {
    pub pgm_lo: u32,
    pub pgm_rsrc1: u32,
    pub pgm_rsrc3: u32,
    pub tmpring_size: u32,
    pub scratch_base_lo: u32,
    pub restart_x: u32,
    pub user_data_0: u32,
    pub resource_limits: u32,
    pub start_x: u32,
    /// The HDP flush request/done pair (NBIO `BIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE`).
    pub hdp_flush: (u32, u32),
}

impl ShRegs {
    pub fn resolve(card: Card, regs: &dyn RegMap) -> Result<ShRegs> {
        let named = gc!(card, m => [
            reg!(HwIp::Gc, m::COMPUTE_PGM_LO),
            reg!(HwIp::Gc, m::COMPUTE_PGM_RSRC1),
            reg!(HwIp::Gc, m::COMPUTE_PGM_RSRC3),
            reg!(HwIp::Gc, m::COMPUTE_TMPRING_SIZE),
            reg!(HwIp::Gc, m::COMPUTE_RESTART_X),
            reg!(HwIp::Gc, m::COMPUTE_USER_DATA_0),
            reg!(HwIp::Gc, m::COMPUTE_RESOURCE_LIMITS),
            reg!(HwIp::Gc, m::COMPUTE_START_X),
            reg!(HwIp::Gc, m::COMPUTE_DISPATCH_SCRATCH_BASE_LO),
        ]);
        let hdp = nbio!(card, m => [
            reg!(HwIp::Nbio, m::BIF_BX_PF0_GPU_HDP_FLUSH_REQ),
            reg!(HwIp::Nbio, m::BIF_BX_PF0_GPU_HDP_FLUSH_DONE),
        ]);
        let a = |i: usize| regs.addr(named[i]);
        Ok(ShRegs {
            pgm_lo: a(0)?,
            pgm_rsrc1: a(1)?,
            pgm_rsrc3: a(2)?,
            tmpring_size: a(3)?,
            scratch_base_lo: a(8)?,
            restart_x: a(4)?,
            user_data_0: a(5)?,
            resource_limits: a(6)?,
            start_x: a(7)?,
            hdp_flush: (regs.addr(hdp[0])?, regs.addr(hdp[1])?),
        })
    }
}

/// A loaded kernel as the step needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub name: String,
    /// GPU address of the first instruction (256-byte aligned).
    pub code_va: u64,
    /// COMPUTE_PGM_RSRC1..3 as the descriptor holds them.
    pub rsrc: [u32; 3],
    pub user_sgprs: u32,
    pub kernarg_size: u32,
    pub kernarg_align: u32,
    /// Byte offset of each buffer argument's address in the kernarg segment.
    pub arg_offsets: Vec<u32>,
    pub lds: u32,
    /// Scratch bytes per work-item (`private_segment_fixed_size`).
    pub scratch: u32,
    /// The work-group size the kernel was compiled for.
    pub workgroup: [u32; 3],
}

/// One dispatch of a step: a kernel, its arguments (a device buffer id and byte offset each), the NDRange.
#[derive(Clone, Debug)]
pub struct Launch<'a> {
    pub kernel: &'a Kernel,
    pub args: Vec<(u32, u64)>,
    pub global: [u32; 3],
    pub local: [u32; 3],
}

/// The scratch region every dispatch of a step is given: `COMPUTE_TMPRING_SIZE` and the region's GPU address
/// ([`crate::scratch`]). The default (zeros) is no scratch, for steps whose kernels need none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scratch {
    pub tmpring_size: u32,
    pub va: u64,
    /// Bytes per work-item the region serves: a kernel needing more is refused.
    pub per_item: u32,
}

/// The encoded step: the indirect buffer as the stream (relocations to [`Sym::Args`]) and the kernarg blocks
/// (relocations to [`Sym::Buffer`]), for the shared linker ([`pilot_core::hcq::link`]).
#[derive(Clone, Debug)]
pub struct Encoded {
    pub step: link::Encoded<NoSym>,
    /// Barriers placed between dispatches.
    pub barriers: usize,
}

/// gfx11's `COMPUTE_PGM_RSRC1.PRIV`, which tinygrad sets on gfx11 (a CWSR workaround; `AMDProgram.__init__`).
const RSRC1_PRIV: u32 = 1 << 20;
/// `COMPUTE_PGM_RSRC2.LDS_SIZE` (bits 15-23) in 512-byte units on gfx11+ (tinygrad `AMDProgram.__init__`).
const RSRC2_LDS_SHIFT: u32 = 15;
const LDS_GRANULE: u32 = 512;

/// RSRC1 and RSRC2 as programmed for `k` on `card`.
pub fn rsrc12(card: Card, k: &Kernel) -> [u32; 2] {
    let priv_bit = if card == Card::Gfx1100 { RSRC1_PRIV } else { 0 };
    let lds = (k.lds.div_ceil(LDS_GRANULE) & 0x1FF) << RSRC2_LDS_SHIFT;
    [k.rsrc[0] | priv_bit, k.rsrc[1] | lds]
}

/// Encodes every launch of a step. Fails with the kernel's name when a launch does not match its kernel.
pub fn encode(card: Card, r: &ShRegs, launches: &[Launch<'_>], scratch: Scratch) -> Result<Encoded> {
    let arena = ArgsArena::new(launches.iter().map(|l| {
        let size = u64::from(l.kernel.kernarg_size.max(4)).next_multiple_of(4);
        let align = u64::from(l.kernel.kernarg_align.max(16));
        BlockExtent { stride: size.next_multiple_of(align), footprint: size }
    }));
    let mut ib = RelocBuf::new();
    let (req, done) = r.hdp_flush;
    pm4::write_wait_reg(&mut ib, pm4::wait::FUNC_GEQ, req, done, !0, !0);
    pm4::acquire_mem(&mut ib, pm4::acquire::ALL);
    let mut blocks = Vec::with_capacity(launches.len());
    let mut hazards = Hazards::new();
    let mut barriers = 0;
    for (n, l) in launches.iter().enumerate() {
        let k = l.kernel;
        check(l, &scratch)?;
        if hazards.before(l.args.iter().map(|(b, _)| *b)) {
            pm4::event_write(&mut ib, pm4::event::CS_PARTIAL_FLUSH, pm4::event::INDEX_PARTIAL_FLUSH);
            pm4::acquire_mem(&mut ib, pm4::acquire::BEFORE_DISPATCH);
            barriers += 1;
        }
        blocks.push(kernarg_block(k, &l.args));
        dispatch(&mut ib, card, r, k, n as u32, l, &scratch)?;
    }
    pm4::event_write(&mut ib, pm4::event::CS_PARTIAL_FLUSH, pm4::event::INDEX_PARTIAL_FLUSH);
    if ib.len() > pm4::INDIRECT_BUFFER_MAX_DWORDS {
        return Err(gpu_err("link step", format!("{} dwords exceed one indirect buffer", ib.len())));
    }
    Ok(Encoded { step: link::Encoded { stream: ib, blocks, arena }, barriers })
}

fn check(l: &Launch<'_>, scratch: &Scratch) -> Result<()> {
    let k = l.kernel;
    let fail = |msg: String| Err(gpu_err("link step", format!("`{}`: {msg}", k.name)));
    if l.args.len() != k.arg_offsets.len() {
        return fail(format!(
            "the dispatch passes {} arguments, the kernel takes {}",
            l.args.len(),
            k.arg_offsets.len()
        ));
    }
    if l.local != k.workgroup {
        return fail(format!("launched with {:?}, built for {:?}", l.local, k.workgroup));
    }
    if (0..3).any(|d| l.local[d] == 0 || !l.global[d].is_multiple_of(l.local[d])) {
        return fail(format!("global {:?} is not whole work-groups of {:?}", l.global, l.local));
    }
    if k.scratch > scratch.per_item {
        return fail(format!(
            "needs {} scratch bytes per work-item, the step's scratch region serves {}",
            k.scratch, scratch.per_item
        ));
    }
    if k.args_need_sgprs() && k.user_sgprs < 2 {
        return fail(format!("{} user SGPRs cannot hold the kernarg address", k.user_sgprs));
    }
    // Counted in 64 bits without overflow: a grid is at most 2^32-1 work-items, a work-group at most 1024.
    let items = |v: [u32; 3]| v.iter().try_fold(1u64, |n, &x| n.checked_mul(u64::from(x)));
    if items(l.global).is_none_or(|n| n > u64::from(u32::MAX)) || items(l.local).is_none_or(|n| n > 1024) {
        return fail(format!(
            "global {:?} in work-groups of {:?} passes 2^32-1 work-items or 1024 per work-group",
            l.global, l.local
        ));
    }
    Ok(())
}

impl Kernel {
    fn args_need_sgprs(&self) -> bool {
        self.kernarg_size > 0
    }
}

/// The kernarg segment of one dispatch: each buffer argument's address at its offset, zeros elsewhere.
fn kernarg_block(k: &Kernel, args: &[(u32, u64)]) -> RelocBuf {
    let mut b = RelocBuf::zeroed(k.kernarg_size.max(4).div_ceil(4) as usize);
    for (&(buffer, offset), &at) in args.iter().zip(&k.arg_offsets) {
        b.set(at as usize / 4, Addr::new(Sym::Buffer(buffer), offset));
    }
    b
}

fn dispatch(
    ib: &mut RelocBuf,
    card: Card,
    r: &ShRegs,
    k: &Kernel,
    n: u32,
    l: &Launch<'_>,
    scratch: &Scratch,
) -> Result<()> {
    let sh = |ib: &mut RelocBuf, reg: u32, v: &[Word]| {
        pm4::set_sh_reg(ib, reg, v).map_err(|e| gpu_err("link step", e.to_string()))
    };
    let imm = |v: &[u32]| v.iter().map(|&x| Word::Imm(x)).collect::<Vec<_>>();
    let code = k.code_va >> 8;
    sh(ib, r.pgm_lo, &imm(&[code as u32, (code >> 32) as u32]))?;
    sh(ib, r.pgm_rsrc1, &imm(&rsrc12(card, k)))?;
    sh(ib, r.pgm_rsrc3, &imm(&[k.rsrc[2]]))?;
    sh(ib, r.tmpring_size, &imm(&[scratch.tmpring_size]))?;
    let base = scratch.va >> 8;
    sh(ib, r.scratch_base_lo, &imm(&[base as u32, (base >> 32) as u32]))?;
    sh(ib, r.restart_x, &imm(&[0, 0, 0]))?;
    if k.user_sgprs > 0 {
        let mut user = vec![Word::Addr(Addr::base(Sym::Args(n)))];
        user.extend((2..k.user_sgprs).map(|_| Word::Imm(0)));
        sh(ib, r.user_data_0, &user)?;
    }
    sh(ib, r.resource_limits, &imm(&[0]))?;
    let [x, y, z] = l.local;
    sh(ib, r.start_x, &imm(&[0, 0, 0, x, y, z, 0, 0]))?;
    let groups = [0, 1, 2].map(|d| l.global[d] / l.local[d]);
    pm4::dispatch_direct(ib, groups, pm4::initiator::WAVE32);
    Ok(())
}

/// Dwords of a ring submission without staged copies ([`RingSubmit`]): a power of two, so such submissions tile
/// the ring exactly.
pub const RING_SUBMIT_DWORDS: usize = 16;
/// Most dwords one ring submission takes: the staged copies, the indirect buffer and the signal.
pub const RING_SUBMIT_MAX_DWORDS: usize = 128;
/// Most staged copies ([`pm4::dma_data`]) one ring submission carries.
pub const MAX_STAGED_COPIES: usize = (RING_SUBMIT_MAX_DWORDS - RING_SUBMIT_DWORDS) / pm4::dma_data::DWORDS;

/// One copy the CP makes before the step: `bytes` from GPU address `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedCopy {
    pub src: u64,
    pub dst: u64,
    pub bytes: usize,
}

/// One ring submission, built without allocating: the staged copies (DMA_DATA, the last with CP_SYNC so the ME
/// waits for all of them), the step's indirect buffer, the RELEASE_MEM of the timeline value, NOPs up to a power
/// of two of at least [`RING_SUBMIT_DWORDS`].
#[derive(Clone, Debug)]
pub struct RingSubmit {
    words: heapless::Vec<u32, RING_SUBMIT_MAX_DWORDS>,
}

impl RingSubmit {
    /// The submission: `copies` (at most [`MAX_STAGED_COPIES`]), then the `ib_dwords`-dword buffer at `ib` when
    /// given, then `value` signalled at `signal` (a RELEASE_MEM with the cache flush, as [`pm4::signal`]).
    pub fn new(copies: &[StagedCopy], ib: Option<(u64, usize)>, signal: u64, value: u64) -> RingSubmit {
        assert!(copies.len() <= MAX_STAGED_COPIES, "{} staged copies in one submission", copies.len());
        let mut r = RingSubmit { words: heapless::Vec::new() };
        for (i, c) in copies.iter().enumerate() {
            r.put(&pm4::dma_data(c.src, c.dst, c.bytes, i + 1 == copies.len()));
        }
        if let Some((ib, dwords)) = ib {
            r.put(&[
                pm4::header(pm4::op::INDIRECT_BUFFER, 3),
                ib as u32,
                (ib >> 32) as u32,
                dwords as u32 | pm4::INDIRECT_BUFFER_VALID,
            ]);
        }
        let event = pm4::release::EVENT_CACHE_FLUSH_AND_INV_TS
            | pm4::release::EVENT_INDEX_END_OF_PIPE << 8
            | pm4::release::CACHE_FLUSH;
        let sel = pm4::release::DATA_SEL_32 << pm4::release::DATA_SEL_SHIFT;
        r.put(&[
            pm4::header(pm4::op::RELEASE_MEM, 7),
            event,
            sel,
            signal as u32,
            (signal >> 32) as u32,
            value as u32,
            0,
            0,
        ]);
        let total = (r.words.len() + 2).next_power_of_two().max(RING_SUBMIT_DWORDS);
        let pad = total - r.words.len();
        r.put(&[pm4::header(pm4::op::NOP, pad - 1)]);
        r.words.resize(total, 0).expect("a ring submission fits RING_SUBMIT_MAX_DWORDS");
        r
    }

    fn put(&mut self, w: &[u32]) {
        self.words.extend_from_slice(w).expect("a ring submission fits RING_SUBMIT_MAX_DWORDS");
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pm4::Va;

    fn regs() -> ShRegs {
        // gfx1100 with GC segment 0 at 0x1260 (Navi31's discovery table).
        let g = |off: u32| 0x1260 + off;
        ShRegs {
            pgm_lo: g(0x1BAC),
            pgm_rsrc1: g(0x1BB2),
            pgm_rsrc3: g(0x1BC8),
            tmpring_size: g(0x1BB8),
            scratch_base_lo: g(0x1BB0),
            restart_x: g(0x1BBB),
            user_data_0: g(0x1BE0),
            resource_limits: g(0x1BB5),
            start_x: g(0x1BA4),
            hdp_flush: (0x14 + 0x106, 0x14 + 0x107),
        }
    }

    fn kernel() -> Kernel {
        Kernel {
            name: "k".into(),
            code_va: 0x8000_0010_0100,
            rsrc: [0x60AF_0000, 0x0000_0088, 0],
            user_sgprs: 2,
            kernarg_size: 16,
            kernarg_align: 8,
            arg_offsets: vec![0, 8],
            lds: 1000,
            scratch: 0,
            workgroup: [32, 1, 1],
        }
    }

    #[test]
    fn one_dispatch_encodes_in_tinygrads_order() {
        let k = kernel();
        let l = Launch { kernel: &k, args: vec![(1, 0), (2, 64)], global: [128, 1, 1], local: [32, 1, 1] };
        let e = encode(Card::Gfx1100, &regs(), &[l], Scratch::default()).unwrap();
        let w = e.step.stream.words();
        // HDP barrier, ACQUIRE_MEM, then PGM_LO/HI = code >> 8.
        assert_eq!(pm4::opcode(w[0]), Some(pm4::op::WAIT_REG_MEM));
        assert_eq!(pm4::opcode(w[7]), Some(pm4::op::ACQUIRE_MEM));
        assert_eq!(&w[15..19], &[pm4::header(pm4::op::SET_SH_REG, 3), 0x2E0C - 0x2C00, 0x0000_1001, 0x80]);
        // RSRC1 gains PRIV on gfx11, RSRC2 the LDS size in 512-byte units.
        assert_eq!(&w[21..23], &[0x60BF_0000, 0x88 | 2 << 15]);
        assert_eq!(e.step.blocks[0].relocs().len(), 2);
        assert_eq!(e.step.stream.relocs().len(), 1, "the kernarg address is the only relocation");
        let end = w.len();
        assert_eq!(&w[end - 7..end - 2], &[pm4::header(pm4::op::DISPATCH_DIRECT, 4), 4, 1, 1, pm4::initiator::WAVE32]);
        assert_eq!(e.barriers, 0);
    }

    #[test]
    fn the_steps_scratch_region_follows_tmpring_size_and_bounds_its_kernels() {
        let mut k = kernel();
        k.scratch = 1028;
        let l = Launch { kernel: &k, args: vec![(1, 0), (2, 0)], global: [32, 1, 1], local: [32, 1, 1] };
        let scratch = Scratch { tmpring_size: 85 | 257 << 12, va: 0x8000_0200_0000, per_item: 1028 };
        let w = encode(Card::Gfx1100, &regs(), std::slice::from_ref(&l), scratch).unwrap().step.stream.words().to_vec();
        let tmpring = [pm4::header(pm4::op::SET_SH_REG, 2), 0x1BB8 + 0x1260 - 0x2C00, 85 | 257 << 12];
        let at = w.windows(3).position(|x| x == tmpring).expect("TMPRING_SIZE is set");
        let base = [pm4::header(pm4::op::SET_SH_REG, 3), 0x1BB0 + 0x1260 - 0x2C00, 0x0002_0000, 0x80];
        assert_eq!(&w[at + 3..at + 7], &base, "DISPATCH_SCRATCH_BASE_LO/HI follow it, the address >> 8");
        let e = encode(Card::Gfx1100, &regs(), &[l], Scratch { per_item: 1024, ..scratch }).unwrap_err().to_string();
        assert!(
            e.contains("`k`: needs 1028 scratch bytes per work-item, the step's scratch region serves 1024"),
            "{e}"
        );
    }

    #[test]
    fn dependent_dispatches_get_a_barrier_and_independent_ones_none() {
        let k = kernel();
        let l =
            |a: u32, b: u32| Launch { kernel: &k, args: vec![(a, 0), (b, 0)], global: [32, 1, 1], local: [32, 1, 1] };
        let e = encode(Card::Gfx1100, &regs(), &[l(1, 2), l(3, 4), l(5, 1)], Scratch::default()).unwrap();
        assert_eq!(e.barriers, 1);
        assert_eq!(e.step.arena.offsets(), &[0, 16, 32]);
    }

    #[test]
    fn mismatched_launches_are_refused_with_the_kernels_name() {
        let k = kernel();
        let bad = Launch { kernel: &k, args: vec![(1, 0)], global: [32, 1, 1], local: [32, 1, 1] };
        let e = encode(Card::Gfx1100, &regs(), &[bad], Scratch::default()).unwrap_err().to_string();
        assert!(e.contains("`k`: the dispatch passes 1 arguments, the kernel takes 2"), "{e}");
        let bad = Launch { kernel: &k, args: vec![(1, 0), (2, 0)], global: [48, 1, 1], local: [32, 1, 1] };
        assert!(encode(Card::Gfx1100, &regs(), &[bad], Scratch::default())
            .unwrap_err()
            .to_string()
            .contains("not whole work-groups"));
        // #26 item 1: grids past 2^32-1 work-items (whose group counts multiply past 64 bits) are refused.
        for global in [[1 << 16, 1 << 16, 32], [u32::MAX - 31, u32::MAX - 31, u32::MAX - 31]] {
            let bad = Launch { kernel: &k, args: vec![(1, 0), (2, 0)], global, local: [32, 1, 1] };
            let e = encode(Card::Gfx1100, &regs(), &[bad], Scratch::default()).unwrap_err().to_string();
            assert!(e.contains("passes 2^32-1 work-items or 1024 per work-group"), "{e}");
        }
    }

    /// The same submission from the packet encoders.
    fn ring_packets(ib: u64, ib_dwords: usize, signal: u64, value: u64) -> Vec<u32> {
        let mut b = RelocBuf::new();
        pm4::indirect_buffer(&mut b, Va::At(ib), ib_dwords);
        pm4::signal(&mut b, Va::At(signal), Word::Imm(value as u32));
        let pad = RING_SUBMIT_DWORDS - b.len();
        pm4::nop(&mut b, pad);
        b.words().to_vec()
    }

    #[test]
    fn a_ring_submission_is_sixteen_dwords_of_the_encoders_packets() {
        let p = ring_packets(0x8000_0000_1000, 300, 0x8000_0000_2000, 7);
        let fast = RingSubmit::new(&[], Some((0x8000_0000_1000, 300)), 0x8000_0000_2000, 7);
        assert_eq!(fast.words(), p);
        assert_eq!(p.len(), RING_SUBMIT_DWORDS);
        assert_eq!(&p[..4], &[pm4::header(pm4::op::INDIRECT_BUFFER, 3), 0x1000, 0x8000, 300 | 1 << 23]);
        assert_eq!((pm4::opcode(p[4]), p[7], p[9]), (Some(pm4::op::RELEASE_MEM), 0x2000, 7));
        assert_eq!(pm4::opcode(p[12]), Some(pm4::op::NOP));
    }

    #[test]
    fn staged_copies_precede_the_indirect_buffer_and_only_the_last_syncs() {
        let c = |i: u64| StagedCopy { src: 0x1_0024_0000 + 0x100 * i, dst: 0x80_0000_1000 + 0x1000 * i, bytes: 0x100 };
        let r = RingSubmit::new(&[c(0), c(1), c(2)], Some((0x8000_0000_1000, 300)), 0x8000_0000_2000, 7);
        let w = r.words();
        assert_eq!(w.len(), 64, "3 copies, the buffer and the signal: 41 dwords, padded to a power of two");
        for i in 0..3 {
            let p = &w[7 * i..7 * i + 7];
            assert_eq!(pm4::opcode(p[0]), Some(pm4::op::DMA_DATA));
            assert_eq!(p[1] & pm4::dma_data::CP_SYNC != 0, i == 2, "CP_SYNC on the last copy only");
            assert_eq!(
                (p[2], p[3], p[4], p[5], p[6]),
                (0x0024_0000 + 0x100 * i as u32, 1, 0x1000 * (i as u32 + 1), 0x80, 0x100)
            );
        }
        assert_eq!(&w[21..25], &ring_packets(0x8000_0000_1000, 300, 0x8000_0000_2000, 7)[..4]);
        assert_eq!(pm4::opcode(w[33]), Some(pm4::op::NOP));
        assert_eq!(pm4::body_len(w[33]), 64 - 34);
        let most = RingSubmit::new(&[c(0); MAX_STAGED_COPIES], None, 0x8000_0000_2000, 7);
        assert_eq!(most.words().len(), RING_SUBMIT_MAX_DWORDS);
    }
}
