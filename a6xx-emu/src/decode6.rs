//! Cat6 (memory) decoding, from Mesa's `src/freedreno/isa/ir3-cat6.xml` (a6xx forms, gen 600..699).

use crate::decode::{bits, GAddr, Instr, Op, Space, Src, SrcKind, Type};

fn bit(w: u64, pos: u32) -> bool {
    (w >> pos) & 1 != 0
}

/// The `offset` field type: a 13-bit signed byte offset.
fn offset13(v: u64) -> i32 {
    (((v << 51) as i64) >> 51) as i32
}

const ATOMICS: [&str; 11] = ["add", "sub", "xchg", "inc", "dec", "cmpxchg", "min", "max", "and", "or", "xor"];
/// `atomic.b.*` opcodes (bits 14..19) in the order of [`ATOMICS`]; inc/dec have no bindless form.
const ATOMIC_B_OPC: [u64; 11] = [0x10, 0x11, 0x12, 0xff, 0xff, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a];

/// The cat6 mnemonics the decoder knows (atomics by family), for the guard tests.
pub fn cat6_names() -> Vec<String> {
    let mut v: Vec<String> =
        ["ldg", "ldg.a", "stg", "stg.a", "ldl", "ldlw", "ldp", "stl", "stlw", "stp", "stc", "ldib.b", "stib.b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    for a in ATOMICS {
        v.push(format!("atomic.{a}"));
        v.push(format!("atomic.g.{a}"));
        if a != "inc" && a != "dec" {
            v.push(format!("atomic.b.{a}"));
        }
    }
    v
}

/// `#cat6-src`: a register or, with `im`, an 8-bit immediate.
fn cat6_src(v: u64, im: bool) -> Src {
    let kind = if im { SrcKind::Imm(v as i32) } else { SrcKind::Gpr(v as u16) };
    Src { kind, half: false, r: false, last: false, abs: false, neg: false }
}

pub(crate) fn decode_cat6(w: u64, i: &mut Instr) -> Option<()> {
    let ty = Type::from_bits_pub(bits(w, 49, 51));
    let opc = bits(w, 54, 58);
    let d = bits(w, 9, 10) as u8 + 1;
    let typed = bit(w, 11);
    let type_size = bits(w, 12, 13) as u8 + 1;
    if bits(w, 52, 53) >= 2 && !bit(w, 40) && bits(w, 20, 22) == 0b110 {
        // `#instruction-cat6-a6xx-ibo-base`: ldib.b / stib.b (load-store, with OFFSET) and atomic.b.*.
        let op14 = bits(w, 14, 19);
        let load_store = bits(w, 52, 53) == 0b10;
        let name: &'static str = if load_store {
            match op14 {
                0b000110 => "ldib.b",
                0b011101 if !bit(w, 0) => "stib.b",
                _ => return None,
            }
        } else {
            let k = ATOMIC_B_OPC.iter().position(|&o| o == op14)?;
            if bit(w, 23) || bits(w, 4, 5) != 0 || opc != 0 {
                return None;
            }
            [
                "atomic.b.add",
                "atomic.b.sub",
                "atomic.b.xchg",
                "",
                "",
                "atomic.b.cmpxchg",
                "atomic.b.min",
                "atomic.b.max",
                "atomic.b.and",
                "atomic.b.or",
                "atomic.b.xor",
            ][k]
        };
        let offset = if load_store && bit(w, 23) {
            (bits(w, 4, 5) << 5 | opc) as u32
        } else if bits(w, 4, 5) != 0 || opc != 0 {
            return None;
        } else {
            0
        };
        let mode = bits(w, 6, 7) as u8;
        if mode == 3 {
            return None;
        }
        i.op = Op::Ibo {
            name,
            typed,
            d,
            ty,
            type_size,
            mode,
            bindless: bit(w, 8),
            base: bits(w, 1, 3) as u8,
            src1: bits(w, 32, 39) as u16,
            src2: bits(w, 24, 31) as u16,
            offset,
            ssbo: cat6_src(bits(w, 41, 48), mode == 0),
        };
        return Some(());
    }
    if bits(w, 52, 53) != 0 && !matches!(opc, 0b00001 | 0b01010 | 0b00010 | 0b00100 | 0b01011 | 0b00101 | 0b11100) {
        // ldg.a/stg.a use bit 52 as the `.a` marker; everything else with 52..53 set is not implemented.
        if !(bits(w, 52, 53) == 1 && (opc == 0b00011 || (0b10000..=0b11010).contains(&opc))) {
            return None;
        }
    }
    i.op = match opc {
        // `#instruction-cat6-ldg` (patterns are written high bit first): ldg (bit 22 = 0), ldg.a (bit 22 = 1, gen 600..699).
        0b00000 => {
            if !bit(w, 0) || !bit(w, 23) || bits(w, 30, 31) != 0 || bits(w, 52, 53) != 0 {
                return None;
            }
            let addr = if bit(w, 22) {
                if bit(w, 11) {
                    return None;
                }
                GAddr::Indexed {
                    idx: bits(w, 1, 8) as u16,
                    off: bits(w, 9, 10) as u32,
                    dword_shift: bits(w, 12, 13) as u8,
                }
            } else {
                GAddr::Imm(offset13(bits(w, 1, 13)))
            };
            Op::Ldg { ty, dst: bits(w, 32, 39) as u16, base: bits(w, 14, 21) as u16, addr, size: bits(w, 24, 26) as u8 }
        }
        // `#instruction-cat6-stg`: stg (bit 52 = 0), stg.a (bit 52 = 1).
        0b00011 => {
            if !bit(w, 23) || bits(w, 30, 31) != 0 || bit(w, 53) {
                return None;
            }
            let addr = if bit(w, 52) {
                if bit(w, 11) {
                    return None;
                }
                GAddr::Indexed {
                    idx: bits(w, 32, 39) as u16,
                    off: bits(w, 9, 10) as u32,
                    dword_shift: bits(w, 12, 13) as u8,
                }
            } else {
                GAddr::Imm(offset13(bits(w, 9, 13) << 8 | bits(w, 32, 39)))
            };
            Op::Stg { ty, src: bits(w, 1, 8) as u16, base: bits(w, 41, 48) as u16, addr, size: bits(w, 24, 26) as u8 }
        }
        // `#instruction-cat6-a3xx-ld`: ldl, ldlw, ldp.
        0b00001 | 0b01010 | 0b00010 => {
            if !bit(w, 0) || !bit(w, 23) {
                return None;
            }
            Op::Ldl {
                space: match opc {
                    0b00001 => Space::L,
                    0b01010 => Space::Lw,
                    _ => Space::P,
                },
                ty,
                dst: bits(w, 32, 39) as u16,
                src: bits(w, 14, 21) as u16,
                off: offset13(bits(w, 1, 13)),
                size: bits(w, 24, 31) as u8,
            }
        }
        // `#instruction-cat6-a3xx-st`: stl, stlw, stp (bit 0 clear).
        0b00100 | 0b01011 | 0b00101 => {
            if !bit(w, 23) || !bit(w, 40) || (opc == 0b00101 && bit(w, 0)) {
                return None;
            }
            Op::Stl {
                space: match opc {
                    0b00100 => Space::L,
                    0b01011 => Space::Lw,
                    _ => Space::P,
                },
                ty,
                dst: bits(w, 41, 48) as u16,
                src: bits(w, 1, 8) as u16,
                off: offset13(bits(w, 9, 13) << 8 | bits(w, 32, 39)),
                size: bits(w, 24, 31) as u8,
            }
        }
        // `#instruction-cat6-a3xx-atomic-local` (bit 52 = 0) and `#instruction-cat6-a6xx-atomic-global` (bit 52 = 1).
        0b10000..=0b11010 => {
            if !bit(w, 0) || bits(w, 1, 8) != 0 || bits(w, 41, 48) != 0 || bit(w, 22) || bit(w, 23) {
                return None;
            }
            let k = (opc - 0b10000) as usize;
            let (dst, src1, src2) = (bits(w, 32, 39) as u16, bits(w, 14, 21) as u16, bits(w, 24, 31) as u16);
            if bit(w, 52) {
                let name = [
                    "atomic.g.add",
                    "atomic.g.sub",
                    "atomic.g.xchg",
                    "atomic.g.inc",
                    "atomic.g.dec",
                    "atomic.g.cmpxchg",
                    "atomic.g.min",
                    "atomic.g.max",
                    "atomic.g.and",
                    "atomic.g.or",
                    "atomic.g.xor",
                ][k];
                Op::AtomicG { name, typed, d, ty, type_size, dst, src1, src2 }
            } else {
                let name = [
                    "atomic.add",
                    "atomic.sub",
                    "atomic.xchg",
                    "atomic.inc",
                    "atomic.dec",
                    "atomic.cmpxchg",
                    "atomic.min",
                    "atomic.max",
                    "atomic.and",
                    "atomic.or",
                    "atomic.xor",
                ][k];
                Op::AtomicL { name, typed, d, ty, type_size, dst, src1, src2 }
            }
        }
        // `stc`: `c[dst] <- src` (size consts); DST is `#const-dst` (bit 8 of it selects `a1.x` + offset).
        0b11100 => {
            if bits(w, 14, 22) != 0 || !bit(w, 23) {
                return None;
            }
            Op::Stc {
                ty,
                src: bits(w, 1, 8) as u16,
                dst: bits(w, 32, 39) as u16,
                a1: bit(w, 40),
                size: bits(w, 24, 26) as u8,
            }
        }
        _ => return None,
    };
    Some(())
}
