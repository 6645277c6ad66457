//! The OpenCL back end: OpenCL C for desktop OpenCL (`cl`) and, through Qualcomm's compiler, the
//! Adreno 630 (`qcom`). One source holds every kernel of a model, after a small prelude.

pub mod prepare;
pub mod render;
pub mod texel;
pub mod tune;

use pilot_core::device::ProgramFormat;
use pilot_core::Target;

use super::{Built, BuiltKernel, Codegen, Gates};
use crate::error::Result;
use crate::program::Program;

/// Helpers every kernel may call. Half is storage only (no `cl_khr_fp16`): conversions go through
/// `vload_half`/`vstore_half`, which round to nearest even. bfloat16 is stored as `ushort` (the top
/// half of a float's bits), rounded to nearest even by bit arithmetic (NaN stays a quiet NaN).
pub const PRELUDE: &str = r#"__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;
float pl_fmax(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b); }
float pl_fmin(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b); }
float pl_bits_half(ushort b) { return vload_half(0, (const half *)&b); }
ushort pl_half_bits(float x) { ushort b; vstore_half(x, 0, (half *)&b); return b; }
float pl_round_half(float x) { return pl_bits_half(pl_half_bits(x)); }
float pl_bits_bf16(ushort b) { return as_float((uint)b << 16); }
ushort pl_bf16_bits(float x) { uint u = as_uint(x); return (ushort)(((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
float pl_round_bf16(float x) { return pl_bits_bf16(pl_bf16_bits(x)); }
float pl_channel(float4 p, long c) { return c == 0 ? p.s0 : c == 1 ? p.s1 : c == 2 ? p.s2 : p.s3; }
"#;

/// Options of the OpenCL back ends beyond the [`Target`] (whose modes say `--image`, `--float16`
/// and `--nolocals`).
#[derive(Clone, Debug)]
pub struct ClOptions {
    /// Image row pitch alignment in bytes (`IMAGE_PITCH_ALIGNMENT`; 64 on the a630).
    pub pitch_align: usize,
    /// Widest image in pixels (16384 on the a630).
    pub max_image_width: usize,
    /// Where `--target qcom` gets Adreno binaries.
    pub qcom_compiler: crate::target::qcom::QcomCompiler,
}

impl Default for ClOptions {
    fn default() -> ClOptions {
        ClOptions {
            pitch_align: 64,
            max_image_width: 16384,
            qcom_compiler: crate::target::qcom::QcomCompiler::host_default(),
        }
    }
}

/// Base-address alignment of arena buffers: sub-buffers must start on it (128 B on PoCL and the a630;
/// 512 B covers desktop GPUs too).
pub const ARENA_ALIGN: usize = 512;

/// The OpenCL back end for `target` (backend `cl`; `qcom` builds on it).
pub struct Cl {
    pub target: Target,
    pub opts: ClOptions,
}

impl Codegen for Cl {
    /// Every kernel of `p` rendered into one OpenCL source, then the read-image gates checked on it.
    fn build(&self, p: &mut Program, gates: &Gates) -> Result<Built> {
        let mut built = build(p, &self.target, &self.opts)?;
        let source = std::str::from_utf8(&built.codes[0]).unwrap_or_default();
        built.read_images = gates.check_source(source)?;
        Ok(built)
    }
}

/// Renders every kernel of `p` into one OpenCL source.
/// With `--nolocals`, local sizes are then timed on this machine's OpenCL device ([`tune`]).
fn build(p: &mut Program, target: &Target, opts: &ClOptions) -> Result<Built> {
    let nolocals = target.nolocals;
    let mut source = PRELUDE.to_string();
    let mut kernels = Vec::new();
    for i in 0..p.kernels.len() {
        let k = p.kernels[i].clone();
        let prep = prepare::prepare(p, &k, nolocals);
        let ck = render::render(p, &k, &prep, !nolocals)?;
        source.push('\n');
        source.push_str(&ck.source);
        let local = ck.local.unwrap_or_else(|| default_local(ck.global));
        kernels.push(BuiltKernel {
            name: ck.name,
            args: ck.args,
            code: 0,
            global: ck.global,
            local,
            amdgpu: None,
            ir3: None,
        });
    }
    if let Some(path) = std::env::var_os("PILOT_DUMP_CL") {
        // Debugging aid: the whole OpenCL source, as built.
        std::fs::write(&path, &source).map_err(|e| crate::error::CompileError::Io {
            path: std::path::Path::new(&path).display().to_string(),
            source: e,
        })?;
    }
    let mut built = Built {
        format: ProgramFormat::OpenClSource,
        codes: vec![source.into_bytes()],
        kernels,
        align: ARENA_ALIGN,
        read_past: 0,
        pitch_align: opts.pitch_align,
        target: target.clone(),
        read_images: (0, 0),
        codegen: None,
    };
    if nolocals {
        tune::tune(p, &mut built)?;
    }
    Ok(built)
}

/// A work-group of at most 64 work-items that divides the NDRange, widest along dimension 0.
pub fn default_local(global: [u32; 3]) -> [u32; 3] {
    let mut local = [1u32; 3];
    let mut room = 64u32;
    for d in 0..3 {
        let l = (1..=room.min(global[d])).rev().find(|&l| global[d].is_multiple_of(l)).unwrap_or(1);
        local[d] = l;
        room /= l;
    }
    local
}

#[cfg(test)]
mod tests;
