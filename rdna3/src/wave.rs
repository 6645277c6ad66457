//! One wave32: its registers, operand access and the fetch-execute loop.

use super::decode::{operand as op, Enc, Inst};
use super::isa::Isa;
use super::kernel::CodeObjectKernel;
use super::memory::Memory;
use super::{mem, salu, valu, EmuError};

pub(super) const LANES: usize = 32;

/// Declares an executor's operations: an enum plus the mapping from assembler names (an operation gfx12 renamed,
/// such as `s_add_co_u32` for gfx11's `s_add_u32`, lists both names).
macro_rules! semantics {
    ($enum:ident { $($id:ident = $($name:literal)|+,)* }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub(super) enum $enum { Unimplemented, $($id,)* }
        impl $enum {
            const ALL: &'static [$enum] = &[$enum::Unimplemented, $($enum::$id,)*];
            pub(super) fn from_name(name: &str) -> u16 {
                match name { $($($name)|+ => $enum::$id as u16,)* _ => 0 }
            }
            pub(super) fn of(sem: u16) -> Self {
                Self::ALL.get(sem as usize).copied().unwrap_or($enum::Unimplemented)
            }
        }
    };
}
pub(super) use semantics;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Running,
    Barrier,
    Done,
}

/// What a wave touches besides its registers.
pub(super) struct Ctx<'a> {
    pub kernel: &'a CodeObjectKernel,
    pub mem: &'a mut dyn Memory,
    pub lds: &'a mut [u8],
    /// Marks each instruction (by index) that executes, when tracing ([`super::dispatch_traced`]).
    pub trace: Option<&'a mut [bool]>,
    /// The dispatch's budget, charged every [`super::dispatch::CHARGE_EVERY`] instructions of a wave.
    pub meter: &'a super::dispatch::Meter,
}

pub(super) struct Wave {
    /// SGPRs s0..s105 and the special registers at their operand codes (VCC 106, M0 125, EXEC 126).
    pub s: [u32; 128],
    pub scc: bool,
    /// VGPRs, lane-minor: `v[reg * 32 + lane]`.
    pub v: Vec<u32>,
    pub nvgpr: usize,
    /// Byte offset of the next instruction.
    pub pc: u32,
    pub state: State,
    /// Each lane's private (scratch) memory, `private_size` bytes per lane.
    pub scratch: Vec<u8>,
    pub private_size: usize,
    pub flush_f32: bool,
    pub flush_f16: bool,
    /// Instructions executed.
    pub executed: u64,
}

/// A VALU source resolved once per instruction: a VGPR base index or a value uniform across lanes.
#[derive(Clone, Copy)]
pub(super) enum Src {
    Vgpr(usize),
    Uniform(u64),
}

/// The data type an instruction's inline float constants take.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Int,
    F16,
    F32,
    F64,
}

/// Operand types from an opcode's name (its type tokens such as `f32`, `u16`): the last token is the
/// sources' type, the first the destination's.
pub(super) fn types_of(name: &str) -> u8 {
    let tokens: Vec<&str> = name
        .split('_')
        .filter(|t| {
            t.len() >= 2 && matches!(t.as_bytes()[0], b'f' | b'i' | b'u' | b'b') && t[1..].parse::<u8>().is_ok()
        })
        .collect();
    let (Some(first), Some(last)) = (tokens.first(), tokens.last()) else { return 0 };
    // Packing conversions (v_cvt_pk_rtz_f16_f32) write both halves: a 32-bit destination.
    let first = if name.contains("_pk_") && !name.starts_with("v_pk_") { &"b32" } else { first };
    let kind = match *last {
        "f16" => 1,
        "f32" => 2,
        "f64" => 3,
        _ => 0,
    };
    kind | (first.ends_with("16") as u8) << 2 | (last.ends_with("16") as u8) << 3
}

/// Decoded [`types_of`] bits.
pub(super) fn kind(types: u8) -> Kind {
    [Kind::Int, Kind::F16, Kind::F32, Kind::F64][(types & 3) as usize]
}
pub(super) const DST16: u8 = 4;
pub(super) const SRC16: u8 = 8;

fn inline_float(code: u16, kind: Kind) -> u64 {
    const F32: [u32; 9] = [
        0x3f00_0000,
        0xbf00_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x4000_0000,
        0xc000_0000,
        0x4080_0000,
        0xc080_0000,
        0x3e22_f983,
    ];
    const F16: [u16; 9] = [0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118];
    const F64: [u64; 9] = [
        0x3fe0_0000_0000_0000,
        0xbfe0_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
        0x4000_0000_0000_0000,
        0xc000_0000_0000_0000,
        0x4010_0000_0000_0000,
        0xc010_0000_0000_0000,
        0x3fc4_5f30_6dc9_c882,
    ];
    let i = (code - 240) as usize;
    match kind {
        Kind::F16 => F16[i] as u64,
        Kind::F64 => F64[i],
        _ => F32[i] as u64,
    }
}

impl Wave {
    pub fn exec(&self) -> u32 {
        self.s[op::EXEC_LO as usize]
    }

    pub fn vcc(&self) -> u32 {
        self.s[op::VCC_LO as usize]
    }

    /// A scalar or constant source, `dwords` (1 or 2) wide.
    pub fn scalar(&self, code: u16, dwords: u8, literal: u32, kind: Kind) -> Result<u64, String> {
        let wide = dwords == 2;
        Ok(match code {
            op::NULL => 0,
            0..=127 => {
                let lo = self.s[code as usize] as u64;
                if wide {
                    let hi = *self.s.get(code as usize + 1).ok_or("a register pair past the SGPR file")? as u64;
                    lo | hi << 32
                } else {
                    lo
                }
            }
            128..=192 => (code - 128) as u64,
            193..=208 => {
                let v = -((code - 192) as i64);
                if wide {
                    v as u64
                } else {
                    v as u32 as u64
                }
            }
            240..=248 => inline_float(code, if wide && kind != Kind::F16 { Kind::F64 } else { kind }),
            op::VCCZ => (self.vcc() == 0) as u64,
            op::EXECZ => (self.exec() == 0) as u64,
            op::SCC => self.scc as u64,
            op::LITERAL if wide && kind == Kind::F64 => (literal as u64) << 32,
            op::LITERAL => literal as u64,
            _ => return Err(format!("operand code {code} is not a scalar source")),
        })
    }

    pub fn write_scalar(&mut self, code: u16, dwords: u8, value: u64) -> Result<(), String> {
        if code == op::NULL {
            return Ok(());
        }
        if code >= 128 || (dwords == 2 && code >= 127) {
            return Err(format!("operand code {code} is not a scalar destination"));
        }
        self.s[code as usize] = value as u32;
        if dwords == 2 {
            self.s[code as usize + 1] = (value >> 32) as u32;
        }
        Ok(())
    }

    /// Resolves a VALU source: a VGPR (checked against the file's size) or a uniform value.
    pub fn src(&self, code: u16, dwords: u8, literal: u32, kind: Kind) -> Result<Src, String> {
        if code >= op::VGPR0 {
            let r = (code - op::VGPR0) as usize;
            self.check_vgpr(r, dwords)?;
            Ok(Src::Vgpr(r * LANES))
        } else {
            Ok(Src::Uniform(self.scalar(code, dwords, literal, kind)?))
        }
    }

    pub fn check_vgpr(&self, r: usize, dwords: u8) -> Result<(), String> {
        let n = if dwords == 0 { 1 } else { dwords as usize };
        if r + n > self.nvgpr {
            return Err(format!("v{} is past the {} VGPRs the kernel descriptor allocates", r + n - 1, self.nvgpr));
        }
        Ok(())
    }

    #[inline]
    pub fn get(&self, s: Src, lane: usize, wide: bool) -> u64 {
        match s {
            Src::Vgpr(b) if wide => self.v[b + lane] as u64 | (self.v[b + LANES + lane] as u64) << 32,
            Src::Vgpr(b) => self.v[b + lane] as u64,
            Src::Uniform(u) => u,
        }
    }

    /// Runs until the wave ends or reaches a barrier.
    pub fn run(&mut self, ctx: &mut Ctx<'_>, step_limit: u64) -> Result<(), EmuError> {
        self.state = State::Running;
        let kernel = ctx.kernel;
        while self.state == State::Running {
            let Some(i) = kernel.at(self.pc) else {
                return Err(EmuError::Dispatch {
                    kernel: kernel.name.clone(),
                    msg: format!("the program counter {:#x} is not at an instruction of the kernel", self.pc),
                });
            };
            let inst = &kernel.insts[i];
            if let Some(t) = ctx.trace.as_deref_mut() {
                t[i] = true;
            }
            self.pc += inst.words as u32 * 4;
            self.executed += 1;
            if self.executed > step_limit {
                return Err(exec_err(kernel, inst, format!("still running after {step_limit} instructions")));
            }
            if self.executed.is_multiple_of(super::dispatch::CHARGE_EVERY) {
                ctx.meter.charge(super::dispatch::CHARGE_EVERY).map_err(|msg| exec_err(kernel, inst, msg))?;
            }
            let r = match inst.enc {
                Enc::Sop1 | Enc::Sop2 | Enc::Sopk | Enc::Sopc | Enc::Sopp => salu::exec(self, inst),
                Enc::Smem => mem::smem(self, ctx, inst),
                Enc::Ds | Enc::Flat | Enc::Global | Enc::Scratch => mem::vmem(self, ctx, inst),
                _ => valu::exec(self, inst),
            };
            r.map_err(|msg| exec_err(kernel, inst, msg))?;
        }
        Ok(())
    }
}

pub(super) fn exec_err(kernel: &CodeObjectKernel, inst: &Inst, msg: String) -> EmuError {
    EmuError::Exec { kernel: kernel.name.clone(), inst: inst.to_string(), offset: inst.offset, msg }
}

/// Whether the executor has semantics for opcode `name` (number `op`) of encoding `enc`.
pub(super) fn implemented(isa: Isa, enc: Enc, name: &str, op: u16) -> bool {
    match enc {
        Enc::Sop1 | Enc::Sop2 | Enc::Sopk | Enc::Sopc | Enc::Sopp => salu::resolve(isa, name) != 0,
        Enc::Smem | Enc::Ds | Enc::Flat | Enc::Global | Enc::Scratch => mem::resolve(name) != 0,
        Enc::Vopd => super::valu_cmp::vopd_implemented(op),
        _ => valu::resolve(name) != 0,
    }
}

/// Resolves every instruction's executor operation once, when the kernel is loaded.
pub(super) fn resolve(inst: &mut Inst) {
    inst.sem = match inst.enc {
        Enc::Sop1 | Enc::Sop2 | Enc::Sopk | Enc::Sopc | Enc::Sopp => salu::resolve(inst.isa, inst.info.name),
        Enc::Smem | Enc::Ds | Enc::Flat | Enc::Global | Enc::Scratch => mem::resolve(inst.info.name),
        _ => valu::resolve(inst.info.name),
    };
    // v_fmac accumulates into its destination: make that the third source.
    if matches!(inst.info.name, "v_fmac_f32" | "v_fmac_f16") && inst.enc != Enc::Vopd {
        inst.src[2] = inst.dst;
    }
    if let Some(y) = &mut inst.y {
        resolve(y);
    }
}
