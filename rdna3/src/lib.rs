//! pilot-rdna3: an RDNA3 (gfx11) emulator, for tests and desktop tools (never the on-device runtime): runs the machine
//! code of AMDGPU code objects built for gfx1100 (wave32).
//!
//! - [`decode`]: machine words to instructions ([`tables`] holds the opcode tables), once per kernel;
//!   [`disasm`] prints them in LLVM's syntax; `dpp` reads src0 across lanes for DPP forms.
//! - [`kernel`]: a kernel's descriptor and code out of the code object.
//! - [`dispatch`](mod@dispatch): each wave's initial registers as the hardware sets them; the waves
//!   of a workgroup run with LDS and barriers.
//! - `wave` with `salu`, `valu` (+ `valu_int`, `valu_f64`, `valu_cmp`) and `mem`: one wave32's state
//!   and the instruction semantics (AMD's "RDNA3 Instruction Set Architecture" reference).
//! - [`memory`]: the device memory seen by the kernel, behind traits with bounds checks.
//! - [`device`]: `--device amd-emu`, a `pilot_core` device that runs `usb+amd` gfx1100 artifacts here.
//!
//! The API the simulated GPU (and `--device amd-emu`) calls; it only grows:
//! 1. [`CodeObjectKernel::load`]`(elf, name)` once per kernel: descriptor read, code decoded (an
//!    unknown encoding fails here, naming word, offset and kernel).
//! 2. A [`Dispatch`]: what DISPATCH_DIRECT programs (COMPUTE_PGM_RSRC1/2, COMPUTE_USER_DATA_*,
//!    COMPUTE_NUM_THREAD_*, workgroup counts, LDS and scratch sizes), filled field by field from the
//!    registers, or by [`Dispatch::for_kernel`] the way a runtime does from the descriptor.
//! 3. [`dispatch_parallel`]`(&kernel, &dispatch, &vram, threads)` over a [`SharedMemory`] (VRAM with
//!    atomics across host threads), or [`dispatch()`] over a [`Memory`] on one thread, or
//!    [`dispatch_traced`] (one thread, marking the instructions that ran). Each returns [`Stats`].
//! 4. [`implemented_opcodes`]: what the executor has semantics for (the instruction tests' guard).
//!
//! What the emulator does not run it refuses with an [`EmuError`] naming the kernel and instruction:
//! unknown encodings at decode, opcodes and modifiers without semantics here when they execute.

pub mod confine;
pub mod decode;
mod decode_gfx12;
pub mod device;
pub mod disasm;
pub mod dispatch;
mod dpp;
pub mod isa;
pub mod kernel;
mod mem;
pub mod memory;
mod salu;
mod salu_float;
pub mod tables;
pub mod tables_gfx12;
mod valu;
mod valu_cmp;
mod valu_f64;
mod valu_int;
mod wave;

pub use dispatch::{cancel_flag, dispatch, dispatch_parallel, dispatch_traced, Budget, Dispatch, Stats};
pub use isa::Isa;
pub use kernel::{CodeObjectKernel, KernelDescriptor};
pub use memory::{Memory, OutOfBounds, SharedMemory, SharedVecMemory, VecMemory};

/// Every gfx11 opcode the emulator runs, as `(encoding, assembler name)`: each entry of the decoder's
/// [`tables`] that the executor has semantics for. Instruction tests check they exercise all of them.
pub fn implemented_opcodes() -> Vec<(decode::Enc, &'static str)> {
    implemented_opcodes_of(Isa::Gfx11)
}

/// [`implemented_opcodes`] of `isa` ([`tables_gfx12`] for gfx12).
pub fn implemented_opcodes_of(isa: Isa) -> Vec<(decode::Enc, &'static str)> {
    isa.encodings()
        .into_iter()
        .flat_map(|(enc, t)| {
            t.iter().filter(move |i| wave::implemented(isa, enc, i.name, i.op)).map(move |i| (enc, i.name))
        })
        .collect()
}

/// Emulator errors. Each names the kernel and, for faults while running, the instruction.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    #[error("rdna3 {kernel}: unknown encoding {word:#010x} at offset {offset:#x}")]
    UnknownEncoding { kernel: String, word: u32, offset: u32 },
    #[error("rdna3 {kernel}: code object: {msg}")]
    CodeObject { kernel: String, msg: String },
    #[error("rdna3 {kernel}: dispatch: {msg}")]
    Dispatch { kernel: String, msg: String },
    #[error("rdna3 {kernel}: `{inst}` at {offset:#x}: {msg}")]
    Exec { kernel: String, inst: String, offset: u32, msg: String },
}
