//! PM4 type-3 packets for the compute queue, gfx10+ layouts (Linux `drivers/gpu/drm/amd/amdgpu/nvd.h`; the same
//! values as tinygrad's `runtime/autogen/am/pm4_nv.py`, which `tests/amd_run_packets.rs` cross-checks).
//!
//! Packets append to a [`RelocBuf`], so an address may be a relocation ([`Word::Addr`]) resolved when the
//! buffer is linked, and a value a symbol patched per submission ([`Word::Value`]).

use pilot_core::hcq::reloc::{Addr, RelocBuf, Word};

/// A 64-bit GPU address in a packet (always two dwords, lo then hi): known now, or a relocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Va {
    At(u64),
    Sym(Addr),
}

impl Va {
    fn words(self) -> [Option<Word>; 2] {
        match self {
            Va::At(a) => [Some(Word::Imm(a as u32)), Some(Word::Imm((a >> 32) as u32))],
            Va::Sym(a) => [Some(Word::Addr(a)), None],
        }
    }
}

/// `items` with each address spread into its dwords.
fn body(items: &[Item]) -> Vec<Word> {
    let mut out = Vec::with_capacity(items.len() + 2);
    for it in items {
        match *it {
            Item::W(w) => out.push(w),
            Item::A(a) => out.extend(a.words().into_iter().flatten()),
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Item {
    W(Word),
    A(Va),
}

/// Type-3 opcodes.
pub mod op {
    pub const NOP: u8 = 0x10;
    pub const DISPATCH_DIRECT: u8 = 0x15;
    pub const WAIT_REG_MEM: u8 = 0x3C;
    pub const INDIRECT_BUFFER: u8 = 0x3F;
    pub const EVENT_WRITE: u8 = 0x46;
    pub const RELEASE_MEM: u8 = 0x49;
    pub const ACQUIRE_MEM: u8 = 0x58;
    pub const DMA_DATA: u8 = 0x50;
    pub const SET_SH_REG: u8 = 0x76;
    pub const SET_UCONFIG_REG: u8 = 0x79;
}

/// Registers SET_SH_REG reaches: dword indices `SH_REG_START..SH_REG_END`, sent as `index - SH_REG_START`.
pub const SH_REG_START: u32 = 0x2C00;
pub const SH_REG_END: u32 = 0x3000;
/// Registers SET_UCONFIG_REG reaches.
pub const UCONFIG_REG_START: u32 = 0xC000;
pub const UCONFIG_REG_END: u32 = 0xC400;

/// The type-3 header of a packet with `body` dwords after it: `3 << 30 | (body - 1) << 16 | opcode << 8`.
pub const fn header(opcode: u8, body: usize) -> u32 {
    3 << 30 | ((body as u32 - 1) & 0x3FFF) << 16 | (opcode as u32) << 8
}

/// The one-dword NOP: a type-3 NOP header whose count field is all ones has no body.
pub const NOP_ONE_DWORD: u32 = 3 << 30 | 0x3FFF << 16 | (op::NOP as u32) << 8;

/// The opcode of a type-3 header, or `None` for another packet type.
pub const fn opcode(header: u32) -> Option<u8> {
    if header >> 30 == 3 {
        Some((header >> 8) as u8)
    } else {
        None
    }
}

/// Body dwords of a type-3 header.
pub const fn body_len(header: u32) -> usize {
    ((header >> 16) & 0x3FFF) as usize + 1
}

/// WAIT_REG_MEM's info dword.
pub mod wait {
    /// Compare functions (bits 0-2).
    pub const FUNC_EQ: u32 = 3;
    pub const FUNC_NEQ: u32 = 4;
    pub const FUNC_GEQ: u32 = 5;
    /// Bit 4: poll memory (else a register).
    pub const MEM_SPACE_MEM: u32 = 1 << 4;
    /// Bit 6: write the first register, then wait on the second (the HDP flush).
    pub const OPERATION_WRITE_WAIT: u32 = 1 << 6;
    /// The poll interval dword.
    pub const INTERVAL: u32 = 4;
}

/// ACQUIRE_MEM's GCR_CNTL bits.
pub mod acquire {
    pub const GLI_INV: u32 = 1 << 0;
    pub const GLM_WB: u32 = 1 << 4;
    pub const GLM_INV: u32 = 1 << 5;
    pub const GLK_WB: u32 = 1 << 6;
    pub const GLK_INV: u32 = 1 << 7;
    pub const GLV_INV: u32 = 1 << 8;
    pub const GL1_INV: u32 = 1 << 9;
    pub const GL2_INV: u32 = 1 << 14;
    pub const GL2_WB: u32 = 1 << 15;
    /// Every cache written back and invalidated (tinygrad's `acquire_mem()` defaults).
    pub const ALL: u32 = GLI_INV | GLM_WB | GLM_INV | GLK_WB | GLK_INV | GLV_INV | GL1_INV | GL2_INV | GL2_WB;
    /// What precedes a dispatch: all but the instruction cache and L2 (tinygrad `acquire_mem(gli=0, gl2=0)`).
    pub const BEFORE_DISPATCH: u32 = GLM_WB | GLM_INV | GLK_WB | GLK_INV | GLV_INV | GL1_INV;
}

/// RELEASE_MEM's event, cache and selector fields.
pub mod release {
    pub const EVENT_CACHE_FLUSH_AND_INV_TS: u32 = 20;
    /// `event_index` (bits 8-11) end of pipe.
    pub const EVENT_INDEX_END_OF_PIPE: u32 = 5;
    pub const GCR_GLM_WB: u32 = 1 << 12;
    pub const GCR_GLM_INV: u32 = 1 << 13;
    pub const GCR_GLV_INV: u32 = 1 << 14;
    pub const GCR_GL1_INV: u32 = 1 << 15;
    pub const GCR_GL2_INV: u32 = 1 << 20;
    pub const GCR_GL2_WB: u32 = 1 << 21;
    pub const GCR_SEQ: u32 = 1 << 22;
    /// The flush a signal carries (tinygrad `release_mem(cache_flush=True)`).
    pub const CACHE_FLUSH: u32 =
        GCR_GLV_INV | GCR_GL1_INV | GCR_GL2_INV | GCR_GLM_WB | GCR_GLM_INV | GCR_GL2_WB | GCR_SEQ;
    /// `data_sel` (bits 29-31 of the second dword).
    pub const DATA_SEL_32: u32 = 1;
    pub const DATA_SEL_64: u32 = 2;
    pub const DATA_SEL_CLOCK: u32 = 3;
    pub const DATA_SEL_SHIFT: u32 = 29;
    /// `int_sel` (bits 24-26): none, as on USB (no interrupts are taken).
    pub const INT_SEL_NONE: u32 = 0;
    pub const INT_SEL_SHIFT: u32 = 24;
}

/// EVENT_WRITE's event dword.
pub mod event {
    pub const CS_PARTIAL_FLUSH: u32 = 7;
    /// `event_index` of a partial flush.
    pub const INDEX_PARTIAL_FLUSH: u32 = 4;
}

/// COMPUTE_DISPATCH_INITIATOR bits.
pub mod initiator {
    pub const COMPUTE_SHADER_EN: u32 = 1 << 0;
    pub const FORCE_START_AT_000: u32 = 1 << 2;
    pub const CS_W32_EN: u32 = 1 << 15;
    /// What pilot dispatches: a wave32 compute shader starting at group 0.
    pub const WAVE32: u32 = COMPUTE_SHADER_EN | FORCE_START_AT_000 | CS_W32_EN;
}

/// INDIRECT_BUFFER's size dword: the valid bit.
/// DMA_DATA (CP DMA) fields (Linux `nvd.h` `PACKET3_DMA_DATA_*`; the selector values are Mesa `sid.h` `V_411_*`).
pub mod dma_data {
    /// SRC_SEL (bits 30:29) and DST_SEL (bits 21:20): the address, through L2 (gfx9+, as Mesa's CP DMA uses).
    pub const SRC_ADDR_TC_L2: u32 = 3 << 29;
    pub const DST_ADDR_TC_L2: u32 = 3 << 20;
    /// The ME waits for this copy and those before it to finish before the next packet.
    pub const CP_SYNC: u32 = 1 << 31;
    /// BYTE_COUNT is bits 25:0 of the command dword.
    pub const MAX_BYTES: usize = (1 << 26) - 1;
    /// Dwords of one packet.
    pub const DWORDS: usize = 7;
}

/// DMA_DATA: `bytes` from `src` to `dst` by the CP's DMA engine, memory to memory through L2; with `sync` the
/// ME waits for it (Mesa `radv_cs_emit_cp_dma`).
pub fn dma_data(src: u64, dst: u64, bytes: usize, sync: bool) -> [u32; dma_data::DWORDS] {
    debug_assert!(bytes <= dma_data::MAX_BYTES);
    let sync = if sync { dma_data::CP_SYNC } else { 0 };
    [
        header(op::DMA_DATA, 6),
        dma_data::SRC_ADDR_TC_L2 | dma_data::DST_ADDR_TC_L2 | sync,
        src as u32,
        (src >> 32) as u32,
        dst as u32,
        (dst >> 32) as u32,
        bytes as u32,
    ]
}

pub const INDIRECT_BUFFER_VALID: u32 = 1 << 23;
/// Largest indirect buffer in dwords (the size field is 20 bits).
pub const INDIRECT_BUFFER_MAX_DWORDS: usize = (1 << 20) - 1;

/// A register a packet cannot reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("PM4: register 0x{reg:x} (+{count}) is outside the {space} range")]
pub struct RegRangeError {
    pub reg: u32,
    pub count: usize,
    pub space: &'static str,
}

fn packet(b: &mut RelocBuf, opcode: u8, items: &[Item]) {
    let words = body(items);
    let n: usize = words.iter().map(Word::len).sum();
    b.push(header(opcode, n));
    b.extend(&words);
}

fn imm(v: u32) -> Item {
    Item::W(Word::Imm(v))
}

/// SET_SH_REG: `values` into consecutive registers from dword index `reg` (absolute, `SH_REG_START..SH_REG_END`).
pub fn set_sh_reg(b: &mut RelocBuf, reg: u32, values: &[Word]) -> Result<(), RegRangeError> {
    set_reg(b, op::SET_SH_REG, SH_REG_START, SH_REG_END, "SH", reg, values)
}

/// SET_UCONFIG_REG: `values` into consecutive registers from dword index `reg`.
pub fn set_uconfig_reg(b: &mut RelocBuf, reg: u32, values: &[Word]) -> Result<(), RegRangeError> {
    set_reg(b, op::SET_UCONFIG_REG, UCONFIG_REG_START, UCONFIG_REG_END, "UCONFIG", reg, values)
}

fn set_reg(
    b: &mut RelocBuf,
    opcode: u8,
    start: u32,
    end: u32,
    space: &'static str,
    reg: u32,
    values: &[Word],
) -> Result<(), RegRangeError> {
    let n: usize = values.iter().map(Word::len).sum();
    if n == 0 || reg < start || u64::from(reg) + n as u64 > u64::from(end) {
        return Err(RegRangeError { reg, count: n, space });
    }
    b.push(header(opcode, n + 1));
    b.push(reg - start);
    b.extend(values);
    Ok(())
}

/// ACQUIRE_MEM over all memory with the GCR_CNTL bits `gcr` (8 dwords).
pub fn acquire_mem(b: &mut RelocBuf, gcr: u32) {
    packet(b, op::ACQUIRE_MEM, &[imm(0), imm(!0), imm(!0), imm(0), imm(0), imm(0), imm(gcr)]);
}

/// RELEASE_MEM at end of pipe: after the flush `gcr`, write `data` (`data_sel` 32- or 64-bit: `data` is then
/// two dwords, lo and hi) to `addr` (8 dwords).
pub fn release_mem(b: &mut RelocBuf, gcr: u32, data_sel: u32, addr: Va, data: [Word; 2]) {
    let event = release::EVENT_CACHE_FLUSH_AND_INV_TS | release::EVENT_INDEX_END_OF_PIPE << 8 | gcr;
    let sel = data_sel << release::DATA_SEL_SHIFT | release::INT_SEL_NONE << release::INT_SEL_SHIFT;
    packet(b, op::RELEASE_MEM, &[imm(event), imm(sel), Item::A(addr), Item::W(data[0]), Item::W(data[1]), imm(0)]);
}

/// The signal write tinygrad's `AMDComputeQueue.signal` makes: flush, then the 32-bit `value` to `addr`.
pub fn signal(b: &mut RelocBuf, addr: Va, value: Word) {
    release_mem(b, release::CACHE_FLUSH, release::DATA_SEL_32, addr, [value, Word::Imm(0)]);
}

/// WAIT_REG_MEM on memory: until `func(*addr & mask, reference)` holds (7 dwords).
pub fn wait_mem(b: &mut RelocBuf, func: u32, addr: Va, reference: Word, mask: u32) {
    let info = imm(func | wait::MEM_SPACE_MEM);
    packet(b, op::WAIT_REG_MEM, &[info, Item::A(addr), Item::W(reference), imm(mask), imm(wait::INTERVAL)]);
}

/// WAIT_REG_MEM write-then-wait on registers: write `req`, wait until `func(done & mask, reference)` (the HDP
/// flush barrier, tinygrad `memory_barrier`).
pub fn write_wait_reg(b: &mut RelocBuf, func: u32, req: u32, done: u32, reference: u32, mask: u32) {
    let info = func | wait::OPERATION_WRITE_WAIT;
    packet(b, op::WAIT_REG_MEM, &[imm(info), imm(req), imm(done), imm(reference), imm(mask), imm(wait::INTERVAL)]);
}

/// INDIRECT_BUFFER: run `dwords` dwords at `addr` (4 dwords).
pub fn indirect_buffer(b: &mut RelocBuf, addr: Va, dwords: usize) {
    debug_assert!(dwords <= INDIRECT_BUFFER_MAX_DWORDS);
    packet(b, op::INDIRECT_BUFFER, &[Item::A(addr), imm(dwords as u32 | INDIRECT_BUFFER_VALID)]);
}

/// DISPATCH_DIRECT of `groups` work-groups with COMPUTE_DISPATCH_INITIATOR `initiator` (5 dwords).
pub fn dispatch_direct(b: &mut RelocBuf, groups: [u32; 3], initiator: u32) {
    let [x, y, z] = groups.map(imm);
    packet(b, op::DISPATCH_DIRECT, &[x, y, z, imm(initiator)]);
}

/// EVENT_WRITE of `event` with `index` (2 dwords).
pub fn event_write(b: &mut RelocBuf, event: u32, index: u32) {
    packet(b, op::EVENT_WRITE, &[imm(event | index << 8)]);
}

/// A NOP of `total` dwords in all, header included (at least 2: a type-3 packet has a body).
pub fn nop(b: &mut RelocBuf, total: usize) {
    debug_assert!(total >= 2, "a PM4 NOP is at least 2 dwords");
    b.push(header(op::NOP, total - 1));
    for _ in 1..total {
        b.push(0u32);
    }
}
