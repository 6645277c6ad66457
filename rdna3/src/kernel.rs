//! A kernel out of an AMDGPU code object (ELF): its 64-byte kernel descriptor (`NAME.kd`) and its code,
//! decoded once.
//!
//! Descriptor layout: LLVM's AMDGPUUsage, "Kernel Descriptor" (code object v3 and later).

use object::{Object, ObjectSection, ObjectSymbol};

use super::decode::{decode_all, Inst};
use super::isa::Isa;
use super::EmuError;

/// The fields of the kernel descriptor the dispatch needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// Byte offset from the descriptor to the kernel's first instruction.
    pub entry_offset: i64,
    pub rsrc3: u32,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub code_properties: u16,
    pub kernarg_preload: u16,
}

/// KERNEL_CODE_PROPERTIES bits: which user SGPRs the kernel expects, in this order.
pub mod props {
    pub const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    pub const DISPATCH_PTR: u16 = 1 << 1;
    pub const QUEUE_PTR: u16 = 1 << 2;
    pub const KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    pub const DISPATCH_ID: u16 = 1 << 4;
    pub const FLAT_SCRATCH_INIT: u16 = 1 << 5;
    pub const PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    pub const WAVEFRONT_SIZE32: u16 = 1 << 10;
}

impl KernelDescriptor {
    pub const SIZE: usize = 64;

    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < Self::SIZE {
            return None;
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap());
        Some(KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            entry_offset: i64::from_le_bytes(b[16..24].try_into().unwrap()),
            rsrc3: u32_at(44),
            rsrc1: u32_at(48),
            rsrc2: u32_at(52),
            code_properties: u16_at(56),
            kernarg_preload: u16_at(58),
        })
    }

    pub fn wave32(&self) -> bool {
        self.code_properties & props::WAVEFRONT_SIZE32 != 0
    }

    /// VGPRs per work-item: COMPUTE_PGM_RSRC1.GRANULATED_WORKITEM_VGPR_COUNT in blocks of 8 (wave32).
    pub fn vgprs(&self) -> u32 {
        ((self.rsrc1 & 0x3f) + 1) * if self.wave32() { 8 } else { 4 }
    }

    /// COMPUTE_PGM_RSRC1.FLOAT_DENORM_MODE_32: 0 flushes f32 denormals on input and output.
    pub fn flush_f32_denorms(&self) -> bool {
        (self.rsrc1 >> 16) & 3 == 0
    }

    /// COMPUTE_PGM_RSRC1.FLOAT_DENORM_MODE_16_64.
    pub fn flush_f16_f64_denorms(&self) -> bool {
        (self.rsrc1 >> 18) & 3 == 0
    }
}

/// A kernel ready to run: name, descriptor and pre-decoded code.
#[derive(Debug)]
pub struct CodeObjectKernel {
    pub name: String,
    /// The instruction set the code is in (from the code object's EF_AMDGPU_MACH).
    pub isa: Isa,
    pub descriptor: KernelDescriptor,
    pub insts: Vec<Inst>,
    /// Instruction index for each code dword (`u32::MAX` inside an instruction).
    index: Vec<u32>,
}

impl CodeObjectKernel {
    /// Reads kernel `name` out of the code object `elf` and decodes its code in the instruction set of the
    /// code object's processor (gfx1100: gfx11, gfx1201: gfx12; any other is refused).
    pub fn load(elf: &[u8], name: &str) -> Result<Self, EmuError> {
        let err = |msg: String| EmuError::CodeObject { kernel: name.to_string(), msg };
        let file = object::File::parse(elf).map_err(|e| err(format!("not an ELF code object: {e}")))?;
        let flags = match file.flags() {
            object::FileFlags::Elf { e_flags, .. } => e_flags,
            _ => 0,
        };
        let isa = Isa::from_elf_flags(flags).ok_or_else(|| {
            err(format!("EF_AMDGPU_MACH {:#x}: the emulator runs gfx1100 and gfx1201 code objects", flags & 0xff))
        })?;
        let kd_sym = file
            .symbols()
            .find(|s| s.name() == Ok(&format!("{name}.kd")))
            .ok_or_else(|| err(format!("no symbol {name}.kd")))?;
        let kd_bytes = read_at(&file, kd_sym.address(), KernelDescriptor::SIZE as u64)
            .ok_or_else(|| err("the kernel descriptor is outside the file's sections".into()))?;
        let descriptor = KernelDescriptor::parse(kd_bytes).expect("64 bytes");
        let entry = kd_sym.address().wrapping_add(descriptor.entry_offset as u64);
        let func = file
            .symbols()
            .find(|s| s.address() == entry && s.kind() == object::SymbolKind::Text)
            .ok_or_else(|| err(format!("no function symbol at the entry {entry:#x}")))?;
        let code =
            read_at(&file, entry, func.size()).ok_or_else(|| err("the code is outside the file's sections".into()))?;
        Self::from_parts_of(isa, name, descriptor, code)
    }

    /// A gfx11 kernel from a descriptor and the bytes of its code (from the entry to the end of the function).
    pub fn from_parts(name: &str, descriptor: KernelDescriptor, code: &[u8]) -> Result<Self, EmuError> {
        Self::from_parts_of(Isa::Gfx11, name, descriptor, code)
    }

    /// [`CodeObjectKernel::from_parts`] for code in `isa`.
    pub fn from_parts_of(isa: Isa, name: &str, descriptor: KernelDescriptor, code: &[u8]) -> Result<Self, EmuError> {
        let mut insts = decode_all(isa, name, code)?;
        insts.iter_mut().for_each(super::wave::resolve);
        let mut index = vec![u32::MAX; code.len() / 4 + 1];
        for (i, inst) in insts.iter().enumerate() {
            index[(inst.offset / 4) as usize] = i as u32;
        }
        Ok(CodeObjectKernel { name: name.to_string(), isa, descriptor, insts, index })
    }

    /// The instruction index at byte offset `offset`, if an instruction starts there.
    pub fn at(&self, offset: u32) -> Option<usize> {
        let i = *self.index.get((offset / 4) as usize)?;
        (offset.is_multiple_of(4) && i != u32::MAX).then_some(i as usize)
    }

    /// The names of the kernels in a code object (symbols `NAME.kd`).
    pub fn names(elf: &[u8]) -> Result<Vec<String>, EmuError> {
        let file = object::File::parse(elf)
            .map_err(|e| EmuError::CodeObject { kernel: "?".into(), msg: format!("not an ELF code object: {e}") })?;
        Ok(file.symbols().filter_map(|s| s.name().ok()?.strip_suffix(".kd").map(str::to_string)).collect())
    }
}

fn read_at<'a>(file: &object::File<'a>, addr: u64, len: u64) -> Option<&'a [u8]> {
    file.sections().find_map(|s| {
        let start = addr.checked_sub(s.address())?;
        if start + len > s.size() {
            return None;
        }
        let data = s.data().ok()?;
        data.get(start as usize..(start + len) as usize)
    })
}
