//! Decoding of a6xx instructions (64-bit words) into [`Instr`], following Mesa's ISA description
//! `src/freedreno/isa/ir3-cat0.xml` … `ir3-cat7.xml` and `ir3-common.xml` (bitset names cited at each
//! decoder). The bit positions below are pilot's own tables, written from those files; nothing here is
//! generated from an encoder.

use crate::DecodeError;

/// `#type` (ir3-common.xml): the data type of cat1 moves and cat6 memory operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    F16,
    F32,
    U16,
    U32,
    S16,
    S32,
    U8,
    /// `u8_32` in `#type`; `u64` in `#type-atomic`.
    U8x32,
}

impl Type {
    pub(crate) fn from_bits_pub(v: u64) -> Type {
        Type::from_bits(v)
    }
    fn from_bits(v: u64) -> Type {
        [Type::F16, Type::F32, Type::U16, Type::U32, Type::S16, Type::S32, Type::U8, Type::U8x32][v as usize & 7]
    }
    /// `#type-half`: the value lives in a half register.
    pub fn is_half(self) -> bool {
        matches!(self, Type::F16 | Type::U16 | Type::S16 | Type::U8)
    }
    /// The size in bytes of one element in memory.
    pub fn bytes(self) -> u32 {
        match self {
            Type::U8 | Type::U8x32 => 1,
            Type::F16 | Type::U16 | Type::S16 => 2,
            Type::F32 | Type::U32 | Type::S32 => 4,
        }
    }
    pub fn name(self) -> &'static str {
        ["f16", "f32", "u16", "u32", "s16", "s32", "u8", "u8_32"][self as usize]
    }
}

/// What a source operand reads (`#multisrc`, `#cat1-*-src`, `#cat3-src` in the ISA files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrcKind {
    /// A register: `gpr * 4 + component` (`#reg-gpr`; 244 is a0.x, 248 is p0.x).
    Gpr(u16),
    /// A constant: `const * 4 + component` (`#reg-const`).
    Const(u16),
    /// `r<a0.x + off>`.
    RelGpr(i16),
    /// `c<a0.x + off>`.
    RelConst(i16),
    /// An integer immediate (cat2/cat3/cat6), sign-extended where the field is `int`.
    Imm(i32),
    /// The cat2 float lookup table (`#flut`) index.
    Flut(u8),
    /// A cat1 immediate: the raw 32 bits, read as `SRC_TYPE`.
    Raw(u32),
}

/// One source operand with its modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Src {
    pub kind: SrcKind,
    pub half: bool,
    /// `(r)`: the register advances with each `(rptN)` repetition.
    pub r: bool,
    pub last: bool,
    pub abs: bool,
    pub neg: bool,
}

impl Src {
    fn new(kind: SrcKind, half: bool) -> Src {
        Src { kind, half, r: false, last: false, abs: false, neg: false }
    }
}

/// A destination register: `gpr * 4 + component`, or `r<a0.x + off>` for cat1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dst {
    Gpr(u16),
    RelGpr(u16),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// Cat0 branch kinds (`#instruction-cat0-branch`, BRTYPE bits 37..39).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Branch {
    Br,
    Brao,
    Braa,
    Bany,
    Ball,
}

/// The operation with its operands, by category.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Cat0 without operands: `nop`, `end`, `ret`, `shpe`, `predt`, … (the mnemonic).
    Flow0(&'static str),
    /// Cat0 with an immediate target: `jump`, `call`, `getone`, `shps`, `bkt` (the mnemonic).
    FlowImm(&'static str, i32),
    Branch {
        kind: Branch,
        inv1: bool,
        comp1: u8,
        inv2: bool,
        comp2: u8,
        target: i32,
    },
    Kill {
        inv: bool,
        comp: u8,
    },
    /// `mov`/`cov`/`mova`/`mova1` (`#instruction-cat1-mov`).
    Mov {
        src_type: Type,
        dst_type: Type,
        round: u8,
        dst: Dst,
        src: Src,
    },
    /// `swz`/`gat`/`sct` (`#instruction-cat1-multi`): moves that read every source before writing any destination.
    /// `swz` pairs `srcs[i]` with `dsts[i]`; `gat` moves four sources to `dsts[0]`..+3; `sct` moves `srcs[0]`..+3 to
    /// four destinations (the pairs are spelled out here).
    Multi {
        name: &'static str,
        src_type: Type,
        dst_type: Type,
        round: u8,
        dsts: Vec<u16>,
        srcs: Vec<u16>,
    },
    /// Cat2 (`#instruction-cat2-*`).
    Alu2 {
        name: &'static str,
        opc: u8,
        cond: Option<Cond>,
        dst: u16,
        dst_half: bool,
        full: bool,
        src1: Src,
        src2: Option<Src>,
    },
    /// Cat3 (`#instruction-cat3`, `#instruction-cat3-alt`).
    Alu3 {
        name: &'static str,
        opc: u8,
        alt: bool,
        dst: u16,
        dst_half: bool,
        full: bool,
        src: [Src; 3],
    },
    /// Cat4 (`#instruction-cat4`).
    Sfu {
        name: &'static str,
        opc: u8,
        dst: u16,
        dst_half: bool,
        full: bool,
        src: Src,
    },
    /// `ldg` / `ldg.a` (a6xx form): address `base + (idx + off) << shift` or `base + (idx << shift) + (off << 2)`.
    Ldg {
        ty: Type,
        dst: u16,
        base: u16,
        addr: GAddr,
        size: u8,
    },
    /// `stg` / `stg.a`.
    Stg {
        ty: Type,
        src: u16,
        base: u16,
        addr: GAddr,
        size: u8,
    },
    /// `ldl`, `ldlw`, `ldp` (local, local-workgroup, private loads): `dst <- l[src + off]`.
    Ldl {
        space: Space,
        ty: Type,
        dst: u16,
        src: u16,
        off: i32,
        size: u8,
    },
    /// `stl`, `stlw`, `stp`: `l[dst + off] <- src`.
    Stl {
        space: Space,
        ty: Type,
        dst: u16,
        src: u16,
        off: i32,
        size: u8,
    },
    /// Local atomics (`#instruction-cat6-a3xx-atomic-local`): `atomic.<name> dst, l[src1], src2`.
    AtomicL {
        name: &'static str,
        typed: bool,
        d: u8,
        ty: Type,
        type_size: u8,
        dst: u16,
        src1: u16,
        src2: u16,
    },
    /// a6xx global atomics (`#instruction-cat6-a6xx-atomic-global`): `atomic.g.<name> dst, src1 (address), src2`.
    AtomicG {
        name: &'static str,
        typed: bool,
        d: u8,
        ty: Type,
        type_size: u8,
        dst: u16,
        src1: u16,
        src2: u16,
    },
    /// `ldib.b`, `stib.b`, `atomic.b.*` (`#instruction-cat6-a6xx-ibo-base`).
    Ibo {
        name: &'static str,
        typed: bool,
        d: u8,
        ty: Type,
        type_size: u8,
        mode: u8,
        bindless: bool,
        base: u8,
        src1: u16,
        src2: u16,
        offset: u32,
        ssbo: Src,
    },
    /// `stc`: `c[dst (+ a1.x)] <- src`, `size` consecutive values.
    Stc {
        ty: Type,
        src: u16,
        dst: u16,
        a1: bool,
        size: u8,
    },
    /// `bar`, `fence` (`#instruction-cat7-barrier`).
    Barrier {
        name: &'static str,
        g: bool,
        l: bool,
        r: bool,
        w: bool,
    },
    /// Other cat7: `sleep`, `icinv`, `dccln`, `dcinv`, `dcflu` (the text after the flags).
    Cat7(String),
    /// Cat5 texture instructions (`#instruction-cat5*`).
    Tex(crate::tex::Tex),
}

/// A decoded instruction: the flags every category may carry, and the operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    pub raw: u64,
    pub sy: bool,
    pub ss: bool,
    pub jp: bool,
    pub ul: bool,
    pub sat: bool,
    pub eq: bool,
    pub ei: bool,
    /// `(rptN)`: the instruction runs `repeat + 1` times.
    pub repeat: u8,
    /// `(nopN)` in cat2/cat3: delay slots after the instruction.
    pub nop: u8,
    pub op: Op,
}

impl Instr {
    /// The operation's name as the executor's tables know it (`add.f`, `cmps.s`, `mov`, `cov`,
    /// `ldg.a`, `atomic.g.add`, …): what the guard tests count.
    pub fn mnemonic(&self) -> String {
        match &self.op {
            Op::Flow0(n) | Op::FlowImm(n, _) => n.to_string(),
            Op::Branch { kind, .. } => format!("{kind:?}").to_lowercase(),
            Op::Kill { .. } => "kill".into(),
            Op::Mov { src_type, dst_type, dst, .. } => match dst {
                Dst::Gpr(0xf4) if *src_type == Type::S16 && *dst_type == Type::S16 => "mova".into(),
                Dst::Gpr(0xf5) if *src_type == Type::U16 && *dst_type == Type::U16 => "mova1".into(),
                _ if src_type == dst_type => "mov".into(),
                _ => "cov".into(),
            },
            Op::Alu2 { name, .. } | Op::Alu3 { name, .. } | Op::Sfu { name, .. } | Op::Multi { name, .. } => {
                name.to_string()
            }
            Op::Ldg { addr, .. } => if matches!(addr, GAddr::Imm(_)) { "ldg" } else { "ldg.a" }.into(),
            Op::Stg { addr, .. } => if matches!(addr, GAddr::Imm(_)) { "stg" } else { "stg.a" }.into(),
            Op::Ldl { space, .. } => ["ldl", "ldlw", "ldp"][*space as usize].into(),
            Op::Stl { space, .. } => ["stl", "stlw", "stp"][*space as usize].into(),
            Op::AtomicL { name, .. } | Op::AtomicG { name, .. } | Op::Ibo { name, .. } => name.to_string(),
            Op::Stc { .. } => "stc".into(),
            Op::Barrier { name, .. } => name.to_string(),
            Op::Cat7(text) => text.split('.').next().unwrap_or("").to_string(),
            Op::Tex(t) => t.name.to_string(),
        }
    }
}

/// The memory of `ldl`/`stl` (local), `ldlw`/`stlw` (local, workgroup form) and `ldp`/`stp` (private, per fiber).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    L,
    Lw,
    P,
}

/// Global address forms of `ldg`/`stg` (ir3-cat6.xml, `ldg`, `ldg.a`, `stg`, `stg.a` for gen 600..699).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GAddr {
    /// `g[base + off]` (bytes).
    Imm(i32),
    /// `g[base + (idx + off) << shift]`, or with `dword_shift > 0`
    /// `g[base + idx << (dword_shift + 2) + off << 2]`.
    Indexed { idx: u16, off: u32, dword_shift: u8 },
}

pub(crate) fn bits(w: u64, lo: u32, hi: u32) -> u64 {
    (w >> lo) & ((1u64 << (hi - lo + 1)) - 1)
}

fn bit(w: u64, pos: u32) -> bool {
    (w >> pos) & 1 != 0
}

fn sext(v: u64, width: u32) -> i64 {
    let s = 64 - width;
    ((v << s) as i64) >> s
}

/// Decodes one instruction; an encoding outside the implemented tables is an error naming it.
pub fn decode(raw: u64) -> Result<Instr, DecodeError> {
    let mut i = Instr {
        raw,
        sy: bit(raw, 60),
        ss: bit(raw, 44),
        jp: bit(raw, 59),
        ul: false,
        sat: false,
        eq: false,
        ei: false,
        repeat: 0,
        nop: 0,
        op: Op::Flow0("nop"),
    };
    let unknown = || DecodeError::Unknown(raw);
    match bits(raw, 61, 63) {
        0 => decode_cat0(raw, &mut i).ok_or_else(unknown)?,
        1 => decode_cat1(raw, &mut i).ok_or_else(unknown)?,
        2 => decode_cat2(raw, &mut i).ok_or_else(unknown)?,
        3 => decode_cat3(raw, &mut i).ok_or_else(unknown)?,
        4 => decode_cat4(raw, &mut i).ok_or_else(unknown)?,
        5 => i.op = Op::Tex(crate::tex::decode(raw).ok_or_else(unknown)?),
        6 => crate::decode6::decode_cat6(raw, &mut i).ok_or_else(unknown)?,
        _ => decode_cat7(raw, &mut i).ok_or_else(unknown)?,
    }
    Ok(i)
}

/// `#instruction-cat0` (ir3-cat0.xml): OPC is bits 55..58, OPC_HI bits 49..51 (bit 49 used on a6xx).
fn decode_cat0(w: u64, i: &mut Instr) -> Option<()> {
    i.eq = bit(w, 48);
    let opc = bits(w, 55, 58);
    let hi = bit(w, 49);
    let imm = bits(w, 0, 31) as u32 as i32;
    let inv1 = bit(w, 52);
    let comp1 = bits(w, 53, 54) as u8;
    i.op = match (hi, opc) {
        (false, 0)
        | (false, 6)
        | (false, 4)
        | (false, 9)
        | (false, 10)
        | (true, 8)
        | (true, 13)
        | (true, 14)
        | (true, 15) => {
            // `#instruction-cat0-0src`: bits 37..39, 45..47 and 52..54 are zero.
            if bits(w, 37, 39) != 0 || bits(w, 45, 47) != 0 || bits(w, 52, 54) != 0 {
                return None;
            }
            i.repeat = bits(w, 40, 42) as u8;
            Op::Flow0(match (hi, opc) {
                (false, 0) => "nop",
                (false, 6) => "end",
                (false, 4) => "ret",
                (false, 9) => "chmask",
                (false, 10) => "chsh",
                (true, 8) => "shpe",
                (true, 13) => "predt",
                (true, 14) => "predf",
                _ => "prede",
            })
        }
        (false, 5) => Op::Kill { inv: inv1, comp: comp1 },
        (false, 2) => Op::FlowImm("jump", imm),
        (false, 3) => Op::FlowImm("call", imm),
        (true, 0) => Op::FlowImm("bkt", imm),
        (true, 5) => Op::FlowImm("getone", imm),
        (true, 7) => Op::FlowImm("shps", imm),
        (false, 1) => {
            let kind = match bits(w, 37, 39) {
                0 => Branch::Br,
                1 => Branch::Brao,
                2 => Branch::Braa,
                4 => Branch::Bany,
                5 => Branch::Ball,
                _ => return None, // brac, brax: not emitted for compute kernels
            };
            Op::Branch { kind, inv1, comp1, inv2: bit(w, 45), comp2: bits(w, 46, 47) as u8, target: imm }
        }
        _ => return None,
    };
    Some(())
}

/// `#instruction-cat1-mov` and its `mov-immed`/`mov-const`/`mov-gpr`/`mov-relgpr`/`mov-relconst`.
fn decode_cat1(w: u64, i: &mut Instr) -> Option<()> {
    if bit(w, 42) {
        return None;
    }
    match bits(w, 57, 58) {
        0 => {}
        2 => return decode_cat1_multi(w, i),
        _ => return None, // movmsk and the rest are not implemented
    }
    i.ul = bit(w, 45);
    i.repeat = bits(w, 40, 41) as u8;
    let dst_type = Type::from_bits(bits(w, 46, 48));
    let src_type = Type::from_bits(bits(w, 50, 52));
    let half = src_type.is_half() || bits(w, 50, 52) == 7;
    let dst_raw = bits(w, 32, 39) as u16;
    let dst = if bit(w, 49) { Dst::RelGpr(dst_raw) } else { Dst::Gpr(dst_raw) };
    let mut src = match bits(w, 53, 54) {
        2 => Src::new(SrcKind::Raw(bits(w, 0, 31) as u32), half),
        1 => {
            if bits(w, 11, 31) != 0 {
                return None;
            }
            Src::new(SrcKind::Const(bits(w, 0, 10) as u16), half)
        }
        0 if bit(w, 11) => {
            if bits(w, 12, 31) != 0 {
                return None;
            }
            let off = sext(bits(w, 0, 9), 10) as i16;
            Src::new(if bit(w, 10) { SrcKind::RelConst(off) } else { SrcKind::RelGpr(off) }, half)
        }
        0 => {
            if bits(w, 8, 9) != 0 || bits(w, 12, 31) != 0 {
                return None;
            }
            let mut s = Src::new(SrcKind::Gpr(bits(w, 0, 7) as u16), half);
            s.last = bit(w, 10);
            s
        }
        _ => return None,
    };
    src.r = bit(w, 43);
    i.op = Op::Mov { src_type, dst_type, round: bits(w, 55, 56) as u8, dst, src };
    Some(())
}

/// `#instruction-cat1-multi`: `swz` (SUB_OPC 0), `gat` (1), `sct` (2); SRC0 bits 0..7, DST0 bits 32..39, the other
/// three operand bytes at 8..31; SRC_R (43), DST_REL (49) and bits 53..54 are zero.
fn decode_cat1_multi(w: u64, i: &mut Instr) -> Option<()> {
    if bit(w, 43) || bit(w, 49) || bits(w, 53, 54) != 0 {
        return None;
    }
    i.ul = bit(w, 45);
    let byte = |k: u32| bits(w, 8 * k, 8 * k + 7) as u16;
    let (d0, s0) = (bits(w, 32, 39) as u16, byte(0));
    let (name, dsts, srcs) = match bits(w, 40, 41) {
        0 if byte(3) == 0 => ("swz", vec![d0, byte(2)], vec![s0, byte(1)]),
        1 => ("gat", vec![d0, d0 + 1, d0 + 2, d0 + 3], vec![s0, byte(1), byte(2), byte(3)]),
        2 => ("sct", vec![d0, byte(1), byte(2), byte(3)], vec![s0, s0 + 1, s0 + 2, s0 + 3]),
        _ => return None,
    };
    i.op = Op::Multi {
        name,
        src_type: Type::from_bits(bits(w, 50, 52)),
        dst_type: Type::from_bits(bits(w, 46, 48)),
        round: bits(w, 55, 56) as u8,
        dsts,
        srcs,
    };
    Some(())
}

/// `#multisrc` (ir3-common.xml): 16 bits of a cat2/cat4 source.
fn multisrc(v: u64, full: bool, r: bool) -> Option<Src> {
    let half = !full;
    let mut s = match bits(v, 11, 13) {
        0b000 => {
            if bits(v, 8, 9) != 0 {
                return None;
            }
            let mut s = Src::new(SrcKind::Gpr(bits(v, 0, 7) as u16), half);
            s.last = bit(v, 10);
            s
        }
        0b010 | 0b110 => Src::new(SrcKind::Const(bits(v, 0, 10) as u16), half),
        0b100 => Src::new(SrcKind::Imm(sext(bits(v, 0, 10), 11) as i32), half),
        0b101 => Src::new(SrcKind::Flut(bits(v, 0, 9) as u8), bit(v, 10)),
        0b001 => {
            let off = sext(bits(v, 0, 9), 10) as i16;
            Src::new(if bit(v, 10) { SrcKind::RelConst(off) } else { SrcKind::RelGpr(off) }, half)
        }
        _ => return None,
    };
    let absneg = bits(v, 14, 15);
    s.neg = absneg & 1 != 0;
    s.abs = absneg & 2 != 0;
    s.r = r;
    Some(s)
}

/// `#dest-half`: half when FULL == DST_CONV, except p0.x/a0.x and above.
fn dest_half(full: bool, conv: bool, dst: u16) -> bool {
    full == conv && dst <= 0xf7
}

pub(crate) const CAT2: [(u8, &str, u8); 44] = [
    // (opc, name, kind) kind: 1 = one source, 2 = two sources, 3 = two sources with a condition.
    (0, "add.f", 2),
    (1, "min.f", 2),
    (2, "max.f", 2),
    (3, "mul.f", 2),
    (4, "sign.f", 1),
    (5, "cmps.f", 3),
    (6, "absneg.f", 1),
    (7, "cmpv.f", 3),
    (9, "floor.f", 1),
    (10, "ceil.f", 1),
    (11, "rndne.f", 1),
    (12, "rndaz.f", 1),
    (13, "trunc.f", 1),
    (16, "add.u", 2),
    (17, "add.s", 2),
    (18, "sub.u", 2),
    (19, "sub.s", 2),
    (20, "cmps.u", 3),
    (21, "cmps.s", 3),
    (22, "min.u", 2),
    (23, "min.s", 2),
    (24, "max.u", 2),
    (25, "max.s", 2),
    (26, "absneg.s", 1),
    (28, "and.b", 2),
    (29, "or.b", 2),
    (30, "not.b", 1),
    (31, "xor.b", 2),
    (33, "cmpv.u", 3),
    (34, "cmpv.s", 3),
    (48, "mul.u24", 2),
    (49, "mul.s24", 2),
    (50, "mull.u", 2),
    (51, "bfrev.b", 1),
    (52, "clz.s", 1),
    (53, "clz.b", 1),
    (54, "shl.b", 2),
    (55, "shr.b", 2),
    (56, "ashr.b", 2),
    (58, "mgen.b", 2),
    (59, "getbit.b", 2),
    (60, "setrm", 1),
    (61, "cbits.b", 1),
    (62, "shb", 2),
];

/// The cat2 opcode table (ir3-cat2.xml, OPC bits 53..58), for the guard tests.
pub fn cat2_names() -> impl Iterator<Item = &'static str> {
    CAT2.iter().map(|e| e.1)
}

/// `#instruction-cat2` (ir3-cat2.xml). `bary.f`, `flat.b` and `msad` are not implemented.
fn decode_cat2(w: u64, i: &mut Instr) -> Option<()> {
    let opc = bits(w, 53, 58) as u8;
    let &(_, name, kind) = CAT2.iter().find(|e| e.0 == opc)?;
    let full = bit(w, 52);
    let dst = bits(w, 32, 39) as u16;
    let (r1, r2) = (bit(w, 43), bit(w, 51));
    i.repeat = bits(w, 40, 41) as u8;
    i.sat = bit(w, 42);
    i.ul = bit(w, 45);
    i.ei = bit(w, 47);
    // `#cat2-cat3-nop-encoding`: with no repeat, the (r) bits count delay slots instead.
    let nop_enc = (r1 || r2) && i.repeat == 0;
    if nop_enc {
        i.nop = r1 as u8 | (r2 as u8) << 1;
    }
    let (r1, r2) = if nop_enc { (false, false) } else { (r1, r2) };
    let src1 = multisrc(bits(w, 0, 15), full, r1)?;
    let src2 = if kind == 1 { None } else { Some(multisrc(bits(w, 16, 31), full, r2)?) };
    let cond = if kind == 3 {
        Some(match bits(w, 48, 50) {
            0 => Cond::Lt,
            1 => Cond::Le,
            2 => Cond::Gt,
            3 => Cond::Ge,
            4 => Cond::Eq,
            5 => Cond::Ne,
            _ => return None,
        })
    } else {
        None
    };
    let dst_half = dest_half(full, bit(w, 46), dst);
    i.op = Op::Alu2 { name, opc, cond, dst, dst_half, full, src1, src2 };
    Some(())
}

/// `#cat3-src` (ir3-cat3.xml): 13 bits; `immed` for the `#instruction-cat3-alt` forms.
fn cat3_src(v: u64, half: bool, immed: bool, r: bool, neg: bool) -> Option<Src> {
    let mut s = match bits(v, 11, 12) {
        0b00 => {
            if bits(v, 8, 9) != 0 {
                return None;
            }
            let mut s = Src::new(SrcKind::Gpr(bits(v, 0, 7) as u16), half);
            s.last = bit(v, 10);
            s
        }
        0b10 | 0b11 if immed => Src::new(SrcKind::Imm(bits(v, 0, 11) as i32), half),
        0b10 => Src::new(SrcKind::Const(bits(v, 0, 10) as u16), half),
        0b01 => {
            let off = sext(bits(v, 0, 9), 10) as i16;
            Src::new(if bit(v, 10) { SrcKind::RelConst(off) } else { SrcKind::RelGpr(off) }, half)
        }
        _ => return None,
    };
    s.r = r;
    s.neg = neg;
    Some(s)
}

const CAT3: [(&str, bool); 16] = [
    ("mad.u16", false),
    ("madsh.u16", true),
    ("mad.s16", false),
    ("madsh.m16", true),
    ("mad.u24", true),
    ("mad.s24", true),
    ("mad.f16", false),
    ("mad.f32", true),
    ("sel.b16", false),
    ("sel.b32", true),
    ("sel.s16", false),
    ("sel.s32", true),
    ("sel.f16", false),
    ("sel.f32", true),
    ("sad.s16", false),
    ("sad.s32", true),
];
const CAT3_ALT: [&str; 5] = ["shrm", "shlm", "shrg", "shlg", "andg"];

/// (alt, opc, name) of every cat3 opcode.
pub(crate) fn cat3_table() -> impl Iterator<Item = (bool, u8, &'static str)> {
    CAT3.iter()
        .enumerate()
        .map(|(i, e)| (false, i as u8, e.0))
        .chain(CAT3_ALT.iter().enumerate().map(|(i, n)| (true, 8 + i as u8, *n)))
}

/// The cat3 opcode names (both tables), for the guard tests.
pub fn cat3_names() -> impl Iterator<Item = &'static str> {
    CAT3.iter().map(|e| e.0).chain(CAT3_ALT)
}

/// `#instruction-cat3` / `#instruction-cat3-alt` (bit 13 selects). dp2acc/dp4acc/wmm are not implemented.
fn decode_cat3(w: u64, i: &mut Instr) -> Option<()> {
    let opc = bits(w, 55, 58) as u8;
    let alt = bit(w, 13);
    let (name, full) = if alt {
        if !(8..=12).contains(&opc) {
            return None;
        }
        (CAT3_ALT[opc as usize - 8], bit(w, 42))
    } else {
        CAT3[opc as usize]
    };
    i.repeat = bits(w, 40, 41) as u8;
    i.ul = bit(w, 45);
    if !alt {
        i.sat = bit(w, 42);
    }
    let (mut r1, mut r2, mut r3) = (bit(w, 43), bit(w, 15), bit(w, 29));
    if (r1 || r2) && i.repeat == 0 {
        i.nop = r1 as u8 | (r2 as u8) << 1;
        (r1, r2, r3) = (false, false, false);
    }
    let half = !full;
    let dst = bits(w, 32, 39) as u16;
    let src1 = cat3_src(bits(w, 0, 12), half, alt, r1, bit(w, 14))?;
    let mut src2 = Src::new(SrcKind::Gpr(bits(w, 47, 54) as u16), half);
    src2.r = r2;
    src2.neg = bit(w, 30);
    let src3 = cat3_src(bits(w, 16, 28), half, alt, r3, bit(w, 31))?;
    let dst_half = dest_half(full, bit(w, 46), dst);
    i.op = Op::Alu3 { name, opc, alt, dst, dst_half, full, src: [src1, src2, src3] };
    Some(())
}

pub(crate) const CAT4: [(u8, &str); 10] = [
    (0, "rcp"),
    (1, "rsq"),
    (2, "log2"),
    (3, "exp2"),
    (4, "sin"),
    (5, "cos"),
    (6, "sqrt"),
    (9, "hrsq"),
    (10, "hlog2"),
    (11, "hexp2"),
];

/// The cat4 opcode names, for the guard tests.
pub fn cat4_names() -> impl Iterator<Item = &'static str> {
    CAT4.iter().map(|e| e.1)
}

/// `#instruction-cat4` (ir3-cat4.xml).
fn decode_cat4(w: u64, i: &mut Instr) -> Option<()> {
    let opc = bits(w, 53, 58) as u8;
    let &(_, name) = CAT4.iter().find(|e| e.0 == opc)?;
    let full = bit(w, 52);
    i.repeat = bits(w, 40, 41) as u8;
    i.sat = bit(w, 42);
    i.ul = bit(w, 45);
    let dst = bits(w, 32, 39) as u16;
    let src = multisrc(bits(w, 0, 15), full, bit(w, 43))?;
    i.op = Op::Sfu { name, opc, dst, dst_half: dest_half(full, bit(w, 46), dst), full, src };
    Some(())
}

/// `#instruction-cat7` (ir3-cat7.xml); `alias`, `lock`, `unlock`, `ccinv` (a7xx) are not decoded.
fn decode_cat7(w: u64, i: &mut Instr) -> Option<()> {
    let opc = bits(w, 55, 58);
    i.op = match opc {
        0 | 1 => {
            if !bit(w, 49) {
                return None; // `#instruction-cat7-barrier`: bits 45..50 are `x1xxxx`, high bit first
            }
            Op::Barrier {
                name: if opc == 0 { "bar" } else { "fence" },
                w: bit(w, 51),
                r: bit(w, 52),
                l: bit(w, 53),
                g: bit(w, 54),
            }
        }
        2 => Op::Cat7(format!("sleep{}", if bit(w, 51) { ".l" } else { ".s" })),
        3 => Op::Cat7("icinv".into()),
        4..=6 => {
            if bit(w, 52) {
                return None; // `#instruction-cat7-data`: bits 52..54 are `xx0`
            }
            let name = ["dccln", "dcinv", "dcflu"][opc as usize - 4];
            Op::Cat7(format!("{name}{}", if bit(w, 51) { ".all" } else { ".shr" }))
        }
        _ => return None,
    };
    Some(())
}
