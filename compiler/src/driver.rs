//! The whole pipeline behind `pilot compile`: import → lower (fold, fuse) → gates → codegen → write.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::backend::cl::{self, ClOptions};
use crate::backend::emit::{self, EmitOptions};
use crate::error::{CompileError, Result};
use crate::lower::image::ImageMode;
use crate::lower::{budget, lower_limited, Port};

/// What to compile for.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// `cpu`, `null` (compile everything, run nothing) or `cl`.
    pub backend: String,
    /// `x86_64` or `aarch64` for `cpu`; the GPU whose constraints `cl` code follows (`a630`).
    pub arch: String,
    /// Modes of the OpenCL target (`--image`, `--float16`, `--nolocals`, pitch alignment).
    pub cl: ClOptions,
    /// Pinned shapes of dynamic inputs.
    pub shapes: HashMap<String, Vec<usize>>,
    /// C compiler override.
    pub cc: Option<PathBuf>,
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
    /// Options for `backend` on its default architecture, everything else default.
    pub fn new(backend: &str) -> CompileOptions {
        let arch = match backend {
            "cl" | "qcom" => "a630".to_string(),
            _ => std::env::consts::ARCH.to_string(),
        };
        CompileOptions {
            backend: backend.to_string(),
            arch: arch.clone(),
            cl: ClOptions { backend: backend.to_string(), arch, ..ClOptions::default() },
            shapes: HashMap::new(),
            cc: None,
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
    let gpu = opts.backend == "cl" || opts.backend == "qcom";
    match opts.backend.as_str() {
        "cpu" | "null" if !["x86_64", "aarch64"].contains(&opts.arch.as_str()) => {
            return Err(CompileError::Graph(format!("unknown CPU architecture `{}` (x86_64, aarch64)", opts.arch)));
        }
        "cpu" | "null" if opts.cl.image || opts.cl.float16 || opts.cl.nolocals => {
            return Err(CompileError::Graph("--image, --float16 and --nolocals apply to the OpenCL target".into()));
        }
        "cl" | "qcom" if opts.arch != "a630" => {
            return Err(CompileError::Graph(format!("unknown OpenCL architecture `{}` (a630)", opts.arch)));
        }
        "cpu" | "null" | "cl" | "qcom" => {}
        other => return Err(CompileError::Graph(format!("unknown target `{other}` (cpu, null, cl, qcom)"))),
    }
    if opts.cl.float16 && !opts.cl.image {
        return Err(CompileError::Graph("--float16 stores images as half: it needs --image".into()));
    }
    progress("import");
    let bytes = crate::onnx::read_model_file(model)?;
    let base = model.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let m = crate::onnx::load_bytes(&bytes, Some(base))?;
    progress("lower");
    let images =
        (gpu && opts.cl.image).then_some(ImageMode { float16: opts.cl.float16, max_width: opts.cl.max_image_width });
    let limits = budget::Limits { max_memory: opts.max_memory };
    let mut lowered = lower_limited(&m, &opts.shapes, images, limits)?;
    let kernels = lowered.program.kernels.len();
    if let Some(expected) = opts.allowed_kernel_count {
        if expected != kernels {
            return Err(CompileError::KernelCount { expected, found: kernels });
        }
    }
    progress(&format!("codegen ({kernels} kernels)"));
    let emit_opts = EmitOptions {
        backend: opts.backend.clone(),
        arch: opts.arch.clone(),
        cc: opts.cc.clone(),
        model_hash: format!("xxh3:{:016x}", pilot_core::artifact::checksum(&bytes)),
        props: m.metadata_props.clone(),
        inputs: lowered.inputs.clone(),
        outputs: lowered.outputs.clone(),
    };
    let (built, read_images, gated_read_images) = if gpu {
        let built = cl::build(&mut lowered.program, &opts.cl)?;
        let source = std::str::from_utf8(&built.codes[0]).unwrap_or_default();
        let (reads, gated) = pilot_core::gates::read_image_counts(source);
        for (gate, allowed, found) in [
            ("ALLOWED_READ_IMAGE", opts.allowed_read_image, reads),
            ("ALLOWED_GATED_READ_IMAGE", opts.allowed_gated_read_image, gated),
        ] {
            if let Some(expected) = allowed.filter(|&e| e != found) {
                return Err(CompileError::Gate { gate, expected, found });
            }
        }
        let built = if opts.backend == "qcom" {
            cl::qcom::to_adreno(&lowered.program, built, opts.cl.qcom_compiler)?
        } else {
            built
        };
        (built, reads, gated)
    } else {
        (emit::build_cpu(&lowered.program, &emit_opts)?, 0, 0)
    };
    let r = emit::write(&lowered.program, &emit_opts, built, out)?;
    progress("done");
    Ok(CompileReport {
        inputs: lowered.inputs,
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
