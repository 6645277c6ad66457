//! Cat5 texture instructions in their direct (non-s2en, non-bindless) form: `#instruction-cat5`,
//! `#instruction-cat5-tex-base`, `#instruction-cat5-tex` in Mesa's `src/freedreno/isa/ir3-cat5.xml`.

use crate::decode::bits;
use crate::decode::Type;

/// A decoded texture instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tex {
    pub name: &'static str,
    pub opc: u8,
    pub is_3d: bool,
    pub a: bool,
    pub o: bool,
    pub p: bool,
    pub sv: bool,
    /// `isam` only: `.1d` (bit 18 clear).
    pub one_d: bool,
    /// `isam` only: bit 53 makes SRC2 an immediate offset.
    pub src2_imm_offset: bool,
    pub ty: Type,
    pub wrmask: u8,
    pub dst: u16,
    /// Coordinate registers are half when FULL (bit 0) is clear.
    pub half_src: bool,
    pub src1: Option<u16>,
    pub src2: Option<u16>,
    pub samp: Option<u8>,
    pub tex: Option<u8>,
}

/// (opc, name, NUM_SRC, HAS_SAMP) of the implemented cat5 opcodes (bits 54..58).
const TEX_OPS: [(u8, &str, u8, bool); 7] = [
    (0, "isam", 1, true),
    (1, "isaml", 2, true),
    (3, "sam", 1, true),
    (4, "samb", 2, true),
    (5, "saml", 2, true),
    (10, "getsize", 1, false),
    (13, "getinfo", 0, false),
];

/// The implemented texture mnemonics, for the guard tests.
pub fn tex_names() -> impl Iterator<Item = &'static str> {
    TEX_OPS.iter().map(|e| e.1)
}

pub(crate) fn decode(w: u64) -> Option<Tex> {
    let bit = |p: u32| (w >> p) & 1 != 0;
    if bit(51) || bit(47) || bits(w, 19, 20) != 0 {
        return None; // s2en/bindless forms are not implemented
    }
    let opc = bits(w, 54, 58) as u8;
    let &(_, name, num_src, has_samp) = TEX_OPS.iter().find(|e| e.0 == opc)?;
    let isam = opc == 0;
    if !isam && bit(18) {
        return None;
    }
    let ty = bits(w, 44, 46);
    if ty > 5 {
        return None;
    }
    let src2_imm_offset = isam && bit(53);
    let o = bit(52);
    let src1 = (num_src > 0).then_some(bits(w, 1, 8) as u16);
    let src2 = (o || num_src > 1).then_some(bits(w, 9, 16) as u16);
    if src1.is_none() && bits(w, 1, 8) != 0 {
        return None;
    }
    if src2.is_none() && !src2_imm_offset && bits(w, 9, 16) != 0 {
        return None;
    }
    if !has_samp && bits(w, 21, 24) != 0 {
        return None;
    }
    Some(Tex {
        name,
        opc,
        is_3d: bit(48),
        a: bit(49),
        o,
        p: !isam && bit(53),
        sv: bit(50),
        one_d: isam && !bit(18),
        src2_imm_offset,
        ty: Type::from_bits_pub(ty),
        wrmask: bits(w, 40, 43) as u8,
        dst: bits(w, 32, 39) as u16,
        half_src: !bit(0),
        src1,
        src2,
        samp: has_samp.then_some(bits(w, 21, 24) as u8),
        tex: Some(bits(w, 25, 31) as u8),
    })
}
