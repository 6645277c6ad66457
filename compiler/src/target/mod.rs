//! The compiler's back ends, one folder per [`Backend`]: each turns a lowered [`Program`] into
//! [`Built`] code (code records, and per kernel its entry, arguments and launch), which
//! [`crate::artifact::write`] turns into an artifact the same way for every target.
//!
//! - [`cpu`]: C per kernel, one object per core compiled by clang (also `null`, which runs nothing);
//! - [`cl`]: OpenCL C, one source for every kernel (runs on any OpenCL device);
//! - [`qcom`]: the OpenCL kernels as Adreno 630 programs, one blob per kernel;
//! - [`amd`]: the OpenCL kernels for AMD GPUs (`usb+amd`), one HSA code object for every kernel.

pub mod amd;
pub mod cl;
pub mod cpu;
pub mod qcom;
pub mod scoping;
pub mod scratch;

use pilot_core::device::ProgramFormat;
use pilot_core::{Backend, Target};

use crate::driver::CompileOptions;
use crate::error::{CompileError, Result};
use crate::program::Program;

/// A back end: builds every kernel of a program for one target.
pub trait Codegen {
    /// Builds the kernels of `p`, checking `gates` on the code before anything is final. May rewrite
    /// `p`'s kernels into the shape the target runs (the OpenCL back ends unroll image pixels).
    fn build(&self, p: &mut Program, gates: &Gates) -> Result<Built>;
}

/// The backend named `name` (aliases allowed); every backend has a back end here.
pub fn backend(name: &str) -> Result<Backend> {
    Backend::parse(name).map_err(|_| unknown_target(name))
}

fn unknown_target(name: &str) -> CompileError {
    let known: Vec<&str> = Backend::ALL.into_iter().map(Backend::name).collect();
    CompileError::Graph(format!("unknown target `{name}` ({})", known.join(", ")))
}

/// The back end for `opts.target`.
pub fn codegen(opts: &CompileOptions) -> Result<Box<dyn Codegen>> {
    let target = opts.target.clone();
    Ok(match target.backend {
        Backend::Cpu | Backend::Null => Box::new(cpu::Cpu { target, cc: opts.cc.clone(), cpu: opts.cpu.clone() }),
        Backend::Cl => Box::new(cl::Cl { target, opts: opts.cl.clone() }),
        Backend::Qcom => Box::new(qcom::Qcom { cl: cl::Cl { target, opts: opts.cl.clone() } }),
        Backend::UsbAmd => Box::new(amd::Amd { target, cc: opts.cc.clone() }),
    })
}

/// Exact counts the kernel sources must have (the seed's `ALLOWED_READ_IMAGE` and
/// `ALLOWED_GATED_READ_IMAGE`); checked by the OpenCL back ends, which have `read_image`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gates {
    pub read_image: Option<usize>,
    pub gated_read_image: Option<usize>,
}

impl Gates {
    /// Counts `read_image` and gated `read_image` in `source`, and fails when a gate is not met.
    pub fn check_source(&self, source: &str) -> Result<(usize, usize)> {
        let (reads, gated) = pilot_core::gates::read_image_counts(source);
        for (gate, allowed, found) in
            [("ALLOWED_READ_IMAGE", self.read_image, reads), ("ALLOWED_GATED_READ_IMAGE", self.gated_read_image, gated)]
        {
            if let Some(expected) = allowed.filter(|&e| e != found) {
                return Err(CompileError::Gate { gate, expected, found });
            }
        }
        Ok((reads, gated))
    }
}

/// Code built for a target: the code records and, per kernel, its entry, arguments and launch.
pub struct Built {
    pub format: ProgramFormat,
    /// Code records; several kernels may share one (a code object or a source with many kernels).
    pub codes: Vec<Vec<u8>>,
    pub kernels: Vec<BuiltKernel>,
    /// Byte alignment of buffers in the scratch arena (the device's base-address alignment).
    pub align: usize,
    /// Bytes past each scratch buffer's end that kernels may read, kept inside the arena (the
    /// CPU's stride-2 vector loads read one element past the last they keep).
    pub read_past: usize,
    /// Image pitch alignment in bytes (images only).
    pub pitch_align: usize,
    pub target: Target,
    /// `read_image` occurrences in the kernel sources, and the gated ones (OpenCL targets; else 0).
    pub read_images: (usize, usize),
    /// The code generator beyond pilot, with its version, when one made the code (`Mesa 25.0.7 ir3 ...`).
    pub codegen: Option<String>,
}

pub struct BuiltKernel {
    pub name: String,
    /// Buffers in argument order (output first).
    pub args: Vec<u32>,
    /// Index into [`Built::codes`].
    pub code: usize,
    pub global: [u32; 3],
    pub local: [u32; 3],
    /// What a dispatch needs, read from the code object (`usb+amd` only).
    pub amdgpu: Option<pilot_core::artifact::AmdDispatch>,
    /// What a dispatch needs, as Mesa's ir3 reported it (`--qcom-compiler ir3` only).
    pub ir3: Option<pilot_core::artifact::Ir3Program>,
}
