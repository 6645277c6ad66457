//! From a [`Program`] and the code a back end built for it ([`Built`]) to an artifact: memory planning,
//! buffers (weights pitched where they are images), programs, the step and the manifest. The same for
//! every target.

use std::collections::HashMap;
use std::path::Path;

use pilot_core::artifact::{
    checksum, ArtifactWriter, BufferSpec, Manifest, Metadata, ParamKind, ParamSpec, PinnedInput, Placement,
    ProgramEntry, TensorSpec,
};
use pilot_core::device::{Arg, BufferId, BufferUse, ProgramId, StepOp};
use pilot_core::DType;

use crate::error::{CompileError, Result};
use crate::lower::Port;
use crate::plan;
use crate::program::{BufKind, Program};
use crate::target::Built;

/// What the artifact records about the model: its hash, its metadata, its ports and the inputs
/// pinned at compile time.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub model_hash: String,
    pub props: Vec<(String, String)>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    pub pinned: Vec<PinnedInput>,
}

/// What [`write`] wrote.
#[derive(Clone, Debug, Default)]
pub struct WriteReport {
    pub kernels: usize,
    pub flops: u64,
    pub arena_bytes: usize,
    pub naive_scratch_bytes: usize,
    pub weight_bytes: usize,
    pub artifact_bytes: u64,
}

fn buffer(size: usize, dtype: DType, kind: BufferUse) -> BufferSpec {
    BufferSpec { size, dtype, kind, placement: Placement::Device, blob: None, checksum: None, image: None }
}

/// The artifact's description of a model input or output held in buffer `buffer`.
fn tensor_spec(port: &Port, buffer: usize) -> TensorSpec {
    TensorSpec { name: port.name.clone(), shape: port.shape.clone(), dtype: port.dtype, buffer, slices: vec![] }
}

/// Writes an artifact of `p` with the code in `built` at `path`.
pub fn write(p: &Program, opts: &ModelInfo, built: Built, path: &Path) -> Result<WriteReport> {
    let plan = plan::plan(p, built.align, built.read_past);

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
            Some(match (buf.image_desc(built.pitch_align), buf.image) {
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
        spec.image = buf.image_desc(built.pitch_align);
        weight_bytes += data.len();
        buffers.push(spec);
        slot.insert(*b, (buffers.len() - 1, 0));
    }
    for &b in &used {
        let buf = &p.bufs[b as usize];
        match (&buf.kind, buf.image_desc(built.pitch_align)) {
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
            amdgpu: k.amdgpu.clone(),
            ir3: k.ir3.clone(),
            // Arguments are in order output first: the kernel writes the first and reads the others.
            params: (k.args.iter().enumerate())
                .map(|(i, &b)| param_spec(&p.bufs[b as usize], i == 0, built.pitch_align))
                .collect(),
            global: k.global,
            local: k.local,
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
            compiler: match &built.codegen {
                Some(cg) => format!("pilot-compiler {} + {cg}", env!("CARGO_PKG_VERSION")),
                None => format!("pilot-compiler {}", env!("CARGO_PKG_VERSION")),
            },
            model_hash: opts.model_hash.clone(),
            props: props_with_flops(p, &opts.props, &built.kernels),
            pinned: opts.pinned.clone(),
        },
        blob_count: 0,
        pads: vec![],
    };
    writer.write(path, &mut manifest)?;
    let artifact_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok(WriteReport {
        kernels: p.kernels.len(),
        flops: p.kernels.iter().map(|k| p.kernel_flops(k)).sum(),
        arena_bytes: plan.arena_bytes,
        naive_scratch_bytes: plan.naive_bytes,
        weight_bytes,
        artifact_bytes,
    })
}

/// The model's metadata plus each program's FLOPs per dispatch (`pilot:kernel_flops`, one count per
/// program in order, for `pilot run --profile`) when the back end kept one program per kernel.
fn props_with_flops(
    p: &Program,
    props: &[(String, String)],
    built: &[crate::target::BuiltKernel],
) -> Vec<(String, String)> {
    let mut props = props.to_vec();
    if built.len() == p.kernels.len() && built.iter().zip(&p.kernels).all(|(b, k)| b.name == k.name) {
        let flops: Vec<String> = p.kernels.iter().map(|k| p.kernel_flops(k).to_string()).collect();
        props.push(("pilot:kernel_flops".into(), flops.join(" ")));
    }
    props
}

/// What a kernel generated for buffer `b` reaches through its argument: the image it addresses by
/// pixel, or the buffer's bytes from the argument's offset.
fn param_spec(b: &crate::program::Buf, writes: bool, pitch_align: usize) -> ParamSpec {
    let kind = match b.image_desc(pitch_align) {
        Some(d) => ParamKind::Image { width: d.width, height: d.height },
        None => ParamKind::Buffer { bytes: b.nbytes() as u64 },
    };
    ParamSpec { dtype: b.dtype, writes, kind }
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
