//! [`Program`] → artifact: scratch memory planning, C rendering and compilation, the manifest, and
//! the atomic write through [`ArtifactWriter`].
//!
//! Buffers: every model input and output is its own artifact buffer (kind input/output), every
//! weight a kernel reads is a weight buffer with its bytes and an xxh3 checksum, and all scratch
//! buffers share one arena (kind scratch) at offsets chosen by [`plan_scratch`]. A kernel that only
//! copies a whole buffer in C order (a model output that is an input or a weight, a plain view) becomes
//! a `copy` step instead of a program. Every other kernel is one program (one ELF object) and one
//! `dispatch` step with `global = [parts, 1, 1]`, in program order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pilot_core::artifact::{
    checksum, ArtifactWriter, BufferSpec, Manifest, Metadata, Placement, ProgramEntry, Target, TensorSpec,
};
use pilot_core::device::{Arg, BufferId, BufferUse, ProgramFormat, ProgramId, StepOp};
use pilot_core::DType;

use crate::codegen::build::{Arch, Toolchain};
use crate::codegen::{render, CKernel};
use crate::error::{CompileError, Result};
use crate::ir::{BinOp, Op, N};
use crate::lazy::strides;
use crate::program::{BufKind, Kernel, Program};

/// Alignment of every scratch buffer inside the arena.
pub const ARENA_ALIGN: u64 = 64;

/// The name, shape and output slices of a model input or output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoSpec {
    pub name: String,
    pub shape: Vec<usize>,
    /// Output slices (openpilot's `output_slices`): name → `[start, end)` elements.
    pub slices: Vec<(String, usize, usize)>,
}

/// How to emit an artifact.
#[derive(Clone, Debug)]
pub struct EmitOptions {
    pub arch: Arch,
    /// C compiler override (`--cc`); see [`Toolchain::find`].
    pub cc: Option<PathBuf>,
    /// `-march` (x86_64) / `-mcpu` (aarch64) override; default `x86-64-v2` / `cortex-a75`.
    pub cpu: Option<String>,
    /// xxh3 of the ONNX bytes, hex.
    pub model_hash: String,
    /// ONNX `metadata_props`, in order.
    pub props: Vec<(String, String)>,
    /// Model input `i`'s name and shape; missing entries are named `input{i}` with shape `[numel]`.
    pub inputs: Vec<IoSpec>,
    /// Model output `i`'s name, shape and slices; missing entries are `output{i}`, `[numel]`.
    pub outputs: Vec<IoSpec>,
}

impl EmitOptions {
    /// Options for this machine with default names.
    pub fn host() -> EmitOptions {
        EmitOptions {
            arch: Arch::host().unwrap_or(Arch::X86_64),
            cc: None,
            cpu: None,
            model_hash: String::new(),
            props: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }
}

/// What [`emit`] produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmitReport {
    /// Programs (dispatches) and copy steps.
    pub kernels: usize,
    pub copies: usize,
    pub flops: u64,
    /// Scratch memory after planning (the arena), and the sum of all scratch buffers.
    pub arena_bytes: u64,
    pub naive_scratch_bytes: u64,
    pub weight_bytes: u64,
    pub artifact_bytes: u64,
    pub compile_seconds: f64,
}

/// Where scratch buffers live in the arena.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScratchPlan {
    /// Byte offset of every placed scratch buffer, by program buffer id.
    pub offsets: BTreeMap<u32, u64>,
    /// Size of the arena: the peak of the plan.
    pub arena_bytes: u64,
    /// Sum of the (aligned) sizes of all placed buffers: the arena without reuse.
    pub naive_bytes: u64,
}

fn align(n: u64) -> u64 {
    n.div_ceil(ARENA_ALIGN) * ARENA_ALIGN
}

/// The buffers step `i` (kernel `i`) reads, and the one it writes.
fn step_buffers(p: &Program, k: &Kernel) -> (Vec<u32>, u32) {
    (p.kernel_inputs(k), k.out)
}

/// Places scratch buffers in one arena. A buffer is live from the first kernel that writes it to the
/// last kernel that reads or writes it (inclusive: a kernel's inputs and output never share memory);
/// buffers are placed in order of first write, each at the lowest 64-byte-aligned offset that does
/// not overlap a buffer live at the same time (first fit, reusing the ranges of dead buffers).
pub fn plan_scratch(p: &Program) -> Result<ScratchPlan> {
    let mut first_write: BTreeMap<u32, usize> = BTreeMap::new();
    let mut first_read: BTreeMap<u32, usize> = BTreeMap::new();
    let mut last_use: BTreeMap<u32, usize> = BTreeMap::new();
    let scratch = |b: u32| p.bufs.get(b as usize).is_some_and(|x| x.kind == BufKind::Scratch);
    for (i, k) in p.kernels.iter().enumerate() {
        let (reads, out) = step_buffers(p, k);
        for b in reads.into_iter().filter(|&b| scratch(b)) {
            first_read.entry(b).or_insert(i);
            last_use.insert(b, i);
        }
        if scratch(out) {
            first_write.entry(out).or_insert(i);
            last_use.insert(out, i);
        }
    }
    for (&b, &r) in &first_read {
        match first_write.get(&b) {
            Some(&w) if w < r => {}
            _ => return Err(CompileError::Graph(format!("scratch buffer {b} is read before it is written"))),
        }
    }
    let mut plan = ScratchPlan::default();
    // (offset, size, last use) of the buffers placed so far that may still be live.
    let mut live: Vec<(u64, u64, usize)> = Vec::new();
    let mut order: Vec<(usize, u32)> = first_write.iter().map(|(&b, &i)| (i, b)).collect();
    order.sort_unstable();
    for (i, b) in order {
        live.retain(|&(_, _, end)| end >= i);
        live.sort_unstable();
        let size = align(p.bufs[b as usize].nbytes() as u64);
        let mut at = 0;
        for &(o, s, _) in &live {
            if at + size <= o {
                break;
            }
            at = at.max(o + s);
        }
        if size > 0 {
            live.push((at, size, last_use[&b]));
        }
        plan.offsets.insert(b, at);
        plan.arena_bytes = plan.arena_bytes.max(at + size);
        plan.naive_bytes += size;
    }
    Ok(plan)
}

/// `(coefficient per variable, constant)` of an affine int64 expression, if it is one.
fn affine(p: &Program, n: N) -> Option<(BTreeMap<u32, i64>, i64)> {
    let ctx = &p.ctx;
    match ctx.op(n) {
        Op::Var(v) => Some((BTreeMap::from([(*v, 1)]), 0)),
        Op::Const(c) if !ctx.dtype(n).is_float() => Some((BTreeMap::new(), c.as_i64())),
        Op::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            let (mut ta, ca) = affine(p, *a)?;
            let (tb, cb) = affine(p, *b)?;
            let s = if *op == BinOp::Add { 1 } else { -1 };
            for (v, c) in tb {
                *ta.entry(v).or_insert(0) += s * c;
            }
            Some((ta, ca + s * cb))
        }
        Op::Binary(BinOp::Mul, a, b) => {
            let (k, x) = match (ctx.const_value(*a), ctx.const_value(*b)) {
                (Some(k), _) => (k.as_i64(), *b),
                (_, Some(k)) => (k.as_i64(), *a),
                _ => return None,
            };
            let (t, c) = affine(p, x)?;
            Some((t.into_iter().map(|(v, x)| (v, x * k)).collect(), c * k))
        }
        _ => None,
    }
}

/// The buffer kernel `k` copies whole and in C order into its output, if that is all it does.
pub fn copy_source(p: &Program, k: &Kernel) -> Option<u32> {
    let Op::Load { buf, index, valid: None } = *p.ctx.op(k.expr) else {
        return None;
    };
    let points: usize = k.shape.iter().product();
    if p.bufs[buf as usize].numel != points || p.bufs[k.out as usize].numel != points {
        return None;
    }
    let (terms, constant) = affine(p, index)?;
    let expected: BTreeMap<u32, i64> =
        k.vars.iter().zip(strides(&k.shape)).zip(&k.shape).filter(|(_, &d)| d > 1).map(|((&v, s), _)| (v, s)).collect();
    let unit = |v: &u32| k.vars.iter().zip(&k.shape).any(|(x, &d)| x == v && d <= 1);
    let actual: BTreeMap<u32, i64> = terms.into_iter().filter(|(v, c)| *c != 0 && !unit(v)).collect();
    (constant == 0 && actual == expected).then_some(buf)
}

enum Step {
    Dispatch(usize),
    Copy { src: u32, dst: u32, len: u64 },
}

/// Renders the program's kernels (all but plain copies); `--dump` and tests use this.
pub fn render_all(program: &Program) -> Result<Vec<CKernel>> {
    program
        .kernels
        .iter()
        .filter(|k| k.shape.iter().product::<usize>() > 0 && copy_source(program, k).is_none())
        .map(|k| render(program, k))
        .collect()
}

/// Writes `program` as an artifact at `path` (atomically) for `opts.arch`.
pub fn emit(program: &Program, opts: &EmitOptions, path: &Path) -> Result<EmitReport> {
    let p = program;
    let plan = plan_scratch(p)?;
    let mut steps = Vec::new();
    let mut rendered = Vec::new();
    for k in &p.kernels {
        if k.shape.iter().product::<usize>() == 0 {
            continue;
        }
        match copy_source(p, k) {
            Some(src) => steps.push(Step::Copy { src, dst: k.out, len: p.bufs[k.out as usize].nbytes() as u64 }),
            None => {
                steps.push(Step::Dispatch(rendered.len()));
                rendered.push(render(p, k)?);
            }
        }
    }
    let read: std::collections::BTreeSet<u32> = rendered
        .iter()
        .flat_map(|c| c.args.iter().copied())
        .chain(steps.iter().filter_map(|s| match s {
            Step::Copy { src, .. } => Some(*src),
            Step::Dispatch(_) => None,
        }))
        .collect();

    let ports = |want: fn(&BufKind) -> Option<usize>, specs: &[IoSpec], what: &str| -> Result<Vec<(u32, IoSpec)>> {
        let mut found: BTreeMap<usize, u32> = BTreeMap::new();
        for (b, buf) in p.bufs.iter().enumerate() {
            if let Some(i) = want(&buf.kind) {
                if found.insert(i, b as u32).is_some() {
                    return Err(CompileError::Graph(format!("two buffers are model {what} {i}")));
                }
            }
        }
        found
            .into_iter()
            .enumerate()
            .map(|(pos, (i, b))| {
                if pos != i {
                    return Err(CompileError::Graph(format!("model {what} {pos} has no buffer")));
                }
                let numel = p.bufs[b as usize].numel;
                let spec = specs.get(i).cloned().unwrap_or_else(|| IoSpec {
                    name: format!("{what}{i}"),
                    shape: vec![numel],
                    slices: vec![],
                });
                if spec.shape.iter().product::<usize>() != numel {
                    return Err(CompileError::Graph(format!(
                        "{what} `{}` has shape {:?} but its buffer holds {numel} elements",
                        spec.name, spec.shape
                    )));
                }
                Ok((b, spec))
            })
            .collect()
    };
    let inputs = ports(|k| if let BufKind::Input(i) = k { Some(*i) } else { None }, &opts.inputs, "input")?;
    let outputs = ports(|k| if let BufKind::Output(i) = k { Some(*i) } else { None }, &opts.outputs, "output")?;
    for (b, spec) in &outputs {
        if p.bufs[*b as usize].numel > 0 && !p.kernels.iter().any(|k| k.out == *b) {
            return Err(CompileError::Graph(format!("output `{}` is never written", spec.name)));
        }
    }

    let t0 = Instant::now();
    let objects = if rendered.is_empty() {
        Vec::new()
    } else {
        Toolchain::find(opts.cc.as_deref(), opts.arch, opts.cpu.as_deref())?.compile_all(&rendered)?
    };
    let compile_seconds = t0.elapsed().as_secs_f64();

    let mut writer = ArtifactWriter::new();
    let mut buffers: Vec<BufferSpec> = Vec::new();
    let mut place: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
    let mut weight_bytes = 0u64;
    let spec = |size: usize, dtype: DType, kind: BufferUse| BufferSpec {
        size,
        dtype,
        kind,
        placement: Placement::Device,
        blob: None,
        checksum: None,
    };
    for (b, buf) in p.bufs.iter().enumerate() {
        let b = b as u32;
        let s = match &buf.kind {
            BufKind::Input(_) => spec(buf.nbytes(), buf.dtype, BufferUse::Input),
            BufKind::Output(_) => spec(buf.nbytes(), buf.dtype, BufferUse::Output),
            BufKind::Weight(t) if read.contains(&b) => {
                if t.data.len() != buf.nbytes() {
                    return Err(CompileError::Graph(format!("weight buffer {b} holds {} bytes", t.data.len())));
                }
                weight_bytes += t.data.len() as u64;
                BufferSpec {
                    blob: Some(writer.add_blob(&t.data)),
                    checksum: Some(checksum(&t.data)),
                    ..spec(buf.nbytes(), buf.dtype, BufferUse::Weight)
                }
            }
            _ => continue,
        };
        place.insert(b, (buffers.len() as u32, 0));
        buffers.push(s);
    }
    let uses_arena = plan.offsets.keys().any(|b| read.contains(b) || p.kernels.iter().any(|k| k.out == *b));
    if uses_arena {
        let arena = buffers.len() as u32;
        buffers.push(spec(plan.arena_bytes.max(ARENA_ALIGN) as usize, DType::U8, BufferUse::Scratch));
        place.extend(plan.offsets.iter().map(|(&b, &o)| (b, (arena, o))));
    }
    let arg = |b: u32| -> Result<Arg> {
        let &(buffer, offset) = place.get(&b).ok_or_else(|| CompileError::Graph(format!("buffer {b} has no place")))?;
        Ok(Arg { buffer: BufferId(buffer), offset })
    };

    let mut programs = Vec::new();
    let mut step = Vec::new();
    for s in &steps {
        match *s {
            Step::Copy { src, dst, len } => step.push(StepOp::Copy { src: arg(src)?, dst: arg(dst)?, len }),
            Step::Dispatch(i) => {
                let c = &rendered[i];
                step.push(StepOp::Dispatch {
                    program: ProgramId(programs.len() as u32),
                    args: c.args.iter().map(|&b| arg(b)).collect::<Result<_>>()?,
                    global: [c.parts.max(1), 1, 1],
                    local: [1, 1, 1],
                });
                programs.push(ProgramEntry {
                    name: c.name.clone(),
                    format: ProgramFormat::Elf,
                    blob: writer.add_blob(&objects[i]),
                    args: c.args.len(),
                });
            }
        }
    }
    let tensor = |(b, s): &(u32, IoSpec)| TensorSpec {
        name: s.name.clone(),
        shape: s.shape.clone(),
        dtype: p.bufs[*b as usize].dtype,
        buffer: place[b].0 as usize,
        slices: s.slices.clone(),
    };
    let mut manifest = Manifest {
        target: Target {
            backend: "cpu".into(),
            arch: opts.arch.name().into(),
            image: false,
            float16: false,
            nolocals: false,
        },
        inputs: inputs.iter().map(tensor).collect(),
        outputs: outputs.iter().map(tensor).collect(),
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
        kernels: rendered.len(),
        copies: steps.len() - rendered.len(),
        flops: p.kernels.iter().map(|k| p.kernel_flops(k)).sum(),
        arena_bytes: if uses_arena { plan.arena_bytes } else { 0 },
        naive_scratch_bytes: plan.naive_bytes,
        weight_bytes,
        artifact_bytes,
        compile_seconds,
    })
}
