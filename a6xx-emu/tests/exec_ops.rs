//! Instruction tests: small kernels written in ir3 assembly, encoded by Mesa's assembler
//! (`ir3-asm`, `scripts/build_ir3_asm.sh`), decoded and printed as `ir3-disasm` prints them, run on
//! the emulator over 64 fibers, and compared with the same computation written here in Rust.
//!
//! `every_implemented_op_is_exercised_or_listed` then checks that each mnemonic the executor
//! implements ([`implemented_mnemonics`]) ran in one of these kernels or is listed with a reason in
//! `exec_unexercised.txt` — and that nothing listed there runs now.

mod support;

use std::collections::BTreeSet;

use half::f16;
use pilot_a6xx_emu::{decode_all, implemented_mnemonics, Buffers};
use support::{assemble, assert_disasm_matches, bytes, lcg, run, u32s};

const N: usize = 64;
const A: u64 = 0x1_0000_0000;
const B: u64 = 0x1_0001_0000;
const C: u64 = 0x1_0002_0000;
const OUT: u64 = 0x1_0003_0000;

/// c0 = A, B addresses; c1 = C, OUT addresses (lo, hi); c2.x = 1.5; c3 for the preamble to write.
fn consts() -> Vec<u32> {
    let mut c: Vec<u32> = [A, B, C, OUT].iter().flat_map(|a| [*a as u32, (*a >> 32) as u32]).collect();
    c.extend([1.5f32.to_bits(), 0, 0, 0, 0, 0, 0, 0]);
    c
}

const PROLOGUE: &str = "mov.u32u32 r2.x, c0.x
mov.u32u32 r2.y, c0.y
mov.u32u32 r2.z, c0.z
mov.u32u32 r2.w, c0.w
mov.u32u32 r3.x, c1.x
mov.u32u32 r3.y, c1.y
mov.u32u32 r3.z, c1.z
mov.u32u32 r3.w, c1.w
";

/// Operands: full in r4.x/y/z (result r5.x), half in hr12.x/y/z (result hr14.x).
fn kernel(op: &str, half_in: bool, half_out: bool) -> String {
    let load = if half_in {
        "ldg.a.u16 hr12.x, g[r2.x+(r0.x)<<2], 1\nldg.a.u16 hr12.y, g[r2.z+(r0.x)<<2], 1\nldg.a.u16 hr12.z, g[r3.x+(r0.x)<<2], 1\n"
    } else {
        "ldg.a.u32 r4.x, g[r2.x+(r0.x)<<2], 1\nldg.a.u32 r4.y, g[r2.z+(r0.x)<<2], 1\nldg.a.u32 r4.z, g[r3.x+(r0.x)<<2], 1\n"
    };
    let store =
        if half_out { "stg.a.u16 g[r3.z+(r0.x)<<2], hr14.x, 1" } else { "stg.a.u32 g[r3.z+(r0.x)<<2], r5.x, 1" };
    format!("{PROLOGUE}{load}(sy)nop\n{op}\n(ss)nop\n{store}\nend\n")
}

#[derive(Default)]
struct Ran {
    mnemonics: BTreeSet<String>,
    kernels: usize,
}

impl Ran {
    /// Assembles, witnesses and runs `src` over 64 fibers with inputs a, b, c; returns OUT.
    fn run(&mut self, src: &str, a: &[u32], b: &[u32], c: &[u32]) -> Vec<u32> {
        let asm = assemble(src);
        assert_disasm_matches(&asm);
        let mem = Buffers::new();
        mem.insert(A, bytes(a));
        mem.insert(B, bytes(b));
        mem.insert(C, bytes(c));
        mem.insert(OUT, vec![0; N * 4]);
        let stats = run(&asm, &consts(), &mem, [1, 1, 1], [N as u32, 1, 1], 0).unwrap_or_else(|e| panic!("{e}\n{src}"));
        for (i, r) in decode_all(&asm.code).iter().enumerate() {
            if stats.executed.get(i) == Some(&true) {
                self.mnemonics.insert(r.as_ref().unwrap().mnemonic());
            }
        }
        self.kernels += 1;
        u32s(&mem.get(OUT).unwrap())
    }
}

fn f(v: u32) -> f32 {
    f32::from_bits(v)
}
fn fb(x: f32) -> u32 {
    x.to_bits()
}
fn h(v: u32) -> f32 {
    f16::from_bits(v as u16).to_f32()
}
fn hb(x: f32) -> u32 {
    f16::from_f32(x).to_bits() as u32
}

/// Floats: specials and values in ±100 (some with halves, to test rounding).
fn floats(seed: u32) -> Vec<u32> {
    let specials = [0.0f32, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.5, f32::INFINITY, f32::NEG_INFINITY, 1e-3, 7.0];
    lcg(seed, N)
        .iter()
        .enumerate()
        .map(|(i, r)| if i < specials.len() { fb(specials[i]) } else { fb((*r as i32 as f32) / 2.147e7 / 1.5) })
        .collect()
}
fn positive(seed: u32) -> Vec<u32> {
    floats(seed).iter().map(|v| fb(f(*v).abs() + 0.25)).filter(|v| f(*v).is_finite()).cycle().take(N).collect()
}
fn ints(seed: u32) -> Vec<u32> {
    let specials = [0u32, 1, u32::MAX, 0x8000_0000, 0x7fff_ffff, 31, 32, 0xffff, 0x1_0000];
    lcg(seed, N).iter().enumerate().map(|(i, r)| if i < specials.len() { specials[i] } else { *r }).collect()
}
fn halves(seed: u32) -> Vec<u32> {
    floats(seed).iter().map(|v| hb(f(*v) / 10.0)).collect()
}
fn shorts(seed: u32) -> Vec<u32> {
    ints(seed).iter().map(|v| v & 0xffff).collect()
}

type Ref = fn(u32, u32, u32) -> u32;

fn same(op: &str, got: &[u32], want: &[u32], a: &[u32], b: &[u32], c: &[u32], half: bool) {
    for i in 0..N {
        let nan = |v: u32| if half { f16::from_bits(v as u16).is_nan() } else { f(v).is_nan() };
        if got[i] == want[i] || (nan(got[i]) && nan(want[i])) {
            continue;
        }
        panic!("{op}: fiber {i}: inputs {:#x} {:#x} {:#x}: got {:#x}, want {:#x}", a[i], b[i], c[i], got[i], want[i]);
    }
}

fn check(ran: &mut Ran, op: &str, half_in: bool, half_out: bool, ins: [Vec<u32>; 3], want: Ref) {
    let [a, b, c] = ins;
    let got = ran.run(&kernel(op, half_in, half_out), &a, &b, &c);
    let mask = if half_out { 0xffff } else { u32::MAX };
    let got: Vec<u32> = got.iter().map(|v| v & mask).collect();
    let exp: Vec<u32> = (0..N).map(|i| want(a[i], b[i], c[i]) & mask).collect();
    same(op, &got, &exp, &a, &b, &c, half_out);
}

fn full_float_cases(ran: &mut Ran) {
    let fl = || [floats(1), floats(2), floats(3)];
    let cases: [(&str, Ref); 22] = [
        ("add.f r5.x, r4.x, r4.y", |a, b, _| fb(f(a) + f(b))),
        ("mul.f r5.x, r4.x, r4.y", |a, b, _| fb(f(a) * f(b))),
        ("min.f r5.x, r4.x, r4.y", |a, b, _| fb(f(a).min(f(b)))),
        ("max.f r5.x, r4.x, r4.y", |a, b, _| fb(f(a).max(f(b)))),
        ("add.f r5.x, (neg)r4.x, (abs)r4.y", |a, b, _| fb(-f(a) + f(b).abs())),
        ("sign.f r5.x, r4.x", |a, _, _| {
            fb(if f(a) > 0.0 {
                1.0
            } else if f(a) < 0.0 {
                -1.0
            } else {
                0.0
            })
        }),
        ("absneg.f r5.x, (absneg)r4.x", |a, _, _| fb(-f(a).abs())),
        ("floor.f r5.x, r4.x", |a, _, _| fb(f(a).floor())),
        ("ceil.f r5.x, r4.x", |a, _, _| fb(f(a).ceil())),
        ("trunc.f r5.x, r4.x", |a, _, _| fb(f(a).trunc())),
        ("rndaz.f r5.x, r4.x", |a, _, _| fb(f(a).round())),
        ("rndne.f r5.x, r4.x", |a, _, _| fb(f(a).round_ties_even())),
        ("cmps.f.lt r5.x, r4.x, r4.y", |a, b, _| (f(a) < f(b)) as u32),
        ("cmps.f.ge r5.x, r4.x, r4.y", |a, b, _| (f(a) >= f(b)) as u32),
        ("cmps.f.eq r5.x, r4.x, r4.x", |a, _, _| (f(a) == f(a)) as u32),
        ("mad.f32 r5.x, r4.x, r4.y, r4.z", |a, b, c| fb(f(a) * f(b) + f(c))),
        ("mad.f32 r5.x, (neg)r4.x, r4.y, c2.x", |a, b, _| fb(-f(a) * f(b) + 1.5)),
        ("(sat)add.f r5.x, r4.x, r4.y", |a, b, _| fb((f(a) + f(b)).clamp(0.0, 1.0))),
        ("mul.f r5.x, r4.x, (pi)", |a, _, _| fb(f(a) * std::f32::consts::PI)),
        ("add.f r5.x, r4.x, (neg)(0.5)", |a, _, _| fb(f(a) - 0.5)),
        ("sel.b32 r5.x, r4.x, r4.y, r4.z", |a, b, c| if b != 0 { a } else { c }),
        ("mov.f32f32 r5.x, r4.x", |a, _, _| a),
    ];
    for (op, want) in cases {
        check(ran, op, false, false, fl(), want);
    }
    let pos = || [positive(4), floats(5), floats(6)];
    let sfu: [(&str, Ref); 7] = [
        ("rcp r5.x, r4.x", |a, _, _| fb(1.0 / f(a))),
        ("rsq r5.x, r4.x", |a, _, _| fb(1.0 / f(a).sqrt())),
        ("sqrt r5.x, r4.x", |a, _, _| fb(f(a).sqrt())),
        ("log2 r5.x, r4.x", |a, _, _| fb(f(a).log2())),
        ("exp2 r5.x, (neg)r4.x", |a, _, _| fb((-f(a)).exp2())),
        ("sin r5.x, r4.x", |a, _, _| fb(f(a).sin())),
        ("cos r5.x, r4.x", |a, _, _| fb(f(a).cos())),
    ];
    for (op, want) in sfu {
        check(ran, op, false, false, pos(), want);
    }
}

fn int_cases(ran: &mut Ran) {
    let iv = || [ints(7), ints(8), ints(9)];
    let s = |v: u32| v as i32;
    let cases: [(&str, Ref); 37] = [
        ("add.u r5.x, r4.x, r4.y", |a, b, _| a.wrapping_add(b)),
        ("(sat)add.u r5.x, r4.x, r4.y", |a, b, _| a.saturating_add(b)),
        ("(sat)add.s r5.x, r4.x, r4.y", |a, b, _| (a as i32).saturating_add(b as i32) as u32),
        ("(sat)sub.u r5.x, r4.x, r4.y", |a, b, _| a.saturating_sub(b)),
        ("(sat)sub.s r5.x, r4.x, r4.y", |a, b, _| (a as i32).saturating_sub(b as i32) as u32),
        ("add.s r5.x, r4.x, (neg)r4.y", |a, b, _| a.wrapping_sub(b)),
        ("sub.u r5.x, r4.x, r4.y", |a, b, _| a.wrapping_sub(b)),
        ("sub.s r5.x, r4.x, r4.y", |a, b, _| a.wrapping_sub(b)),
        ("add.s r5.x, r4.x, -3", |a, _, _| a.wrapping_sub(3)),
        ("min.u r5.x, r4.x, r4.y", |a, b, _| a.min(b)),
        ("max.u r5.x, r4.x, r4.y", |a, b, _| a.max(b)),
        ("min.s r5.x, r4.x, r4.y", |a, b, _| (a as i32).min(b as i32) as u32),
        ("max.s r5.x, r4.x, r4.y", |a, b, _| (a as i32).max(b as i32) as u32),
        ("absneg.s r5.x, (abs)r4.x", |a, _, _| (a as i32).wrapping_abs() as u32),
        ("cmps.u.lt r5.x, r4.x, r4.y", |a, b, _| (a < b) as u32),
        ("cmps.s.le r5.x, r4.x, r4.y", |a, b, _| ((a as i32) <= (b as i32)) as u32),
        ("cmps.s.ne r5.x, r4.x, r4.y", |a, b, _| (a != b) as u32),
        ("cmps.u.gt r5.x, r4.x, r4.y", |a, b, _| (a > b) as u32),
        ("and.b r5.x, r4.x, r4.y", |a, b, _| a & b),
        ("or.b r5.x, r4.x, (neg)r4.y", |a, b, _| a | !b),
        ("xor.b r5.x, r4.x, r4.y", |a, b, _| a ^ b),
        ("not.b r5.x, r4.x", |a, _, _| !a),
        ("shl.b r5.x, r4.x, r4.y", |a, b, _| a << (b & 31)),
        ("shr.b r5.x, r4.x, r4.y", |a, b, _| a >> (b & 31)),
        ("ashr.b r5.x, r4.x, 5", |a, _, _| ((a as i32) >> 5) as u32),
        ("bfrev.b r5.x, r4.x", |a, _, _| a.reverse_bits()),
        // -1 for 0: what Mesa's ufind_msb/find_lsb lowering relies on.
        ("clz.b r5.x, r4.x", |a, _, _| a.checked_ilog2().map_or(u32::MAX, |msb| 31 - msb)),
        ("cbits.b r5.x, r4.x", |a, _, _| a.count_ones()),
        ("mul.u24 r5.x, r4.x, r4.y", |a, b, _| (a & 0xffffff).wrapping_mul(b & 0xffffff)),
        ("mul.s24 r5.x, r4.x, r4.y", |a, b, _| (((a << 8) as i32 >> 8).wrapping_mul((b << 8) as i32 >> 8)) as u32),
        ("mull.u r5.x, r4.x, r4.y", |a, b, _| (a & 0xffff) * (b & 0xffff)),
        ("madsh.m16 r5.x, r4.x, r4.y, r4.z", |a, b, c| ((a & 0xffff).wrapping_mul(b >> 16) << 16).wrapping_add(c)),
        ("mad.u24 r5.x, r4.x, r4.y, r4.z", |a, b, c| (a & 0xffffff).wrapping_mul(b & 0xffffff).wrapping_add(c)),
        ("mad.s24 r5.x, r4.x, r4.y, r4.z", |a, b, c| {
            (((a << 8) as i32 >> 8).wrapping_mul((b << 8) as i32 >> 8)).wrapping_add(c as i32) as u32
        }),
        ("shrm r5.x, r4.y, r4.x, r4.z", |a, b, c| (a >> (b & 31)) & c),
        ("shlg r5.x, r4.y, r4.x, r4.z", |a, b, c| (a << (b & 31)) | c),
        ("andg r5.x, r4.x, r4.y, r4.z", |a, b, c| (a & b) | c),
    ];
    let _ = s;
    for (op, want) in cases {
        check(ran, op, false, false, iv(), want);
    }
    let more: [(&str, Ref); 3] = [
        ("sad.s32 r5.x, r4.x, r4.y, r4.z", |a, b, c| a.wrapping_add(b).wrapping_add(c)),
        ("shlm r5.x, r4.y, r4.x, r4.z", |a, b, c| (a << (b & 31)) & c),
        ("shrg r5.x, r4.y, r4.x, r4.z", |a, b, c| (a >> (b & 31)) | c),
    ];
    for (op, want) in more {
        check(ran, op, false, false, iv(), want);
    }
}

fn half_cases(ran: &mut Ran) {
    let hv = || [halves(10), halves(11), halves(12)];
    let cases: [(&str, Ref); 8] = [
        ("add.f hr14.x, hr12.x, hr12.y", |a, b, _| hb(h(a) + h(b))),
        ("mul.f hr14.x, hr12.x, (neg)hr12.y", |a, b, _| hb(h(a) * -h(b))),
        ("max.f hr14.x, hr12.x, h(0.5)", |a, _, _| hb(h(a).max(0.5))),
        ("mad.f16 hr14.x, hr12.x, hr12.y, hr12.z", |a, b, c| hb(h(a) * h(b) + h(c))),
        ("floor.f hr14.x, hr12.x", |a, _, _| hb(h(a).floor())),
        ("rcp hr14.x, hr12.x", |a, _, _| hb(1.0 / h(a))),
        ("cmps.f.gt hr14.x, hr12.x, hr12.y", |a, b, _| (h(a) > h(b)) as u32),
        ("sel.b16 hr14.x, hr12.x, hr12.y, hr12.z", |a, b, c| if b & 0xffff != 0 { a } else { c }),
    ];
    for (op, want) in cases {
        check(ran, op, true, true, hv(), want);
    }
    let sv = || [shorts(13), shorts(14), shorts(15)];
    let ints: [(&str, Ref); 4] = [
        ("add.s hr14.x, hr12.x, h(-1)", |a, _, _| a.wrapping_sub(1)),
        ("min.s hr14.x, hr12.x, hr12.y", |a, b, _| (a as u16 as i16).min(b as u16 as i16) as u16 as u32),
        ("ashr.b hr14.x, hr12.x, 3", |a, _, _| ((a as u16 as i16) >> 3) as u16 as u32),
        ("mad.u16 hr14.x, hr12.x, hr12.y, hr12.z", |a, b, c| a.wrapping_mul(b).wrapping_add(c)),
    ];
    for (op, want) in ints {
        check(ran, op, true, true, sv(), want);
    }
    check(ran, "sad.s16 hr14.x, hr12.x, hr12.y, hr12.z", true, true, sv(), |a, b, c| a.wrapping_add(b).wrapping_add(c));
    check(ran, "mad.s16 hr14.x, hr12.x, hr12.y, hr12.z", true, true, sv(), |a, b, c| {
        ((a as u16 as i16 as i32) * (b as u16 as i16 as i32) + c as u16 as i16 as i32) as u32 & 0xffff
    });
    let pos = || [halves(16).iter().map(|v| hb(h(*v).abs() + 0.5)).collect(), halves(17), halves(18)];
    let sfu: [(&str, Ref); 3] = [
        ("hrsq hr14.x, hr12.x", |a, _, _| hb(1.0 / h(a).sqrt())),
        ("hlog2 hr14.x, hr12.x", |a, _, _| hb(h(a).log2())),
        ("hexp2 hr14.x, hr12.x", |a, _, _| hb(h(a).exp2())),
    ];
    for (op, want) in sfu {
        check(ran, op, true, true, pos(), want);
    }
}

/// The preamble: the wave's first fiber computes c2.x + c2.x into c3.x with `stc` (through a1.x),
/// every fiber then reads it.
fn preamble_cases(ran: &mut Ran) {
    let pre = "shps #6
getone #5
mov.u32u32 r8.x, c2.x
add.f r8.x, r8.x, r8.x
mova1 a1.x, 12
stc.u32 c[a1.x], r8.x, 1
(ss)shpe
";
    let body = kernel("add.f r5.x, r4.x, c3.x", false, false);
    let (a, b, c) = (floats(80), floats(81), floats(82));
    let got = ran.run(&format!("{pre}{body}"), &a, &b, &c);
    for i in 0..N {
        assert_eq!(got[i], fb(f(a[i]) + 3.0), "preamble constant, fiber {i}");
    }
}

fn conversion_cases(ran: &mut Ran) {
    let fl = || [floats(16), floats(17), floats(18)];
    let full: [(&str, Ref); 5] = [
        ("cov.f32s32 r5.x, r4.x", |a, _, _| f(a) as i32 as u32),
        ("cov.f32u32 r5.x, r4.x", |a, _, _| f(a) as u32),
        ("cov.s32f32 r5.x, r4.y", |_, b, _| fb(b as i32 as f32)),
        ("cov.u32f32 r5.x, r4.y", |_, b, _| fb(b as f32)),
        ("mov.u32u32 r5.x, 0x12345678", |_, _, _| 0x12345678),
    ];
    for (op, want) in full {
        check(ran, op, false, false, fl(), want);
    }
    check(ran, "cov.f32f16 hr14.x, r4.x", false, true, fl(), |a, _, _| hb(f(a)));
    // `#round`: ir3 marks f2f16_rtne conversions (even); to an integer the value is rounded first.
    check(ran, "cov.f32f16 (even)hr14.x, r4.x", false, true, fl(), |a, _, _| hb(f(a)));
    let rounded: [(&str, Ref); 3] = [
        ("cov.f32s32 (even)r5.x, r4.x", |a, _, _| f(a).round_ties_even() as i32 as u32),
        ("cov.f32s32 (pos_infinity)r5.x, r4.x", |a, _, _| f(a).ceil() as i32 as u32),
        ("cov.f32s32 (neg_infinity)r5.x, r4.x", |a, _, _| f(a).floor() as i32 as u32),
    ];
    for (op, want) in rounded {
        check(ran, op, false, false, fl(), want);
    }
    check(ran, "cov.u32u16 hr14.x, r4.y", false, true, [ints(19), ints(20), ints(21)], |_, b, _| b & 0xffff);
    check(ran, "cov.f16f32 r5.x, hr12.x", true, false, [halves(22), halves(23), halves(24)], |a, _, _| fb(h(a)));
    check(ran, "cov.s16s32 r5.x, hr12.x", true, false, [shorts(25), shorts(26), shorts(27)], |a, _, _| {
        a as u16 as i16 as i32 as u32
    });
    check(ran, "cov.u16u32 r5.x, hr12.x", true, false, [shorts(28), shorts(29), shorts(30)], |a, _, _| a);
    check(ran, "cov.f16s16 hr14.x, hr12.x", true, true, [halves(31), halves(32), halves(33)], |a, _, _| {
        h(a) as i16 as u16 as u32
    });
    // An 8-bit source is sign-extended (ir3's i2i16/i2f of int8; Mesa masks for zero-extension).
    check(ran, "cov.u8s16 hr14.x, hr12.x", true, true, [shorts(34), shorts(35), shorts(36)], |a, _, _| {
        a as u8 as i8 as i16 as u16 as u32
    });
}

/// (rptN) with (r) sources, relative addressing through a0.x, and immediate moves.
fn repeat_cases(ran: &mut Ran) {
    let fl = [floats(40), floats(41), floats(42)];
    // r5.x = a + b, r5.y = b + b (rpt1: dst and (r) srcs advance), then the sum of both.
    let op = "(rpt1)add.f r6.x, (r)r4.x, r4.y\n(ss)nop\nadd.f r5.x, r6.x, r6.y";
    check(ran, op, false, false, fl.clone(), |a, b, _| fb((f(a) + f(b)) + (f(b) + f(b))));
    // mova a0.x = 2, then r<a0.x + 16> is r4.z.
    let op = "mov.s16s16 hr10.x, 2\nmova a0.x, hr10.x\nmov.u32u32 r5.x, r<a0.x + 16>";
    check(ran, op, false, false, [ints(43), ints(44), ints(45)], |_, _, c| c);
    // c<a0.x + 5> is c1.w (the high word of OUT's address).
    let op = "mov.s16s16 hr10.x, 2\nmova a0.x, hr10.x\nadd.u r5.x, r4.x, c<a0.x + 5>";
    check(ran, op, false, false, [ints(46), ints(47), ints(48)], |a, _, _| a.wrapping_add((OUT >> 32) as u32));
}

/// Branches, a loop and predicates: the sum 0 + 1 + … + (a & 7), and a select through `br`.
fn flow_cases(ran: &mut Ran) {
    let a: Vec<u32> = ints(50);
    let loop_op = "and.b r6.x, r4.x, 7
mov.u32u32 r5.x, 0
mov.u32u32 r6.y, 0
cmps.u.ge p0.x, r6.y, r6.x
br p0.x, #4
add.u r5.x, r5.x, r6.y
add.u r6.y, r6.y, 1
jump #-4
(jp)nop";
    check(ran, loop_op, false, false, [a.clone(), ints(51), ints(52)], |a, _, _| (0..(a & 7)).sum());
    let pred = "cmps.s.lt p0.x, r4.x, r4.y
cmps.s.gt p0.y, r4.x, r4.z
mov.u32u32 r5.x, 0
brao !p0.x, !p0.y, #2
mov.u32u32 r5.x, 1
(jp)nop
braa p0.x, p0.y, #2
add.u r5.x, r5.x, 2
(jp)nop";
    check(ran, pred, false, false, [ints(53), ints(54), ints(55)], |a, b, c| {
        let (x, y) = ((a as i32) < (b as i32), (a as i32) > (c as i32));
        (x && y) as u32 + if x && y { 0 } else { 2 }
    });
    let br = "cmps.u.eq p0.x, r4.x, r4.x\nmov.u32u32 r5.x, 5\nbr p0.x, #2\nmov.u32u32 r5.x, 6\n(jp)nop\nsleep.l\nfence.g.l.r.w";
    check(ran, br, false, false, [ints(56), ints(57), ints(58)], |_, _, _| 5);
}

/// Loads with immediate offsets, vector loads/stores, and global atomics.
fn memory_cases(ran: &mut Ran) {
    // ldg/stg with a byte offset on a per-fiber address: r6.xy = A + 4 * id.
    let op = "shl.b r7.x, r0.x, 2
add.u r6.x, r2.x, r7.x
mov.u32u32 r6.y, r2.y
ldg.u32 r5.y, g[r6.x+4], 1
ldg.u32 r5.z, g[r6.x], 2
(sy)add.u r5.x, r5.y, r5.z
add.u r5.x, r5.x, r5.w
add.u r6.x, r3.x, r7.x
mov.u32u32 r6.y, r3.y
stg.u32 g[r6.x+0], r5.x, 1";
    // Fiber i: A[i + 1] + A[i] + A[i + 1] stored to C[i] (OUT stays 0); A has 65 entries.
    let mut a = ints(60);
    a.push(77);
    let asm = kernel(op, false, false).replace("stg.a.u32 g[r3.z+(r0.x)<<2], r5.x, 1\n", "");
    let mem_c = ran.run_with_c(&asm, &a, &ints(61));
    for i in 0..N {
        assert_eq!(mem_c[i], a[i + 1].wrapping_add(a[i]).wrapping_add(a[i + 1]), "ldg/stg offsets, fiber {i}");
    }
    // Global atomics: every fiber applies operation k with its A to B[k] (B starts as INIT).
    let mut op = String::from("mov.u32u32 r6.x, r2.z\nmov.u32u32 r6.y, r2.w\n");
    for (k, name) in ATOMICS.iter().enumerate() {
        let dst = atomic_dst(k);
        op += &format!(
            "atomic.g.{name}.untyped.1d.{}.1.g {dst}, r6.x, r4.x\n(ss)add.u r6.x, r6.x, 4\n",
            atomic_type(name)
        );
    }
    op += "(sy)mov.u32u32 r5.x, r9.x";
    let a = ints(62);
    let b = ran.run_with_b(&kernel(&op, false, false), &a);
    for (k, name) in ATOMICS.iter().enumerate() {
        assert_eq!(b[k], a.iter().fold(ATOMIC_INIT, |s, v| atomic_ref(name, s, *v)), "atomic.g.{name}");
    }
}

const ATOMICS: [&str; 8] = ["add", "sub", "xchg", "min", "max", "and", "or", "xor"];
const ATOMIC_INIT: u32 = 0x8765_4321;

/// A distinct result register per atomic (r9.x, r9.y, …), so none waits on another.
fn atomic_dst(k: usize) -> String {
    format!("r{}.{}", 9 + k / 4, ['x', 'y', 'z', 'w'][k % 4])
}

fn atomic_type(name: &str) -> &'static str {
    if name == "min" {
        "s32"
    } else {
        "u32"
    }
}

/// The operation applied in fiber order (fibers of a work-group run in order).
fn atomic_ref(name: &str, old: u32, v: u32) -> u32 {
    match name {
        "add" => old.wrapping_add(v),
        "sub" => old.wrapping_sub(v),
        "xchg" => v,
        "min" => (old as i32).min(v as i32) as u32,
        "max" => old.max(v),
        "and" => old & v,
        "or" => old | v,
        _ => old ^ v,
    }
}

/// Local memory and a barrier: each fiber stores its A, then reads its neighbour's; local atomics.
fn local_cases(ran: &mut Ran) {
    let op = "shl.b r7.x, r0.x, 2
stl.u32 l[r7.x], r4.x, 1
bar
add.u r7.y, r0.x, 1
and.b r7.y, r7.y, 63
shl.b r7.y, r7.y, 2
ldl.u32 r5.x, l[r7.y], 1
stlw.u32 l[r7.x+256], r4.y, 1
ldlw.u32 r5.y, l[r7.x+256], 1
mov.u32u32 r7.w, 512
atomic.add.untyped.1d.u32.1.l r6.x, l[r7.w], r4.y
(ss)nop
bar
ldl.u32 r6.y, l[r7.w], 1
(ss)add.u r5.x, r5.x, r6.y
add.u r5.x, r5.x, r5.y";
    let (a, b) = (ints(70), ints(71));
    let got = ran.run_local(&kernel(op, false, false), &a, &b, 516);
    let sum = b.iter().fold(0u32, |s, v| s.wrapping_add(*v));
    for i in 0..N {
        assert_eq!(got[i], a[(i + 1) % N].wrapping_add(sum).wrapping_add(b[i]), "local memory, fiber {i}");
    }
}

/// Local atomics: fiber i applies operation k with its A to l[4k] (which fiber 0 first sets to B[0]).
fn local_atomic_cases(ran: &mut Ran) {
    let mut op = String::from("mov.u32u32 r7.x, 0\n(ss)nop\n");
    op += "cmps.u.eq p0.x, r0.x, 0\nbr !p0.x, #9\n";
    for k in 0..8 {
        op += &format!("stl.u32 l[r7.x+{}], r4.y, 1\n", 4 * k);
    }
    op += "(jp)nop\nbar\n";
    for (k, name) in ATOMICS.iter().enumerate() {
        let dst = atomic_dst(k);
        op += &format!(
            "atomic.{name}.untyped.1d.{}.1.l {dst}, l[r7.x], r4.x\n(ss)add.u r7.x, r7.x, 4\n",
            atomic_type(name)
        );
    }
    op += "(ss)nop\nbar\nshl.b r7.y, r0.x, 2\nand.b r7.y, r7.y, 31\nldl.u32 r5.x, l[r7.y], 1";
    let (a, b) = (ints(72), vec![ATOMIC_INIT; N]);
    let got = ran.run_local(&kernel(&op, false, false), &a, &b, 32);
    for (k, name) in ATOMICS.iter().enumerate() {
        let want = a.iter().fold(ATOMIC_INIT, |s, v| atomic_ref(name, s, *v));
        assert_eq!(got[k], want, "atomic.{name} (local)");
    }
}

/// Texture and image addresses use all 49 bits of a GPU address (BASE_HI is 17 bits).
const TEX: u64 = 0x1_8000_0004_0000;
const IMG: u64 = 0x1_8000_0005_0000;

/// An `A6XX_TEX_CONST` for a linear 2D texture (fields from Mesa's a6xx.xml), swizzle xyzw.
fn tex_const(fmt: u32, w: u32, h: u32, pitch: u32, base: u64) -> [u32; 16] {
    let mut d = [0u32; 16];
    d[0] = fmt << 22 | 1 << 7 | 2 << 10 | 3 << 13;
    d[1] = w | h << 15;
    d[2] = pitch << 7 | 1 << 29;
    d[4] = base as u32;
    d[5] = (base >> 32) as u32;
    d
}

/// An `A6XX_TEX_SAMP`, nearest, with WRAP_S = WRAP_T = `wrap`.
fn tex_samp(wrap: u32) -> [u32; 4] {
    [wrap << 5 | wrap << 8, 0, 0, 0]
}

/// Texel (x, y) channel c of the test textures: x + 10 y + 100 c.
fn texel(x: i64, y: i64, c: usize) -> f32 {
    (x + 10 * y + 100 * c as i64) as f32
}

/// `isam`/`sam` on an 8x4 RGBA32F texture with a padded pitch, border and clamp samplers, and an
/// RGBA16F one read as (f16); `stib.b`/`ldib.b` on an RGBA16F image.
fn texture_cases(ran: &mut Ran) {
    let (w, h) = (8u32, 4u32);
    let pitch = 192;
    let mut f32tex = vec![0u8; (pitch * h) as usize];
    let mut f16tex = vec![0u8; (w * 8 * h) as usize];
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            for c in 0..4 {
                let o = (y * pitch as i64 + x * 16 + 4 * c as i64) as usize;
                f32tex[o..o + 4].copy_from_slice(&texel(x, y, c).to_le_bytes());
                let o = (y * w as i64 * 8 + x * 8 + 2 * c as i64) as usize;
                f16tex[o..o + 2].copy_from_slice(&f16::from_f32(texel(x, y, c)).to_le_bytes());
            }
        }
    }
    let descs = |wrap: u32| support::Descriptors {
        textures: vec![tex_const(0x82, w, h, pitch, TEX), tex_const(0x62, w, h, w * 8, IMG)],
        samplers: vec![tex_samp(wrap)],
        ibos: vec![tex_const(0x62, w, h, w * 8, IMG)],
        private_mem: 0,
    };
    let xs: Vec<u32> = (0..N as i32).map(|i| (i % 8 - 1) as u32).collect();
    let ys: Vec<u32> = (0..N as u32).map(|i| i / 8 % 4).collect();
    let sum = |x: i64, y: i64| (0..4).map(|c| texel(x, y, c)).sum::<f32>();
    let sum4 = "(sy)add.f r5.x, r6.x, r6.y\nadd.f r5.x, r5.x, r6.z\nadd.f r5.x, r5.x, r6.w";
    // CLAMP_TO_BORDER (3): x = -1 reads zeros; CLAMP_TO_EDGE (1): x = -1 reads x = 0. `isam.1d` is the form ir3
    // emits for image loads (bit 18 clear, Mesa's INV_1D unset): the same 2-D read.
    for (wrap, edge, name) in [(3, None, "isam"), (1, Some(0), "isam"), (3, None, "isam.1d")] {
        let isam = format!("{name} (f32)(xyzw)r6.x, r4.x, s#0, t#0\n{sum4}");
        let isam = isam.as_str();
        let got = ran
            .run_full(
                &kernel(isam, false, false),
                &xs,
                &ys,
                &ys,
                &[(TEX, f32tex.clone()), (IMG, f16tex.clone())],
                &descs(wrap),
            )
            .0;
        for i in 0..N {
            let (x, y) = (xs[i] as i32 as i64, ys[i] as i64);
            let want = if x >= 0 { sum(x, y) } else { edge.map_or(0.0, |e| sum(e, y)) };
            assert_eq!(f(got[i]), want, "isam wrap {wrap}, fiber {i} at ({x}, {y})");
        }
    }
    // A partial write mask: channel c still lands in dst + c (y in r6.y, w in r6.w).
    let partial = "isam (f32)(yw)r6.x, r4.x, s#0, t#0\n(sy)add.f r5.x, r6.y, r6.w";
    let got = ran
        .run_full(
            &kernel(partial, false, false),
            &xs,
            &ys,
            &ys,
            &[(TEX, f32tex.clone()), (IMG, f16tex.clone())],
            &descs(1),
        )
        .0;
    for i in 0..N {
        let (x, y) = ((xs[i] as i32).max(0) as i64, ys[i] as i64);
        assert_eq!(f(got[i]), texel(x, y, 1) + texel(x, y, 3), "isam (yw), fiber {i}");
    }
    let isam16 = "isam (f16)(xyzw)hr14.x, r4.x, s#0, t#1\n(sy)nop";
    let got = ran
        .run_full(
            &kernel(isam16, false, true),
            &xs,
            &ys,
            &ys,
            &[(TEX, f32tex.clone()), (IMG, f16tex.clone())],
            &descs(1),
        )
        .0;
    for i in 0..N {
        let x = (xs[i] as i32).max(0) as i64;
        assert_eq!(got[i] & 0xffff, hb(texel(x, ys[i] as i64, 0)), "isam (f16), fiber {i}");
    }
    let sam = "sam (f32)(xyzw)r6.x, r4.x, s#0, t#0\n(sy)add.f r5.x, r6.x, r6.w";
    let nx: Vec<u32> = (0..N).map(|i| fb(((i % 8) as f32 + 0.5) / 8.0)).collect();
    let ny: Vec<u32> = (0..N).map(|i| fb(((i / 8 % 4) as f32 + 0.5) / 4.0)).collect();
    let got = ran
        .run_full(&kernel(sam, false, false), &nx, &ny, &ny, &[(TEX, f32tex.clone()), (IMG, f16tex.clone())], &descs(1))
        .0;
    for (i, g) in got.iter().enumerate() {
        let (x, y) = ((i % 8) as i64, (i / 8 % 4) as i64);
        assert_eq!(f(*g), texel(x, y, 0) + texel(x, y, 3), "sam, fiber {i}");
    }
    let ib = "cov.u32f32 r6.x, r4.x
cov.u32f32 r6.y, r4.y
mov.f32f32 r6.z, c2.x
mov.f32f32 r6.w, (0.5)
stib.b.typed.2d.f32.4.imm r6.x, r4.x, 0
ldib.b.typed.2d.f32.4.imm r7.x, r4.x, 0
(sy)add.f r5.x, r7.x, r7.y
add.f r5.x, r5.x, r7.z
add.f r5.x, r5.x, r7.w";
    let xs: Vec<u32> = (0..N as u32).map(|i| i % 8).collect();
    let (got, mem) = ran.run_full(&kernel(ib, false, false), &xs, &ys, &ys, &[(TEX, f32tex), (IMG, f16tex)], &descs(1));
    let img = mem.get(IMG).unwrap();
    for i in 0..N {
        let (x, y) = (xs[i] as usize, ys[i] as usize);
        assert_eq!(f(got[i]), x as f32 + y as f32 + 2.0, "stib.b/ldib.b, fiber {i}");
        let o = y * 64 + x * 8;
        assert_eq!(f16::from_le_bytes([img[o + 4], img[o + 5]]).to_f32(), 1.5, "stib.b wrote f16 z at ({x}, {y})");
    }
}

/// `swz`/`gat`/`sct`: moves that read every source before writing; `swz` swaps two registers in place.
fn multi_move_cases(ran: &mut Ran) {
    let ins = || [ints(100), ints(101), ints(102)];
    check(ran, "swz.u32u32 r4.x, r4.y, r4.y, r4.x\nsub.u r5.x, r4.x, r4.y", false, false, ins(), |a, b, _| {
        b.wrapping_sub(a)
    });
    let gat = "gat.u32u32 r6.x, r4.z, r4.x, r4.y, r4.z\nsub.u r5.x, r6.x, r6.y\nadd.u r5.x, r5.x, r6.z\nxor.b r5.x, r5.x, r6.w";
    check(ran, gat, false, false, ins(), |a, b, c| c.wrapping_sub(a).wrapping_add(b) ^ c);
    let sct = "mov.u32u32 r4.w, 7\nsct.u32u32 r6.y, r6.x, r6.w, r6.z, r4.x\nsub.u r5.x, r6.y, r6.x\nadd.u r5.x, r5.x, r6.w\nadd.u r5.x, r5.x, r6.z";
    check(ran, sct, false, false, ins(), |a, b, c| a.wrapping_sub(b).wrapping_add(c).wrapping_add(7));
    let fl = || [floats(103), floats(104), floats(105)];
    check(ran, "swz.f32f16 hr14.x, hr14.y, r4.x, r4.y", false, true, fl(), |a, _, _| hb(f(a)));
}

/// Private memory: each fiber stores A and B at p[8], p[12], then reads them back as a pair (ldp
/// results need (sy)).
fn private_cases(ran: &mut Ran) {
    let op = "mov.u32u32 r7.x, 8\nstp.u32 p[r7.x], r4.x, 1\nstp.u32 p[r7.x+4], r4.y, 1\nldp.u32 r6.x, p[r7.x], 2\n(sy)sub.u r5.x, r6.x, r6.y";
    let (a, b) = (ints(90), ints(91));
    let descs = support::Descriptors { private_mem: 16, ..Default::default() };
    let got = ran.run_full(&kernel(op, false, false), &a, &b, &b, &[], &descs).0;
    for i in 0..N {
        assert_eq!(got[i], a[i].wrapping_sub(b[i]), "private memory, fiber {i}");
    }
}

impl Ran {
    #[allow(clippy::too_many_arguments)]
    fn run_full(
        &mut self,
        src: &str,
        a: &[u32],
        b: &[u32],
        c: &[u32],
        extra: &[(u64, Vec<u8>)],
        descs: &support::Descriptors,
    ) -> (Vec<u32>, Buffers) {
        let asm = assemble(src);
        assert_disasm_matches(&asm);
        let mem = Buffers::new();
        mem.insert(A, bytes(a));
        mem.insert(B, bytes(b));
        mem.insert(C, bytes(c));
        mem.insert(OUT, vec![0; N * 4]);
        for (addr, data) in extra {
            mem.insert(*addr, data.clone());
        }
        let stats = support::run_with(&asm, &consts(), &mem, [1, 1, 1], [N as u32, 1, 1], 0, descs)
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
        self.note(&asm.code, &stats.executed);
        (u32s(&mem.get(OUT).unwrap()), mem)
    }

    fn run_with_c(&mut self, src: &str, a: &[u32], b: &[u32]) -> Vec<u32> {
        let asm = assemble(src);
        assert_disasm_matches(&asm);
        let mem = Buffers::new();
        mem.insert(A, bytes(a));
        mem.insert(B, bytes(b));
        mem.insert(C, vec![0; N * 4]);
        mem.insert(OUT, vec![0; N * 4]);
        let stats = run(&asm, &consts(), &mem, [1, 1, 1], [N as u32, 1, 1], 0).unwrap_or_else(|e| panic!("{e}\n{src}"));
        self.note(&asm.code, &stats.executed);
        u32s(&mem.get(C).unwrap())
    }

    fn run_with_b(&mut self, src: &str, a: &[u32]) -> Vec<u32> {
        let asm = assemble(src);
        assert_disasm_matches(&asm);
        let mem = Buffers::new();
        mem.insert(A, bytes(a));
        mem.insert(B, bytes(&[ATOMIC_INIT; N]));
        mem.insert(C, vec![0; N * 4]);
        mem.insert(OUT, vec![0; N * 4]);
        let stats = run(&asm, &consts(), &mem, [1, 1, 1], [N as u32, 1, 1], 0).unwrap_or_else(|e| panic!("{e}\n{src}"));
        self.note(&asm.code, &stats.executed);
        u32s(&mem.get(B).unwrap())
    }

    fn run_local(&mut self, src: &str, a: &[u32], b: &[u32], local: u32) -> Vec<u32> {
        let asm = assemble(src);
        assert_disasm_matches(&asm);
        let mem = Buffers::new();
        mem.insert(A, bytes(a));
        mem.insert(B, bytes(b));
        mem.insert(C, vec![0; N * 4]);
        mem.insert(OUT, vec![0; N * 4]);
        let stats =
            run(&asm, &consts(), &mem, [1, 1, 1], [N as u32, 1, 1], local).unwrap_or_else(|e| panic!("{e}\n{src}"));
        self.note(&asm.code, &stats.executed);
        u32s(&mem.get(OUT).unwrap())
    }

    fn note(&mut self, code: &[u8], executed: &[bool]) {
        for (i, r) in decode_all(code).iter().enumerate() {
            if executed.get(i) == Some(&true) {
                self.mnemonics.insert(r.as_ref().unwrap().mnemonic());
            }
        }
        self.kernels += 1;
    }
}

#[test]
fn every_implemented_op_is_exercised_or_listed() {
    let mut ran = Ran::default();
    full_float_cases(&mut ran);
    int_cases(&mut ran);
    half_cases(&mut ran);
    conversion_cases(&mut ran);
    repeat_cases(&mut ran);
    flow_cases(&mut ran);
    memory_cases(&mut ran);
    local_cases(&mut ran);
    local_atomic_cases(&mut ran);
    preamble_cases(&mut ran);
    texture_cases(&mut ran);
    private_cases(&mut ran);
    multi_move_cases(&mut ran);
    let listed: BTreeSet<String> = include_str!("exec_unexercised.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(" # ").next().unwrap().trim().to_string())
        .collect();
    let implemented: BTreeSet<String> = implemented_mnemonics().into_iter().collect();
    let missing: Vec<_> = implemented.iter().filter(|m| !ran.mnemonics.contains(*m) && !listed.contains(*m)).collect();
    let stale: Vec<_> = listed.iter().filter(|m| ran.mnemonics.contains(*m) || !implemented.contains(*m)).collect();
    assert!(missing.is_empty(), "implemented but neither exercised nor listed in exec_unexercised.txt: {missing:?}");
    assert!(stale.is_empty(), "listed in exec_unexercised.txt but exercised (or not implemented): {stale:?}");
    eprintln!("{} kernels ran {} distinct operations", ran.kernels, ran.mnemonics.len());
}
