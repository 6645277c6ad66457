//! An Adreno a6xx shader-ISA emulator (desktop and tests only; the lean runtime never links it).
//!
//! **Decoder.** [`decode()`] turns a 64-bit word into an [`Instr`] with pilot's own field tables,
//! written from Mesa's ISA description (`src/freedreno/isa/ir3-cat0.xml` … `ir3-cat7.xml`,
//! `ir3-common.xml`; bitset names cited at each decoder). [`Instr`]'s `Display` is Mesa's syntax, so
//! it compares line by line with Mesa's `ir3-disasm` (tests: Mesa's `disasm.c` vectors and every
//! kernel the tests assemble). Encodings outside the tables are [`DecodeError::Unknown`]: cat0 flow
//! (`nop` … `prede`, `jump`, `br`/`brao`/`braa`/`bany`/`ball`, `shps`, `getone`, `kill`), cat1
//! `mov`/`cov`/`mova`/`mova1` (immediate, const, register, relative), cat2 and cat3 (all but
//! `bary.f`/`flat.b`/`msad`/`dp*acc`/`wmm`), cat4, cat5 `isam`/`isaml`/`sam`/`samb`/`saml`/
//! `getsize`/`getinfo` in the direct `s#`/`t#` form, cat6 `ldg`/`stg` (and `.a`), `ldl`/`stl`,
//! `ldlw`/`stlw`, `ldp`/`stp`, `stc`, local and `.g` atomics, `ldib.b`/`stib.b`/`atomic.b.*`,
//! cat7 `bar`, `fence`, `sleep`, `icinv`, `dccln`/`dcinv`/`dcflu`.
//!
//! **Executor.** [`Program::decode`] + [`Dispatch`] + [`run`] against a [`Memory`] (GPU virtual
//! addresses, bounds-checked by the implementation; [`Buffers`] is one). Each fiber runs the scalar
//! program on its own registers; fibers of a work-group run in order, meeting at `bar`; work-groups
//! may spread over host threads (`Dispatch::threads`); results are deterministic for race-free
//! programs. [`implemented_mnemonics`] lists what executes: the ALU of cat2/cat3/cat4 in full and
//! half precision with `(sat)`, `(rptN)` and `(r)`, source modifiers, flow and predicates, moves and
//! conversions, `a0.x`/`a1.x` relative addressing, global/local/private loads and stores, global and
//! local atomics, `stc` in the preamble (`shps`…`shpe`, run once per wave), nearest `isam`/`sam`,
//! typed `ldib.b`/`stib.b` on linear textures/images and untyped ones on buffers (SSBOs), with the
//! `A6XX_TEX_CONST`/`A6XX_TEX_SAMP` descriptors [`TexDesc`]/[`SampDesc`] decode.
//!
//! **Faults** ([`Fault`], naming the instruction offset, work-group and fiber): anything not
//! implemented (including an undecodable word when it is reached); a register above the program's
//! declared footprint (`ProgramInfo::max_reg`, half registers merged as `ir3_collect_info` counts
//! them); a read or overwrite of a result still in flight without the sync flag ir3's legalizer
//! (`ir3_legalize.c`) would set — `(ss)` for SFU and local-memory results and for constants written
//! by `stc`, `(sy)` for texture, global/private-memory and image results — and an ALU write over a
//! register an in-flight SFU, memory or texture instruction may still be reading (its WAR rule);
//! memory, local or private memory, constants or descriptors out of bounds; a fiber past
//! `Dispatch::fiber_step_limit`.
//!
//! **Not modelled:** the ALU delay slots (`(nopN)`, `nop` counts), write-after-read hazards whose
//! writer is itself a memory, texture or SFU instruction, races within a wave (fibers run one after another), `mad` as
//! fused (it rounds twice); cross-fiber operations (`getone` outside the preamble, `bany`/`ball`,
//! shuffles, ballots) fault. Half register `hrN.c` overlaps full `r(N/2)` as Mesa's
//! `ra_num_to_physreg` (`ir3_ra.h`) counts them; that the even half is the low 16 bits, and that a
//! half constant reads the low 16 bits of its 32-bit slot, are assumptions no witness here checks.

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

pub use decode::{
    cat2_names, cat3_names, cat4_names, decode, Branch, Cond, Dst, GAddr, Instr, Op, Space, Src, SrcKind, Type,
};
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
