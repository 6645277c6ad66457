//! The ELF loader against bad input, W^X, and objects built for the other architecture.

use object::elf::{self as e, FileHeader64};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian as LE;

use super::super::elf as loader;
use super::super::reloc::Machine;
use super::*;

/// Names of the undefined symbols of an object.
pub(super) fn undefined_symbols(code: &[u8]) -> Vec<String> {
    let header = FileHeader64::<LE>::parse(code).unwrap();
    let sections = header.sections(LE, code).unwrap();
    let symbols = sections.symbols(LE, code, e::SHT_SYMTAB).unwrap();
    symbols
        .iter()
        .filter(|s| s.st_shndx(LE) == e::SHN_UNDEF)
        .map(|s| String::from_utf8_lossy(symbols.symbol_name(LE, s).unwrap()).into_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Loads `code` and returns the error message, failing the test if it loads.
pub(super) fn load_error(code: &[u8], name: &str) -> String {
    let mut dev = CpuDevice::new(1);
    match dev.load_program(&spec(name, code, 0)) {
        Ok(_) => panic!("`{name}` loaded but should not have"),
        Err(err) => {
            assert!(matches!(err, DeviceError::Program { .. }), "{err:?}");
            err.to_string()
        }
    }
}

pub(super) fn assert_contains(message: &str, needle: &str) {
    assert!(message.contains(needle), "`{message}` should mention `{needle}`");
}

/// A small deterministic xorshift generator.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn rejects_garbage_and_truncated_objects() {
    assert_contains(&load_error(b"", "k"), "not an ELF file");
    assert_contains(&load_error(b"hello, this is not an object file at all", "k"), "not an ELF file");
    // e_ident: class at 4, data encoding at 5, version at 6.
    let mut header_only = vec![0u8; 64];
    header_only[..4].copy_from_slice(&e::ELFMAG);
    header_only[4] = e::ELFCLASS64;
    header_only[5] = e::ELFDATA2LSB;
    header_only[6] = e::EV_CURRENT;
    load_error(&header_only, "k");

    let code = cc(LUT, MODELS[0]);
    assert_contains(&load_error(&code[..code.len() / 2], "lut"), "malformed ELF");
    for len in (0..code.len()).step_by(13) {
        assert!(loader::link_at(&code[..len], "lut", 0x10_0000, &|_| Some(0)).is_err());
    }
    // Random corruption must give an error or a linked image, never a panic. Linking into a
    // buffer executes nothing.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..400 {
        let mut bad = code.clone();
        for _ in 0..1 + next(&mut state) % 4 {
            let at = next(&mut state) as usize % bad.len();
            bad[at] ^= 1 << (next(&mut state) % 8);
        }
        let _ = loader::link_at(&bad, "lut", 0x10_0000, &|_| Some(0x1234));
    }
}

#[test]
fn rejects_wrong_class_machine_endianness_and_type() {
    let code = cc(VADD, MODELS[0]);
    let patched = |at: usize, value: &[u8]| {
        let mut bad = code.clone();
        bad[at..at + value.len()].copy_from_slice(value);
        bad
    };
    assert_contains(&load_error(&patched(4, &[e::ELFCLASS32]), "vadd"), "64-bit");
    assert_contains(&load_error(&patched(5, &[e::ELFDATA2MSB]), "vadd"), "little-endian");
    // e_type at 16, e_machine at 18.
    assert_contains(&load_error(&patched(16, &e::ET_EXEC.to_le_bytes()), "vadd"), "relocatable");
    assert_contains(&load_error(&patched(18, &e::EM_386.to_le_bytes()), "vadd"), "unsupported machine");
}

#[test]
fn rejects_an_unsupported_relocation() {
    let mut code = cc(LUT, MODELS[0]);
    let header = FileHeader64::<LE>::parse(&*code).unwrap();
    let sections = header.sections(LE, &*code).unwrap();
    let rela_text = sections
        .iter()
        .find(|s| sections.section_name(LE, s).unwrap() == b".rela.text")
        .expect("lut has text relocations");
    let first = rela_text.sh_offset(LE) as usize;
    let r_type = match Machine::host() {
        Some(Machine::Aarch64) => e::R_AARCH64_TLSLE_ADD_TPREL_HI12,
        _ => e::R_X86_64_GOTOFF64,
    };
    // r_info is at byte 8 of an Elf64_Rela; its low 32 bits are the type.
    code[first + 8..first + 12].copy_from_slice(&r_type.to_le_bytes());
    let message = load_error(&code, "lut");
    assert_contains(&message, "unsupported");
    assert_contains(&message, &r_type.to_string());
}

#[test]
fn rejects_undefined_symbols_and_bad_entries() {
    let calls_foo = "extern void foo(void *);\nvoid k(void *const *a, unsigned p, unsigned n) { foo(a[0]); }\n";
    for model in MODELS {
        let code = cc(calls_foo, model);
        assert_contains(&load_error(&code, "k"), "undefined symbol `foo`");
    }
    let code = cc(LUT, MODELS[0]);
    assert_contains(&load_error(&code, "nope"), "entry symbol `nope` not found");
    assert_contains(&load_error(&code, "table"), "not a function");
    assert_contains(&load_error(&code, "total"), "not a function");
}

/// Permission strings (`r-xp`, ...) of the mappings overlapping `range`, with how many bytes of
/// `range` each covers.
fn permissions(range: std::ops::Range<u64>) -> Vec<(String, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut found = Vec::new();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(span), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let (lo, hi) = span.split_once('-').unwrap();
        let lo = u64::from_str_radix(lo, 16).unwrap().max(range.start);
        let hi = u64::from_str_radix(hi, 16).unwrap().min(range.end);
        if lo < hi {
            found.push((perms.to_string(), hi - lo));
        }
    }
    found
}

#[test]
fn code_pages_are_never_writable_and_executable() {
    for model in MODELS {
        let code = cc(LUT, model);
        let mut dev = CpuDevice::new(1);
        let p = dev.load_program(&spec("lut", &code, 3)).unwrap();
        let range = dev.program_range(p);
        let perms = permissions(range.clone());
        let covered: u64 = perms.iter().map(|(_, len)| len).sum();
        assert_eq!(covered, range.end - range.start, "{perms:?}");
        for (p, _) in &perms {
            assert!(!(p.contains('w') && p.contains('x')), "{model:?}: W+X mapping {perms:?}");
        }
        let bytes =
            |prefix: &str| -> u64 { perms.iter().filter(|(p, _)| p.starts_with(prefix)).map(|(_, len)| len).sum() };
        // LUT has code, read-only data (table, GOT) and data, one 64 KiB region each. Read-only
        // data shows as `r--` (qemu-user reports such pages as `r-x`); it is never writable.
        let region = 64 * 1024;
        assert!(bytes("r-x") >= region, "{perms:?}");
        assert_eq!(bytes("r-x") + bytes("r--"), 2 * region, "{perms:?}");
        assert_eq!(bytes("rw-"), region, "{perms:?}");
    }
}

/// `clang-19` or `clang`; `None` (a skip, a failure under `PILOT_REQUIRE=1`) without either.
fn clang() -> Option<&'static str> {
    pilot_test_support::require::tool(&["clang-19", "clang"])
}

#[test]
fn foreign_architecture_objects_link_but_do_not_execute() {
    let Some(clang) = clang() else { return };
    let (target, machine) = match Machine::host() {
        Some(Machine::Aarch64) => ("--target=x86_64-linux-gnu", Machine::X86_64),
        _ => ("--target=aarch64-linux-gnu", Machine::Aarch64),
    };
    let models: [&[&str]; 3] = [&["-fPIC"], &["-fno-pic"], &["-fno-pic", "-mcmodel=large"]];
    for model in models {
        for (source, entry) in [(VADD, "vadd"), (LUT, "lut"), (MEMFNS, "memfns"), (PARITY, "parity")] {
            let code = compile_with(clang, source, &[&[target][..], model].concat()).unwrap();
            assert_contains(&load_error(&code, entry), "cannot be executed here");
            let base = 0x4000_0000;
            let host = |name: &str| loader::HOST_SYMBOLS.contains(&name).then_some(0x7fff_0000_0000);
            let linked =
                loader::link_at(&code, entry, base, &host).unwrap_or_else(|e| panic!("{entry} {model:?}: {e}"));
            assert_eq!(linked.machine, machine);
            assert!(linked.entry_offset < linked.text_end);
            if entry == "memfns" && machine == Machine::Aarch64 {
                // The last stub starts with `adrp x16, ...`.
                let at = linked.text_end - super::super::reloc::STUB_SIZE;
                let word = u32::from_le_bytes(linked.bytes[at..at + 4].try_into().unwrap());
                assert_eq!(word & 0x9f00_001f, 0x9000_0010, "{word:#x}");
            }
        }
    }
}

#[test]
fn clang_built_host_kernels_run() {
    let Some(clang) = clang() else { return };
    for model in MODELS {
        // An explicit target, so that the object is for this process even under emulation.
        let target = format!("--target={}-linux-gnu", std::env::consts::ARCH);
        let code = compile_with(clang, VADD, &[&["-O3", &target][..], model].concat()).unwrap();
        let mut dev = CpuDevice::new(2);
        let p = dev.load_program(&spec("vadd", &code, 4)).unwrap();
        let n = 77u32;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let ids: Vec<BufferId> = [4 * n as usize, 4 * n as usize, 4 * n as usize, 4]
            .iter()
            .map(|&size| dev.alloc(size, BufferUse::Scratch).unwrap())
            .collect();
        dev.copy_in(ids[0], 0, &to_bytes(&a)).unwrap();
        dev.copy_in(ids[1], 0, &to_bytes(&a)).unwrap();
        dev.copy_in(ids[3], 0, &n.to_le_bytes()).unwrap();
        let step = dev.link_step(&[dispatch(p, &ids, 2)]).unwrap();
        dev.submit(step).unwrap();
        let want: Vec<f32> = a.iter().map(|x| 2.0 * x).collect();
        assert_eq!(f32s(&read(&mut dev, ids[2], 4 * n as usize)), want, "{model:?}");
    }
}
