//! Relocation arithmetic for x86_64 and aarch64, as pure functions over a byte buffer.
//!
//! Nothing here touches memory outside the slice it is given, knows about mappings, or depends on the
//! host architecture: the loader ([`super::elf`]) computes the addresses, and these functions patch
//! the bytes. That keeps every relocation kind unit-testable for both machines on either host.
//!
//! Notation follows the psABIs: `S` is the symbol's address, `A` the addend, `P` the address of the
//! patched field, `G` the address of the symbol's GOT entry (the loader builds a small GOT inside the
//! image), `Page(x) = x & !0xfff`. Every field is range-checked where the psABI says it is checked
//! (the `_NC` kinds are not); a failed check is an error, never a silently truncated value.

use object::elf;

/// The two machines the loader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Machine {
    X86_64,
    Aarch64,
}

impl Machine {
    /// The machine this process runs on, if it is one the loader can execute.
    pub(crate) fn host() -> Option<Machine> {
        if cfg!(target_arch = "x86_64") {
            Some(Machine::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Machine::Aarch64)
        } else {
            None
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Machine::X86_64 => "x86_64",
            Machine::Aarch64 => "aarch64",
        }
    }
}

/// Size in bytes of one host-function stub (see [`write_stub`]).
pub(crate) const STUB_SIZE: usize = 16;

/// What a relocation kind needs from the loader beyond `S`, `A` and `P`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Needs {
    /// Nothing more.
    Direct,
    /// A GOT entry holding `S` (x86_64: the addend applies to the entry's address, not its content).
    GotEntry,
    /// A GOT entry holding `S + A` (aarch64).
    GotEntryWithAddend,
}

/// Classifies `r_type`, rejecting every kind this loader does not implement (`R_*_NONE` included: a
/// compiler never emits it, so one in an object is damage).
pub(crate) fn needs(machine: Machine, r_type: u32) -> Result<Needs, String> {
    let needs = match machine {
        Machine::X86_64 => match r_type {
            elf::R_X86_64_64
            | elf::R_X86_64_PC32
            | elf::R_X86_64_PLT32
            | elf::R_X86_64_32
            | elf::R_X86_64_32S
            | elf::R_X86_64_PC64 => Needs::Direct,
            elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX => Needs::GotEntry,
            _ => return Err(format!("unsupported x86_64 relocation type {r_type}")),
        },
        Machine::Aarch64 => match r_type {
            elf::R_AARCH64_ABS64
            | elf::R_AARCH64_ABS32
            | elf::R_AARCH64_PREL32
            | elf::R_AARCH64_PREL64
            | elf::R_AARCH64_ADR_PREL_PG_HI21
            | elf::R_AARCH64_ADR_PREL_LO21
            | elf::R_AARCH64_ADD_ABS_LO12_NC
            | elf::R_AARCH64_LDST8_ABS_LO12_NC
            | elf::R_AARCH64_LDST16_ABS_LO12_NC
            | elf::R_AARCH64_LDST32_ABS_LO12_NC
            | elf::R_AARCH64_LDST64_ABS_LO12_NC
            | elf::R_AARCH64_LDST128_ABS_LO12_NC
            | elf::R_AARCH64_CALL26
            | elf::R_AARCH64_JUMP26
            | elf::R_AARCH64_MOVW_UABS_G0
            | elf::R_AARCH64_MOVW_UABS_G0_NC
            | elf::R_AARCH64_MOVW_UABS_G1
            | elf::R_AARCH64_MOVW_UABS_G1_NC
            | elf::R_AARCH64_MOVW_UABS_G2
            | elf::R_AARCH64_MOVW_UABS_G2_NC
            | elf::R_AARCH64_MOVW_UABS_G3 => Needs::Direct,
            elf::R_AARCH64_ADR_GOT_PAGE | elf::R_AARCH64_LD64_GOT_LO12_NC => Needs::GotEntryWithAddend,
            _ => return Err(format!("unsupported aarch64 relocation type {r_type}")),
        },
    };
    Ok(needs)
}

/// Whether compilers emit `r_type` in code (`exec`) or in data sections for the code models the loader
/// supports (PIC, and x86_64's non-PIC small model). Instruction fields take instruction kinds, data
/// words take data kinds: a kind moved from one to the other (say a 4-byte PC32 field retyped to an
/// 8-byte absolute one) would patch bytes of the neighbouring instruction.
pub(crate) fn emitted_in(machine: Machine, r_type: u32, exec: bool) -> bool {
    let data = match machine {
        Machine::X86_64 => match r_type {
            elf::R_X86_64_PC32 | elf::R_X86_64_32 | elf::R_X86_64_32S => return true,
            elf::R_X86_64_64 | elf::R_X86_64_PC64 => true,
            _ => false,
        },
        Machine::Aarch64 => matches!(
            r_type,
            elf::R_AARCH64_ABS64 | elf::R_AARCH64_ABS32 | elf::R_AARCH64_PREL32 | elf::R_AARCH64_PREL64
        ),
    };
    data != exec
}

/// True for the x86_64 kinds that need the image in the low 2 GiB (absolute 32-bit fields, as
/// emitted by `-fno-pic -mcmodel=small`).
pub(crate) fn needs_low_address(machine: Machine, r_type: u32) -> bool {
    machine == Machine::X86_64 && matches!(r_type, elf::R_X86_64_32 | elf::R_X86_64_32S)
}

/// One relocation to apply: where (relative to the section) and how.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    pub r_type: u32,
    /// Byte offset of the field inside the section.
    pub offset: u64,
    pub addend: i64,
}

/// Applies one relocation to `section`, whose first byte lives at address `section_addr`.
///
/// `sym` is `S`; `got` is `G`, the address of the GOT entry, required when [`needs`] says so.
/// Errors name the problem (unsupported kind, field outside the section, value out of range,
/// misaligned target) and leave `section` unchanged.
pub(crate) fn apply(
    machine: Machine,
    section: &mut [u8],
    section_addr: u64,
    site: Site,
    sym: u64,
    got: Option<u64>,
) -> Result<(), String> {
    let kind = needs(machine, site.r_type)?;
    let got = match kind {
        Needs::Direct => 0,
        Needs::GotEntry | Needs::GotEntryWithAddend => {
            got.ok_or_else(|| format!("relocation type {} has no GOT entry", site.r_type))?
        }
    };
    // Addresses are 64-bit and wrap: work on their signed 64-bit interpretation, so `S + A` with
    // a negative addend, or a high-half address, range-checks as the psABIs mean it.
    let p = wrap(i128::from(section_addr) + i128::from(site.offset));
    let s_a = wrap(i128::from(sym) + i128::from(site.addend));
    let field = Field { section, offset: site.offset };
    match machine {
        Machine::X86_64 => {
            let g_a = wrap(i128::from(got) + i128::from(site.addend));
            apply_x86_64(field, site.r_type, s_a, p, g_a)
        }
        Machine::Aarch64 => apply_aarch64(field, site.r_type, s_a, p, wrap(i128::from(got))),
    }
    .map_err(|e| format!("relocation type {} at offset {:#x}: {e}", site.r_type, site.offset))
}

/// `value` reduced modulo 2^64, as a signed 64-bit number.
fn wrap(value: i128) -> i128 {
    i128::from(value as i64)
}

/// `value` reduced modulo 2^64, as an unsigned 64-bit number.
fn unsigned(value: i128) -> i128 {
    i128::from(value as u64)
}

/// The bytes a relocation patches, with bounds checks.
struct Field<'a> {
    section: &'a mut [u8],
    offset: u64,
}

impl Field<'_> {
    fn range(&self, width: usize) -> Result<std::ops::Range<usize>, String> {
        let start = usize::try_from(self.offset).map_err(|_| "offset overflows".to_string())?;
        match start.checked_add(width) {
            Some(end) if end <= self.section.len() => Ok(start..end),
            _ => Err(format!("{width}-byte field outside its section of {} bytes", self.section.len())),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        let range = self.range(bytes.len())?;
        self.section[range].copy_from_slice(bytes);
        Ok(())
    }

    fn read_u32(&self) -> Result<u32, String> {
        let range = self.range(4)?;
        let mut word = [0u8; 4];
        word.copy_from_slice(&self.section[range]);
        Ok(u32::from_le_bytes(word))
    }

    /// Reads an instruction word, lets `patch` rewrite it, writes it back.
    fn patch_insn(&mut self, patch: impl FnOnce(u32) -> Result<u32, String>) -> Result<(), String> {
        let insn = patch(self.read_u32()?)?;
        self.write(&insn.to_le_bytes())
    }
}

fn check_range(value: i128, min: i128, max: i128) -> Result<(), String> {
    if value < min || value > max {
        Err(format!("value {value:#x} out of range [{min:#x}, {max:#x}]"))
    } else {
        Ok(())
    }
}

fn signed32(value: i128) -> Result<[u8; 4], String> {
    check_range(value, i128::from(i32::MIN), i128::from(i32::MAX))?;
    Ok((value as i32).to_le_bytes())
}

fn apply_x86_64(mut field: Field<'_>, r_type: u32, s_a: i128, p: i128, g_a: i128) -> Result<(), String> {
    match r_type {
        // Truncation to 64 bits is the definition of these two kinds (addresses wrap).
        elf::R_X86_64_64 => field.write(&(s_a as u64).to_le_bytes()),
        elf::R_X86_64_PC64 => field.write(&((s_a - p) as u64).to_le_bytes()),
        elf::R_X86_64_PC32 | elf::R_X86_64_PLT32 => field.write(&signed32(wrap(s_a - p))?),
        elf::R_X86_64_32 => {
            check_range(unsigned(s_a), 0, i128::from(u32::MAX))?;
            field.write(&(s_a as u32).to_le_bytes())
        }
        elf::R_X86_64_32S => field.write(&signed32(s_a)?),
        elf::R_X86_64_GOTPCREL | elf::R_X86_64_GOTPCRELX | elf::R_X86_64_REX_GOTPCRELX => {
            field.write(&signed32(wrap(g_a - p))?)
        }
        _ => Err("unsupported".to_string()),
    }
}

fn page(x: i128) -> i128 {
    x & !0xfff
}

/// ADR/ADRP immediate: `immlo` in bits 29..31, `immhi` in bits 5..24; `imm` must fit 21 signed bits.
fn encode_adr(insn: u32, imm: i128) -> Result<u32, String> {
    check_range(imm, -(1 << 20), (1 << 20) - 1)?;
    let imm = imm as u32;
    Ok((insn & !((0x3 << 29) | (0x7ffff << 5))) | ((imm & 0x3) << 29) | (((imm >> 2) & 0x7ffff) << 5))
}

/// ADRP to the page of `target` from the page of `p`.
fn encode_adrp(insn: u32, target: i128, p: i128) -> Result<u32, String> {
    encode_adr(insn, wrap(page(target) - page(p)) >> 12)
}

/// The 12-bit unsigned immediate in bits 10..22 (ADD and the scaled LDR/STR forms), scaled by
/// `1 << shift`; the low 12 bits of `value` must be a multiple of the access size.
fn encode_lo12(insn: u32, value: i128, shift: u32) -> Result<u32, String> {
    let lo = (value & 0xfff) as u32;
    if lo & ((1 << shift) - 1) != 0 {
        return Err(format!("target {value:#x} not aligned to the {}-byte access", 1u32 << shift));
    }
    Ok((insn & !(0xfff << 10)) | ((lo >> shift) << 10))
}

fn apply_aarch64(mut field: Field<'_>, r_type: u32, s_a: i128, p: i128, g: i128) -> Result<(), String> {
    match r_type {
        elf::R_AARCH64_ABS64 => field.write(&(s_a as u64).to_le_bytes()),
        elf::R_AARCH64_PREL64 => field.write(&((s_a - p) as u64).to_le_bytes()),
        elf::R_AARCH64_ABS32 => {
            check_range(s_a, i128::from(i32::MIN), i128::from(u32::MAX))?;
            field.write(&(s_a as u32).to_le_bytes())
        }
        elf::R_AARCH64_PREL32 => {
            let x = wrap(s_a - p);
            check_range(x, i128::from(i32::MIN), i128::from(u32::MAX))?;
            field.write(&(x as u32).to_le_bytes())
        }
        elf::R_AARCH64_ADR_PREL_PG_HI21 => field.patch_insn(|i| encode_adrp(i, s_a, p)),
        elf::R_AARCH64_ADR_PREL_LO21 => field.patch_insn(|i| encode_adr(i, wrap(s_a - p))),
        elf::R_AARCH64_ADD_ABS_LO12_NC | elf::R_AARCH64_LDST8_ABS_LO12_NC => {
            field.patch_insn(|i| encode_lo12(i, s_a, 0))
        }
        elf::R_AARCH64_LDST16_ABS_LO12_NC => field.patch_insn(|i| encode_lo12(i, s_a, 1)),
        elf::R_AARCH64_LDST32_ABS_LO12_NC => field.patch_insn(|i| encode_lo12(i, s_a, 2)),
        elf::R_AARCH64_LDST64_ABS_LO12_NC => field.patch_insn(|i| encode_lo12(i, s_a, 3)),
        elf::R_AARCH64_LDST128_ABS_LO12_NC => field.patch_insn(|i| encode_lo12(i, s_a, 4)),
        elf::R_AARCH64_CALL26 | elf::R_AARCH64_JUMP26 => field.patch_insn(|i| {
            let off = wrap(s_a - p);
            if off & 3 != 0 {
                return Err(format!("branch offset {off:#x} not a multiple of 4"));
            }
            check_range(off, -(1 << 27), (1 << 27) - 4)
                .map_err(|e| format!("branch target out of range (no veneer): {e}"))?;
            Ok((i & !0x03ff_ffff) | (((off >> 2) as u32) & 0x03ff_ffff))
        }),
        elf::R_AARCH64_ADR_GOT_PAGE => field.patch_insn(|i| encode_adrp(i, g, p)),
        elf::R_AARCH64_LD64_GOT_LO12_NC => field.patch_insn(|i| encode_lo12(i, g, 3)),
        elf::R_AARCH64_MOVW_UABS_G0
        | elf::R_AARCH64_MOVW_UABS_G0_NC
        | elf::R_AARCH64_MOVW_UABS_G1
        | elf::R_AARCH64_MOVW_UABS_G1_NC
        | elf::R_AARCH64_MOVW_UABS_G2
        | elf::R_AARCH64_MOVW_UABS_G2_NC
        | elf::R_AARCH64_MOVW_UABS_G3 => {
            let (group, checked) = match r_type {
                elf::R_AARCH64_MOVW_UABS_G0 => (0, true),
                elf::R_AARCH64_MOVW_UABS_G0_NC => (0, false),
                elf::R_AARCH64_MOVW_UABS_G1 => (1, true),
                elf::R_AARCH64_MOVW_UABS_G1_NC => (1, false),
                elf::R_AARCH64_MOVW_UABS_G2 => (2, true),
                elf::R_AARCH64_MOVW_UABS_G2_NC => (2, false),
                _ => (3, true),
            };
            if checked {
                check_range(unsigned(s_a), 0, (1i128 << (16 * (group + 1))) - 1)?;
            }
            let chunk = ((s_a as u64) >> (16 * group)) as u32 & 0xffff;
            field.patch_insn(|i| Ok((i & !(0xffff << 5)) | (chunk << 5)))
        }
        _ => Err("unsupported".to_string()),
    }
}

/// Writes a stub at `stub_addr` that jumps to the address stored in the 8-byte GOT entry at
/// `got_entry`, clobbering only registers the calling convention lets a call veneer clobber
/// (none on x86_64, `x16` on aarch64). `out` must be [`STUB_SIZE`] bytes.
///
/// x86_64: `jmp *disp32(%rip)` padded with `int3`.
/// aarch64: `adrp x16, G; ldr x16, [x16, :lo12:G]; br x16; brk #0`.
pub(crate) fn write_stub(machine: Machine, out: &mut [u8], stub_addr: u64, got_entry: u64) -> Result<(), String> {
    if out.len() != STUB_SIZE {
        return Err("stub slot has the wrong size".to_string());
    }
    let g = i128::from(got_entry);
    let s = i128::from(stub_addr);
    match machine {
        Machine::X86_64 => {
            out.fill(0xcc);
            out[..2].copy_from_slice(&[0xff, 0x25]);
            // The displacement is relative to the end of the 6-byte instruction.
            out[2..6].copy_from_slice(&signed32(wrap(g - (s + 6)))?);
        }
        Machine::Aarch64 => {
            let adrp = encode_adrp(0x9000_0010, g, s)?;
            let ldr = encode_lo12(0xf940_0210, g, 3)?;
            let words = [adrp, ldr, 0xd61f_0200, 0xd420_0000];
            for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
                chunk.copy_from_slice(&word.to_le_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "reloc_tests.rs"]
mod tests;
