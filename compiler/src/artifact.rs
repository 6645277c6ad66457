//! From a [`Program`] to an artifact: memory planning, the manifest, and building for the CPU (C
//! rendering, one object per core). Other targets build their code elsewhere and share [`write`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pilot_core::artifact::{
    checksum, ArtifactWriter, BufferSpec, Manifest, Metadata, Placement, ProgramEntry, Target, TensorSpec,
};
use pilot_core::device::{Arg, BufferId, BufferUse, ImageChannel, ImageDesc, ProgramFormat, ProgramId, StepOp};
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

/// Code built for a target: the code records and, per kernel, its entry, arguments and launch.
pub struct Built {
    pub format: ProgramFormat,
    /// Code records; several kernels may share one (a code object or a source with many kernels).
    pub codes: Vec<Vec<u8>>,
    pub kernels: Vec<BuiltKernel>,
    /// Byte alignment of buffers in the scratch arena (the device's base-address alignment).
    pub align: usize,
    /// Image pitch alignment in bytes (images only).
    pub pitch_align: usize,
    pub target: Target,
}

pub struct BuiltKernel {
    pub name: String,
    /// Buffers in argument order (output first).
    pub args: Vec<u32>,
    /// Index into [`Built::codes`].
    pub code: usize,
    pub global: [u32; 3],
    pub local: [u32; 3],
}

/// Builds `p` for the CPU: C rendered per kernel, one object per core, compiled in parallel.
pub fn build_cpu(p: &Program, opts: &EmitOptions) -> Result<Built> {
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
    let codes = build::compile_all(&sources, &cc, &opts.arch)?;
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
        })
        .collect();
    Ok(Built {
        format: ProgramFormat::Elf,
        codes,
        kernels,
        align: plan::ALIGN,
        pitch_align: 1,
        target: Target {
            backend: opts.backend.clone(),
            arch: opts.arch.clone(),
            image: false,
            float16: false,
            nolocals: false,
        },
    })
}

/// Writes `p` for the CPU as an artifact at `path`.
pub fn emit(p: &Program, opts: &EmitOptions, path: &Path) -> Result<EmitReport> {
    let built = build_cpu(p, opts)?;
    write(p, opts, built, path)
}

/// The artifact's description of a model input or output held in buffer `buffer`.
fn tensor_spec(port: &Port, buffer: usize) -> TensorSpec {
    TensorSpec { name: port.name.clone(), shape: port.shape.clone(), dtype: port.dtype, buffer, slices: vec![] }
}

/// The pitch of an image row: the pixels' bytes rounded up to `align`.
pub fn image_pitch(width: usize, elem: usize, align: usize) -> usize {
    (width * 4 * elem).div_ceil(align) * align
}

/// The artifact's image descriptor of an image buffer.
pub fn image_desc(b: &crate::program::Buf, pitch_align: usize) -> Option<ImageDesc> {
    let im = b.image?;
    let channel = if b.dtype == DType::F16 { ImageChannel::F16 } else { ImageChannel::F32 };
    Some(ImageDesc {
        width: im.width as u32,
        height: im.height as u32,
        pitch: image_pitch(im.width, b.dtype.size(), pitch_align) as u32,
        channel,
    })
}

/// Writes an artifact of `p` with the code in `built` at `path`.
pub fn write(p: &Program, opts: &EmitOptions, built: Built, path: &Path) -> Result<EmitReport> {
    let plan = plan::plan(p, built.align);

    // Artifact buffers: inputs, outputs, used weights, images, then the scratch arena.
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
        inputs.push(tensor_spec(port, buffers.len() - 1));
    }
    for (i, port) in opts.outputs.iter().enumerate() {
        let b = p
            .bufs
            .iter()
            .position(|b| b.kind == BufKind::Output(i))
            .ok_or_else(|| CompileError::Graph(format!("output `{}` has no buffer", port.name)))?;
        buffers.push(buffer(p.bufs[b].nbytes(), port.dtype, BufferUse::Output));
        slot.insert(b as u32, (buffers.len() - 1, 0));
        outputs.push(tensor_spec(port, buffers.len() - 1));
    }
    let mut used: Vec<u32> = built.kernels.iter().flat_map(|k| k.args.iter().copied()).collect();
    used.sort_unstable();
    used.dedup();
    // Weight contents, pitched where the weight is an image (kept alive for the writer).
    let contents: Vec<(u32, std::borrow::Cow<[u8]>)> = used
        .iter()
        .filter_map(|&b| {
            let buf = &p.bufs[b as usize];
            let BufKind::Weight(t) = &buf.kind else { return None };
            Some(match (image_desc(buf, built.pitch_align), buf.image) {
                (Some(d), Some(im)) => {
                    (b, std::borrow::Cow::Owned(pitched(&t.data, im.width * 4 * buf.dtype.size(), d.pitch as usize)))
                }
                _ => (b, std::borrow::Cow::Borrowed(&t.data[..])),
            })
        })
        .collect();
    let mut writer = ArtifactWriter::new();
    let mut weight_bytes = 0;
    for (b, data) in &contents {
        let buf = &p.bufs[*b as usize];
        let blob = writer.add_blob(data);
        let mut spec = buffer(data.len(), buf.dtype, BufferUse::Weight);
        spec.blob = Some(blob);
        spec.checksum = Some(checksum(data));
        spec.image = image_desc(buf, built.pitch_align);
        weight_bytes += data.len();
        buffers.push(spec);
        slot.insert(*b, (buffers.len() - 1, 0));
    }
    for &b in &used {
        let buf = &p.bufs[b as usize];
        match (&buf.kind, image_desc(buf, built.pitch_align)) {
            (BufKind::Scratch, Some(d)) => {
                let mut spec = buffer(d.bytes(), buf.dtype, BufferUse::Scratch);
                spec.image = Some(d);
                buffers.push(spec);
                slot.insert(b, (buffers.len() - 1, 0));
            }
            (BufKind::Input(_) | BufKind::Output(_), Some(_)) => {
                return Err(CompileError::Graph(format!("buffer {b}: model inputs and outputs are never images")))
            }
            _ => {}
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
    let code_blobs: Vec<usize> = built.codes.iter().map(|c| writer.add_blob(c)).collect();
    let mut programs = Vec::new();
    let mut step = Vec::new();
    for (i, k) in built.kernels.iter().enumerate() {
        programs.push(ProgramEntry {
            name: k.name.clone(),
            format: built.format,
            blob: code_blobs[k.code],
            args: k.args.len(),
        });
        step.push(StepOp::Dispatch {
            program: ProgramId(i as u32),
            args: k.args.iter().map(|&b| arg(b)).collect(),
            global: k.global,
            local: k.local,
        });
    }
    let mut manifest = Manifest {
        target: built.target.clone(),
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

/// Rows of `row` bytes laid out `pitch` bytes apart, the padding zeroed.
fn pitched(data: &[u8], row: usize, pitch: usize) -> Vec<u8> {
    if row == pitch {
        return data.to_vec();
    }
    let mut out = vec![0u8; data.len() / row * pitch];
    for (src, dst) in data.chunks(row).zip(out.chunks_mut(pitch)) {
        dst[..row].copy_from_slice(src);
    }
    out
}
