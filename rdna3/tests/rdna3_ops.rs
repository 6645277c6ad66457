//! Instruction tests: the emulator's opcodes run in small OpenCL C kernels built by clang-19 for
//! gfx1100, where inline assembly picks the exact opcode and encoding (`_e32`: VOP1/VOP2/VOPC, `_e64`:
//! VOP3), and every result is compared with the same computation written in Rust.
//!
//! `every_implemented_opcode_is_exercised` runs them all with the emulator's instruction trace and
//! checks that each opcode the emulator implements ([`implemented_opcodes`]) ran here, ran in a kernel
//! of `rdna3_kernels.rs` or `rdna3_errors.rs` (decoded from the code objects they run and check), or
//! is listed in `rdna3_unexercised.txt` — and that nothing listed there runs now, so the list only
//! shrinks. A new opcode in the emulator therefore comes with its test.

mod rdna3_support;

use std::collections::BTreeSet;

use pilot_rdna3::{dispatch_traced, implemented_opcodes, CodeObjectKernel, Dispatch, Stats};
use rdna3_support::{kernargs, lcg, Arg, Device};

mod rdna3_ops_support;

use rdna3_ops_support::alu::{self, Alu};
use rdna3_ops_support::mem;
use rdna3_ops_support::{alu_source, compare_cases, same, AluInputs, CompareCase};

/// Opcodes (`"Enc name"`) that ran in a traced dispatch.
#[derive(Default)]
struct Trace {
    ran: BTreeSet<String>,
}

impl Trace {
    /// Runs `name` of `co` like [`Device::run`], recording the opcodes that executed.
    fn run(&mut self, dev: &mut Device, co: &[u8], name: &str, grid: [u32; 3], wg: [u32; 3], args: &[Arg]) -> Stats {
        let kernel = CodeObjectKernel::load(co, name).unwrap_or_else(|e| panic!("{e}"));
        let kernarg = dev.alloc(&kernargs(args));
        let d = Dispatch::for_kernel(&kernel, grid, wg, kernarg).unwrap();
        let mut executed = vec![false; kernel.insts.len()];
        let stats = dispatch_traced(&kernel, &d, &mut dev.mem, &mut executed).unwrap_or_else(|e| panic!("{e}"));
        for (inst, _) in kernel.insts.iter().zip(&executed).filter(|(_, ran)| **ran) {
            self.ran.insert(format!("{:?} {}", inst.enc, inst.name()));
            if let Some(y) = &inst.y {
                self.ran.insert(format!("{:?} {}", y.enc, y.name()));
            }
        }
        stats
    }
}

/// Inputs shared by the generated kernels: 32 lanes of 16-, 32- and 64-bit operands.
struct Inputs {
    a32: Vec<u32>,
    b32: Vec<u32>,
    a64: Vec<u64>,
    b64: Vec<u64>,
    a16: Vec<u32>,
    b16: Vec<u32>,
    class: Vec<u32>,
}

const F32_SPECIAL: [u32; 14] = [
    0x0000_0000,
    0x8000_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x3f00_0000,
    0x4000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0x0000_0001,
    0x8040_0000,
    0x7f7f_ffff,
    0x4040_0000,
    0x0d80_0000,
];

fn inputs() -> Inputs {
    let r = lcg(11, 7 * 32);
    let pick = |i: usize| F32_SPECIAL[r[i] as usize % F32_SPECIAL.len()];
    // Every fourth lane compares a value with itself, so equality holds somewhere.
    let a32: Vec<u32> = (0..32).map(pick).collect();
    let b32: Vec<u32> = (0..32).map(|l| if l % 4 == 0 { a32[l] } else { pick(32 + l) }).collect();
    let wide = |x: u32, salt: u32| (f32::from_bits(x) as f64).to_bits() ^ (salt as u64 & 1);
    let a64: Vec<u64> = (0..32).map(|l| wide(a32[l], r[64 + l])).collect();
    let b64: Vec<u64> = (0..32).map(|l| if l % 4 == 0 { a64[l] } else { wide(b32[l], r[96 + l]) }).collect();
    // f16 operands in the low half, garbage above (16-bit opcodes must ignore it).
    let h = |x: u32, junk: u32| half::f16::from_f32(f32::from_bits(x)).to_bits() as u32 | junk << 16;
    let a16: Vec<u32> = (0..32)
        .map(|l| match l % 8 {
            3 => 0x0003 | r[128 + l] << 16, // f16 denormals
            5 => 0x8200 | r[128 + l] << 16,
            _ => h(a32[l], r[128 + l]),
        })
        .collect();
    let b16: Vec<u32> = (0..32).map(|l| if l % 4 == 0 { a16[l] } else { h(b32[l], r[160 + l]) }).collect();
    let class = (0..32).map(|l| r[192 + l] & 0x3ff).collect();
    Inputs { a32, b32, a64, b64, a16, b16, class }
}

fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Every VOPC compare, in its VOPC (`_e32`) and VOP3 (`_e64`) encodings: the lane mask it writes
/// (VCC, an SGPR or EXEC) against Rust's comparison of the same operands.
fn compares(trace: &mut Trace) -> Vec<String> {
    let cases: Vec<CompareCase> = compare_cases();
    let input = inputs();
    let src = rdna3_ops_support::compare_source(&cases);
    let Some(co) = rdna3_support::build("compares", &src) else { return vec!["clang-19 is missing".into()] };
    let mut dev = Device::new();
    let args = [&input.a32, &input.b32, &input.a16, &input.b16, &input.class].map(|v| dev.alloc(&u32_bytes(v)));
    let (pa64, pb64) = (dev.alloc(&u64_bytes(&input.a64)), dev.alloc(&u64_bytes(&input.b64)));
    let out = dev.zeros(cases.len() * 2 * 32 * 4);
    let mut kargs: Vec<Arg> = args.iter().map(|&p| Arg::Ptr(p)).collect();
    kargs.extend([Arg::Ptr(pa64), Arg::Ptr(pb64), Arg::Ptr(out)]);
    trace.run(&mut dev, &co, "compares", [1, 1, 1], [32, 1, 1], &kargs);
    let got = dev.i32s(out, cases.len() * 2 * 32);
    let mut failures = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        let want = (0..32).fold(0u32, |m, l| m | (case.eval(&input, l) as u32) << l);
        for (f, form) in ["e32", "e64"].iter().enumerate() {
            let slot = (2 * k + f) * 32;
            for lane in 0..32 {
                if got[slot + lane] as u32 != want {
                    failures.push(format!(
                        "{}_{form}: lane {lane} read mask {:#010x}, Rust says {want:#010x}",
                        case.name,
                        got[slot + lane] as u32
                    ));
                    break;
                }
            }
        }
    }
    failures
}

/// The VALU (one lane per value) or SALU (one workgroup per value) table: each row's forms against
/// its Rust reference.
fn alu_table(trace: &mut Trace, cases: &[Alu], vector: bool) -> Vec<String> {
    let name = if vector { "valu" } else { "salu" };
    let Some(co) = rdna3_support::build(name, &alu_source(name, cases, vector)) else { return vec![] };
    let input = AluInputs::new(if vector { 21 } else { 22 });
    let mut dev = Device::new();
    let flat = |sets: &[Vec<u64>; 3]| sets.concat();
    let as32 = |v: Vec<u64>| v.iter().flat_map(|x| (*x as u32).to_le_bytes()).collect::<Vec<u8>>();
    let mut args = vec![
        Arg::Ptr(dev.alloc(&as32(flat(&input.f)))),
        Arg::Ptr(dev.alloc(&as32(flat(&input.i)))),
        Arg::Ptr(dev.alloc(&u64_bytes(&flat(&input.d)))),
        Arg::Ptr(dev.alloc(&as32(flat(&input.h)))),
        Arg::Ptr(dev.alloc(&as32(flat(&input.k)))),
    ];
    let slots: usize = cases.iter().map(|c| c.forms.len()).sum();
    let out = dev.zeros(slots * 32 * 8);
    args.push(Arg::Ptr(out));
    let grid = if vector { [1, 1, 1] } else { [32, 1, 1] };
    trace.run(&mut dev, &co, name, grid, [32, 1, 1], &args);
    let got: Vec<u64> =
        dev.read(out, slots * 32 * 8).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let mut failures = Vec::new();
    let mut n = 0;
    for c in cases {
        for form in c.forms {
            for l in 0..32 {
                let mut src = [0u64; 3];
                for (p, &t) in c.srcs.iter().enumerate() {
                    src[p] = input.get(t, p, l);
                }
                let want = (c.reference)(src);
                if !same(c.dst, got[n * 32 + l], want) {
                    failures.push(format!(
                        "{}{form}: {} {l} of {src:x?}: got {:#x}, Rust says {want:#x}",
                        c.name,
                        if vector { "lane" } else { "workgroup" },
                        got[n * 32 + l]
                    ));
                    break;
                }
            }
            n += 1;
        }
    }
    failures
}

/// The memory opcodes of one family (`global_`, `flat_` or `ds_`) that the emulator implements:
/// what each returns and leaves in its lane's slot, against Rust.
fn memory(trace: &mut Trace, prefix: &str) -> Vec<String> {
    let names: Vec<&'static str> =
        implemented_opcodes().into_iter().map(|(_, n)| n).filter(|n| n.starts_with(prefix)).collect();
    let cases = mem::cases(&names);
    let lds = prefix == "ds_";
    let kernel = format!("mem_{}", prefix.trim_end_matches('_'));
    let Some(co) = rdna3_support::build(&kernel, &mem::source(&kernel, &cases, lds)) else { return vec![] };
    let r = lcg(31, 3 * 32 * 4);
    let init: Vec<u32> = r[..128].to_vec();
    // Small data values on some lanes make inc/dec and cmpswap take both branches.
    let data: Vec<u32> = (0..256).map(|k| if k % 3 == 0 { r[128 + k] % 8 } else { r[128 + k] }).collect();
    let data: Vec<u32> =
        data.iter().enumerate().map(|(k, &x)| if k >= 128 && k % 8 == 4 { init[k - 128] } else { x }).collect();
    let mut dev = Device::new();
    let slots = dev.zeros(32 * 16);
    let (pi, pd) = (dev.alloc(&u32_bytes(&init)), dev.alloc(&u32_bytes(&data)));
    let out = dev.zeros(cases.len() * 64 * 16);
    trace.run(
        &mut dev,
        &co,
        &kernel,
        [1, 1, 1],
        [32, 1, 1],
        &[Arg::Ptr(slots), Arg::Ptr(pi), Arg::Ptr(pd), Arg::Ptr(out)],
    );
    let got: Vec<u32> =
        dev.read(out, cases.len() * 64 * 16).chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut failures = Vec::new();
    for (k, c) in cases.iter().enumerate() {
        for l in 0..32 {
            let slot: [u8; 16] = u32_bytes(&init[4 * l..4 * l + 4]).try_into().unwrap();
            let v: [u32; 4] = data[4 * l..4 * l + 4].try_into().unwrap();
            let (want_r, want_slot) = mem::reference(c.kind, slot, [0xdead_beef; 4], v, data[128 + 4 * l]);
            let at = (k * 64 + l) * 4;
            let got_r: [u32; 4] = got[at..at + 4].try_into().unwrap();
            let got_slot: [u8; 16] = u32_bytes(&got[at + 128..at + 132]).try_into().unwrap();
            if got_r != want_r || got_slot != want_slot {
                failures.push(format!(
                    "{}: lane {l}: returned {got_r:x?}, slot {got_slot:x?}; Rust says {want_r:x?}, {want_slot:x?}",
                    c.name
                ));
                break;
            }
        }
    }
    failures
}

/// The opcodes in the code objects `rdna3_kernels.rs` and `rdna3_errors.rs` run and check.
fn in_kernel_tests() -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let tests = [include_str!("kernel_cases/cases.rs"), include_str!("rdna3_errors.rs")].concat();
    for (stem, src, flags) in rdna3_support::SOURCES {
        let Some(co) = rdna3_support::build_with(stem, src, flags) else { continue };
        for name in CodeObjectKernel::names(&co).unwrap() {
            assert!(tests.contains(&format!("\"{name}\"")), "no rdna3_* test runs kernel `{name}`");
            let k = CodeObjectKernel::load(&co, &name).unwrap();
            for inst in &k.insts {
                seen.insert(format!("{:?} {}", inst.enc, inst.name()));
                if let Some(y) = &inst.y {
                    seen.insert(format!("{:?} {}", y.enc, y.name()));
                }
            }
        }
    }
    seen
}

#[test]
fn every_implemented_opcode_is_exercised() {
    // A guard never passes untested, switch or not.
    assert!(
        pilot_test_support::require::runs("clang-19"),
        "clang-19 is missing: the coverage guard needs it (run scripts/setup.sh)"
    );
    let mut trace = Trace::default();
    let mut failures = compares(&mut trace);
    failures.extend(alu_table(&mut trace, &alu::valu(), true));
    failures.extend(alu_table(&mut trace, &alu::salu(), false));
    for prefix in ["global_", "flat_", "ds_"] {
        failures.extend(memory(&mut trace, prefix));
    }
    let covered: BTreeSet<String> = trace.ran.iter().cloned().chain(in_kernel_tests()).collect();
    let listed: Vec<String> = include_str!("rdna3_unexercised.txt")
        .lines()
        .filter(|l| !l.starts_with("//") && !l.trim().is_empty())
        .map(|l| l.split('#').next().unwrap().trim().to_string())
        .collect();
    for (enc, name) in implemented_opcodes() {
        let key = format!("{enc:?} {name}");
        match (covered.contains(&key), listed.contains(&key)) {
            (false, false) => failures.push(format!("{key}: implemented, but no test runs it")),
            (true, true) => failures.push(format!("{key}: runs in a test now: remove it from rdna3_unexercised.txt")),
            _ => {}
        }
    }
    let implemented: Vec<String> = implemented_opcodes().iter().map(|(e, n)| format!("{e:?} {n}")).collect();
    failures
        .extend(listed.iter().filter(|l| !implemented.contains(l)).map(|l| format!("{l}: listed but not implemented")));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
