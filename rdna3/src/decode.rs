//! The RDNA3 (gfx11) and RDNA4 (gfx12) instruction decoder: machine words to [`Inst`], once per kernel.
//!
//! Field positions follow AMD's "RDNA3 Instruction Set Architecture" reference, chapter "Microcode
//! Formats"; gfx12's re-encoded SMEM and vector memory formats are in [`super::decode_gfx12`]. Operands keep
//! the hardware's 9-bit source encoding (see [`operand`]) so that the executor and the disassembler read them
//! the same way.

use super::isa::Isa;
use super::EmuError;

/// One opcode of one encoding: its number, its assembler name and its operands' widths in dwords.
#[derive(Debug)]
pub struct OpInfo {
    pub op: u16,
    pub name: &'static str,
    /// Widths of vdst/sdst, src0, src1, src2 (0: absent, [`MASK`]: a lane mask).
    pub w: [u8; 4],
    /// Width of the memory data operand (stores, DS data0/data1).
    pub data: u8,
    /// Width of the VGPR address operand.
    pub addr: u8,
    /// Width of the scalar base/address operand.
    pub saddr: u8,
    /// Width of a VOP3SD carry-out (0 when the opcode has none).
    pub sdst: u8,
}

/// A width that is a lane mask (one SGPR in wave32).
pub const MASK: u8 = 9;

impl OpInfo {
    #[allow(clippy::too_many_arguments)]
    pub const fn new(op: u16, name: &'static str, w: [u8; 4], data: u8, addr: u8, saddr: u8, sdst: u8) -> Self {
        OpInfo { op, name, w, data, addr, saddr, sdst }
    }
}

/// The microcode format an instruction was encoded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enc {
    Sop1,
    Sop2,
    Sopk,
    Sopc,
    Sopp,
    Smem,
    Vop1,
    Vop2,
    Vopc,
    Vop3,
    Vop3p,
    Vopd,
    Ds,
    Flat,
    Global,
    Scratch,
}

/// Source operand codes (the 9-bit SRC field; SSRC fields use the low 8 bits of the same map).
pub mod operand {
    pub const VCC_LO: u16 = 106;
    pub const VCC_HI: u16 = 107;
    pub const NULL: u16 = 124;
    pub const M0: u16 = 125;
    pub const EXEC_LO: u16 = 126;
    pub const EXEC_HI: u16 = 127;
    pub const ZERO: u16 = 128;
    pub const DPP8: u16 = 233;
    pub const DPP8FI: u16 = 234;
    pub const DPP16: u16 = 250;
    pub const VCCZ: u16 = 251;
    pub const EXECZ: u16 = 252;
    pub const SCC: u16 = 253;
    pub const LITERAL: u16 = 255;
    pub const VGPR0: u16 = 256;
}

/// A DPP source swizzle (the dword after a VOP1/VOP2/VOPC word whose src0 is 250, 233 or 234).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dpp {
    None,
    /// DPP16: the whole control dword (DPP_CTRL bits 16:8, FI 18, BOUND_CTRL 19, modifiers 23:20,
    /// BANK_MASK 27:24, ROW_MASK 31:28).
    Dpp16(u32),
    /// DPP8: eight 3-bit lane selects; `fi` fetches from inactive lanes too.
    Dpp8 {
        sel: u32,
        fi: bool,
    },
}

/// A decoded instruction. Fields an encoding lacks stay zero.
#[derive(Clone, Debug)]
pub struct Inst {
    pub isa: Isa,
    pub enc: Enc,
    pub info: &'static OpInfo,
    /// Byte offset from the start of the kernel's code.
    pub offset: u32,
    /// Length in dwords, literal included.
    pub words: u8,
    /// Destination operand code (VGPRs as 256 + n, like sources).
    pub dst: u16,
    /// Source operand codes, in assembler order.
    pub src: [u16; 3],
    /// VOP3SD carry-out / VOP3-encoded compare destination.
    pub sdst: u16,
    pub literal: u32,
    pub abs: u8,
    pub neg: u8,
    pub neg_hi: u8,
    pub opsel: u8,
    pub opsel_hi: u8,
    pub clamp: bool,
    pub omod: u8,
    /// SOPP/SOPK simm16 (sign-extended), SMEM/FLAT offset, DS offset0.
    pub imm: i32,
    /// DS offset1.
    pub imm1: u8,
    /// gfx11: GLC (bit 0, an atomic returns), DLC (1), SLC (2). gfx12: TH (bits 0-2; bit 0 set: an atomic
    /// returns) and SCOPE (bits 3-4).
    pub cache: u8,
    /// FLAT: VGPR address, data VGPR, scalar address (NULL for none). DS: addr, data0, data1.
    pub addr: u16,
    pub data: [u16; 2],
    pub saddr: u16,
    /// VOPD: the Y half.
    pub y: Option<Box<Inst>>,
    /// Data-parallel primitive: src0 read from another lane of the row (VOP1/VOP2/VOPC only).
    pub dpp: Dpp,
    /// The executor's operation, resolved from the name when the kernel is loaded.
    pub sem: u16,
    /// Operand types for the executor, resolved with `sem` (see `wave::Types`).
    pub types: u8,
}

impl Inst {
    pub fn name(&self) -> &'static str {
        self.info.name
    }

    pub(super) fn new(enc: Enc, info: &'static OpInfo, offset: u32) -> Self {
        Inst {
            isa: Isa::Gfx11,
            enc,
            info,
            offset,
            words: 1,
            dst: 0,
            src: [0; 3],
            sdst: 0,
            literal: 0,
            abs: 0,
            neg: 0,
            neg_hi: 0,
            opsel: 0,
            opsel_hi: 0,
            clamp: false,
            omod: 0,
            imm: 0,
            imm1: 0,
            cache: 0,
            addr: 0,
            data: [0; 2],
            saddr: operand::NULL,
            y: None,
            dpp: Dpp::None,
            sem: 0,
            types: super::wave::types_of(info.name),
        }
    }

    /// The VALU opcode in the VOP3 numbering (VOPC as is, VOP2 + 256, VOP1 + 384), for executing
    /// VOP1/VOP2/VOPC/VOP3 through one table.
    pub fn vop3_op(&self) -> u16 {
        match self.enc {
            Enc::Vop2 => self.info.op + 256,
            Enc::Vop1 => self.info.op + 384,
            _ => self.info.op,
        }
    }
}

pub(super) fn bits(w: u64, hi: u32, lo: u32) -> u32 {
    ((w >> lo) & ((1u64 << (hi - lo + 1)) - 1)) as u32
}

pub(super) fn lookup(table: &'static [OpInfo], op: u32) -> Option<&'static OpInfo> {
    table.binary_search_by_key(&op, |i| i.op as u32).ok().map(|i| &table[i])
}

/// VOP2 opcodes whose encoding always carries a 32-bit literal (v_fmamk/v_fmaak f32/f16).
const VOP2_FMAMK_F32: u16 = 44;
const VOP2_FMAAK_F32: u16 = 45;
const VOP2_FMAMK_F16: u16 = 55;
const VOP2_FMAAK_F16: u16 = 56;
/// VOPD opcodes with a literal K.
const VOPD_FMAAK: u16 = 1;
const VOPD_FMAMK: u16 = 2;

/// Decodes a kernel's code: every instruction from byte 0 to the end of `code`.
pub fn decode_all(isa: Isa, kernel: &str, code: &[u8]) -> Result<Vec<Inst>, EmuError> {
    let words: Vec<u32> = code.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < words.len() {
        let inst = decode_at(isa, kernel, &words, at)?;
        at += inst.words as usize;
        out.push(inst);
    }
    Ok(out)
}

/// Decodes the gfx11 instruction at dword index `at`.
pub fn decode_one(kernel: &str, words: &[u32], at: usize) -> Result<Inst, EmuError> {
    decode_at(Isa::Gfx11, kernel, words, at)
}

/// Decodes the `isa` instruction at dword index `at`.
pub fn decode_at(isa: Isa, kernel: &str, words: &[u32], at: usize) -> Result<Inst, EmuError> {
    let mut inst = decode_words(isa, kernel, words, at)?;
    inst.isa = isa;
    if let Some(y) = &mut inst.y {
        y.isa = isa;
    }
    Ok(inst)
}

fn decode_words(isa: Isa, kernel: &str, words: &[u32], at: usize) -> Result<Inst, EmuError> {
    let tables = isa.tables();
    let w0 = words[at];
    let unknown = || EmuError::UnknownEncoding { kernel: kernel.to_string(), word: w0, offset: at as u32 * 4 };
    let w1 = || words.get(at + 1).copied().ok_or_else(unknown);
    let offset = at as u32 * 4;
    let w0u = w0 as u64;
    let mut inst;
    if bits(w0u, 31, 23) == 0b1_0111_1101 {
        inst = Inst::new(Enc::Sop1, lookup(tables.sop1, bits(w0u, 15, 8)).ok_or_else(unknown)?, offset);
        inst.dst = bits(w0u, 22, 16) as u16;
        inst.src[0] = bits(w0u, 7, 0) as u16;
    } else if bits(w0u, 31, 23) == 0b1_0111_1110 {
        inst = Inst::new(Enc::Sopc, lookup(tables.sopc, bits(w0u, 22, 16)).ok_or_else(unknown)?, offset);
        inst.src = [bits(w0u, 7, 0) as u16, bits(w0u, 15, 8) as u16, 0];
    } else if bits(w0u, 31, 23) == 0b1_0111_1111 {
        inst = Inst::new(Enc::Sopp, lookup(tables.sopp, bits(w0u, 22, 16)).ok_or_else(unknown)?, offset);
        inst.imm = w0 as u16 as i16 as i32;
    } else if bits(w0u, 31, 28) == 0b1011 {
        inst = Inst::new(Enc::Sopk, lookup(tables.sopk, bits(w0u, 27, 23)).ok_or_else(unknown)?, offset);
        inst.dst = bits(w0u, 22, 16) as u16;
        inst.imm = w0 as u16 as i16 as i32;
        if inst.info.name == "s_setreg_imm32_b32" {
            inst.src[0] = operand::LITERAL;
        }
    } else if bits(w0u, 31, 30) == 0b10 {
        inst = Inst::new(Enc::Sop2, lookup(tables.sop2, bits(w0u, 29, 23)).ok_or_else(unknown)?, offset);
        inst.dst = bits(w0u, 22, 16) as u16;
        let (s0, s1) = (bits(w0u, 7, 0) as u16, bits(w0u, 15, 8) as u16);
        // The scalar fused multiply-adds with a constant K carry it as a literal, in assembler order.
        inst.src = match inst.info.name {
            "s_fmamk_f32" => [s0, operand::LITERAL, s1],
            "s_fmaak_f32" => [s0, s1, operand::LITERAL],
            _ => [s0, s1, 0],
        };
    } else if bits(w0u, 31, 25) == 0b011_1111 {
        inst = Inst::new(Enc::Vop1, lookup(tables.vop1, bits(w0u, 16, 9)).ok_or_else(unknown)?, offset);
        inst.dst = bits(w0u, 24, 17) as u16;
        if !writes_sgpr(inst.info.name) {
            inst.dst += operand::VGPR0;
        }
        inst.src[0] = bits(w0u, 8, 0) as u16;
    } else if bits(w0u, 31, 25) == 0b011_1110 {
        inst = Inst::new(Enc::Vopc, lookup(tables.vopc, bits(w0u, 24, 17)).ok_or_else(unknown)?, offset);
        inst.dst = operand::VCC_LO;
        inst.src = [bits(w0u, 8, 0) as u16, operand::VGPR0 + bits(w0u, 16, 9) as u16, 0];
    } else if bits(w0u, 31, 31) == 0 {
        let info = lookup(tables.vop2, bits(w0u, 30, 25)).ok_or_else(unknown)?;
        inst = Inst::new(Enc::Vop2, info, offset);
        inst.dst = operand::VGPR0 + bits(w0u, 24, 17) as u16;
        let s0 = bits(w0u, 8, 0) as u16;
        let s1 = operand::VGPR0 + bits(w0u, 16, 9) as u16;
        inst.src = match info.op {
            VOP2_FMAMK_F32 | VOP2_FMAMK_F16 => [s0, operand::LITERAL, s1],
            VOP2_FMAAK_F32 | VOP2_FMAAK_F16 => [s0, s1, operand::LITERAL],
            _ => [s0, s1, 0],
        };
    } else if isa == Isa::Gfx12 && super::decode_gfx12::is_vmem(w0) {
        let w2 = words.get(at + 2).copied().ok_or_else(unknown)?;
        inst = super::decode_gfx12::vmem([w0, w1()?, w2], offset).ok_or_else(unknown)?;
        inst.words = 3;
    } else {
        let w = (w1()? as u64) << 32 | w0u;
        inst = decode_64(isa, w, offset).ok_or_else(unknown)?;
        inst.words = 2;
    }
    // Source extensions: one literal dword, or a DPP control dword.
    let mut srcs: Vec<u16> = inst.src.to_vec();
    if let Some(y) = &inst.y {
        srcs.extend_from_slice(&y.src);
    }
    if srcs.contains(&operand::LITERAL) {
        let lit = words.get(at + inst.words as usize).copied().ok_or_else(unknown)?;
        inst.literal = lit;
        if let Some(y) = &mut inst.y {
            y.literal = lit;
        }
        inst.words += 1;
    }
    if matches!(inst.src[0], operand::DPP8 | operand::DPP8FI | operand::DPP16) {
        // The DPP control dword follows; it names src0's VGPR. Only the 32-bit VOP1/VOP2/VOPC forms.
        if !matches!(inst.enc, Enc::Vop1 | Enc::Vop2 | Enc::Vopc) {
            return Err(unknown());
        }
        let ctrl = words.get(at + inst.words as usize).copied().ok_or_else(unknown)?;
        inst.dpp = match inst.src[0] {
            operand::DPP16 => Dpp::Dpp16(ctrl),
            _ => Dpp::Dpp8 { sel: ctrl >> 8, fi: inst.src[0] == operand::DPP8FI },
        };
        if let Dpp::Dpp16(c) = inst.dpp {
            // src0/src1 neg and abs live in the DPP16 dword.
            inst.neg = ((c >> 20) & 1 | (c >> 21) & 2) as u8;
            inst.abs = ((c >> 21) & 1 | (c >> 22) & 2) as u8;
        }
        inst.src[0] = operand::VGPR0 + (ctrl & 0xff) as u16;
        inst.words += 1;
    }
    Ok(inst)
}

fn decode_64(isa: Isa, w: u64, offset: u32) -> Option<Inst> {
    let tables = isa.tables();
    let top6 = bits(w, 31, 26);
    let src = |lo: u32| bits(w, lo + 8, lo) as u16;
    let mut inst;
    match top6 {
        0b11_1101 if isa == Isa::Gfx12 => inst = super::decode_gfx12::smem(w, offset)?,
        0b11_1101 => {
            inst = Inst::new(Enc::Smem, lookup(tables.smem, bits(w, 25, 18))?, offset);
            inst.dst = bits(w, 12, 6) as u16;
            inst.saddr = bits(w, 5, 0) as u16 * 2;
            inst.cache = (bits(w, 14, 14) | bits(w, 13, 13) << 1) as u8;
            inst.imm = ((bits(w, 52, 32) << 11) as i32) >> 11;
            inst.addr = bits(w, 63, 57) as u16;
        }
        0b11_0101 => {
            let info = lookup(tables.vop3, bits(w, 25, 16))?;
            inst = Inst::new(Enc::Vop3, info, offset);
            inst.dst = bits(w, 7, 0) as u16;
            if info.w[0] != MASK && !writes_sgpr(info.name) {
                inst.dst += operand::VGPR0;
            }
            inst.src = [src(32), src(41), src(50)];
            if info.sdst != 0 {
                inst.sdst = bits(w, 14, 8) as u16;
            } else {
                inst.abs = bits(w, 10, 8) as u8;
                inst.opsel = bits(w, 14, 11) as u8;
            }
            inst.clamp = bits(w, 15, 15) != 0;
            inst.omod = bits(w, 60, 59) as u8;
            inst.neg = bits(w, 63, 61) as u8;
        }
        0b11_0011 if bits(w, 31, 24) == 0b1100_1100 => {
            inst = Inst::new(Enc::Vop3p, lookup(tables.vop3p, bits(w, 22, 16))?, offset);
            inst.dst = operand::VGPR0 + bits(w, 7, 0) as u16;
            inst.src = [src(32), src(41), src(50)];
            inst.neg_hi = bits(w, 10, 8) as u8;
            inst.opsel = bits(w, 13, 11) as u8;
            inst.opsel_hi = (bits(w, 60, 59) | bits(w, 14, 14) << 2) as u8;
            inst.clamp = bits(w, 15, 15) != 0;
            inst.neg = bits(w, 63, 61) as u8;
        }
        0b11_0010 => {
            let opx = bits(w, 25, 22);
            let opy = bits(w, 21, 17);
            inst = Inst::new(Enc::Vopd, lookup(tables.vopd, opx)?, offset);
            let mut y = Inst::new(Enc::Vopd, lookup(tables.vopd, opy)?, offset);
            let vdstx = bits(w, 63, 56) as u16;
            let vdsty = (bits(w, 55, 49) << 1) as u16 | ((vdstx & 1) ^ 1);
            inst.dst = operand::VGPR0 + vdstx;
            y.dst = operand::VGPR0 + vdsty;
            inst.src = vopd_srcs(inst.info.op, src(0), operand::VGPR0 + bits(w, 16, 9) as u16, inst.dst);
            y.src = vopd_srcs(y.info.op, src(32), operand::VGPR0 + bits(w, 48, 41) as u16, y.dst);
            inst.y = Some(Box::new(y));
        }
        0b11_0110 => {
            inst = Inst::new(Enc::Ds, lookup(tables.ds, bits(w, 25, 18))?, offset);
            inst.imm = bits(w, 7, 0) as i32;
            inst.imm1 = bits(w, 15, 8) as u8;
            if bits(w, 17, 17) != 0 {
                return None; // GDS is not for compute kernels
            }
            inst.addr = operand::VGPR0 + bits(w, 39, 32) as u16;
            inst.data = [operand::VGPR0 + bits(w, 47, 40) as u16, operand::VGPR0 + bits(w, 55, 48) as u16];
            inst.dst = operand::VGPR0 + bits(w, 63, 56) as u16;
        }
        // MUBUF: only the cache invalidates (no buffer resource), as SOPP-like no-ops.
        0b11_1000 if isa == Isa::Gfx11 => {
            inst = Inst::new(Enc::Sopp, lookup(tables.mubuf_cache, bits(w, 25, 18))?, offset)
        }
        0b11_0111 if isa == Isa::Gfx11 => {
            let (enc, table) = match bits(w, 17, 16) {
                0 => (Enc::Flat, tables.flat),
                1 => (Enc::Scratch, tables.scratch),
                2 => (Enc::Global, tables.global),
                _ => return None,
            };
            inst = Inst::new(enc, lookup(table, bits(w, 24, 18))?, offset);
            inst.imm = if enc == Enc::Flat { bits(w, 11, 0) as i32 } else { ((bits(w, 12, 0) << 19) as i32) >> 19 };
            inst.cache = (bits(w, 14, 14) | bits(w, 13, 13) << 1 | bits(w, 15, 15) << 2) as u8;
            inst.addr = operand::VGPR0 + bits(w, 39, 32) as u16;
            inst.data = [operand::VGPR0 + bits(w, 47, 40) as u16, 0];
            inst.saddr = bits(w, 54, 48) as u16;
            inst.dst = operand::VGPR0 + bits(w, 63, 56) as u16;
            if enc == Enc::Scratch && bits(w, 55, 55) == 0 {
                inst.addr = operand::NULL; // SVE=0: no VGPR address
            }
        }
        _ => return None,
    }
    Some(inst)
}

pub(super) fn vopd_srcs(op: u16, s0: u16, s1: u16, dst: u16) -> [u16; 3] {
    match op {
        VOPD_FMAAK => [s0, s1, operand::LITERAL],
        VOPD_FMAMK => [s0, operand::LITERAL, s1],
        0 => [s0, s1, dst],             // v_dual_fmac_f32: D += S0 * S1
        9 => [s0, s1, operand::VCC_LO], // v_dual_cndmask_b32 selects by VCC
        _ => [s0, s1, 0],
    }
}

/// VALU opcodes whose destination field names an SGPR.
fn writes_sgpr(name: &str) -> bool {
    // gfx12's v_s_* (scalar transcendentals) are VOP3 with an SGPR destination.
    matches!(name, "v_readlane_b32" | "v_readfirstlane_b32") || name.starts_with("v_s_")
}
