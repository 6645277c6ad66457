//! gfx12's re-encoded memory formats (AMD's "RDNA4 Instruction Set Architecture", "Microcode Formats"; the same
//! fields as tinygrad 0.14.0's `runtime/autogen/amd/rdna4/ins.py` SMEM, VFLAT, VGLOBAL and VSCRATCH):
//! - SMEM (64-bit): opcode in bits 18:13, a signed 24-bit immediate offset, TH/SCOPE instead of GLC/DLC;
//! - VFLAT/VGLOBAL/VSCRATCH (96-bit, one encoding byte each): the address VGPR moves to the third dword,
//!   store data to its own field, a signed 24-bit offset, TH/SCOPE cache controls.
//!
//! Both decode to the same [`Inst`] fields as gfx11's forms, so the executor runs them unchanged.

use super::decode::{bits, lookup, operand, Enc, Inst};
use super::isa::Isa;

const VFLAT: u32 = 0xec;
const VSCRATCH: u32 = 0xed;
const VGLOBAL: u32 = 0xee;

/// Whether the dword starts a VFLAT, VSCRATCH or VGLOBAL instruction (three dwords).
pub(super) fn is_vmem(w0: u32) -> bool {
    matches!(w0 >> 24, VFLAT | VSCRATCH | VGLOBAL)
}

fn sext24(v: u32) -> i32 {
    ((v << 8) as i32) >> 8
}

pub(super) fn smem(w: u64, offset: u32) -> Option<Inst> {
    let mut inst = Inst::new(Enc::Smem, lookup(Isa::Gfx12.tables().smem, bits(w, 18, 13))?, offset);
    inst.dst = bits(w, 12, 6) as u16;
    inst.saddr = bits(w, 5, 0) as u16 * 2;
    inst.cache = (bits(w, 24, 23) | bits(w, 22, 21) << 3) as u8;
    inst.imm = sext24(bits(w, 55, 32));
    inst.addr = bits(w, 63, 57) as u16;
    Some(inst)
}

pub(super) fn vmem(w: [u32; 3], offset: u32) -> Option<Inst> {
    let t = Isa::Gfx12.tables();
    let (enc, table) = match w[0] >> 24 {
        VFLAT => (Enc::Flat, t.flat),
        VSCRATCH => (Enc::Scratch, t.scratch),
        _ => (Enc::Global, t.global),
    };
    let (w0, w1, w2) = (w[0] as u64, w[1] as u64, w[2] as u64);
    let mut inst = Inst::new(enc, lookup(table, bits(w0, 21, 14))?, offset);
    inst.saddr = bits(w0, 6, 0) as u16;
    inst.dst = operand::VGPR0 + bits(w1, 7, 0) as u16;
    inst.cache = (bits(w1, 22, 20) | bits(w1, 19, 18) << 3) as u8;
    inst.data = [operand::VGPR0 + bits(w1, 30, 23) as u16, 0];
    inst.addr = operand::VGPR0 + bits(w2, 7, 0) as u16;
    inst.imm = sext24(bits(w2, 31, 8));
    if enc == Enc::Scratch && bits(w1, 17, 17) == 0 {
        inst.addr = operand::NULL; // SVE=0: no VGPR address
    }
    Some(inst)
}
