//! The whole pipeline behind `pilot compile`: import → lower (fold, fuse) → gates → codegen → write.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::backend::emit::{emit, EmitOptions};
use crate::error::{CompileError, Result};
use crate::lower::{lower, Port};

/// What to compile for.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// `cpu` or `null` (compile everything, run nothing).
    pub backend: String,
    /// `x86_64` or `aarch64`.
    pub arch: String,
    /// Pinned shapes of dynamic inputs.
    pub shapes: HashMap<String, Vec<usize>>,
    /// C compiler override.
    pub cc: Option<PathBuf>,
    /// The `ALLOWED_KERNEL_COUNT` gate (exact), checked before anything is written.
    pub allowed_kernel_count: Option<usize>,
}

/// The summary `pilot compile` prints.
#[derive(Clone, Debug)]
pub struct CompileReport {
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    pub kernels: usize,
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
    if !["cpu", "null"].contains(&opts.backend.as_str()) {
        return Err(CompileError::Graph(format!("target `{}` is not available yet", opts.backend)));
    }
    if !["x86_64", "aarch64"].contains(&opts.arch.as_str()) {
        return Err(CompileError::Graph(format!("unknown CPU architecture `{}` (x86_64, aarch64)", opts.arch)));
    }
    progress("import");
    let bytes =
        std::fs::read(model).map_err(|source| CompileError::Io { path: model.display().to_string(), source })?;
    let base = model.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let m = crate::onnx::load_bytes(&bytes, Some(base))?;
    progress("lower");
    let lowered = lower(&m, &opts.shapes)?;
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
    let r = emit(&lowered.program, &emit_opts, out)?;
    progress("done");
    Ok(CompileReport {
        inputs: lowered.inputs,
        outputs: lowered.outputs,
        kernels: r.kernels,
        flops: r.flops,
        arena_bytes: r.arena_bytes,
        naive_scratch_bytes: r.naive_scratch_bytes,
        weight_bytes: r.weight_bytes,
        artifact_bytes: r.artifact_bytes,
        seconds: st.elapsed().as_secs_f64(),
    })
}
