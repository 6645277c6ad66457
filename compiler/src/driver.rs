//! The whole pipeline behind `pilot compile`: import → lower (fold, fuse) → gates → codegen → write.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pilot_core::artifact::PinnedInput;
use pilot_core::Target;

use crate::artifact::{self, ModelInfo};
use crate::error::{CompileError, Result};
use crate::lower::image::ImageMode;
use crate::lower::winograd::Policy;
use crate::lower::{budget, lower_pinned, pin, Port};
use crate::target::cl::ClOptions;
use crate::target::{self, Gates};

/// What to compile for.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Backend, architecture and the OpenCL modes (`--image`, `--float16`, `--nolocals`); checked
    /// against the target rules ([`Target::check`]) before anything else.
    pub target: Target,
    /// Options of the OpenCL back ends (pitch alignment, widest image, the Adreno compiler).
    pub cl: ClOptions,
    /// Pinned shapes of dynamic inputs.
    pub shapes: HashMap<String, Vec<usize>>,
    /// Inputs pinned to a value (`--const`): folded like initializers, recorded in the artifact and
    /// removed from its inputs. Each must name a model input and match its declared type.
    pub consts: pin::Pins,
    /// C compiler override.
    pub cc: Option<PathBuf>,
    /// The CPU the `cpu` target compiles for (`--cpu`, e.g. `x86-64-v3`, `cortex-a75`); `None` is
    /// the host (`-march=native`) or, cross, the arch's default core.
    pub cpu: Option<String>,
    /// The `ALLOWED_KERNEL_COUNT` gate (exact), checked before anything is written.
    pub allowed_kernel_count: Option<usize>,
    /// The `ALLOWED_READ_IMAGE` and `ALLOWED_GATED_READ_IMAGE` gates (exact, OpenCL targets).
    pub allowed_read_image: Option<usize>,
    pub allowed_gated_read_image: Option<usize>,
    /// The most bytes one value or buffer, all the weights, or the whole planned memory may take
    /// (see [`budget`]).
    pub max_memory: u64,
}

impl CompileOptions {
    /// Options for `target`, everything else default.
    pub fn new(target: Target) -> CompileOptions {
        CompileOptions {
            target,
            cl: ClOptions::default(),
            shapes: HashMap::new(),
            consts: pin::Pins::new(),
            cc: None,
            cpu: None,
            allowed_kernel_count: None,
            allowed_read_image: None,
            allowed_gated_read_image: None,
            max_memory: budget::DEFAULT_MAX_MEMORY,
        }
    }
}

/// The summary `pilot compile` prints.
#[derive(Clone, Debug)]
pub struct CompileReport {
    pub inputs: Vec<Port>,
    /// The inputs pinned with `--const`, as the artifact records them.
    pub pinned: Vec<PinnedInput>,
    pub outputs: Vec<Port>,
    pub kernels: usize,
    /// `read_image` occurrences in the kernel sources, and the gated ones (OpenCL targets).
    pub read_images: usize,
    pub gated_read_images: usize,
    pub flops: u64,
    /// Peak scratch memory after planning, and what it would be without reuse.
    pub arena_bytes: usize,
    pub naive_scratch_bytes: usize,
    pub weight_bytes: usize,
    pub artifact_bytes: u64,
    pub seconds: f64,
}

fn mib(b: f64) -> String {
    format!("{:.2} MiB", b / (1024.0 * 1024.0))
}

impl fmt::Display for CompileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, ports) in [("input ", &self.inputs), ("output", &self.outputs)] {
            for p in ports {
                writeln!(f, "{what}   {:<32} {:<8} {:?}", p.name, p.dtype.name(), p.shape)?;
            }
        }
        for p in &self.pinned {
            writeln!(f, "pinned   {:<32} {:<8} {:?} {}", p.name, p.dtype.name(), p.shape, p.hash)?;
        }
        writeln!(f, "kernels  {}", self.kernels)?;
        if self.read_images > 0 {
            writeln!(f, "images   {} read_image, {} gated", self.read_images, self.gated_read_images)?;
        }
        writeln!(f, "flops    {:.3} GFLOP per step", self.flops as f64 / 1e9)?;
        writeln!(
            f,
            "memory   {} peak scratch ({} without reuse), {} weights",
            mib(self.arena_bytes as f64),
            mib(self.naive_scratch_bytes as f64),
            mib(self.weight_bytes as f64)
        )?;
        writeln!(f, "artifact {}", mib(self.artifact_bytes as f64))?;
        write!(f, "time     {:.2} s", self.seconds)
    }
}

/// Compiles the ONNX model at `model` into an artifact at `out`. `progress` is told each stage.
/// Nothing is written unless every step and gate succeeds.
pub fn compile(model: &Path, out: &Path, opts: &CompileOptions, progress: &dyn Fn(&str)) -> Result<CompileReport> {
    let st = Instant::now();
    opts.target.check().map_err(|e| CompileError::Graph(e.to_string()))?;
    let codegen = target::codegen(opts)?;
    progress("import");
    let bytes = crate::onnx::read_model_file(model)?;
    let base = model.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let m = crate::onnx::load_bytes(&bytes, Some(base))?;
    progress("lower");
    let images =
        opts.target.image.then_some(ImageMode { float16: opts.target.float16, max_width: opts.cl.max_image_width });
    let limits = budget::Limits { max_memory: opts.max_memory };
    let pilot_winograd = std::env::var("PILOT_WINOGRAD").ok();
    let winograd = Policy::for_backend(opts.target.backend, pilot_winograd.as_deref()).map_err(CompileError::Graph)?;
    let lanes = match opts.target.backend {
        pilot_core::target::Backend::Cpu => {
            crate::target::cpu::isa::CpuTarget::new(opts.target.arch.name(), opts.cpu.as_deref())?.vec_unit().lanes
        }
        _ => 0,
    };
    let mut lowered = lower_pinned(&m, &opts.shapes, &opts.consts, images, limits, winograd, lanes)?;
    budget::check_planned(&lowered.program, limits).map_err(CompileError::Graph)?;
    let kernels = lowered.program.kernels.len();
    if let Some(expected) = opts.allowed_kernel_count {
        if expected != kernels {
            return Err(CompileError::KernelCount { expected, found: kernels });
        }
    }
    progress(&format!("codegen ({kernels} kernels)"));
    let info = ModelInfo {
        model_hash: format!("xxh3:{:016x}", pilot_core::artifact::checksum(&bytes)),
        props: m.metadata_props.clone(),
        inputs: lowered.inputs.clone(),
        outputs: lowered.outputs.clone(),
        pinned: opts
            .consts
            .iter()
            .map(|(name, t)| PinnedInput {
                name: name.clone(),
                shape: t.shape.clone(),
                dtype: t.dtype,
                hash: pin::hash(t),
            })
            .collect(),
    };
    let gates = Gates { read_image: opts.allowed_read_image, gated_read_image: opts.allowed_gated_read_image };
    let built = codegen.build(&mut lowered.program, &gates)?;
    let (read_images, gated_read_images) = built.read_images;
    let r = artifact::write(&lowered.program, &info, built, out)?;
    progress("done");
    Ok(CompileReport {
        inputs: lowered.inputs,
        pinned: info.pinned,
        outputs: lowered.outputs,
        kernels: r.kernels,
        read_images,
        gated_read_images,
        flops: r.flops,
        arena_bytes: r.arena_bytes,
        naive_scratch_bytes: r.naive_scratch_bytes,
        weight_bytes: r.weight_bytes,
        artifact_bytes: r.artifact_bytes,
        seconds: st.elapsed().as_secs_f64(),
    })
}
