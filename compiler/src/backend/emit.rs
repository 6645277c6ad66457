//! From a [`Program`] to an artifact: memory planning, C rendering, building, the manifest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pilot_core::artifact::{
    checksum, ArtifactWriter, BufferSpec, Manifest, Metadata, Placement, ProgramEntry, Target, TensorSpec,
};
use pilot_core::device::{Arg, BufferId, BufferUse, ProgramFormat, ProgramId, StepOp};
use pilot_core::DType;

use super::{build, c, cmath, plan};
use crate::error::{CompileError, Result};
use crate::lower::Port;
use crate::program::{BufKind, Program};

#[derive(Clone, Debug)]
pub struct EmitOptions {
    pub backend: String,
    pub arch: String,
    pub cc: Option<PathBuf>,
    pub model_hash: String,
    pub props: Vec<(String, String)>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
}

#[derive(Clone, Debug, Default)]
pub struct EmitReport {
    pub kernels: usize,
    pub flops: u64,
    pub arena_bytes: usize,
    pub naive_scratch_bytes: usize,
    pub weight_bytes: usize,
    pub artifact_bytes: u64,
}

/// Renders every kernel (without the prelude).
pub fn render_all(p: &Program) -> Vec<c::CKernel> {
    p.kernels.iter().map(|k| c::render(p, k)).collect()
}

/// Kernels grouped into translation units, one per core: each unit is the prelude plus its kernels,
/// compiled into one object that every kernel of the unit loads by its own entry symbol.
fn units(rendered: &[c::CKernel]) -> Vec<(String, String, Vec<usize>)> {
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

fn buffer(size: usize, dtype: DType, kind: BufferUse) -> BufferSpec {
    BufferSpec { size, dtype, kind, placement: Placement::Device, blob: None, checksum: None, image: None }
}

/// Writes `p` as an artifact at `path`.
pub fn emit(p: &Program, opts: &EmitOptions, path: &Path) -> Result<EmitReport> {
    let rendered = render_all(p);
    let cc = build::find_cc(opts.cc.as_deref(), &opts.arch)?;
    let units = units(&rendered);
    if let Some(dir) = std::env::var_os("PILOT_DUMP_C") {
        // Debugging aid: every translation unit's C, as compiled.
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).map_err(|source| CompileError::Io { path: dir.display().to_string(), source })?;
        for (name, source, _) in &units {
            let f = dir.join(format!("{name}.c"));
            std::fs::write(&f, source).map_err(|source| CompileError::Io { path: f.display().to_string(), source })?;
        }
    }
    let sources: Vec<(String, String)> = units.iter().map(|(n, src, _)| (n.clone(), src.clone())).collect();
    let objects = build::compile_all(&sources, &cc, &opts.arch)?;
    let plan = plan::plan(p);

    // Artifact buffers: inputs, outputs, used weights, then the scratch arena.
    let mut buffers = Vec::new();
    let mut slot: HashMap<u32, (usize, u64)> = HashMap::new();
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for (i, port) in opts.inputs.iter().enumerate() {
        let b = p.bufs.iter().position(|b| b.kind == BufKind::Input(i));
        buffers.push(buffer(port.shape.iter().product::<usize>() * port.dtype.size(), port.dtype, BufferUse::Input));
        if let Some(b) = b {
            slot.insert(b as u32, (buffers.len() - 1, 0));
        }
        inputs.push(TensorSpec {
            name: port.name.clone(),
            shape: port.shape.clone(),
            dtype: port.dtype,
            buffer: buffers.len() - 1,
            slices: vec![],
        });
    }
    for (i, port) in opts.outputs.iter().enumerate() {
        let b = p
            .bufs
            .iter()
            .position(|b| b.kind == BufKind::Output(i))
            .ok_or_else(|| CompileError::Graph(format!("output `{}` has no buffer", port.name)))?;
        buffers.push(buffer(p.bufs[b].nbytes(), port.dtype, BufferUse::Output));
        slot.insert(b as u32, (buffers.len() - 1, 0));
        outputs.push(TensorSpec {
            name: port.name.clone(),
            shape: port.shape.clone(),
            dtype: port.dtype,
            buffer: buffers.len() - 1,
            slices: vec![],
        });
    }
    let mut writer = ArtifactWriter::new();
    let mut weight_bytes = 0;
    let mut used: Vec<u32> = rendered.iter().flat_map(|k| k.args.iter().copied()).collect();
    used.sort_unstable();
    used.dedup();
    for &b in &used {
        if let BufKind::Weight(t) = &p.bufs[b as usize].kind {
            let blob = writer.add_blob(&t.data);
            let mut spec = buffer(t.data.len(), t.dtype, BufferUse::Weight);
            spec.blob = Some(blob);
            spec.checksum = Some(checksum(&t.data));
            weight_bytes += t.data.len();
            buffers.push(spec);
            slot.insert(b, (buffers.len() - 1, 0));
        }
    }
    if plan.arena_bytes > 0 {
        buffers.push(buffer(plan.arena_bytes, DType::U8, BufferUse::Scratch));
        let arena = buffers.len() - 1;
        for (&b, &off) in &plan.offsets {
            slot.insert(b, (arena, off as u64));
        }
    }
    let arg = |b: u32| -> Arg {
        let (i, off) = slot[&b];
        Arg { buffer: BufferId(i as u32), offset: off }
    };
    let mut unit_blob = vec![0usize; rendered.len()];
    for ((_, _, members), obj) in units.iter().zip(&objects) {
        let blob = writer.add_blob(obj);
        for &i in members {
            unit_blob[i] = blob;
        }
    }
    let mut programs = Vec::new();
    let mut step = Vec::new();
    for (i, k) in rendered.iter().enumerate() {
        programs.push(ProgramEntry {
            name: k.name.clone(),
            format: ProgramFormat::Elf,
            blob: unit_blob[i],
            args: k.args.len(),
        });
        step.push(StepOp::Dispatch {
            program: ProgramId(i as u32),
            args: k.args.iter().map(|&b| arg(b)).collect(),
            global: [k.parts, 1, 1],
            local: [1, 1, 1],
        });
    }
    let mut manifest = Manifest {
        target: Target {
            backend: opts.backend.clone(),
            arch: opts.arch.clone(),
            image: false,
            float16: false,
            nolocals: false,
        },
        inputs,
        outputs,
        buffers,
        programs,
        step,
        metadata: Metadata {
            compiler: format!("pilot-compiler {}", env!("CARGO_PKG_VERSION")),
            model_hash: opts.model_hash.clone(),
            props: opts.props.clone(),
        },
        blob_count: 0,
        pads: vec![],
    };
    writer.write(path, &mut manifest)?;
    let artifact_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok(EmitReport {
        kernels: p.kernels.len(),
        flops: p.kernels.iter().map(|k| p.kernel_flops(k)).sum(),
        arena_bytes: plan.arena_bytes,
        naive_scratch_bytes: plan.naive_bytes,
        weight_bytes,
        artifact_bytes,
    })
}
