//! Relocation arithmetic on hand-assembled instruction words. Expected encodings were computed by
//! hand from the Arm ARM and cross-checked once with `llvm-mc -triple=aarch64 -show-encoding`;
//! these tests need no external tool.

use super::*;

/// Patches a 4-byte word at offset 0 of a section at `section_addr` and returns the new word.
fn patch(machine: Machine, word: u32, r_type: u32, section_addr: u64, sym: u64, addend: i64) -> Result<u32, String> {
    let mut bytes = word.to_le_bytes();
    let site = Site { r_type, offset: 0, addend };
    apply(machine, &mut bytes, section_addr, site, sym, Some(sym))?;
    Ok(u32::from_le_bytes(bytes))
}

fn a64(word: u32, r_type: u32, p: u64, s: u64) -> Result<u32, String> {
    patch(Machine::Aarch64, word, r_type, p, s, 0)
}

#[test]
fn aarch64_adrp_page_delta() {
    // adrp x0, sym: Page(0x12345678) - Page(0x10000010) = 0x2345 pages; immlo = 1, immhi = 0x8d1.
    assert_eq!(a64(0x9000_0000, elf::R_AARCH64_ADR_PREL_PG_HI21, 0x1000_0010, 0x1234_5678), Ok(0xb001_1a20));
    // One page backwards: imm = -1, immlo = 3, immhi = 0x7ffff.
    assert_eq!(a64(0x9000_0000, elf::R_AARCH64_ADR_PREL_PG_HI21, 0x1000_0000, 0x0fff_f000), Ok(0xf0ff_ffe0));
    // 4 GiB away does not fit 21 signed bits of pages.
    assert!(a64(0x9000_0000, elf::R_AARCH64_ADR_PREL_PG_HI21, 0, 1 << 32).is_err());
    // The GOT variant uses G instead of S + A.
    assert_eq!(a64(0x9000_0000, elf::R_AARCH64_ADR_GOT_PAGE, 0x1000_0010, 0x1234_5678), Ok(0xb001_1a20));
}

#[test]
fn aarch64_adr_and_add_lo12() {
    // adr x0, . + 0x12345: immlo = 1, immhi = 0x48d1.
    assert_eq!(a64(0x1000_0000, elf::R_AARCH64_ADR_PREL_LO21, 0x1000, 0x1000 + 0x12345), Ok(0x3009_1a20));
    assert!(a64(0x1000_0000, elf::R_AARCH64_ADR_PREL_LO21, 0, 1 << 20).is_err());
    // add x0, x0, :lo12:0x12345678 -> imm12 = 0x678.
    assert_eq!(a64(0x9100_0000, elf::R_AARCH64_ADD_ABS_LO12_NC, 0, 0x1234_5678), Ok(0x9119_e000));
}

#[test]
fn aarch64_load_store_lo12_scaled() {
    // ldrb w1, [x0, #0xabc]
    assert_eq!(a64(0x3940_0001, elf::R_AARCH64_LDST8_ABS_LO12_NC, 0, 0x5abc), Ok(0x396a_f001));
    // ldrh w1, [x0, #0x246]: imm12 = 0x246 >> 1
    assert_eq!(a64(0x7940_0001, elf::R_AARCH64_LDST16_ABS_LO12_NC, 0, 0x5246), Ok(0x7944_8c01));
    // ldr w1, [x0, #0xffc]: imm12 = 0xffc >> 2
    assert_eq!(a64(0xb940_0001, elf::R_AARCH64_LDST32_ABS_LO12_NC, 0, 0x1234_5ffc), Ok(0xb94f_fc01));
    // ldr x1, [x0, #0xff8]: imm12 = 0xff8 >> 3
    assert_eq!(a64(0xf940_0001, elf::R_AARCH64_LDST64_ABS_LO12_NC, 0, 0x1234_5ff8), Ok(0xf947_fc01));
    // ldr q0, [x0, #0x7f0]: imm12 = 0x7f0 >> 4
    assert_eq!(a64(0x3dc0_0000, elf::R_AARCH64_LDST128_ABS_LO12_NC, 0, 0x97f0), Ok(0x3dc1_fc00));
    // A target not aligned to the access size would silently load the wrong address.
    assert!(a64(0xf940_0001, elf::R_AARCH64_LDST64_ABS_LO12_NC, 0, 0x1234_5ffc).is_err());
    assert!(a64(0x3dc0_0000, elf::R_AARCH64_LDST128_ABS_LO12_NC, 0, 0x97f8).is_err());
    // GOT load: ldr x1, [x0, :got_lo12:G]
    assert_eq!(a64(0xf940_0001, elf::R_AARCH64_LD64_GOT_LO12_NC, 0, 0x1234_5ff8), Ok(0xf947_fc01));
}

#[test]
fn aarch64_branches() {
    // bl . + 0x10000 -> imm26 = 0x4000
    assert_eq!(a64(0x9400_0000, elf::R_AARCH64_CALL26, 0x10000, 0x20000), Ok(0x9400_4000));
    // bl . - 0x10 -> imm26 = -4
    assert_eq!(a64(0x9400_0000, elf::R_AARCH64_CALL26, 0x10000, 0xfff0), Ok(0x97ff_fffc));
    // b . + 8
    assert_eq!(a64(0x1400_0000, elf::R_AARCH64_JUMP26, 0x1000, 0x1008), Ok(0x1400_0002));
    // +-128 MiB is the limit; there are no veneers for in-image calls.
    assert!(a64(0x9400_0000, elf::R_AARCH64_CALL26, 0, 1 << 27).is_err());
    assert_eq!(a64(0x9400_0000, elf::R_AARCH64_CALL26, 1 << 27, 0), Ok(0x9600_0000));
    assert!(a64(0x9400_0000, elf::R_AARCH64_CALL26, 0, 6).is_err());
}

#[test]
fn aarch64_movw_groups() {
    let s = 0x1122_3344_5566_7788;
    assert_eq!(a64(0xd280_0000, elf::R_AARCH64_MOVW_UABS_G0_NC, 0, s), Ok(0xd28e_f100));
    assert_eq!(a64(0xf2a0_0000, elf::R_AARCH64_MOVW_UABS_G1_NC, 0, s), Ok(0xf2aa_acc0));
    assert_eq!(a64(0xf2c0_0000, elf::R_AARCH64_MOVW_UABS_G2_NC, 0, s), Ok(0xf2c6_6880));
    assert_eq!(a64(0xf2e0_0000, elf::R_AARCH64_MOVW_UABS_G3, 0, s), Ok(0xf2e2_2440));
    // Checked groups reject values with bits above the group.
    assert!(a64(0xd280_0000, elf::R_AARCH64_MOVW_UABS_G0, 0, 0x1_0000).is_err());
    assert!(a64(0xd2a0_0000, elf::R_AARCH64_MOVW_UABS_G1, 0, s).is_err());
    assert!(a64(0xd2c0_0000, elf::R_AARCH64_MOVW_UABS_G2, 0, s).is_err());
    // movz x0, #0x1234, lsl 16
    assert_eq!(a64(0xd2a0_0000, elf::R_AARCH64_MOVW_UABS_G1, 0, 0x1234_5678), Ok(0xd2a2_4680));
}

#[test]
fn aarch64_data_relocations() {
    let mut bytes = [0u8; 8];
    let site = |r_type| Site { r_type, offset: 0, addend: 0x10 };
    apply(Machine::Aarch64, &mut bytes, 0x1000, site(elf::R_AARCH64_ABS64), 0xdead_beef_0000, None).unwrap();
    assert_eq!(u64::from_le_bytes(bytes), 0xdead_beef_0010);
    apply(Machine::Aarch64, &mut bytes, 0x2000, site(elf::R_AARCH64_PREL64), 0x1000, None).unwrap();
    assert_eq!(u64::from_le_bytes(bytes), (-0xff0i64) as u64);
    apply(Machine::Aarch64, &mut bytes, 0x2000, site(elf::R_AARCH64_PREL32), 0x1000, None).unwrap();
    assert_eq!(&bytes[..4], &(-0xff0i32).to_le_bytes());
    assert!(apply(Machine::Aarch64, &mut bytes, 0, site(elf::R_AARCH64_ABS32), 1 << 32, None).is_err());
    apply(Machine::Aarch64, &mut bytes, 0, site(elf::R_AARCH64_ABS32), 0xffff_0000, None).unwrap();
    assert_eq!(&bytes[..4], &0xffff_0010u32.to_le_bytes());
}

#[test]
fn x86_64_relocations() {
    let x86 = |r_type, sym: u64, addend: i64, got: Option<u64>| {
        let mut bytes = [0u8; 12];
        let site = Site { r_type, offset: 4, addend };
        apply(Machine::X86_64, &mut bytes, 0x1000, site, sym, got).map(|()| bytes)
    };
    // P = 0x1004: call target 0x2000 with the usual -4 addend.
    let b = x86(elf::R_X86_64_PC32, 0x2000, -4, None).unwrap();
    assert_eq!(&b[4..8], &0xff8u32.to_le_bytes());
    let b = x86(elf::R_X86_64_PLT32, 0x0, -4, None).unwrap();
    assert_eq!(&b[4..8], &(-0x1008i32).to_le_bytes());
    assert!(x86(elf::R_X86_64_PLT32, 0x1_0000_1004, 0, None).is_err());
    let b = x86(elf::R_X86_64_GOTPCREL, 0xdead, -4, Some(0x3000)).unwrap();
    assert_eq!(&b[4..8], &0x1ff8u32.to_le_bytes());
    assert!(x86(elf::R_X86_64_REX_GOTPCRELX, 0xdead, -4, None).is_err(), "GOT entry required");
    let b = x86(elf::R_X86_64_64, 0x1122_3344_5566_7788, 8, None).unwrap();
    assert_eq!(&b[4..12], &0x1122_3344_5566_7790u64.to_le_bytes());
    let b = x86(elf::R_X86_64_PC64, 0x0, 0, None).unwrap();
    assert_eq!(&b[4..12], &(-0x1004i64).to_le_bytes());
    let b = x86(elf::R_X86_64_32, 0xffff_fff0, 0xf, None).unwrap();
    assert_eq!(&b[4..8], &0xffff_ffffu32.to_le_bytes());
    assert!(x86(elf::R_X86_64_32, 0xffff_fff0, 0x10, None).is_err());
    let b = x86(elf::R_X86_64_32S, 0xffff_ffff_8000_0000, 0, None).unwrap();
    assert_eq!(&b[4..8], &0x8000_0000u32.to_le_bytes());
    assert!(x86(elf::R_X86_64_32S, 0x8000_0000, 0, None).is_err());
}

#[test]
fn rejects_unknown_types_and_fields_outside_the_section() {
    assert!(needs(Machine::X86_64, elf::R_X86_64_GOTOFF64).is_err());
    assert!(needs(Machine::X86_64, elf::R_X86_64_TPOFF32).is_err());
    assert!(needs(Machine::Aarch64, elf::R_AARCH64_TLSLE_ADD_TPREL_HI12).is_err());
    assert!(needs(Machine::Aarch64, elf::R_AARCH64_CONDBR19).is_err());
    let mut bytes = [0u8; 6];
    let site = Site { r_type: elf::R_X86_64_PC32, offset: 4, addend: 0 };
    let err = apply(Machine::X86_64, &mut bytes, 0, site, 0, None).unwrap_err();
    assert!(err.contains("outside"), "{err}");
    let site = Site { offset: u64::MAX, ..site };
    assert!(apply(Machine::X86_64, &mut bytes, 0, site, 0, None).is_err());
    assert_eq!(bytes, [0; 6]);
}

#[test]
fn stubs_jump_through_the_got() {
    let mut stub = [0u8; STUB_SIZE];
    write_stub(Machine::X86_64, &mut stub, 0x1000, 0x2000).unwrap();
    // jmp *0xffa(%rip): the displacement counts from the end of the 6-byte instruction.
    assert_eq!(stub[..6], [0xff, 0x25, 0xfa, 0x0f, 0x00, 0x00]);
    assert!(stub[6..].iter().all(|&b| b == 0xcc));
    write_stub(Machine::Aarch64, &mut stub, 0x10000, 0x20008).unwrap();
    let words: Vec<u32> = stub.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    // adrp x16, . + 0x10000; ldr x16, [x16, #8]; br x16; brk #0
    assert_eq!(words, [0x9000_0090, 0xf940_0610, 0xd61f_0200, 0xd420_0000]);
    assert!(write_stub(Machine::X86_64, &mut stub, 0, 1 << 40).is_err());
}
