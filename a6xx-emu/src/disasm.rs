//! Mesa's assembly syntax for decoded instructions: the `<display>` templates of
//! `src/freedreno/isa/ir3-cat*.xml`, so the text compares line by line with `ir3-disasm`.

use std::fmt::{self, Write};

use crate::decode::{Branch, Cond, Dst, GAddr, Instr, Op, Space, Src, SrcKind, Type};

const SWIZ: [char; 4] = ['x', 'y', 'z', 'w'];

/// `#reg-gpr`: `rN.c`, with the `a0.c` (61) and `p0.c` (62) overrides.
fn gpr(n: u16) -> String {
    let c = SWIZ[(n & 3) as usize];
    match n >> 2 {
        61 => format!("a0.{c}"),
        62 => format!("p0.{c}"),
        g => format!("r{g}.{c}"),
    }
}

fn h(half: bool) -> &'static str {
    if half {
        "h"
    } else {
        ""
    }
}

fn rel(file: char, off: i16) -> String {
    if off == 0 {
        format!("{file}<a0.x>")
    } else {
        format!("{file}<a0.x + {off}>")
    }
}

/// The `#flut` enum of ir3-common.xml.
const FLUT: [&str; 12] = [
    "(0.0)",
    "(0.5)",
    "(1.0)",
    "(2.0)",
    "(e)",
    "(pi)",
    "(1/pi)",
    "(1/log2(e))",
    "(log2(e))",
    "(1/log2(10))",
    "(log2(10))",
    "(4.0)",
];

fn absneg(s: &Src) -> &'static str {
    match (s.abs, s.neg) {
        (false, false) => "",
        (false, true) => "(neg)",
        (true, false) => "(abs)",
        (true, true) => "(absneg)",
    }
}

fn r(b: bool) -> &'static str {
    if b {
        "(r)"
    } else {
        ""
    }
}

fn last(b: bool) -> &'static str {
    if b {
        "(last)"
    } else {
        ""
    }
}

/// `#multisrc` display (cat2, cat4).
fn multisrc(s: &Src) -> String {
    let (an, rr, hh) = (absneg(s), r(s.r), h(s.half));
    match s.kind {
        SrcKind::Gpr(n) => format!("{}{an}{rr}{hh}{}", last(s.last), gpr(n)),
        SrcKind::Const(n) => format!("{an}{rr}{hh}c{}.{}", n >> 2, SWIZ[(n & 3) as usize]),
        SrcKind::Imm(v) if s.half => format!("{an}{rr}h({v})"),
        SrcKind::Imm(v) => format!("{an}{rr}{v}"),
        SrcKind::Flut(i) => format!("{an}{rr}{hh}{}", FLUT.get(i as usize).copied().unwrap_or("(?)")),
        SrcKind::RelGpr(o) => format!("{an}{rr}{hh}{}", rel('r', o)),
        SrcKind::RelConst(o) => format!("{an}{rr}{hh}{}", rel('c', o)),
        SrcKind::Raw(v) => format!("{v}"),
    }
}

/// `#cat3-src` display (the (neg)/(r) prefixes are printed by the instruction).
fn cat3src(s: &Src) -> String {
    let hh = h(s.half);
    match s.kind {
        SrcKind::Gpr(n) => format!("{}{hh}{}", last(s.last), gpr(n)),
        SrcKind::Const(n) => format!("{hh}c{}.{}", n >> 2, SWIZ[(n & 3) as usize]),
        SrcKind::Imm(v) => format!("{v}"),
        SrcKind::RelGpr(o) => format!("{hh}r<a0.x + {o}>"),
        SrcKind::RelConst(o) => format!("{hh}c<a0.x + {o}>"),
        SrcKind::Flut(_) | SrcKind::Raw(_) => "?".into(),
    }
}

/// `#cat1-immed-src` display for the given source type.
fn cat1_immed(v: u32, ty: Type) -> String {
    match ty {
        Type::F16 => format!("h({:.6})", half::f16::from_bits(v as u16).to_f32()),
        Type::F32 => format!("({:.6})", f32::from_bits(v)),
        Type::U32 if v > 0x1000 => format!("0x{v:x}"),
        Type::S16 => format!("{}", v as u16 as i16),
        Type::S32 => format!("{}", v as i32),
        _ => format!("{v}"),
    }
}

fn cat1_src(s: &Src, ty: Type) -> String {
    let (rr, hh) = (r(s.r), h(s.half));
    match s.kind {
        SrcKind::Raw(v) => cat1_immed(v, ty),
        SrcKind::Gpr(n) => format!("{}{rr}{hh}{}", last(s.last), gpr(n)),
        SrcKind::Const(n) => format!("{rr}{hh}c{}.{}", n >> 2, SWIZ[(n & 3) as usize]),
        SrcKind::RelGpr(o) => format!("{rr}{hh}{}", rel('r', o)),
        SrcKind::RelConst(o) => format!("{rr}{hh}{}", rel('c', o)),
        SrcKind::Imm(_) | SrcKind::Flut(_) => "?".into(),
    }
}

/// The `offset` field type: `+N`, `-N`, or nothing for zero.
fn offset(v: i64) -> String {
    match v {
        0 => String::new(),
        v if v > 0 => format!("+{v}"),
        v => format!("{v}"),
    }
}

fn cond(c: Cond) -> &'static str {
    ["lt", "le", "gt", "ge", "eq", "ne"][c as usize]
}

fn atomic_type(ty: Type) -> &'static str {
    if ty == Type::U8 {
        "u64"
    } else {
        ty.name()
    }
}

const WRMASK: [&str; 16] =
    ["", "x", "y", "xy", "z", "xz", "yz", "xyz", "w", "xw", "yw", "xyw", "zw", "xzw", "yzw", "xyzw"];

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut o = String::new();
        let flag = |o: &mut String, b: bool, s: &str| {
            if b {
                o.push_str(s)
            }
        };
        flag(&mut o, self.sy, "(sy)");
        // Cat5/cat6 have no (ss) bit: bit 44 belongs to their operands.
        let cat = self.raw >> 61;
        flag(&mut o, self.ss && cat != 5 && cat != 6, "(ss)");
        let rpt = if self.repeat > 0 { format!("(rpt{})", self.repeat) } else { String::new() };
        match &self.op {
            Op::Flow0(name) => {
                flag(&mut o, self.eq, "(eq)");
                flag(&mut o, self.jp, "(jp)");
                write!(o, "{rpt}{name}")?;
            }
            Op::FlowImm(name, t) => {
                flag(&mut o, self.jp, "(jp)");
                write!(o, "{name} #{t}")?;
            }
            Op::Branch { kind, inv1, comp1, inv2, comp2, target } => {
                flag(&mut o, self.eq, "(eq)");
                flag(&mut o, self.jp, "(jp)");
                let p1 = format!("{}p0.{}", if *inv1 { "!" } else { "" }, SWIZ[*comp1 as usize]);
                let p2 = format!("{}p0.{}", if *inv2 { "!" } else { "" }, SWIZ[*comp2 as usize]);
                match kind {
                    Branch::Br => write!(o, "br {p1}, #{target}")?,
                    Branch::Bany => write!(o, "bany {p1}, #{target}")?,
                    Branch::Ball => write!(o, "ball {p1}, #{target}")?,
                    Branch::Brao => write!(o, "brao {p1}, {p2}, #{target}")?,
                    Branch::Braa => write!(o, "braa {p1}, {p2}, #{target}")?,
                }
            }
            Op::Kill { inv, comp } => {
                flag(&mut o, self.eq, "(eq)");
                flag(&mut o, self.jp, "(jp)");
                write!(o, "kill {}p0.{}", if *inv { "!" } else { "" }, SWIZ[*comp as usize])?;
            }
            Op::Multi { name, src_type, dst_type, round, dsts, srcs } => {
                flag(&mut o, self.jp, "(jp)");
                flag(&mut o, self.ul, "(ul)");
                let round = ["", "(even)", "(pos_infinity)", "(neg_infinity)"][*round as usize];
                // `#instruction-cat1-typed`: HALF/DST_HALF are also set for the 8-bit types.
                let half = |t: Type| h(t.is_half() || t == Type::U8x32);
                let d = |n: &u16| format!("{}{}", half(*dst_type), gpr(*n));
                let s = |n: &u16| format!("{}{}", half(*src_type), gpr(*n));
                let ops: Vec<String> = match *name {
                    "swz" => vec![d(&dsts[0]), d(&dsts[1]), s(&srcs[0]), s(&srcs[1])],
                    "gat" => std::iter::once(d(&dsts[0])).chain(srcs.iter().map(s)).collect(),
                    _ => dsts.iter().map(d).chain(std::iter::once(s(&srcs[0]))).collect(),
                };
                write!(o, "{name}.{}{} {round}{}", src_type.name(), dst_type.name(), ops.join(", "))?;
            }
            Op::Mov { src_type, dst_type, round, dst, src } => {
                flag(&mut o, self.jp, "(jp)");
                o.push_str(&rpt);
                flag(&mut o, self.ul, "(ul)");
                let round = ["", "(even)", "(pos_infinity)", "(neg_infinity)"][*round as usize];
                let s = cat1_src(src, *src_type);
                match dst {
                    Dst::Gpr(0xf4) if *src_type == Type::S16 && *dst_type == Type::S16 => {
                        write!(o, "mova {round}a0.x, {s}")?
                    }
                    Dst::Gpr(0xf5) if *src_type == Type::U16 && *dst_type == Type::U16 => {
                        write!(o, "mova1 {round}a1.x, {s}")?
                    }
                    _ => {
                        let name = if src_type == dst_type { "mov" } else { "cov" };
                        let d = match dst {
                            Dst::Gpr(n) => gpr(*n),
                            Dst::RelGpr(off) => rel('r', *off as i16),
                        };
                        let dh = h(dst_type.is_half() || *dst_type == Type::U8x32);
                        write!(o, "{name}.{}{} {round}{dh}{d}, {s}", src_type.name(), dst_type.name())?;
                    }
                }
            }
            Op::Alu2 { name, cond: c, dst, dst_half, src1, src2, .. } => {
                flag(&mut o, self.jp, "(jp)");
                flag(&mut o, self.sat, "(sat)");
                if self.nop > 0 {
                    write!(o, "(nop{}) ", self.nop)?;
                } else {
                    o.push_str(&rpt);
                }
                flag(&mut o, self.ul, "(ul)");
                o.push_str(name);
                if let Some(c) = c {
                    write!(o, ".{}", cond(*c))?;
                }
                write!(o, " {}{}{}, {}", if self.ei { "(ei)" } else { "" }, h(*dst_half), gpr(*dst), multisrc(src1))?;
                if let Some(s2) = src2 {
                    write!(o, ", {}", multisrc(s2))?;
                }
            }
            Op::Alu3 { name, dst, dst_half, src, .. } => {
                flag(&mut o, self.jp, "(jp)");
                flag(&mut o, self.sat, "(sat)");
                if self.nop > 0 {
                    write!(o, "(nop{}) ", self.nop)?;
                } else {
                    o.push_str(&rpt);
                }
                flag(&mut o, self.ul, "(ul)");
                let neg = |s: &Src| if s.neg { "(neg)" } else { "" };
                write!(
                    o,
                    "{name} {}{}, {}{}{}, {}{}{}{}, {}{}{}",
                    h(*dst_half),
                    gpr(*dst),
                    neg(&src[0]),
                    r(src[0].r),
                    cat3src(&src[0]),
                    neg(&src[1]),
                    r(src[1].r),
                    last(src[1].last),
                    format_args!(
                        "{}{}",
                        h(src[1].half),
                        gpr(match src[1].kind {
                            SrcKind::Gpr(n) => n,
                            _ => 0,
                        })
                    ),
                    neg(&src[2]),
                    r(src[2].r),
                    cat3src(&src[2])
                )?;
            }
            Op::Sfu { name, dst, dst_half, src, .. } => {
                flag(&mut o, self.jp, "(jp)");
                flag(&mut o, self.sat, "(sat)");
                o.push_str(&rpt);
                flag(&mut o, self.ul, "(ul)");
                write!(o, "{name} {}{}, {}", h(*dst_half), gpr(*dst), multisrc(src))?;
            }
            Op::Tex(t) => {
                flag(&mut o, self.jp, "(jp)");
                o.push_str(t.name);
                flag(&mut o, t.is_3d, ".3d");
                flag(&mut o, t.a, ".a");
                flag(&mut o, t.o, ".o");
                flag(&mut o, t.p, ".p");
                flag(&mut o, t.sv, if t.opc == 0 { ".v" } else { ".s" });
                flag(&mut o, t.one_d, ".1d");
                write!(o, " ({})({}){}{}", t.ty.name(), WRMASK[t.wrmask as usize], h(t.ty.is_half()), gpr(t.dst))?;
                if let Some(s) = t.src1 {
                    write!(o, ", {}{}", h(t.half_src), gpr(s))?;
                }
                match t.src2 {
                    Some(s) => write!(o, ", {}{}", h(t.half_src), gpr(s))?,
                    None if t.src2_imm_offset => o.push_str(&offset(((self.raw >> 9) & 0xff) as i64)),
                    None => {}
                }
                if let Some(s) = t.samp {
                    write!(o, ", s#{s}")?;
                }
                if let Some(s) = t.tex {
                    write!(o, ", t#{s}")?;
                }
            }
            Op::Ldg { ty, dst, base, addr, size } => {
                flag(&mut o, self.jp, "(jp)");
                let g = gaddr(*base, addr);
                let name = if matches!(addr, GAddr::Imm(_)) { "ldg" } else { "ldg.a" };
                write!(o, "{name}.{} {}{}, {g}, {size}", ty.name(), h(ty.is_half()), gpr(*dst))?;
            }
            Op::Stg { ty, src, base, addr, size } => {
                flag(&mut o, self.jp, "(jp)");
                let g = gaddr(*base, addr);
                let name = if matches!(addr, GAddr::Imm(_)) { "stg" } else { "stg.a" };
                write!(o, "{name}.{} {g}, {}{}, {size}", ty.name(), h(ty.is_half()), gpr(*src))?;
            }
            Op::Ldl { space, ty, dst, src, off, size } => {
                flag(&mut o, self.jp, "(jp)");
                // Only `ldp`'s display template carries TYPE_HALF.
                let (name, file, hh) = match space {
                    Space::L => ("ldl", 'l', ""),
                    Space::Lw => ("ldlw", 'l', ""),
                    Space::P => ("ldp", 'p', h(ty.is_half())),
                };
                write!(
                    o,
                    "{name}.{} {hh}{}, {file}[{}{}], {size}",
                    ty.name(),
                    gpr(*dst),
                    gpr(*src),
                    offset(*off as i64)
                )?;
            }
            Op::Stl { space, ty, dst, src, off, size } => {
                flag(&mut o, self.jp, "(jp)");
                let (name, file) = match space {
                    Space::L => ("stl", 'l'),
                    Space::Lw => ("stlw", 'l'),
                    Space::P => ("stp", 'p'),
                };
                write!(o, "{name}.{} {file}[{}{}], {}, {size}", ty.name(), gpr(*dst), offset(*off as i64), gpr(*src))?;
            }
            Op::AtomicL { name, typed, d, ty, type_size, dst, src1, src2 } => {
                flag(&mut o, self.jp, "(jp)");
                let t = if *typed { "typed" } else { "untyped" };
                write!(
                    o,
                    "{name}.{t}.{d}d.{}.{type_size}.l {}, l[{}], {}",
                    ty.name(),
                    gpr(*dst),
                    gpr(*src1),
                    gpr(*src2)
                )?;
            }
            Op::AtomicG { name, typed, d, ty, type_size, dst, src1, src2 } => {
                flag(&mut o, self.jp, "(jp)");
                let t = if *typed { "typed" } else { "untyped" };
                write!(
                    o,
                    "{name}.{t}.{d}d.{}.{type_size}.g {}, {}, {}",
                    atomic_type(*ty),
                    gpr(*dst),
                    gpr(*src1),
                    gpr(*src2)
                )?;
            }
            Op::Ibo { name, typed, d, ty, type_size, mode, bindless, base, src1, src2, offset: off, ssbo } => {
                flag(&mut o, self.jp, "(jp)");
                let t = if *typed { "typed" } else { "untyped" };
                let mode = ["imm", "uniform", "nonuniform"][*mode as usize];
                let base = if *bindless { format!(".base{base}") } else { String::new() };
                let ssbo = match ssbo.kind {
                    SrcKind::Imm(v) => v.to_string(),
                    SrcKind::Gpr(n) => gpr(n),
                    _ => "?".into(),
                };
                if name.starts_with("atomic") {
                    write!(
                        o,
                        "{name}.{t}.{d}d.{}.{type_size}.{mode}{base} {}, {}, {ssbo}",
                        atomic_type(*ty),
                        gpr(*src1),
                        gpr(*src2)
                    )?;
                } else {
                    write!(
                        o,
                        "{name}.{t}.{d}d.{}.{type_size}.{mode}{base} {}{}, {}{}, {ssbo}",
                        ty.name(),
                        h(ty.is_half()),
                        gpr(*src1),
                        gpr(*src2),
                        offset(*off as i64)
                    )?;
                }
            }
            Op::Stc { ty, src, dst, a1, size } => {
                flag(&mut o, self.jp, "(jp)");
                let c = if *a1 { format!("a1.x{}", offset(*dst as i64)) } else { dst.to_string() };
                write!(o, "stc.{} c[{c}], {}, {size}", ty.name(), gpr(*src))?;
            }
            Op::Barrier { name, g, l, r: rd, w } => {
                flag(&mut o, self.jp, "(jp)");
                o.push_str(name);
                flag(&mut o, *g, ".g");
                flag(&mut o, *l, ".l");
                flag(&mut o, *rd, ".r");
                flag(&mut o, *w, ".w");
            }
            Op::Cat7(text) => {
                flag(&mut o, self.jp, "(jp)");
                o.push_str(text);
            }
        }
        f.write_str(&o)
    }
}

/// `ldg`/`stg` address text (ir3-cat6.xml display templates of `ldg`, `ldg.a`, `stg`, `stg.a`).
fn gaddr(base: u16, addr: &GAddr) -> String {
    match *addr {
        GAddr::Imm(off) => format!("g[{}{}]", gpr(base), offset(off as i64)),
        GAddr::Indexed { idx, off, dword_shift: 0 } => {
            format!("g[{}+({}{})<<2]", gpr(base), gpr(idx), offset(off as i64))
        }
        GAddr::Indexed { idx, off, dword_shift } => {
            format!("g[{}+{}<<{}{}<<2]", gpr(base), gpr(idx), dword_shift + 2, offset(off as i64))
        }
    }
}
