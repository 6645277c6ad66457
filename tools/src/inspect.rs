//! `pilot inspect`: what an artifact holds, as text or JSON.

use std::path::Path;

use pilot_core::artifact::{Manifest, TensorSpec};
use pilot_core::device::{BufferUse, ProgramFormat, StepOp};
use pilot_core::gates;
use pilot_core::Artifact;
use pilot_runtime::printable;
use serde_json::{json, Value};

fn kind(k: BufferUse) -> &'static str {
    match k {
        BufferUse::Weight => "weight",
        BufferUse::Input => "input",
        BufferUse::Output => "output",
        BufferUse::State => "state",
        BufferUse::Scratch => "scratch",
    }
}

fn tensor(t: &TensorSpec) -> Value {
    let slices: serde_json::Map<String, Value> = t.slices.iter().map(|(n, a, b)| (n.clone(), json!([a, b]))).collect();
    json!({"name": t.name, "shape": t.shape, "dtype": t.dtype.name(), "buffer": t.buffer, "slices": slices})
}

/// The JSON description of an artifact (stable keys; tests and CI scripts read it).
pub fn describe(a: &Artifact) -> Value {
    let m: &Manifest = &a.manifest;
    let mut by_kind = serde_json::Map::new();
    for k in [BufferUse::Weight, BufferUse::Input, BufferUse::Output, BufferUse::State, BufferUse::Scratch] {
        let (n, bytes) =
            m.buffers.iter().filter(|b| b.kind == k).fold((0usize, 0usize), |(n, s), b| (n + 1, s + b.size));
        by_kind.insert(kind(k).into(), json!({"count": n, "bytes": bytes}));
    }
    let dispatches = m.step.iter().filter(|op| matches!(op, StepOp::Dispatch { .. })).count();
    let (reads, gated) = read_images(a);
    let images: Vec<Value> = m
        .buffers
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.image.map(|im| (i, im)))
        .map(|(i, im)| {
            json!({"buffer": i, "width": im.width, "height": im.height, "pitch": im.pitch,
                   "channel": pilot_core::artifact::schema::channel_name(im.channel)})
        })
        .collect();
    json!({
        "file_size": a.file_size(),
        "target": {
            "backend": m.target.backend.name(), "arch": m.target.arch.name(),
            "image": m.target.image, "float16": m.target.float16, "nolocals": m.target.nolocals,
        },
        "inputs": m.inputs.iter().map(tensor).collect::<Vec<_>>(),
        "outputs": m.outputs.iter().map(tensor).collect::<Vec<_>>(),
        "buffers": by_kind,
        "programs": m.programs.iter().map(|p| {
            let (r, g) = program_read_images(a, p);
            json!({"name": p.name, "args": p.args, "code_bytes": a.blob(p.blob).len(),
                   "read_image": r, "gated_read_image": g, "amdgpu": p.amdgpu.as_ref().map(amdgpu),
                   "ir3": p.ir3.as_ref().map(ir3)})
        }).collect::<Vec<_>>(),
        "kernel_count": dispatches,
        "read_image": reads,
        "gated_read_image": gated,
        "images": images,
        "copies": m.step.len() - dispatches,
        "checksums": m.buffers.iter().filter(|b| b.checksum.is_some()).count(),
        "metadata": {
            "compiler": m.metadata.compiler,
            "model_hash": m.metadata.model_hash,
            "props": m.metadata.props.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "pinned": m.metadata.pinned.iter().map(|p| {
                json!({"name": p.name, "shape": p.shape, "dtype": p.dtype.name(), "hash": p.hash})
            }).collect::<Vec<_>>(),
        },
    })
}

/// The seed's image gates summed over every kernel (OpenCL sources only; 0 otherwise).
fn read_images(a: &Artifact) -> (usize, usize) {
    a.manifest.programs.iter().map(|p| program_read_images(a, p)).fold((0, 0), |(r, g), (pr, pg)| (r + pr, g + pg))
}

/// The image gates of one program: its own kernel's text within its source (OpenCL C, or the source a
/// `--qcom-compiler fake` blob carries; a real Adreno blob has no source and counts 0).
fn program_read_images(a: &Artifact, p: &pilot_core::artifact::ProgramEntry) -> (usize, usize) {
    let count = |source: &str| {
        gates::kernel_sources(source)
            .into_iter()
            .find(|(name, _)| *name == p.name)
            .map_or((0, 0), |(_, text)| gates::read_image_counts(text))
    };
    match p.format {
        ProgramFormat::OpenClSource => count(std::str::from_utf8(a.blob(p.blob)).unwrap_or_default()),
        ProgramFormat::AdrenoBlob => fake_blob_source(a.blob(p.blob)).map_or((0, 0), |source| count(&source)),
        _ => (0, 0),
    }
}

/// An `ir3` program's dispatch record.
fn ir3(r: &pilot_core::artifact::Ir3Program) -> Value {
    let args: Vec<Value> = r
        .args
        .iter()
        .map(|a| match *a {
            pilot_core::artifact::Ir3Arg::Param(o) => json!({"param": o}),
            pilot_core::artifact::Ir3Arg::Texture(i) => json!({"texture": i}),
            pilot_core::artifact::Ir3Arg::Ibo(i) => json!({"ibo": i}),
        })
        .collect();
    json!({"instrlen": r.instrlen, "full_regs": r.full_regs, "half_regs": r.half_regs, "constlen": r.constlen,
           "params": r.params, "driver_params": r.driver_params, "immediates_offset": r.immediates_offset,
           "immediates": r.immediates.len(), "branchstack": r.branchstack, "private_memory": r.private_memory,
           "local_memory": r.local_memory, "textures": r.textures, "ibos": r.ibos, "args": args})
}

/// An `amdgpu` program's dispatch record.
fn amdgpu(d: &pilot_core::artifact::AmdDispatch) -> Value {
    json!({"descriptor": d.descriptor, "code": d.code, "rsrc": d.rsrc, "kernarg_size": d.kernarg_size,
           "kernarg_align": d.kernarg_align, "arg_offsets": d.arg_offsets, "user_sgprs": d.user_sgprs,
           "vgprs": d.vgprs, "sgprs": d.sgprs, "lds": d.lds, "scratch": d.scratch, "wave32": d.wave32})
}

/// The OpenCL source a `--qcom-compiler fake` blob carries (builds with the fake KGSL only).
#[cfg(feature = "fake-kgsl")]
fn fake_blob_source(blob: &[u8]) -> Option<String> {
    let prog = pilot_qcom::blob::parse(blob).ok()?;
    pilot_qcom::fake_shader::FakeShader::decode(&prog.image).map(|shader| shader.source)
}

#[cfg(not(feature = "fake-kgsl"))]
fn fake_blob_source(_: &[u8]) -> Option<String> {
    None
}

fn mib(bytes: usize) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Prints the description of the artifact at `path`.
pub fn inspect(path: &Path, as_json: bool) -> anyhow::Result<()> {
    let a = Artifact::open(path)?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&describe(&a))?);
        return Ok(());
    }
    let m = &a.manifest;
    let t = &m.target;
    let flags: Vec<&str> = [("image", t.image), ("float16", t.float16), ("nolocals", t.nolocals)]
        .into_iter()
        .filter_map(|(n, on)| on.then_some(n))
        .collect();
    println!("{}  ({})", printable(&path.display().to_string()), mib(a.file_size()));
    println!("target    {}:{} {}", t.backend, t.arch, flags.join(" "));
    for (what, list) in [("input ", &m.inputs), ("output", &m.outputs)] {
        for x in list {
            println!("{what}    {:<32} {:<8} {:?}", printable(&x.name), x.dtype.name(), x.shape);
            for (n, s, e) in &x.slices {
                println!("            slice {} [{s}, {e})", printable(n));
            }
        }
    }
    for p in &m.metadata.pinned {
        let (name, hash) = (printable(&p.name), printable(&p.hash));
        println!("pinned    {name:<32} {:<8} {:?} {hash} (--const: fixed at compile time)", p.dtype.name(), p.shape);
    }
    for k in [BufferUse::Weight, BufferUse::Input, BufferUse::Output, BufferUse::State, BufferUse::Scratch] {
        let sizes: Vec<usize> = m.buffers.iter().filter(|b| b.kind == k).map(|b| b.size).collect();
        if !sizes.is_empty() {
            println!("buffers   {:<8} {:>5} × totalling {}", kind(k), sizes.len(), mib(sizes.iter().sum()));
        }
    }
    let dispatches = m.step.iter().filter(|op| matches!(op, StepOp::Dispatch { .. })).count();
    println!("programs  {}", m.programs.len());
    let ir3s: Vec<_> = m.programs.iter().filter_map(|p| p.ir3.as_ref()).collect();
    if !ir3s.is_empty() {
        let most = |f: fn(&pilot_core::artifact::Ir3Program) -> u32| ir3s.iter().map(|r| f(r)).max().unwrap_or(0);
        println!(
            "ir3       {} a630 programs, {} × 16 instructions in all; at most {} full registers, {} vec4 consts, {} textures",
            ir3s.len(),
            ir3s.iter().map(|r| r.instrlen).sum::<u32>(),
            most(|r| r.full_regs),
            most(|r| r.constlen),
            most(|r| r.textures)
        );
    }
    let amd: Vec<_> = m.programs.iter().filter_map(|p| p.amdgpu.as_ref().map(|d| (p.blob, d))).collect();
    if !amd.is_empty() {
        let most = |f: fn(&pilot_core::artifact::AmdDispatch) -> u32| amd.iter().map(|(_, d)| f(d)).max().unwrap_or(0);
        let mut objects: Vec<usize> = amd.iter().map(|(b, _)| *b).collect();
        objects.dedup();
        println!(
            "amdgpu    {} kernels in {} code object(s), wave32; at most {} VGPRs, {} SGPRs, {} user SGPRs, {} B kernargs, {} B LDS, {} B scratch",
            amd.len(),
            objects.len(),
            most(|d| d.vgprs),
            most(|d| d.sgprs),
            most(|d| d.user_sgprs),
            most(|d| d.kernarg_size),
            most(|d| d.lds),
            most(|d| d.scratch)
        );
    }
    println!("step      {dispatches} kernels, {} copies", m.step.len() - dispatches);
    let (reads, gated) = read_images(&a);
    let images = m.buffers.iter().filter(|b| b.image.is_some()).count();
    if images > 0 || reads > 0 {
        println!("images    {images} image buffers; {reads} read_image, {gated} gated");
    }
    println!("compiler  {}", printable(&m.metadata.compiler));
    println!("model     {}", printable(&m.metadata.model_hash));
    for (k, v) in &m.metadata.props {
        let shown: String = v.chars().take(60).collect();
        println!("prop      {} = {}{}", printable(k), printable(&shown), if v.chars().count() > 60 { "…" } else { "" });
    }
    Ok(())
}
