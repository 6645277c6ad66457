//! Hand-edited objects that are well-formed ELF but mean something the compiler never emits: each
//! is refused with a message naming the problem, before any code runs.

use object::elf::{self as e, FileHeader64, Rela64, SectionHeader64, Sym64};
use object::read::elf::FileHeader;
use object::LittleEndian as LE;

use super::super::reloc::Machine;
use super::elf_tests::{assert_contains, load_error};
use super::*;

/// File offsets of the parts of an object that the tests edit.
struct Layout {
    /// Section index and header offset, by name.
    sections: Vec<(String, usize, usize)>,
}

impl Layout {
    fn of(code: &[u8]) -> Layout {
        let header = FileHeader64::<LE>::parse(code).unwrap();
        let table = header.sections(LE, code).unwrap();
        let shoff = header.e_shoff(LE) as usize;
        let sections = table
            .enumerate()
            .map(|(i, s)| {
                let name = String::from_utf8_lossy(table.section_name(LE, s).unwrap()).into_owned();
                (name, i.0, shoff + i.0 * std::mem::size_of::<SectionHeader64<LE>>())
            })
            .collect();
        Layout { sections }
    }

    fn section(&self, name: &str) -> (usize, usize) {
        let (_, index, at) = self.sections.iter().find(|(n, ..)| n == name).unwrap_or_else(|| panic!("no {name}"));
        (*index, *at)
    }
}

fn u32_at(code: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(code[at..at + 4].try_into().unwrap())
}

fn u64_at(code: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(code[at..at + 8].try_into().unwrap())
}

/// sh_type at 4, sh_offset at 24, sh_size at 32, sh_info at 44 of an Elf64_Shdr.
const SH_TYPE: usize = 4;
const SH_OFFSET: usize = 24;
const SH_SIZE: usize = 32;
const SH_INFO: usize = 44;

/// The object the tests edit: `LUT` built position-independent, with text relocations against a
/// read-only table, a `.bss` counter and a global reached through the GOT.
fn lut() -> Vec<u8> {
    cc(LUT, MODELS[0])
}

/// File offsets of the relocations of `.rela.text`.
fn text_relocations(code: &[u8]) -> Vec<usize> {
    let (_, at) = Layout::of(code).section(".rela.text");
    let (start, size) = (u64_at(code, at + SH_OFFSET) as usize, u64_at(code, at + SH_SIZE) as usize);
    let entry = std::mem::size_of::<Rela64<LE>>();
    (start..start + size).step_by(entry).collect()
}

/// r_info is at byte 8 of an Elf64_Rela (type in the low 32 bits), r_addend at 16.
fn set_type(code: &mut [u8], rela: usize, r_type: u32) {
    code[rela + 8..rela + 12].copy_from_slice(&r_type.to_le_bytes());
}

fn host() -> Machine {
    Machine::host().expect("these tests run on x86_64 or aarch64")
}

#[test]
fn symbols_beyond_their_section_are_refused() {
    let code = lut();
    let layout = Layout::of(&code);
    let (_, symtab) = layout.section(".symtab");
    let (start, size) = (u64_at(&code, symtab + SH_OFFSET) as usize, u64_at(&code, symtab + SH_SIZE) as usize);
    let entry = std::mem::size_of::<Sym64<LE>>();
    // `lut` itself: st_shndx at 6, st_value at 8, st_size at 16 of an Elf64_Sym.
    let name_offset = |at: usize| u32_at(&code, at) as usize;
    let strtab = {
        let (_, at) = layout.section(".strtab");
        u64_at(&code, at + SH_OFFSET) as usize
    };
    let lut_sym = (start..start + size)
        .step_by(entry)
        .find(|&at| code[strtab + name_offset(at)..].starts_with(b"lut\0"))
        .expect("the symbol `lut`");
    let shndx = u16::from_le_bytes(code[lut_sym + 6..lut_sym + 8].try_into().unwrap()) as usize;
    let text = layout.sections.iter().find(|(_, i, _)| *i == shndx).map(|(_, _, at)| *at).unwrap();
    let text_size = u64_at(&code, text + SH_SIZE);
    for value in [64 << 20, 1 << 20, text_size + 88, text_size] {
        let mut bad = code.clone();
        bad[lut_sym + 8..lut_sym + 16].copy_from_slice(&value.to_le_bytes());
        let message = load_error(&bad, "lut");
        assert_contains(&message, "symbol `lut`");
        assert_contains(&message, "lies outside section");
    }
    // A size reaching past the end is refused too.
    let mut bad = code.clone();
    bad[lut_sym + 16..lut_sym + 24].copy_from_slice(&(text_size + 1).to_le_bytes());
    assert_contains(&load_error(&bad, "lut"), "lies outside section");
}

#[test]
fn addends_reaching_outside_the_image_are_refused() {
    let code = lut();
    for rela in text_relocations(&code) {
        for delta in [1i64 << 20, -(1 << 20), 64 << 20, -(64 << 20)] {
            let mut bad = code.clone();
            let addend = i64::from_le_bytes(bad[rela + 16..rela + 24].try_into().unwrap());
            bad[rela + 16..rela + 24].copy_from_slice(&addend.wrapping_add(delta).to_le_bytes());
            let message = load_error(&bad, "lut");
            assert!(
                message.contains("reaches outside the image") || message.contains("points outside the image"),
                "addend {addend} + {delta}: {message}"
            );
        }
    }
}

#[test]
fn executable_sections_without_contents_are_refused() {
    let mut code = lut();
    let (_, text) = Layout::of(&code).section(".text");
    code[text + SH_TYPE..text + SH_TYPE + 4].copy_from_slice(&e::SHT_NOBITS.to_le_bytes());
    assert_contains(&load_error(&code, "lut"), "executable section .text has no contents");
}

#[test]
fn relocation_kinds_moved_between_code_and_data_or_none_are_refused() {
    let code = lut();
    let (pc_relative, absolute, none) = match host() {
        Machine::X86_64 => (&[e::R_X86_64_PC32, e::R_X86_64_PLT32][..], e::R_X86_64_64, e::R_X86_64_NONE),
        Machine::Aarch64 => (&[e::R_AARCH64_ADR_PREL_PG_HI21][..], e::R_AARCH64_ABS64, e::R_AARCH64_NONE),
    };
    let relas = text_relocations(&code);
    let retyped =
        relas.iter().find(|&&at| pc_relative.contains(&u32_at(&code, at + 8))).expect("a PC-relative text relocation");
    let mut bad = code.clone();
    set_type(&mut bad, *retyped, absolute);
    let message = load_error(&bad, "lut");
    assert_contains(&message, &format!("relocation type {absolute} is never emitted in code"));
    let mut bad = code.clone();
    set_type(&mut bad, relas[0], none);
    assert_contains(&load_error(&bad, "lut"), &format!("unsupported {} relocation type {none}", host().name()));
}

#[test]
fn relocation_sections_must_target_their_own_loaded_section() {
    let code = lut();
    let layout = Layout::of(&code);
    let (_, rela_text) = layout.section(".rela.text");
    let (symtab, _) = layout.section(".symtab");
    for (target, needle) in [
        (999u32, "targets section 999, which does not exist"),
        (0, "targets section 0, which does not exist"),
        (symtab as u32, "relocation section .rela.text targets section .symtab"),
    ] {
        let mut bad = code.clone();
        bad[rela_text + SH_INFO..rela_text + SH_INFO + 4].copy_from_slice(&target.to_le_bytes());
        assert_contains(&load_error(&bad, "lut"), needle);
    }
}
