//! The generated parts of `rdna3_ops.rs`: each compare opcode's OpenCL C (inline assembly) and its
//! reference in Rust, written with Rust's own comparisons.

use pilot_rdna3::{decode::Enc, implemented_opcodes};

use super::Inputs;

/// One `v_cmp[x]_COND_TYPE` opcode.
pub struct CompareCase {
    pub name: &'static str,
    cmpx: bool,
    cond: &'static str,
    ty: &'static str,
}

/// Every implemented VOPC opcode.
pub fn compare_cases() -> Vec<CompareCase> {
    implemented_opcodes()
        .into_iter()
        .filter(|(enc, _)| *enc == Enc::Vopc)
        .map(|(_, name)| {
            let (cmpx, rest) = match name.strip_prefix("v_cmpx_") {
                Some(r) => (true, r),
                None => (false, name.strip_prefix("v_cmp_").expect("a VOPC opcode is a compare")),
            };
            let (cond, ty) = rest.rsplit_once('_').expect("v_cmp_COND_TYPE");
            CompareCase { name, cmpx, cond, ty }
        })
        .collect()
}

impl CompareCase {
    /// The operand arrays (kernel parameter names) of this compare's sources.
    fn operands(&self) -> (&'static str, &'static str) {
        let a = match self.ty {
            "f16" | "i16" | "u16" => "a16",
            "f64" | "i64" | "u64" => "a64",
            _ => "a32",
        };
        let b = match (self.cond, a) {
            ("class", _) => "cls",
            (_, "a16") => "b16",
            (_, "a64") => "b64",
            _ => "b32",
        };
        (a, b)
    }

    /// The condition on lane `l`'s operands, computed by Rust. The negated conditions are written as
    /// the ISA names them: true when an operand is NaN.
    #[allow(clippy::neg_cmp_op_on_partial_ord, clippy::double_comparisons)]
    pub fn eval(&self, i: &Inputs, l: usize) -> bool {
        let float = |x: f64, y: f64| -> bool {
            match self.cond {
                "f" => false,
                "lt" => x < y,
                "eq" => x == y,
                "le" => x <= y,
                "gt" => x > y,
                "lg" => x < y || x > y,
                "ge" => x >= y,
                "o" => !x.is_nan() && !y.is_nan(),
                "u" => x.is_nan() || y.is_nan(),
                "nge" => !(x >= y),
                "nlg" => !(x < y || x > y),
                "ngt" => !(x > y),
                "nle" => !(x <= y),
                "neq" => x != y,
                "nlt" => !(x < y),
                "t" => true,
                c => panic!("float condition {c}"),
            }
        };
        fn int<T: Ord>(cond: &str, x: T, y: T) -> bool {
            match cond {
                "f" => false,
                "lt" => x < y,
                "eq" => x == y,
                "le" => x <= y,
                "gt" => x > y,
                "ne" => x != y,
                "ge" => x >= y,
                "t" => true,
                c => panic!("integer condition {c}"),
            }
        }
        let h = |x: u32| half::f16::from_bits(x as u16).to_f64();
        if self.cond == "class" {
            let x = match self.ty {
                "f16" => h(i.a16[l]),
                "f32" => f32::from_bits(i.a32[l]) as f64,
                _ => f64::from_bits(i.a64[l]),
            };
            let quiet = match self.ty {
                "f16" => i.a16[l] & 0x200 != 0,
                "f32" => i.a32[l] & 0x40_0000 != 0,
                _ => i.a64[l] & (1 << 51) != 0,
            };
            let subnormal = match self.ty {
                "f16" => i.a16[l] & 0x7c00 == 0 && i.a16[l] & 0x3ff != 0,
                "f32" => f32::from_bits(i.a32[l]).is_subnormal(),
                _ => x.is_subnormal(),
            };
            let neg = x.is_sign_negative();
            let class = if x.is_nan() {
                quiet as u32
            } else if x.is_infinite() {
                if neg {
                    2
                } else {
                    9
                }
            } else if x == 0.0 {
                if neg {
                    5
                } else {
                    6
                }
            } else if subnormal {
                if neg {
                    4
                } else {
                    7
                }
            } else if neg {
                3
            } else {
                8
            };
            return i.class[l] >> class & 1 != 0;
        }
        match self.ty {
            "f16" => float(h(i.a16[l]), h(i.b16[l])),
            "f32" => float(f32::from_bits(i.a32[l]) as f64, f32::from_bits(i.b32[l]) as f64),
            "f64" => float(f64::from_bits(i.a64[l]), f64::from_bits(i.b64[l])),
            "i16" => int(self.cond, i.a16[l] as i16, i.b16[l] as i16),
            "u16" => int(self.cond, i.a16[l] as u16, i.b16[l] as u16),
            "i32" => int(self.cond, i.a32[l] as i32, i.b32[l] as i32),
            "u32" => int(self.cond, i.a32[l], i.b32[l]),
            "i64" => int(self.cond, i.a64[l] as i64, i.b64[l] as i64),
            "u64" => int(self.cond, i.a64[l], i.b64[l]),
            t => panic!("compare type {t}"),
        }
    }

    /// Two statements: the `_e32` form (mask to VCC, or EXEC for cmpx) into `o[2k]`, the `_e64`
    /// form (mask to an SGPR, or EXEC) into `o[2k+1]`, each lane storing the whole mask.
    fn source(&self, k: usize) -> String {
        let (a, b) = self.operands();
        let mut s = String::new();
        for (f, form) in ["e32", "e64"].iter().enumerate() {
            let slot = 2 * k + f;
            let asm = if self.cmpx {
                // Save EXEC, compare into it, read it, restore it: one statement, so nothing runs
                // under the narrowed EXEC.
                format!(
                    "s_mov_b32 %1, exec_lo\\n\\t{}_{form} %2, %3\\n\\ts_mov_b32 %0, exec_lo\\n\\ts_mov_b32 exec_lo, %1\" : \"=&s\"(m), \"=&s\"(save) : \"v\"(x_{a}), \"v\"(x_{b})",
                    self.name
                )
            } else if *form == "e32" {
                format!(
                    "{}_{form} vcc_lo, %1, %2\\n\\ts_mov_b32 %0, vcc_lo\" : \"=s\"(m) : \"v\"(x_{a}), \"v\"(x_{b}) : \"vcc\"",
                    self.name
                )
            } else {
                format!("{}_{form} %0, %1, %2\" : \"=s\"(m) : \"v\"(x_{a}), \"v\"(x_{b})", self.name)
            };
            s.push_str(&format!("  __asm__ volatile(\"{asm});\n  o[{slot} * 32 + t] = m;\n"));
        }
        s
    }
}

/// The kernel `compares`: every case, both encodings.
pub fn compare_source(cases: &[CompareCase]) -> String {
    let mut s = String::from(
        "kernel void compares(global const uint *a32, global const uint *b32, global const uint *a16,\n\
         global const uint *b16, global const uint *cls, global const ulong *a64, global const ulong *b64,\n\
         global uint *o) {\n\
         \x20 uint t = __builtin_amdgcn_workitem_id_x();\n\
         \x20 uint x_a32 = a32[t], x_b32 = b32[t], x_a16 = a16[t], x_b16 = b16[t], x_cls = cls[t];\n\
         \x20 ulong x_a64 = a64[t], x_b64 = b64[t];\n\
         \x20 uint m, save;\n",
    );
    for (k, c) in cases.iter().enumerate() {
        s.push_str(&c.source(k));
    }
    s.push_str("}\n");
    s
}

pub mod alu;
pub mod mem;

use alu::{Alu, T};

/// The input arrays of the ALU kernels, by [`T`]: three sources each, 32 values per array.
pub struct AluInputs {
    pub f: [Vec<u64>; 3],
    pub i: [Vec<u64>; 3],
    pub d: [Vec<u64>; 3],
    pub h: [Vec<u64>; 3],
    pub k: [Vec<u64>; 3],
}

impl AluInputs {
    pub fn new(seed: u32) -> AluInputs {
        let r = super::lcg(seed, 15 * 32);
        let col =
            |n: usize, f: &dyn Fn(usize, u32) -> u64| -> Vec<u64> { (0..32).map(|l| f(l, r[n * 32 + l])).collect() };
        let float = |l: usize, x: u32| -> u32 {
            if l.is_multiple_of(3) {
                super::F32_SPECIAL[x as usize % super::F32_SPECIAL.len()]
            } else {
                (((x >> 8) as f32 / (1u32 << 24) as f32) * 20.0 - 10.0).to_bits()
            }
        };
        let f = [0, 1, 2].map(|n| col(n, &|l, x| float(l + n, x) as u64));
        // Integers: random, with small values on some lanes (shift counts, equal operands).
        let i = [3, 4, 5].map(|n| col(n, &|l, x| if l % 4 == 1 { (x % 40) as u64 } else { x as u64 }));
        let d = [6, 7, 8].map(|n| {
            col(n, &|l, x| {
                let v = f32::from_bits(float(l + n, x)) as f64;
                (if l % 5 == 2 { v * 1e-310 } else { v * 1.000_000_1 }).to_bits()
            })
        });
        let h = [9, 10, 11].map(|n| {
            col(n, &|l, x| (half::f16::from_f32(f32::from_bits(float(l + n, x))).to_bits() as u32 | x << 16) as u64)
        });
        let k = [12, 13, 14].map(|n| col(n, &|_, x| ((x % 81) as i32 - 40) as u32 as u64));
        AluInputs { f, i, d, h, k }
    }

    /// Source `pos` of type `t` on lane `l`.
    pub fn get(&self, t: T, pos: usize, l: usize) -> u64 {
        match t {
            T::F => self.f[pos][l],
            T::I | T::S => self.i[pos][l],
            T::D | T::S64 => self.d[pos][l],
            T::H => self.h[pos][l],
            T::K => self.k[pos][l],
            _ => unreachable!("{t:?} is a result type"),
        }
    }
}

fn var(t: T, pos: usize) -> String {
    let set = match t {
        T::F => "f",
        T::I => "i",
        T::D => "d",
        T::H => "h",
        T::K => "k",
        T::S => "s",
        T::S64 => "sd",
        _ => unreachable!(),
    };
    format!("x_{set}{}", ["a", "b", "c"][pos])
}

/// A kernel running `cases` (vector when `vector`, else scalar): statement `n` of the list (one per
/// case and form) stores its result at `o[n * 32 + lane]` (vector) or `o[n * 32 + workgroup]`.
pub fn alu_source(name: &str, cases: &[Alu], vector: bool) -> String {
    let mut s = format!(
        "kernel void {name}(global const uint *f, global const uint *i, global const ulong *d, global const uint *h,\n\
         global const uint *k, global ulong *o) {{\n\
         \x20 uint t = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();\n\
         \x20 uint r32; ulong r64;\n"
    );
    for p in 0..3 {
        let abc = ["a", "b", "c"][p];
        for set in ["f", "i", "h", "k"] {
            s.push_str(&format!("  uint x_{set}{abc} = {set}[{p} * 32 + t];\n"));
        }
        s.push_str(&format!("  ulong x_d{abc} = d[{p} * 32 + t];\n"));
        // Scalar operands: workgroup g's values, uniform across the wave.
        s.push_str(&format!("  uint x_s{abc} = __builtin_amdgcn_readfirstlane(i[{p} * 32 + g]);\n"));
        s.push_str(&format!(
            "  ulong x_sd{abc} = (ulong)(uint)__builtin_amdgcn_readfirstlane((uint)d[{p} * 32 + g]) | \
             (ulong)(uint)__builtin_amdgcn_readfirstlane((uint)(d[{p} * 32 + g] >> 32)) << 32;\n"
        ));
    }
    let mut n = 0;
    for c in cases {
        let wide = matches!(c.dst, T::B64 | T::F64);
        let r = if wide { "r64" } else { "r32" };
        let reg = if vector { "v" } else { "s" };
        for form in c.forms {
            let operands = c
                .operands
                .map(str::to_string)
                .unwrap_or_else(|| (0..=c.srcs.len()).map(|k| format!("%{k}")).collect::<Vec<_>>().join(", "));
            let ins: Vec<String> =
                c.srcs.iter().enumerate().map(|(p, &t)| format!("\"{reg}\"({})", var(t, p))).collect();
            let clobber = if vector { "" } else { " : \"scc\"" };
            // `!`: the operands are the whole statement, which sets its destination up first, so the
            // destination must not share a register with a source (early clobber).
            let (statement, early) = match operands.strip_prefix('!') {
                Some(whole) => (whole.to_string(), "&"),
                None => (format!("{}{form} {operands}", c.name), ""),
            };
            s.push_str(&format!(
                "  __asm__ volatile(\"{statement}\" : \"={early}{reg}\"({r}) : {}{clobber});\n",
                ins.join(", ")
            ));
            let at = if vector { "t" } else { "g" };
            let guard = if vector { "" } else { "if (t == 0) " };
            s.push_str(&format!("  {guard}o[{n} * 32 + {at}] = {r};\n"));
            n += 1;
        }
    }
    s.push_str("}\n");
    s
}

/// Whether `got` is `want` for a result of type `t`: the bits that type has; NaNs equal as NaNs.
pub fn same(t: T, got: u64, want: u64) -> bool {
    match t {
        T::B32 => got as u32 == want as u32,
        T::B16 => got as u16 == want as u16,
        T::F32 => {
            got as u32 == want as u32 || f32::from_bits(got as u32).is_nan() && f32::from_bits(want as u32).is_nan()
        }
        T::F16 => {
            let nan = |x: u64| x as u16 & 0x7c00 == 0x7c00 && x as u16 & 0x3ff != 0;
            got as u16 == want as u16 || nan(got) && nan(want)
        }
        T::F64 => got == want || f64::from_bits(got).is_nan() && f64::from_bits(want).is_nan(),
        T::PkF16 => same(T::F16, got, want) && same(T::F16, got >> 16, want >> 16),
        _ => got == want,
    }
}
