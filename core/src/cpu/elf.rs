//! The loader for freestanding relocatable ELF64 objects (`ET_REL`, x86_64 or aarch64, little-endian).
//!
//! Loading is three stages:
//!
//! 1. `Object::parse` validates the header and reads the section and symbol tables;
//! 2. `Object::plan` lays the image out: every `SHF_ALLOC` section, each at its alignment, in three
//!    regions (code, read-only data, writable data) that start on 64 KiB boundaries (a multiple of
//!    every Linux page size on both machines), plus a
//!    stub per host function at the end of the code region and a small GOT at the end of the
//!    read-only region;
//! 3. `Object::link` fills an image buffer at a given base address: copies section bytes (`.bss` is
//!    left zero), writes the GOT and the stubs, and applies every relocation with the pure functions
//!    of the `reloc` module.
//!
//! Stage 3 works on any byte buffer, so `link_at` can link an aarch64 object on an x86_64 host for
//! tests. [`load`] maps the image (anonymous, read-write), links it in place, syncs the instruction
//! cache, then seals it: code `R+X`, read-only data and GOT `R`, data and bss `RW`. No page is ever
//! writable and executable at once.
//!
//! Undefined symbols resolve only against a fixed host table, [`HOST_SYMBOLS`]: `memcpy`, `memset`,
//! `memmove` (Rust implementations), plus `_GLOBAL_OFFSET_TABLE_`, which names the image's GOT. Code reaches them through an in-image stub that jumps via
//! the GOT, so a 32-bit PC-relative call always reaches however far away the host code is. Objects
//! built with `-fno-pic -mcmodel=small` on x86_64 contain absolute 32-bit relocations; their image is
//! mapped in the low 2 GiB (`MAP_32BIT`). In-image aarch64 branches must be within +-128 MiB (there
//! are no veneers; images are far smaller), anything else is an error.
//!
//! Beyond structure, the loader checks meaning, so that an object the compiler could not have written
//! is refused before it runs: executable sections hold contents (`PROGBITS`); every symbol of a loaded
//! section lies inside it; a relocation section `.rela.X` targets an existing section named `X`;
//! only the relocation kinds compilers emit, instruction kinds in code and data kinds in data (never
//! `R_*_NONE`); and every relocation, and every GOT entry, reaches into the image (host functions
//! through their in-image stubs).
//!
//! Every failure is an `Err(String)` describing the problem; this reads untrusted artifacts and never
//! panics on bad input.

use std::collections::BTreeMap;

use object::elf::{self, FileHeader64};
use object::read::elf::Rela as _;
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::{LittleEndian as LE, SectionIndex, SymbolIndex};

use super::host::host_address;
pub use super::host::HOST_SYMBOLS;
use super::mem::{sync_icache, ImageMap, Protection, REGION_ALIGN};
use super::reloc::{self, Machine, Needs, Site, STUB_SIZE};

/// The kernel ABI: `void NAME(void *const *args, uint32_t part, uint32_t nparts)`.
pub type KernelFn = unsafe extern "C" fn(args: *const *mut u8, part: u32, nparts: u32);

/// Largest image the loader accepts (kernels are small; this bounds what a bad file can ask for).
const MAX_IMAGE: usize = 256 << 20;

/// A program mapped and sealed in this process, ready to call.
pub struct LoadedImage {
    map: ImageMap,
    entry: KernelFn,
}

impl LoadedImage {
    pub fn entry(&self) -> KernelFn {
        self.entry
    }

    /// Address range of the whole mapping (for diagnostics and tests).
    pub fn address_range(&self) -> std::ops::Range<u64> {
        self.map.addr()..self.map.addr() + self.map.len() as u64
    }
}

/// Loads `code` for execution in this process and returns its entry point `name`.
pub fn load(code: &[u8], name: &str) -> Result<LoadedImage, String> {
    let obj = Object::parse(code)?;
    let host = Machine::host().ok_or("this host architecture cannot execute ELF programs")?;
    if obj.machine != host {
        return Err(format!(
            "object is for {}, but this host is {}; it cannot be executed here",
            obj.machine.name(),
            host.name()
        ));
    }
    let plan = obj.plan(name)?;
    let mut map = ImageMap::new(plan.total, plan.low)?;
    let base = map.addr();
    if plan.low && base.saturating_add(plan.total as u64) > 1 << 31 {
        return Err("could not map the image below 2 GiB".to_string());
    }
    obj.link(&plan, map.bytes_mut(), base, &|name| host_address(name))?;
    sync_icache(map.bytes_mut().as_ptr(), plan.text_end);
    map.protect(0, plan.ro_start, Protection::ReadExec)?;
    map.protect(plan.ro_start, plan.rw_start - plan.ro_start, Protection::Read)?;
    map.protect(plan.rw_start, plan.total - plan.rw_start, Protection::ReadWrite)?;
    let entry_addr = base + plan.entry_offset as u64;
    // SAFETY: `entry_addr` is the address of a function symbol (STT_FUNC) inside an executable section
    // of this mapping, now R+X; a function pointer is just that address. Calling it is a separate
    // obligation of the caller (the kernel ABI), and `map` lives as long as the returned value.
    let entry = unsafe { std::mem::transmute::<*const u8, KernelFn>(entry_addr as *const u8) };
    Ok(LoadedImage { map, entry })
}

/// An image linked into a plain buffer at a pretend `base` address (for tests of either machine).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct LinkedBuffer {
    pub machine: Machine,
    pub bytes: Vec<u8>,
    pub entry_offset: usize,
    pub text_end: usize,
}

/// Parses, lays out and links `code` into a buffer as if it were mapped at `base`, resolving host
/// functions with `host`. Nothing is executed or mapped.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn link_at(
    code: &[u8],
    name: &str,
    base: u64,
    host: &dyn Fn(&str) -> Option<u64>,
) -> Result<LinkedBuffer, String> {
    let obj = Object::parse(code)?;
    let plan = obj.plan(name)?;
    let mut bytes = vec![0u8; plan.total];
    obj.link(&plan, &mut bytes, base, host)?;
    Ok(LinkedBuffer { machine: obj.machine, bytes, entry_offset: plan.entry_offset, text_end: plan.text_end })
}

/// How a symbol resolves.
#[derive(Clone, Debug)]
enum SymDef {
    /// The null symbol, or a weak undefined one: address 0.
    Zero,
    /// `value` bytes into a loaded section.
    Section {
        index: usize,
        value: u64,
    },
    Absolute(u64),
    /// `_GLOBAL_OFFSET_TABLE_`: the start of the image's GOT.
    GotBase,
    /// A host function: reached through stub `stub`.
    Host {
        name: String,
        stub: usize,
    },
    /// Resolving it is an error, reported only if a relocation uses it.
    Invalid(String),
}

struct Object<'d> {
    data: &'d [u8],
    machine: Machine,
    sections: SectionTable<'d, FileHeader64<LE>, &'d [u8]>,
    symbols: SymbolTable<'d, FileHeader64<LE>, &'d [u8]>,
}

/// Where everything goes in the image. Offsets are relative to the image base.
struct Plan {
    total: usize,
    low: bool,
    /// End of code and stubs; the code region is `[0, ro_start)`.
    text_end: usize,
    ro_start: usize,
    rw_start: usize,
    /// Offset of each loaded section, by section index.
    section_offset: Vec<Option<usize>>,
    symbols: Vec<SymDef>,
    stub_offset: usize,
    got_offset: usize,
    /// GOT slot of each (symbol, value addend) pair.
    got: BTreeMap<(u32, i64), usize>,
    /// Relocation sections to apply: (target section index, relocation section index).
    relocations: Vec<(usize, usize)>,
    entry_offset: usize,
}

fn malformed(e: object::Error) -> String {
    format!("malformed ELF: {e}")
}

fn align_up(value: usize, align: usize) -> Result<usize, String> {
    value
        .checked_add(align - 1)
        .map(|v| v & !(align - 1))
        .filter(|&v| v <= MAX_IMAGE)
        .ok_or_else(|| format!("image larger than {MAX_IMAGE} bytes"))
}

/// How far below the image a relocation may point: x86_64 PC-relative fields are biased by the
/// bytes between the field and the end of the instruction (-4, or -8 with a trailing immediate).
const BELOW_IMAGE_SLACK: u64 = 16;

/// Whether `addr` lies in the image `[base, base + total]` (one past the end included), give or take
/// [`BELOW_IMAGE_SLACK`] below it.
fn in_image(addr: u64, base: u64, total: usize) -> bool {
    addr.wrapping_sub(base.wrapping_sub(BELOW_IMAGE_SLACK)) <= total as u64 + BELOW_IMAGE_SLACK
}

fn to_usize(value: u64) -> Result<usize, String> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v <= MAX_IMAGE)
        .ok_or_else(|| format!("size {value:#x} larger than {MAX_IMAGE} bytes"))
}

impl<'d> Object<'d> {
    fn parse(data: &'d [u8]) -> Result<Object<'d>, String> {
        // e_ident: magic (0..4), class (4), data encoding (5), ...; 16 bytes in all.
        const EI_CLASS: usize = 4;
        const EI_DATA: usize = 5;
        let ident = data.get(..16).ok_or("not an ELF file (too short)")?;
        if ident[..4] != elf::ELFMAG {
            return Err("not an ELF file (bad magic)".to_string());
        }
        if ident[EI_CLASS] != elf::ELFCLASS64 {
            return Err("not a 64-bit ELF object".to_string());
        }
        if ident[EI_DATA] != elf::ELFDATA2LSB {
            return Err("not a little-endian ELF object".to_string());
        }
        let header = FileHeader64::<LE>::parse(data).map_err(malformed)?;
        let endian = header.endian().map_err(malformed)?;
        if header.e_type(endian) != elf::ET_REL {
            return Err(format!("not a relocatable object (e_type {})", header.e_type(endian)));
        }
        let machine = match header.e_machine(endian) {
            elf::EM_X86_64 => Machine::X86_64,
            elf::EM_AARCH64 => Machine::Aarch64,
            other => return Err(format!("unsupported machine {other} (want x86_64 or aarch64)")),
        };
        let sections = header.sections(endian, data).map_err(malformed)?;
        let symbols = sections.symbols(endian, data, elf::SHT_SYMTAB).map_err(malformed)?;
        Ok(Object { data, machine, sections, symbols })
    }

    fn symbol_name(&self, sym: &elf::Sym64<LE>) -> String {
        match self.symbols.symbol_name(LE, sym) {
            Ok(name) => String::from_utf8_lossy(name).into_owned(),
            Err(_) => "<bad name>".to_string(),
        }
    }

    fn section_name(&self, header: &elf::SectionHeader64<LE>) -> String {
        match self.sections.section_name(LE, header) {
            Ok(name) => String::from_utf8_lossy(name).into_owned(),
            Err(_) => "<bad name>".to_string(),
        }
    }

    fn plan(&self, entry: &str) -> Result<Plan, String> {
        // 1. Sections, by region.
        let mut regions: [Vec<(usize, usize, usize)>; 3] = Default::default(); // (index, size, align)
        for (index, header) in self.sections.enumerate() {
            let flags = header.sh_flags(LE);
            if flags & u64::from(elf::SHF_ALLOC) == 0 || header.sh_type(LE) == elf::SHT_NULL {
                continue;
            }
            let name = self.section_name(header);
            if flags & u64::from(elf::SHF_TLS) != 0 {
                return Err(format!("section {name}: thread-local storage is not supported"));
            }
            if matches!(header.sh_type(LE), elf::SHT_INIT_ARRAY | elf::SHT_FINI_ARRAY | elf::SHT_PREINIT_ARRAY) {
                return Err(format!("section {name}: constructors/destructors are not supported"));
            }
            let exec = flags & u64::from(elf::SHF_EXECINSTR) != 0;
            let write = flags & u64::from(elf::SHF_WRITE) != 0;
            if exec && header.sh_type(LE) != elf::SHT_PROGBITS {
                return Err(format!("executable section {name} has no contents (type {})", header.sh_type(LE)));
            }
            let region = match (exec, write) {
                (true, true) => return Err(format!("section {name} is writable and executable")),
                (true, false) => 0,
                (false, false) => 1,
                (false, true) => 2,
            };
            let align = header.sh_addralign(LE).max(1);
            if !align.is_power_of_two() || align > REGION_ALIGN as u64 {
                return Err(format!("section {name}: unsupported alignment {align}"));
            }
            if header.sh_type(LE) != elf::SHT_NOBITS {
                // Contents must be inside the file, so only `.bss` can make the image large.
                header.data(LE, self.data).map_err(malformed)?;
            }
            regions[region].push((index.0, to_usize(header.sh_size(LE))?, align as usize));
        }

        // 2. Symbols.
        let mut section_placed = vec![false; self.sections.len()];
        for list in &regions {
            for &(index, _, _) in list {
                section_placed[index] = true;
            }
        }
        let mut symbols = Vec::with_capacity(self.symbols.len());
        let mut stubs = 0usize;
        let mut got: BTreeMap<(u32, i64), usize> = BTreeMap::new();
        for (index, sym) in self.symbols.enumerate() {
            let def = if index.0 == 0 {
                SymDef::Zero
            } else if sym.st_type() == elf::STT_GNU_IFUNC || sym.st_type() == elf::STT_TLS {
                SymDef::Invalid(format!("symbol `{}` has an unsupported type", self.symbol_name(sym)))
            } else {
                match sym.st_shndx(LE) {
                    elf::SHN_ABS => SymDef::Absolute(sym.st_value(LE)),
                    elf::SHN_COMMON => {
                        let name = self.symbol_name(sym);
                        return Err(format!("common symbol `{name}` (compile with -fno-common)"));
                    }
                    _ => match self.symbols.symbol_section(LE, sym, index).map_err(malformed)? {
                        None if sym.st_shndx(LE) != elf::SHN_UNDEF && sym.st_shndx(LE) != elf::SHN_XINDEX => {
                            SymDef::Invalid(format!(
                                "symbol `{}` has unsupported section index {:#x}",
                                self.symbol_name(sym),
                                sym.st_shndx(LE)
                            ))
                        }
                        None => {
                            let name = self.symbol_name(sym);
                            if name == "_GLOBAL_OFFSET_TABLE_" {
                                SymDef::GotBase
                            } else if HOST_SYMBOLS.contains(&name.as_str()) {
                                stubs += 1;
                                let slot = got.len();
                                got.insert((index.0 as u32, 0), slot);
                                SymDef::Host { name, stub: stubs - 1 }
                            } else if sym.st_bind() == elf::STB_WEAK {
                                SymDef::Invalid(format!("weak undefined symbol `{name}` would resolve to address 0"))
                            } else if name.is_empty() {
                                SymDef::Invalid("unnamed undefined symbol".to_string())
                            } else {
                                return Err(format!(
                                    "undefined symbol `{name}` (the host provides only {})",
                                    HOST_SYMBOLS.join(", ")
                                ));
                            }
                        }
                        Some(section) if section_placed.get(section.0) == Some(&true) => {
                            self.check_symbol_extent(sym, section)?;
                            SymDef::Section { index: section.0, value: sym.st_value(LE) }
                        }
                        Some(section) => SymDef::Invalid(format!(
                            "symbol `{}` is in section {} which is not loaded",
                            self.symbol_name(sym),
                            section.0
                        )),
                    },
                }
            };
            symbols.push(def);
        }

        // 3. Relocation sections and the GOT entries they need.
        let mut relocations = Vec::new();
        let mut low = false;
        for (index, header) in self.sections.enumerate() {
            let sh_type = header.sh_type(LE);
            if sh_type != elf::SHT_RELA && sh_type != elf::SHT_REL {
                continue;
            }
            let target = header.sh_info(LE) as usize;
            let name = self.section_name(header);
            let target_header = match self.sections.section(SectionIndex(target)) {
                Ok(h) if target != 0 => h,
                _ => return Err(format!("relocation section {name} targets section {target}, which does not exist")),
            };
            // `.rela.X` relocates `X` (every assembler names them so): a relocation section retargeted
            // at another section would leave its own section unrelocated.
            let target_name = self.section_name(target_header);
            if name.strip_prefix(".rela").or_else(|| name.strip_prefix(".rel")) != Some(target_name.as_str()) {
                return Err(format!("relocation section {name} targets section {target_name}"));
            }
            if section_placed.get(target) != Some(&true) {
                continue; // debug info and other sections that are not loaded
            }
            if sh_type == elf::SHT_REL {
                return Err("REL relocations (without addend) are not supported".to_string());
            }
            if header.sh_link(LE) as usize != self.symbols.section().0 {
                return Err("relocation section does not use the symbol table".to_string());
            }
            let (relas, _) = header.rela(LE, self.data).map_err(malformed)?.ok_or("bad relocation section")?;
            let exec = target_header.sh_flags(LE) & u64::from(elf::SHF_EXECINSTR) != 0;
            for rela in relas {
                let r_type = rela.r_type(LE, false);
                let kind = reloc::needs(self.machine, r_type)?;
                if !reloc::emitted_in(self.machine, r_type, exec) {
                    let what = if exec { "code" } else { "data" };
                    return Err(format!("section {target_name}: relocation type {r_type} is never emitted in {what}"));
                }
                low |= reloc::needs_low_address(self.machine, r_type);
                let sym = rela.r_sym(LE, false);
                if sym as usize >= symbols.len() {
                    return Err(format!("relocation uses symbol {sym}, which does not exist"));
                }
                let key = match kind {
                    Needs::Direct => continue,
                    Needs::GotEntry => (sym, 0),
                    Needs::GotEntryWithAddend => (sym, rela.r_addend(LE)),
                };
                let slot = got.len();
                got.entry(key).or_insert(slot);
            }
            relocations.push((target, index.0));
        }

        // 4. Layout.
        let mut section_offset = vec![None; self.sections.len()];
        let mut cursor = 0usize;
        let mut place = |list: &[(usize, usize, usize)], cursor: &mut usize| -> Result<(), String> {
            for &(index, size, align) in list {
                *cursor = align_up(*cursor, align)?;
                section_offset[index] = Some(*cursor);
                *cursor = cursor.checked_add(size).ok_or("image too large")?;
            }
            Ok(())
        };
        place(&regions[0], &mut cursor)?;
        let stub_offset = align_up(cursor, STUB_SIZE)?;
        let text_end = stub_offset + stubs * STUB_SIZE;
        let ro_start = align_up(text_end, REGION_ALIGN)?;
        cursor = ro_start;
        place(&regions[1], &mut cursor)?;
        let got_offset = align_up(cursor, 8)?;
        let rw_start = align_up(got_offset + got.len() * 8, REGION_ALIGN)?;
        cursor = rw_start;
        place(&regions[2], &mut cursor)?;
        let total = align_up(cursor, REGION_ALIGN)?.max(REGION_ALIGN);

        // 5. The entry point.
        let entry_offset = self.find_entry(entry, &symbols, &section_offset)?;
        Ok(Plan {
            total,
            low,
            text_end,
            ro_start,
            rw_start,
            section_offset,
            symbols,
            stub_offset,
            got_offset,
            got,
            relocations,
            entry_offset,
        })
    }

    fn find_entry(&self, entry: &str, symbols: &[SymDef], section_offset: &[Option<usize>]) -> Result<usize, String> {
        let mut found = None;
        for (index, sym) in self.symbols.enumerate() {
            if self.symbols.symbol_name(LE, sym).ok() != Some(entry.as_bytes()) {
                continue;
            }
            let global = sym.st_bind() != elf::STB_LOCAL;
            if found.is_none() || global {
                found = Some((index, sym));
            }
            if global {
                break;
            }
        }
        let (index, sym): (SymbolIndex, _) = found.ok_or_else(|| format!("entry symbol `{entry}` not found"))?;
        let not_function = || format!("entry symbol `{entry}` is not a function in an executable section");
        let SymDef::Section { index: section, value } = symbols[index.0] else {
            return Err(not_function());
        };
        let header = self.sections.section(SectionIndex(section)).map_err(malformed)?;
        if sym.st_type() != elf::STT_FUNC
            || header.sh_flags(LE) & u64::from(elf::SHF_EXECINSTR) == 0
            || value >= header.sh_size(LE)
        {
            return Err(not_function());
        }
        Ok(section_offset[section].ok_or_else(not_function)? + value as usize)
    }

    /// A symbol defined in a loaded section must lie inside it: its value at most the section's size
    /// (one past the end marks an end), and its extent `st_size` within the section.
    fn check_symbol_extent(&self, sym: &elf::Sym64<LE>, section: SectionIndex) -> Result<(), String> {
        let header = self.sections.section(section).map_err(malformed)?;
        let size = header.sh_size(LE);
        let (value, len) = (sym.st_value(LE), sym.st_size(LE));
        if value.checked_add(len).is_none_or(|end| end > size) {
            return Err(format!(
                "symbol `{}` ({len} bytes at {value:#x}) lies outside section {} of {size} bytes",
                self.symbol_name(sym),
                self.section_name(header)
            ));
        }
        Ok(())
    }

    /// Resolves symbol `index` for a direct reference (host functions resolve to their stub).
    fn resolve(&self, plan: &Plan, base: u64, index: u32) -> Result<u64, String> {
        match &plan.symbols[index as usize] {
            SymDef::Zero => Ok(0),
            SymDef::Absolute(value) => Ok(*value),
            SymDef::Section { index, value } => {
                let offset = plan.section_offset[*index].ok_or("symbol in an unloaded section")?;
                Ok(base.wrapping_add(offset as u64).wrapping_add(*value))
            }
            SymDef::Host { stub, .. } => Ok(base + (plan.stub_offset + stub * STUB_SIZE) as u64),
            SymDef::GotBase => Ok(base + plan.got_offset as u64),
            SymDef::Invalid(reason) => Err(reason.clone()),
        }
    }

    /// Whether symbol `index` resolves into the image (a section, the GOT, a host stub).
    fn targets_image(&self, plan: &Plan, index: u32) -> bool {
        matches!(plan.symbols[index as usize], SymDef::Section { .. } | SymDef::GotBase | SymDef::Host { .. })
    }

    /// Fills `image` (zeroed, `plan.total` bytes) as if it were mapped at `base`.
    fn link(&self, plan: &Plan, image: &mut [u8], base: u64, host: &dyn Fn(&str) -> Option<u64>) -> Result<(), String> {
        if image.len() != plan.total {
            return Err("image buffer has the wrong size".to_string());
        }
        // Section contents.
        for (index, header) in self.sections.enumerate() {
            let Some(offset) = plan.section_offset[index.0] else {
                continue;
            };
            if header.sh_type(LE) == elf::SHT_NOBITS {
                continue; // already zero
            }
            let bytes = header.data(LE, self.data).map_err(malformed)?;
            if bytes.len() as u64 != header.sh_size(LE) {
                return Err(format!("section {} data is truncated", self.section_name(header)));
            }
            image[offset..offset + bytes.len()].copy_from_slice(bytes);
        }
        // The GOT, then the stubs that jump through it.
        for (&(sym, addend), &slot) in &plan.got {
            let value = match &plan.symbols[sym as usize] {
                SymDef::Host { name, .. } => {
                    host(name).ok_or_else(|| format!("host symbol `{name}` is not available"))?
                }
                _ => {
                    let value = self.resolve(plan, base, sym)?;
                    if !self.targets_image(plan, sym) || !in_image(value.wrapping_add(addend as u64), base, plan.total)
                    {
                        return Err(format!("GOT entry of symbol {sym} (addend {addend}) points outside the image"));
                    }
                    value
                }
            };
            let at = plan.got_offset + slot * 8;
            image[at..at + 8].copy_from_slice(&value.wrapping_add(addend as u64).to_le_bytes());
        }
        for (sym, def) in plan.symbols.iter().enumerate() {
            if let SymDef::Host { stub, .. } = def {
                let slot = plan.got[&(sym as u32, 0)];
                let at = plan.stub_offset + stub * STUB_SIZE;
                let got_addr = base + (plan.got_offset + slot * 8) as u64;
                reloc::write_stub(self.machine, &mut image[at..at + STUB_SIZE], base + at as u64, got_addr)?;
            }
        }
        // Relocations.
        for &(target, rel_index) in &plan.relocations {
            let target_header = self.sections.section(SectionIndex(target)).map_err(malformed)?;
            let offset = plan.section_offset[target].ok_or("relocation target not loaded")?;
            let size = target_header.sh_size(LE) as usize;
            let section = &mut image[offset..offset + size];
            let section_addr = base + offset as u64;
            let rel_header = self.sections.section(SectionIndex(rel_index)).map_err(malformed)?;
            let (relas, _) = rel_header.rela(LE, self.data).map_err(malformed)?.ok_or("bad relocation section")?;
            let target_name = self.section_name(target_header);
            for rela in relas {
                let r_type = rela.r_type(LE, false);
                let sym = rela.r_sym(LE, false);
                let site = Site { r_type, offset: rela.r_offset(LE), addend: rela.r_addend(LE) };
                let in_section = |e: String| format!("section {target_name}: {e}");
                let s = self.resolve(plan, base, sym).map_err(in_section)?;
                let kind = reloc::needs(self.machine, r_type)?;
                let got = match kind {
                    Needs::Direct => None,
                    Needs::GotEntry => plan.got.get(&(sym, 0)),
                    Needs::GotEntryWithAddend => plan.got.get(&(sym, site.addend)),
                }
                .map(|slot| base + (plan.got_offset + slot * 8) as u64);
                // What the patched field makes the code reach: the symbol (or its GOT entry), moved by
                // the addend. Only in-image targets are legitimate (host functions are reached through
                // stubs in the image).
                let reached = match (kind, got) {
                    (Needs::GotEntry, Some(g)) => g.wrapping_add(site.addend as u64),
                    (Needs::GotEntryWithAddend, Some(g)) => g,
                    _ => s.wrapping_add(site.addend as u64),
                };
                if !in_image(reached, base, plan.total) || !self.targets_image(plan, sym) {
                    return Err(in_section(format!(
                        "relocation at offset {:#x} (symbol {sym}, addend {}) reaches outside the image",
                        site.offset, site.addend
                    )));
                }
                reloc::apply(self.machine, section, section_addr, site, s, got).map_err(in_section)?;
            }
        }
        Ok(())
    }
}
