//! Memory opcodes (GLOBAL, FLAT, DS): each lane owns a 16-byte slot, set to known bytes before the
//! instruction; the kernel returns what the instruction returned and the slot afterwards, and Rust
//! computes both from the same bytes.

/// A memory opcode's test: the assembler statement and what it does, for [`reference`].
pub struct Mem {
    pub name: &'static str,
    /// Global/flat (a 64-bit address) or DS (an LDS offset).
    pub lds: bool,
    pub kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// Loads `bytes`, sign-extended with `signed`; `d16`: into the low (0) or high (1) half.
    Load {
        bytes: usize,
        signed: bool,
        d16: Option<u32>,
    },
    /// Stores `bytes` of the data; `hi`: from its high half.
    Store {
        bytes: usize,
        hi: bool,
    },
    /// A 32-bit atomic on the slot's first word; `rtn`: returns the old value.
    Atomic {
        op: &'static str,
        rtn: bool,
    },
    /// DS two-address forms: dwords (or qwords with `wide`) at slot offsets 1 and 3 (0 and 1 wide).
    Load2 {
        wide: bool,
    },
    Store2 {
        wide: bool,
    },
}

fn kind_of(name: &str) -> Option<Kind> {
    let base = ["global_", "flat_", "ds_"].iter().find_map(|p| name.strip_prefix(p))?;
    let base = base.strip_prefix("atomic_").map(|b| (b, true)).unwrap_or((base, false));
    let (body, atomic_prefix) = base;
    let bytes = |ty: &str| match &ty[1..] {
        "8" => 1,
        "16" => 2,
        "32" => 4,
        "64" => 8,
        "96" => 12,
        _ => 16,
    };
    let (body, ty) = body.rsplit_once('_')?;
    Some(match body {
        "load" | "load_d16" | "load_d16_hi" => {
            let d16 = match body {
                "load_d16" => Some(0),
                "load_d16_hi" => Some(1),
                _ => None,
            };
            Kind::Load { bytes: bytes(ty), signed: ty.starts_with('i'), d16 }
        }
        // DS spells its half forms as a suffix: ds_load_u8_d16_hi.
        "load_u8" | "load_i8" | "load_u16" | "load_i16" => {
            let (b, t) = body.rsplit_once('_').unwrap();
            let _ = b;
            Kind::Load { bytes: bytes(t), signed: t.starts_with('i'), d16: Some((ty == "hi") as u32) }
        }
        "load_u8_d16" | "load_i8_d16" | "load_u16_d16" | "load_i16_d16" => {
            let t = body.split('_').nth(1).unwrap();
            Kind::Load { bytes: bytes(t), signed: t.starts_with('i'), d16: Some(1) }
        }
        "store" => Kind::Store { bytes: bytes(ty), hi: false },
        "store_d16_hi" => Kind::Store { bytes: bytes(ty), hi: true },
        "store_b8_d16" | "store_b16_d16" => Kind::Store { bytes: bytes(body.split('_').nth(1).unwrap()), hi: true },
        "load_2addr" => Kind::Load2 { wide: ty == "b64" },
        "store_2addr" => Kind::Store2 { wide: ty == "b64" },
        _ => {
            let (op, rtn) = match body.strip_suffix("_rtn") {
                Some(op) => (op, true),
                None => (body, atomic_prefix),
            };
            let op = match (op, ty) {
                ("min" | "max", "i32") => ["min_i", "max_i"][(op == "max") as usize],
                ("min" | "max", "f32") => ["min_f", "max_f"][(op == "max") as usize],
                ("add", "f32") => "add_f",
                ("storexchg", _) => "swap",
                ("cmpstore", _) => "cmpswap",
                ("sub" | "add" | "and" | "or" | "xor" | "inc" | "dec" | "swap" | "cmpswap" | "min" | "max", _) => op,
                _ => return None,
            };
            let op: &'static str = [
                "add", "sub", "min", "max", "min_i", "max_i", "min_f", "max_f", "add_f", "and", "or", "xor", "inc",
                "dec", "swap", "cmpswap",
            ]
            .into_iter()
            .find(|o| *o == op)?;
            Kind::Atomic { op, rtn }
        }
    })
}

/// The memory opcodes of `names` this test knows how to drive.
pub fn cases(names: &[&'static str]) -> Vec<Mem> {
    names
        .iter()
        .filter(|n| !n.contains("stride64") && **n != "ds_nop")
        .filter_map(|&name| Some(Mem { name, lds: name.starts_with("ds_"), kind: kind_of(name)? }))
        .collect()
}

impl Mem {
    /// The statement: `%0` the result (if any), `%1` the address, `%2`/`%3` data. `r` is uint4, `a`
    /// the slot address, `v` uint4 data, `w` the second datum.
    pub fn source(&self) -> String {
        let off = if self.name.starts_with("global_") { ", off" } else { "" };
        let addr = if self.lds { "la" } else { "ga" };
        let n = self.name;
        match self.kind {
            Kind::Load { bytes, d16: Some(_), .. } if bytes <= 2 => {
                format!("r1 = r.x; __asm__ volatile(\"{n} %0, %1{off}\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : \"+v\"(r1) : \"v\"({addr}) : \"memory\"); r.x = r1;")
            }
            Kind::Load { bytes, .. } => {
                let (t, back) = match bytes {
                    8 => ("r2", "r.xy = r2;"),
                    12 => ("r3", "r.xyz = r3;"),
                    16 => ("r4", "r = r4;"),
                    _ => ("r1", "r.x = r1;"),
                };
                format!("__asm__ volatile(\"{n} %0, %1{off}\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : \"=v\"({t}) : \"v\"({addr}) : \"memory\"); {back}")
            }
            Kind::Store { bytes, .. } => {
                let v = match bytes {
                    8 => "v.xy",
                    12 => "v.xyz",
                    16 => "v",
                    _ => "v.x",
                };
                format!("__asm__ volatile(\"{n} %0, %1{off}\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : : \"v\"({addr}), \"v\"({v}) : \"memory\");")
            }
            Kind::Atomic { op: "cmpswap", rtn } if self.lds => {
                if rtn {
                    format!("__asm__ volatile(\"{n} %0, %1, %2, %3\\n\\ts_waitcnt lgkmcnt(0)\" : \"=v\"(r1) : \"v\"(la), \"v\"(v.x), \"v\"(w) : \"memory\"); r.x = r1;")
                } else {
                    format!("__asm__ volatile(\"{n} %0, %1, %2\\n\\ts_waitcnt lgkmcnt(0)\" : : \"v\"(la), \"v\"(v.x), \"v\"(w) : \"memory\");")
                }
            }
            Kind::Atomic { op: "cmpswap", .. } => format!(
                "__asm__ volatile(\"{n} %0, %1, %2{off} glc\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : \"=v\"(r1) : \"v\"(ga), \"v\"((uint2)(v.x, w)) : \"memory\"); r.x = r1;"
            ),
            Kind::Atomic { rtn: true, .. } => {
                let glc = if self.lds { "" } else { " glc" };
                format!("__asm__ volatile(\"{n} %0, %1, %2{off}{glc}\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : \"=v\"(r1) : \"v\"({addr}), \"v\"(v.x) : \"memory\"); r.x = r1;")
            }
            Kind::Atomic { .. } => {
                format!("__asm__ volatile(\"{n} %0, %1{off}\\n\\ts_waitcnt vmcnt(0) lgkmcnt(0)\" : : \"v\"({addr}), \"v\"(v.x) : \"memory\");")
            }
            Kind::Load2 { wide: false } => format!(
                "__asm__ volatile(\"{n} %0, %1 offset0:1 offset1:3\\n\\ts_waitcnt lgkmcnt(0)\" : \"=v\"(r2) : \"v\"(la) : \"memory\"); r.xy = r2;"
            ),
            Kind::Load2 { wide: true } => format!(
                "__asm__ volatile(\"{n} %0, %1 offset0:0 offset1:1\\n\\ts_waitcnt lgkmcnt(0)\" : \"=v\"(r4) : \"v\"(la) : \"memory\"); r = r4;"
            ),
            Kind::Store2 { wide: false } => format!(
                "__asm__ volatile(\"{n} %0, %1, %2 offset0:1 offset1:3\\n\\ts_waitcnt lgkmcnt(0)\" : : \"v\"(la), \"v\"(v.x), \"v\"(v.y) : \"memory\");"
            ),
            Kind::Store2 { wide: true } => format!(
                "__asm__ volatile(\"{n} %0, %1, %2 offset0:0 offset1:1\\n\\ts_waitcnt lgkmcnt(0)\" : : \"v\"(la), \"v\"(v.xy), \"v\"(v.zw) : \"memory\");"
            ),
        }
    }
}

fn word(b: &[u8; 16], i: usize) -> u32 {
    u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap())
}

/// What the instruction returns (in `r`, which starts as `r0`) and leaves in the slot, from the
/// slot's bytes, the data `v` and the second datum `w`.
pub fn reference(kind: Kind, slot: [u8; 16], r0: [u32; 4], v: [u32; 4], w: u32) -> ([u32; 4], [u8; 16]) {
    let mut r = r0;
    let mut out = slot;
    let vb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    match kind {
        Kind::Load { bytes, signed, d16 } => {
            let raw = |n: usize| -> u32 {
                let sh = 32 - 8 * n as u32;
                let x = word(&slot, 0) << sh;
                if signed {
                    ((x as i32) >> sh) as u32
                } else {
                    x >> sh
                }
            };
            match d16 {
                Some(half) if bytes <= 2 => {
                    let x = raw(bytes) & 0xffff;
                    r[0] = if half == 0 { r0[0] & 0xffff_0000 | x } else { r0[0] & 0xffff | x << 16 };
                }
                _ if bytes <= 4 => r[0] = raw(bytes),
                _ => {
                    for (k, x) in r.iter_mut().enumerate().take(bytes / 4) {
                        *x = word(&slot, k);
                    }
                }
            }
        }
        Kind::Store { bytes, hi } => {
            let src = if hi { (v[0] >> 16).to_le_bytes().to_vec() } else { vb.clone() };
            out[..bytes].copy_from_slice(&src[..bytes]);
        }
        Kind::Atomic { op, rtn } => {
            let old = word(&slot, 0);
            let (x, f) = (v[0], |u: u32| f32::from_bits(u));
            let new = match op {
                "add" => old.wrapping_add(x),
                "sub" => old.wrapping_sub(x),
                "min" => old.min(x),
                "max" => old.max(x),
                "min_i" => (old as i32).min(x as i32) as u32,
                "max_i" => (old as i32).max(x as i32) as u32,
                "min_f" => f(old).min(f(x)).to_bits(),
                "max_f" => f(old).max(f(x)).to_bits(),
                "add_f" => (f(old) + f(x)).to_bits(),
                "and" => old & x,
                "or" => old | x,
                "xor" => old ^ x,
                "inc" => {
                    if old >= x {
                        0
                    } else {
                        old + 1
                    }
                }
                "dec" => {
                    if old == 0 || old > x {
                        x
                    } else {
                        old - 1
                    }
                }
                "swap" => x,
                _ => {
                    if old == w {
                        x
                    } else {
                        old
                    }
                }
            };
            out[..4].copy_from_slice(&new.to_le_bytes());
            if rtn {
                r[0] = old;
            }
        }
        Kind::Load2 { wide: false } => {
            r[0] = word(&slot, 1);
            r[1] = word(&slot, 3);
        }
        Kind::Load2 { wide: true } => r = [0, 1, 2, 3].map(|k| word(&slot, k)),
        Kind::Store2 { wide: false } => {
            out[4..8].copy_from_slice(&v[0].to_le_bytes());
            out[12..16].copy_from_slice(&v[1].to_le_bytes());
        }
        Kind::Store2 { wide: true } => out.copy_from_slice(&vb),
    }
    (r, out)
}

/// The kernel `NAME`: per case, reset this lane's slot, run the statement, write `r` and the slot.
pub fn source(name: &str, cases: &[Mem], lds: bool) -> String {
    let mut s = format!(
        "kernel void {name}(global uint4 *slots, global const uint4 *init, global const uint4 *data, global uint4 *out) {{\n\
         \x20 local uint4 sh[32];\n\
         \x20 uint t = __builtin_amdgcn_workitem_id_x();\n\
         \x20 uint4 v = data[t], r, r4; uint3 r3; uint2 r2; uint r1;\n\
         \x20 uint w = data[32 + t].x;\n\
         \x20 global uint4 *ga = &slots[t];\n\
         \x20 uint la = (uint)(size_t)(local void *)&sh[t];\n"
    );
    for (k, c) in cases.iter().enumerate() {
        let slot = if lds { "sh[t]" } else { "slots[t]" };
        s.push_str(&format!("  {slot} = init[t]; r = (uint4)(0xdeadbeef, 0xdeadbeef, 0xdeadbeef, 0xdeadbeef);\n"));
        s.push_str(&format!("  {}\n", c.source()));
        s.push_str(&format!("  out[{k} * 64 + t] = r; out[{k} * 64 + 32 + t] = {slot};\n"));
    }
    s.push_str("}\n");
    s
}
