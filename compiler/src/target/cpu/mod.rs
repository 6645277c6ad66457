//! The CPU back end (`cpu`, and `null`, which compiles the same and runs nothing): C rendered per
//! kernel ([`render`], [`upcast`]; an innermost dimension that the loads divide split and adjacent
//! dimensions that every load walks as one merged first, `merge`) after a freestanding math
//! prelude ([`cmath`]), grouped into one translation unit per core and compiled into relocatable
//! objects in parallel ([`cc`]).

pub mod cc;
pub mod cmath;
mod epilogue;
mod guards;
pub mod isa;
mod merge;
mod peel;
mod period;
pub mod render;
mod reorder;
pub mod split;
mod tile;
pub mod tune;
pub mod upcast;

use std::path::PathBuf;

use pilot_core::device::ProgramFormat;
use pilot_core::Target;

use super::{Built, BuiltKernel, Codegen, Gates};
use crate::error::{CompileError, Result};
use crate::program::{Kernel, Program};

/// Byte alignment of every buffer in the scratch arena (a cache line).
pub const ARENA_ALIGN: usize = 64;

/// Bytes the arena keeps after every scratch buffer: a stride-2 vector load reads one element past
/// the last it keeps (`tile.rs`), which must stay inside the arena.
pub const READ_PAST: usize = 8;

/// The CPU back end for `target` (backend `cpu` or `null`), with an optional C compiler override.
pub struct Cpu {
    pub target: Target,
    pub cc: Option<PathBuf>,
    /// The CPU to compile for (`--cpu`): `None` is the host (`-march=native`) or, cross, the
    /// default core of the arch.
    pub cpu: Option<String>,
}

/// Work (floating-point operations plus output elements) below which a kernel runs as one part:
/// handing a part to another thread costs microseconds on an idle core and a scheduler time slice
/// on a busy one, more than such a kernel takes.
pub const MIN_PARALLEL_WORK: u64 = 1 << 18;

/// The same for a kernel whose buffers hold under [`SMALL_DATA_BYTES`]: on 2 threads, most of
/// `ppocr_cls`'s 3–10 µs convolutions on such data ran at 0.6–0.9× (the second core fetching
/// its inputs from the first core's cache), those on more data at 1.3–1.6×.
pub const MIN_PARALLEL_WORK_SMALL_DATA: u64 = 1 << 20;

/// See [`MIN_PARALLEL_WORK_SMALL_DATA`].
pub const SMALL_DATA_BYTES: u64 = 512 << 10;

/// Bytes below which a kernel without floating-point work (a copy: padding, transpose, gather)
/// runs as one part. Its second thread would read what the previous kernels left in the first
/// core's cache from the other core's: on a 2-core Xeon the pad copies of `vision_full` ran at
/// 0.8–0.97× on 2 threads up to 1.1 MB moved and at 1.3–1.8× from 2.1 MB. A copy of a value that was
/// itself written in parts splits anyway ([`parallel_plan`]).
pub const MIN_PARALLEL_COPY_BYTES: u64 = 2 << 20;

/// Whether kernel `k` is worth more than one part (else its dispatch runs on the calling thread).
pub fn runs_parallel(p: &Program, k: &Kernel) -> bool {
    let outputs: u64 = k.shape.iter().map(|&d| d as u64).product();
    let flops = p.kernel_flops(k);
    let bytes: usize = p.kernel_inputs(k).iter().chain([&k.out]).map(|&b| p.bufs[b as usize].nbytes()).sum();
    let bytes = bytes as u64;
    if flops == 0 {
        return bytes >= MIN_PARALLEL_COPY_BYTES;
    }
    flops + outputs >= if bytes < SMALL_DATA_BYTES { MIN_PARALLEL_WORK_SMALL_DATA } else { MIN_PARALLEL_WORK }
}

/// Bytes (inputs and output) from which a kernel that reads a value written in parts runs in parts too.
/// On a 2-vCPU AMD EPYC, `orientation_lcnet`'s pad copies (0.5–1.7 MB) of outputs of parallel depthwise
/// convolutions ran 4× slower on one thread of two than alone (the second core's half fetched from its
/// cache) and its 2-thread step went 6.2 → 3.4 ms when they followed their producers.
pub const MIN_FOLLOW_BYTES: u64 = 256 << 10;

/// Whether each kernel of `p` (in step order), offering `parts[i]` parts, runs in parts: more than one
/// part and [`runs_parallel`], or it reads a value that a kernel before it wrote in parts and moves at
/// least [`MIN_FOLLOW_BYTES`]. Such a value lies in both cores' caches; a kernel on one thread would
/// fetch the other core's half from its cache.
pub fn parallel_plan(p: &Program, parts: &[u32]) -> Vec<bool> {
    let mut spread = std::collections::HashSet::new();
    p.kernels
        .iter()
        .zip(parts)
        .map(|(k, &parts)| {
            let inputs = p.kernel_inputs(k);
            let bytes: u64 = inputs.iter().chain([&k.out]).map(|&b| p.bufs[b as usize].nbytes() as u64).sum();
            let follows = bytes >= MIN_FOLLOW_BYTES && inputs.iter().any(|b| spread.contains(b));
            let parallel = parts > 1 && (runs_parallel(p, k) || follows);
            if parallel {
                spread.insert(k.out);
            } else {
                spread.remove(&k.out);
            }
            parallel
        })
        .collect()
}

/// Renders every kernel (without the prelude), register tiles sized for `unit`; kernels the
/// [`parallel_plan`] keeps on one thread offer one part.
pub fn render_all(p: &Program, unit: isa::VecUnit) -> Vec<render::CKernel> {
    let mut rendered: Vec<render::CKernel> = p.kernels.iter().map(|k| render::render(p, k, unit, None)).collect();
    let parts: Vec<u32> = rendered.iter().map(|ck| ck.parts).collect();
    for (ck, parallel) in rendered.iter_mut().zip(parallel_plan(p, &parts)) {
        if !parallel {
            // The kernel splits its range by `part / nparts`: one part is the whole range.
            ck.parts = 1;
        }
    }
    rendered
}

/// Kernels grouped into translation units, one per core: each unit is the prelude plus its kernels,
/// compiled into one object that every kernel of the unit loads by its own entry symbol.
fn units(rendered: &[render::CKernel]) -> Vec<(String, String, Vec<usize>)> {
    let n = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, rendered.len().max(1));
    (0..n)
        .map(|u| {
            let members: Vec<usize> = (u..rendered.len()).step_by(n).collect();
            let mut source = cmath::PRELUDE.to_string();
            for &i in &members {
                source.push('\n');
                source.push_str(&rendered[i].source);
            }
            (format!("unit{u}"), source, members)
        })
        .filter(|(_, _, m)| !m.is_empty())
        .collect()
}

impl Codegen for Cpu {
    /// C rendered per kernel, one object per core, compiled in parallel. The CPU has no gates.
    fn build(&self, p: &mut Program, _gates: &Gates) -> Result<Built> {
        let arch = self.target.arch.name();
        let cpu = isa::CpuTarget::new(arch, self.cpu.as_deref())?;
        let unit = cpu.vec_unit();
        epilogue::fold_elementwise_consumers(p);
        reorder::reorder_transposed_outputs(p, unit.lanes);
        let weights: Vec<bool> = p.bufs.iter().map(|b| matches!(b.kind, crate::program::BufKind::Weight(_))).collect();
        for k in &mut p.kernels {
            merge::split_dims(&mut p.ctx, k, &|b| weights[b as usize], 2 * unit.lanes);
            merge::merge_dims(&mut p.ctx, k);
        }
        let mut rendered = render_all(p, unit);
        let cc = cc::find_cc(self.cc.as_deref(), arch)?;
        if self.target.backend == pilot_core::target::Backend::Cpu && tune::enabled(&cpu) {
            // The plan of `render_all`: kernels it kept on one thread offer one part.
            let plan: Vec<bool> = rendered.iter().map(|ck| ck.parts > 1).collect();
            let parallel = |i: usize| plan[i];
            tune::tune(p, &mut rendered, unit, &cc, &cpu, &parallel)?;
        }
        let units = units(&rendered);
        if let Some(dir) = std::env::var_os("PILOT_DUMP_C") {
            // Debugging aid: every translation unit's C, as compiled.
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir)
                .map_err(|source| CompileError::Io { path: dir.display().to_string(), source })?;
            for (name, source, _) in &units {
                let f = dir.join(format!("{name}.c"));
                std::fs::write(&f, source)
                    .map_err(|source| CompileError::Io { path: f.display().to_string(), source })?;
            }
        }
        let sources: Vec<(String, String)> = units.iter().map(|(n, src, _)| (n.clone(), src.clone())).collect();
        let codes = cc::compile_all(&sources, &cc, &cpu)?;
        let mut unit_of = vec![0usize; rendered.len()];
        for (u, (_, _, members)) in units.iter().enumerate() {
            for &i in members {
                unit_of[i] = u;
            }
        }
        let kernels = rendered
            .iter()
            .enumerate()
            .map(|(i, k)| BuiltKernel {
                name: k.name.clone(),
                args: k.args.clone(),
                code: unit_of[i],
                global: [k.parts, 1, 1],
                local: [1, 1, 1],
                amdgpu: None,
                ir3: None,
            })
            .collect();
        Ok(Built {
            format: ProgramFormat::Elf,
            codes,
            kernels,
            align: ARENA_ALIGN,
            read_past: READ_PAST,
            pitch_align: 1,
            target: self.target.clone(),
            read_images: (0, 0),
            codegen: None,
        })
    }
}

#[cfg(test)]
mod tests;
