//! The ELF layer of an HSA code object: header, loadable image, exported symbols and notes.
//!
//! A code object is a linked shared object (`ld.lld -shared`): `ELFCLASS64`, little-endian, `ET_DYN`,
//! `EM_AMDGPU`, OS ABI `ELFOSABI_AMDGPU_HSA` with ABI version 2, 3 or 4 (code object V4, V5, V6), and
//! the GPU in `e_flags` (LLVM AMDGPUUsage, "ELF Header"). Its `PT_LOAD` segments placed at their
//! virtual addresses form the image the GPU runs; nothing is relocated at load (an object that still
//! carries relocations is refused), so image offsets are the addresses the code was linked at.

use object::elf::{self, FileHeader64};
use object::read::elf::{Dyn as _, FileHeader, ProgramHeader, SectionHeader, Sym as _};
use object::LittleEndian as LE;

use pilot_core::Arch;

/// `ELFOSABI_AMDGPU_HSA`.
const OSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`: the msgpack metadata note, owner `AMDGPU`.
const NT_AMDGPU_METADATA: u32 = 32;
/// `EF_AMDGPU_MACH`: the GPU in the low byte of `e_flags`.
const EF_AMDGPU_MACH: u32 = 0xff;
/// `EF_AMDGPU_MACH_AMDGCN_GFX1100` and `EF_AMDGPU_MACH_AMDGCN_GFX1201`.
const MACHS: [(u32, Arch); 2] = [(0x041, Arch::Gfx1100), (0x04e, Arch::Gfx1201)];
/// `DT_RELRSZ`: bytes of packed relative relocations.
const DT_RELRSZ: u32 = 35;
/// Largest image accepted (kernels are small; this bounds what a bad file can ask for).
pub const MAX_IMAGE: u64 = 64 << 20;

/// What the ELF layer found.
pub struct Elf<'d> {
    pub arch: Arch,
    /// Code object version (4, 5 or 6).
    pub version: u32,
    /// The loadable image: every `PT_LOAD` at its address, zero-filled between and beyond file data.
    pub image: Vec<u8>,
    /// Executable address ranges of the image.
    pub code: Vec<std::ops::Range<u64>>,
    /// Exported symbols (`.dynsym`), by name.
    pub symbols: Vec<Symbol>,
    /// The `NT_AMDGPU_METADATA` note's contents.
    pub metadata: &'d [u8],
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    /// `STT_FUNC` (code) or `STT_OBJECT` (a descriptor).
    pub kind: u8,
}

type Hdr = FileHeader64<LE>;

/// Reads the header, the image, the symbols and the metadata note; refuses anything a loader would
/// have to fix up (relocations, undefined symbols, needed libraries).
pub fn read(data: &[u8]) -> Result<Elf<'_>, String> {
    let malformed = |e: object::Error| format!("malformed ELF: {e}");
    let hdr = Hdr::parse(data).map_err(malformed)?;
    let endian = hdr.endian().map_err(malformed)?;
    if !matches!(endian, LE) {
        return Err("not little-endian".into());
    }
    let ident = hdr.e_ident();
    if hdr.e_machine(endian) != elf::EM_AMDGPU {
        return Err(format!("e_machine is {}, not EM_AMDGPU (224)", hdr.e_machine(endian)));
    }
    if ident.os_abi != OSABI_AMDGPU_HSA {
        return Err(format!("OS ABI is {}, not ELFOSABI_AMDGPU_HSA (64)", ident.os_abi));
    }
    let version = match ident.abi_version {
        2..=4 => u32::from(ident.abi_version) + 2,
        v => return Err(format!("ABI version {v} is not code object V4, V5 or V6 (2, 3 or 4)")),
    };
    if hdr.e_type(endian) != elf::ET_DYN {
        return Err(format!("e_type is {}, not ET_DYN: link the object first (ld.lld -shared)", hdr.e_type(endian)));
    }
    let flags = hdr.e_flags(endian);
    let arch = MACHS.iter().find(|(m, _)| *m == flags & EF_AMDGPU_MACH).map(|(_, a)| *a).ok_or_else(|| {
        format!("e_flags mach 0x{:02x} is not gfx1100 (0x41) or gfx1201 (0x4e)", flags & EF_AMDGPU_MACH)
    })?;
    // XNACK, SRAMECC and the V6 generic version: none exist on these GPUs, so every other bit is 0.
    if flags & !EF_AMDGPU_MACH != 0 {
        return Err(format!("e_flags 0x{flags:x}: feature or generic-version bits set for {arch}"));
    }

    let phdrs = hdr.program_headers(endian, data).map_err(malformed)?;
    let (image, code) = load_image(phdrs, data)?;
    let mut metadata = None;
    for ph in phdrs {
        match ph.p_type(endian) {
            elf::PT_NOTE => {
                let Some(mut notes) = ph.notes(endian, data).map_err(malformed)? else { continue };
                while let Some(note) = notes.next().map_err(malformed)? {
                    match (note.name(), note.n_type(endian)) {
                        (b"AMDGPU", NT_AMDGPU_METADATA) if metadata.is_none() => metadata = Some(note.desc()),
                        (b"AMDGPU", NT_AMDGPU_METADATA) => return Err("two NT_AMDGPU_METADATA notes".into()),
                        (b"GNU", elf::NT_GNU_BUILD_ID) => {}
                        (name, t) => {
                            return Err(format!("unknown note type {t} of owner {:?}", String::from_utf8_lossy(name)))
                        }
                    }
                }
            }
            elf::PT_DYNAMIC => check_dynamic(ph, data)?,
            _ => {}
        }
    }
    let metadata = metadata.ok_or("no NT_AMDGPU_METADATA note")?;

    let sections = hdr.sections(endian, data).map_err(malformed)?;
    for s in sections.iter() {
        if matches!(s.sh_type(endian), elf::SHT_REL | elf::SHT_RELA | elf::SHT_RELR) && s.sh_size(endian) != 0 {
            let name = sections.section_name(endian, s).map(String::from_utf8_lossy).unwrap_or_default();
            return Err(format!("relocations left in section `{name}`: the image must need none"));
        }
    }
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM).map_err(malformed)?;
    if dynsym.is_empty() {
        return Err("no .dynsym: nothing exported".into());
    }
    let mut symbols = Vec::new();
    for sym in dynsym.iter().skip(1) {
        let name = dynsym.symbol_name(endian, sym).map_err(malformed)?;
        let name = std::str::from_utf8(name).map_err(|_| "a symbol name is not UTF-8".to_string())?;
        if sym.is_undefined(endian) {
            return Err(format!("symbol `{name}` is undefined: the image must need no other object"));
        }
        symbols.push(Symbol {
            name: name.to_string(),
            value: sym.st_value(endian),
            size: sym.st_size(endian),
            kind: sym.st_type(),
        });
    }
    Ok(Elf { arch, version, image, code, symbols, metadata })
}

/// Places every `PT_LOAD` at its address; returns the image and its executable ranges.
fn load_image(phdrs: &[elf::ProgramHeader64<LE>], data: &[u8]) -> Result<(Vec<u8>, Vec<std::ops::Range<u64>>), String> {
    let mut loads: Vec<_> = phdrs.iter().filter(|p| p.p_type(LE) == elf::PT_LOAD).collect();
    loads.sort_by_key(|p| p.p_vaddr(LE));
    if loads.is_empty() {
        return Err("no PT_LOAD segment".into());
    }
    let mut end = 0u64;
    let mut code = Vec::new();
    for p in &loads {
        let (vaddr, filesz, memsz) = (p.p_vaddr(LE), p.p_filesz(LE), p.p_memsz(LE));
        if filesz > memsz {
            return Err(format!("PT_LOAD at 0x{vaddr:x}: file size 0x{filesz:x} exceeds memory size 0x{memsz:x}"));
        }
        if vaddr < end {
            return Err(format!("PT_LOAD at 0x{vaddr:x} overlaps the one before"));
        }
        end = vaddr
            .checked_add(memsz)
            .filter(|&e| e <= MAX_IMAGE)
            .ok_or_else(|| format!("PT_LOAD at 0x{vaddr:x} of 0x{memsz:x} bytes ends beyond {MAX_IMAGE} bytes"))?;
        if p.p_flags(LE) & elf::PF_W != 0 && p.p_flags(LE) & elf::PF_X != 0 {
            return Err(format!("PT_LOAD at 0x{vaddr:x} is writable and executable"));
        }
        if p.p_flags(LE) & elf::PF_X != 0 {
            code.push(vaddr..vaddr + memsz);
        }
    }
    let mut image = vec![0u8; end as usize];
    for p in &loads {
        let bytes = p.data(LE, data).map_err(|()| format!("PT_LOAD at 0x{:x}: outside the file", p.p_vaddr(LE)))?;
        let at = p.p_vaddr(LE) as usize;
        image[at..at + bytes.len()].copy_from_slice(bytes);
    }
    Ok((image, code))
}

/// Refuses dynamic entries that would need a loader: relocation tables and needed libraries.
fn check_dynamic(ph: &elf::ProgramHeader64<LE>, data: &[u8]) -> Result<(), String> {
    let entries = ph.dynamic(LE, data).map_err(|e| format!("malformed ELF: {e}"))?.unwrap_or_default();
    for d in entries {
        let (tag, val) = (d.d_tag(LE), d.d_val(LE));
        let what = match u32::try_from(tag).unwrap_or(u32::MAX) {
            elf::DT_NEEDED => "a needed library (DT_NEEDED)",
            elf::DT_RELASZ if val != 0 => "relocations (DT_RELASZ)",
            elf::DT_RELSZ if val != 0 => "relocations (DT_RELSZ)",
            elf::DT_PLTRELSZ if val != 0 => "relocations (DT_PLTRELSZ)",
            DT_RELRSZ if val != 0 => "relocations (DT_RELRSZ)",
            elf::DT_TEXTREL => "text relocations (DT_TEXTREL)",
            _ => continue,
        };
        return Err(format!("the dynamic section lists {what}: the image must need no loader"));
    }
    Ok(())
}
