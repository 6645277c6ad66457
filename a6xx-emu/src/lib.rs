//! An Adreno a6xx shader-ISA emulator (desktop and tests only; the lean runtime never links it).
//!
//! - [`decode()`]: 64-bit instruction words to [`Instr`], with pilot's own field tables written from
//!   Mesa's ISA description (`src/freedreno/isa/ir3-cat0.xml` … `ir3-cat7.xml`, `ir3-common.xml`).
//!   [`Instr`]'s `Display` prints Mesa's syntax, so it compares line by line with Mesa's `ir3-disasm`.
//!   Encodings outside the tables are [`DecodeError::Unknown`].
//! - [`Program`] + [`Dispatch`] + [`Memory`]: runs a compute program over a grid (see `exec`).
//!   Anything not implemented, out of bounds, or read stale (a missing `(ss)`/`(sy)`) stops the
//!   dispatch with a [`Fault`] naming the instruction offset and the reason: never a silent result.

mod alu;
mod decode;
mod decode6;
mod desc;
mod disasm;
mod exec;
mod exec_ops;
mod exec_tex;
mod memory;
mod tex;

pub use decode::{cat2_names, cat3_names, cat4_names, decode, Branch, Cond, Dst, GAddr, Instr, Op, Src, SrcKind, Type};
pub use decode6::cat6_names;
pub use desc::{Format, SampDesc, TexDesc, Wrap};
pub use exec::{run, Dispatch, Fault, Program, ProgramInfo, Stats};
pub use exec_ops::implemented_mnemonics;
pub use memory::{Buffers, Memory};
pub use tex::{tex_names, Tex};

/// A word the decoder does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown or unimplemented a6xx encoding {:08x}_{:08x}", .0 >> 32, .0 & 0xffff_ffff)]
    Unknown(u64),
}

/// Decodes a program's bytes (little-endian 64-bit words); each entry is the instruction or why not.
pub fn decode_all(code: &[u8]) -> Vec<Result<Instr, DecodeError>> {
    code.chunks_exact(8).map(|c| decode(u64::from_le_bytes(c.try_into().unwrap()))).collect()
}
