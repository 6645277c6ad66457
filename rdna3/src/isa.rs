//! The two instruction sets the emulator runs: gfx11 (RDNA3: gfx1100) and gfx12 (RDNA4: gfx1201). They share the
//! VALU, SALU, DS and VOPD formats and most semantics; opcode numbers and names differ (each has its generated
//! table: [`crate::tables`], [`crate::tables_gfx12`]), and gfx12 re-encodes SMEM and vector memory (96-bit
//! VFLAT/VGLOBAL/VSCRATCH with TH/SCOPE cache fields) and splits `s_waitcnt` into one wait per counter.

use super::decode::{Enc, OpInfo};
use super::{tables, tables_gfx12};

/// The instruction set a kernel is encoded in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isa {
    #[default]
    Gfx11,
    Gfx12,
}

/// One instruction set's opcode tables, per encoding (`mubuf_cache`: gfx11's cache invalidates, run as no-ops).
pub struct Tables {
    pub sop1: &'static [OpInfo],
    pub sop2: &'static [OpInfo],
    pub sopk: &'static [OpInfo],
    pub sopc: &'static [OpInfo],
    pub sopp: &'static [OpInfo],
    pub mubuf_cache: &'static [OpInfo],
    pub smem: &'static [OpInfo],
    pub vop1: &'static [OpInfo],
    pub vop2: &'static [OpInfo],
    pub vopc: &'static [OpInfo],
    pub vop3: &'static [OpInfo],
    pub vop3p: &'static [OpInfo],
    pub vopd: &'static [OpInfo],
    pub ds: &'static [OpInfo],
    pub flat: &'static [OpInfo],
    pub global: &'static [OpInfo],
    pub scratch: &'static [OpInfo],
}

macro_rules! tables_of {
    ($m:ident) => {
        Tables {
            sop1: $m::SOP1,
            sop2: $m::SOP2,
            sopk: $m::SOPK,
            sopc: $m::SOPC,
            sopp: $m::SOPP,
            mubuf_cache: $m::MUBUF_CACHE,
            smem: $m::SMEM,
            vop1: $m::VOP1,
            vop2: $m::VOP2,
            vopc: $m::VOPC,
            vop3: $m::VOP3,
            vop3p: $m::VOP3P,
            vopd: $m::VOPD,
            ds: $m::DS,
            flat: $m::FLAT,
            global: $m::GLOBAL,
            scratch: $m::SCRATCH,
        }
    };
}

static GFX11: Tables = tables_of!(tables);
static GFX12: Tables = tables_of!(tables_gfx12);

/// ELF `e_flags` EF_AMDGPU_MACH values (LLVM's AMDGPUUsage, "AMDGPU ELF Header").
const MACH_MASK: u32 = 0xff;
const MACH_GFX1100: u32 = 0x41;
const MACH_GFX1201: u32 = 0x4e;

impl Isa {
    pub fn tables(self) -> &'static Tables {
        match self {
            Isa::Gfx11 => &GFX11,
            Isa::Gfx12 => &GFX12,
        }
    }

    /// The processor LLVM names for it (`--mcpu`): the one card of each family pilot targets.
    pub fn mcpu(self) -> &'static str {
        match self {
            Isa::Gfx11 => "gfx1100",
            Isa::Gfx12 => "gfx1201",
        }
    }

    /// The instruction set of a code object's EF_AMDGPU_MACH (`None`: a processor the emulator does not run).
    pub fn from_elf_flags(e_flags: u32) -> Option<Isa> {
        match e_flags & MACH_MASK {
            MACH_GFX1100 => Some(Isa::Gfx11),
            MACH_GFX1201 => Some(Isa::Gfx12),
            _ => None,
        }
    }

    /// Every table with the encoding its opcodes decode as.
    pub fn encodings(self) -> [(Enc, &'static [OpInfo]); 17] {
        let t = self.tables();
        [
            (Enc::Sop1, t.sop1),
            (Enc::Sop2, t.sop2),
            (Enc::Sopk, t.sopk),
            (Enc::Sopc, t.sopc),
            (Enc::Sopp, t.sopp),
            (Enc::Sopp, t.mubuf_cache),
            (Enc::Smem, t.smem),
            (Enc::Vop1, t.vop1),
            (Enc::Vop2, t.vop2),
            (Enc::Vopc, t.vopc),
            (Enc::Vop3, t.vop3),
            (Enc::Vop3p, t.vop3p),
            (Enc::Vopd, t.vopd),
            (Enc::Ds, t.ds),
            (Enc::Flat, t.flat),
            (Enc::Global, t.global),
            (Enc::Scratch, t.scratch),
        ]
    }
}
