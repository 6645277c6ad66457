//! Lowering an ONNX graph to a [`Program`]: every node becomes lazy-tensor operations; constants
//! fold as they appear (shape subgraphs disappear); realization points are chosen here.
//!
//! Realization policy (where fusion stops):
//! - graph outputs are realized into output buffers;
//! - a value that contains a reduction and has several consumers is realized once;
//! - an input of a reduction (conv, matmul, pooling) is realized when it carries computation that the
//!   reduction would otherwise repeat for every reuse (see [`NodeCtx::reduce_input`]);
//! - a value whose expression is deeper than [`MAX_FUSED_DEPTH`] is realized;
//! - everything else (elementwise chains, activations, bias, normalization, residual adds, movement)
//!   fuses into its producer or consumer.

mod argmax_pool;
mod attention;
mod batch_products;
mod bitwise;
pub mod budget;
mod compose;
mod control;
mod crop;
mod einsum;
mod elementwise;
mod fold_affine;
mod gated;
mod grid;
mod hyperbolic;
pub mod image;
mod index_ops;
mod kv_cache;
mod loss;
mod ml;
mod nn;
mod norm;
mod optim;
mod optional;
mod patch_transpose;
pub mod pin;
mod quant;
mod reduce;
mod rejoin;
mod resize;
mod rnn;
mod rotary;
mod scatter;
mod shape;
mod training;
mod window;
pub mod winograd;

use std::collections::{HashMap, HashSet};

use pilot_core::DType;

use crate::error::{CompileError, Result};
use crate::lazy::Lazy;
use crate::onnx::{Dim, Model, Node};
use crate::program::{BufKind, Program};
use crate::tensor::Tensor;

/// Constants up to this many elements are folded at compile time into fresh constants.
pub const FOLD_LIMIT: usize = 1 << 22;

/// A value whose expression is deeper than this is realized, whatever its uses: a chain of
/// thousands of fused operations would make one kernel that the C compiler schedules in quadratic
/// time (and every recursive pass deeper).
pub const MAX_FUSED_DEPTH: u32 = 512;

/// A named model input or output.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// A lowered model.
#[derive(Debug)]
pub struct Lowered {
    pub program: Program,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
}

type OpFn = fn(&mut NodeCtx<'_>) -> Result<Vec<Lazy>>;

fn lookup(op: &str) -> Option<OpFn> {
    // First: these take over MaxPool with Indices and training-mode BatchNormalization and Dropout.
    argmax_pool::lookup(op)
        .or_else(|| training::lookup(op))
        .or_else(|| elementwise::lookup(op))
        .or_else(|| shape::lookup(op))
        .or_else(|| nn::lookup(op))
        .or_else(|| reduce::lookup(op))
        .or_else(|| resize::lookup(op))
        .or_else(|| rnn::lookup(op))
        .or_else(|| hyperbolic::lookup(op))
        .or_else(|| index_ops::lookup(op))
        .or_else(|| einsum::lookup(op))
        .or_else(|| norm::lookup(op))
        .or_else(|| scatter::lookup(op))
        .or_else(|| quant::lookup(op))
        .or_else(|| loss::lookup(op))
        .or_else(|| attention::lookup(op))
        .or_else(|| gated::lookup(op))
        .or_else(|| bitwise::lookup(op))
        .or_else(|| window::lookup(op))
        .or_else(|| crop::lookup(op))
        .or_else(|| rotary::lookup(op))
        .or_else(|| control::lookup(op))
        .or_else(|| grid::lookup(op))
        .or_else(|| optional::lookup(op))
        .or_else(|| kv_cache::lookup(op))
}

/// Whether the lowering knows `op` (in the default domain).
pub fn supports(op: &str) -> bool {
    lookup(op).is_some()
}

struct Lowerer {
    p: Program,
    values: HashMap<String, Lazy>,
    consts: HashMap<String, Tensor>,
    uses: HashMap<String, usize>,
    opset: i64,
    /// Set when convolutions and matmuls read their operands as images (`--image`).
    images: Option<image::ImageMode>,
    /// Images already packed, by what they hold (see [`image::ImageKey`]): consumers share them.
    packed: HashMap<image::ImageKey, Lazy>,
    /// Values some convolution reads as its input (in image mode: see [`settle`]).
    conv_inputs: HashSet<String>,
    /// Values some MatMul or Gemm reads as its left operand (in image mode: see [`settle`]).
    matmul_inputs: HashSet<String>,
    /// Values read several times whose reads rejoin at one elementwise node ([`rejoin`]).
    rejoining: HashSet<String>,
    limits: budget::Limits,
    /// The run-time inputs each value is computed from, for errors that suggest `--const`.
    sources: pin::Sources,
    /// When convolutions take the Winograd path (the CPU target's choice).
    winograd: winograd::Policy,
    /// The CPU target's f32 lanes per vector (0 on other targets): a convolution whose output rows
    /// would leave most lanes idle computes along its output channels instead (`nn::channels_inner`).
    lanes: usize,
}

/// Elements of fill a stride-1 padded copy keeps after its last row: the CPU's register tiles may
/// then run up to that far past the end of a row, reading the next one, and stay in the buffer
/// (`target/cpu/upcast.rs`: a row of 23 takes one tile of 32 instead of two overlapping tiles of 16).
pub const ROW_SLACK: usize = 64;

/// What an op implementation sees: its node, its inputs, and the program being built.
pub struct NodeCtx<'a> {
    l: &'a mut Lowerer,
    pub node: &'a Node,
}

impl NodeCtx<'_> {
    pub fn p(&mut self) -> &mut Program {
        &mut self.l.p
    }

    pub fn opset(&self) -> i64 {
        self.l.opset
    }

    /// The image mode, when convolutions and matmuls read images.
    pub fn images(&self) -> Option<image::ImageMode> {
        self.l.images
    }

    /// When convolutions take the Winograd path.
    pub fn winograd(&self) -> winograd::Policy {
        self.l.winograd
    }

    /// The CPU target's f32 lanes per vector; 0 on other targets.
    pub fn cpu_lanes(&self) -> usize {
        self.l.lanes
    }

    /// The image already packed for `key`, if any.
    pub fn packed_image(&self, key: &image::ImageKey) -> Option<Lazy> {
        self.l.packed.get(key).cloned()
    }

    /// Remembers the image packed for `key`.
    pub fn remember_image(&mut self, key: image::ImageKey, view: Lazy) {
        self.l.packed.insert(key, view);
    }

    /// Refuses a value of `shape` and `dtype` larger than the memory limit (see [`budget`]); ops
    /// that build tensors at compile time call it before allocating.
    pub fn check_value(&self, what: &str, dtype: DType, shape: &[usize]) -> Result<()> {
        self.l.limits.check_value(what, dtype, shape).map_err(|e| self.err(e))
    }

    pub fn err(&self, reason: impl Into<String>) -> CompileError {
        CompileError::Node {
            node: self.node.name.clone(),
            op: self.node.op_type.clone(),
            opset: self.l.opset,
            reason: reason.into(),
        }
    }

    pub fn num_inputs(&self) -> usize {
        self.node.inputs.len()
    }

    pub fn has_input(&self, i: usize) -> bool {
        self.node.inputs.get(i).is_some_and(|n| !n.is_empty())
    }

    pub fn input(&self, i: usize) -> Result<Lazy> {
        let name = self
            .node
            .inputs
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.err(format!("input {i} is missing")))?;
        self.l.values.get(name).cloned().ok_or_else(|| self.err(format!("input `{name}` is not defined before use")))
    }

    pub fn opt_input(&self, i: usize) -> Result<Option<Lazy>> {
        if self.has_input(i) {
            self.input(i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Input `i` as a compile-time constant (shape-like inputs must be).
    pub fn const_input(&mut self, i: usize) -> Result<Tensor> {
        let name = self.node.inputs.get(i).cloned().unwrap_or_default();
        if let Some(t) = self.l.consts.get(&name) {
            return Ok(t.clone());
        }
        let x = self.input(i)?;
        if !self.l.p.is_constant(&x) {
            let why = self.l.sources.explain(&name).unwrap_or_else(|| "is not".into());
            return Err(self.err(format!("input {i} (`{name}`) must be a compile-time constant: it {why}")));
        }
        self.check_value(&format!("input {i} (`{name}`)"), x.dtype, &x.shape)?;
        let t = self.l.p.fold(&x).ok_or_else(|| {
            self.err(format!(
                "input {i} (`{name}`) of shape {:?} is a constant too costly to evaluate at compile time (over {} element evaluations)",
                x.shape,
                budget::FOLD_WORK_LIMIT
            ))
        })?;
        self.l.consts.insert(name, t.clone());
        Ok(t)
    }

    pub fn opt_const_input(&mut self, i: usize) -> Result<Option<Tensor>> {
        if self.has_input(i) {
            self.const_input(i).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.node.attr_int(name).unwrap_or(default)
    }

    pub fn attr_float(&self, name: &str, default: f32) -> f32 {
        self.node.attr_float(name).unwrap_or(default)
    }

    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.node.attr_ints(name).map(<[i64]>::to_vec)
    }

    pub fn attr_str(&self, name: &str, default: &str) -> String {
        self.node.attr_str(name).unwrap_or_else(|| default.to_string())
    }

    /// Normalizes a possibly negative axis for rank `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        let a = if axis < 0 { axis + rank as i64 } else { axis };
        if a < 0 || a >= rank.max(1) as i64 {
            return Err(self.err(format!("axis {axis} out of range for rank {rank}")));
        }
        Ok(a as usize)
    }

    /// `x` ready to be read many times by a reduction that reads each element `reuse` times:
    /// realized first if it carries computation worth not repeating.
    pub fn reduce_input(&mut self, x: &Lazy, reuse: f64) -> Lazy {
        let p = &mut self.l.p;
        if p.is_buffer_view(x).is_some() || p.is_constant(x) {
            return x.clone();
        }
        let cost = p.ctx.cost_capped(x.expr, 8);
        if p.ctx.has_reduce(x.expr) || (reuse > 1.5 && cost >= 2) || cost >= 8 {
            let name = format!("{}_in", self.node.name);
            return self.l.p.realize(x, BufKind::Scratch, &name);
        }
        x.clone()
    }

    /// The input of a windowed reduction (convolution, pooling), padded spatially with `fill`, and
    /// with [`ROW_SLACK`] elements (whole rows of fill) after the last row unless its phases are
    /// split (below).
    ///
    /// Padding is materialized: the window loop then reads plain memory with no bounds guards, which
    /// is what lets it vectorize. A producer with a reduction is realized first (guarding its loads
    /// would slow its own loop); an elementwise one is computed by the copy itself, unless on the
    /// CPU it has transcendental math and the copy's rows are short or split into phases (below).
    /// With a stride `s > 2` along the last axis (and `s = 2` off the CPU), the copy also splits that axis into its
    /// `s` phases (`x[.., j*s + p]` stored at `[.., p, j]`), so the window loop reads contiguous
    /// memory; on the GPU targets (no CPU vector lanes) an unpadded strided input is not copied for
    /// that. Where several output channels share each load (`shared`: an ungrouped convolution),
    /// the CPU reads a stride of 2 itself (two vectors, the even lanes kept, the cost shared): an
    /// unpadded input is not copied, a padded one is copied in place order (its elementwise producer
    /// vectorized, where the split's stride-2 reads took gathers). A depthwise convolution or a
    /// pooling, whose every load feeds one output channel, keeps the split.
    #[allow(clippy::too_many_arguments)]
    pub fn windowed_input(
        &mut self,
        x: &Lazy,
        pad_lo: &[i64],
        pad_hi: &[i64],
        fill: f64,
        reuse: f64,
        stride: usize,
        shared: bool,
    ) -> Lazy {
        let padded = pad_lo.iter().chain(pad_hi).any(|&v| v != 0);
        // The CPU's register tiles read a stride of 2 as two vectors and keep the even lanes
        // (`target/cpu/tile.rs`): no phase split where output channels share those loads.
        let split = stride > 1 && !(stride == 2 && shared && self.cpu_lanes() > 0);
        let copied = padded || (split && self.cpu_lanes() > 0);
        if !copied {
            return self.reduce_input(x, reuse);
        }
        // The copy computes an elementwise producer once per element itself (one kernel less),
        // unless, on the CPU, the producer has math that only vectorized loops make cheap and the
        // copy's rows are short (its guards cut them into pieces) or split into phases (read every
        // `stride`-th element): the copy runs them in scalar (a swish before a stride-2 depthwise
        // convolution: 7 ns per element, computed on its own over whole planes: 0.5 ns).
        let lanes = self.cpu_lanes();
        let r = x.rank();
        let width = (x.shape[r - 1] as i64 + pad_lo[pad_lo.len() - 1] + pad_hi[pad_hi.len() - 1]).max(0) as usize;
        let short = split || width <= 2 * lanes;
        let p = &mut self.l.p;
        let costly = lanes > 0 && short && p.is_buffer_view(x).is_none() && crate::ir::transcendental(&p.ctx, x.expr);
        let x = if p.ctx.has_reduce(x.expr) {
            self.reduce_input(x, reuse)
        } else if costly && !p.is_constant(x) {
            let name = format!("{}_in", self.node.name);
            self.l.p.realize(x, BufKind::Scratch, &name)
        } else {
            x.clone()
        };
        let lo = [&[0, 0][..], pad_lo].concat();
        let mut hi = [&[0, 0][..], pad_hi].concat();
        if split {
            hi[r - 1] += (width.div_ceil(stride) * stride - width) as i64;
        } else if r >= 3 && width > 0 {
            hi[r - 2] += ROW_SLACK.div_ceil(width) as i64;
        }
        let p = &mut self.l.p;
        let xp = p.pad(&x, &lo, &hi, fill);
        if p.is_constant(&xp) {
            return xp;
        }
        let name = format!("{}_pad", self.node.name);
        if !split {
            return p.realize(&xp, BufKind::Scratch, &name);
        }
        let w = xp.shape[r - 1];
        let mut split = xp.shape.clone();
        split[r - 1] = w / stride;
        split.push(stride);
        let mut perm: Vec<usize> = (0..=r).collect();
        perm.swap(r - 1, r);
        let phases = p.reshape(&xp, &split);
        let phases = p.permute(&phases, &perm);
        let stored = p.realize(&phases, BufKind::Scratch, &name);
        let back = p.permute(&stored, &perm);
        p.reshape(&back, &xp.shape)
    }

    /// The input of a max pooling, padded without a copy: the window reads the input itself with
    /// its loads guarded by the padding's bounds. A max window has no weights to share, so it gains
    /// nothing from the padded copy's unguarded reads that would pay for 2 passes over the input;
    /// the CPU back end peels the guarded columns off its inner loop (`target/cpu/peel.rs`).
    pub fn guarded_window(&mut self, x: &Lazy, pad_lo: &[i64], pad_hi: &[i64], fill: f64, reuse: f64) -> Lazy {
        let x = self.reduce_input(x, reuse);
        let lo = [&[0, 0][..], pad_lo].concat();
        let hi = [&[0, 0][..], pad_hi].concat();
        self.l.p.pad(&x, &lo, &hi, fill)
    }

    /// Broadcasts all inputs to a common shape, or errors naming the shapes.
    pub fn broadcast(&mut self, xs: &[&Lazy]) -> Result<Vec<Lazy>> {
        let shapes: Vec<Vec<usize>> = xs.iter().map(|x| x.shape.clone()).collect();
        self.l.p.broadcast(xs).ok_or_else(|| self.err(format!("shapes {shapes:?} do not broadcast")))
    }
}

fn resolve_dims(name: &str, dims: &Option<Vec<Dim>>, pinned: Option<&Vec<usize>>) -> Result<Vec<usize>> {
    if let Some(s) = pinned {
        if let Some(d) = dims {
            if d.len() != s.len() {
                return Err(CompileError::Graph(format!(
                    "--shape {name}: {} dimensions given, the model has {}",
                    s.len(),
                    d.len()
                )));
            }
            for (i, (dim, &v)) in d.iter().zip(s).enumerate() {
                if let Dim::Fixed(f) = dim {
                    if *f as usize != v {
                        return Err(CompileError::Graph(format!(
                            "--shape {name}: dimension {i} is fixed to {f} in the model, {v} given"
                        )));
                    }
                }
            }
        }
        return Ok(s.clone());
    }
    let dims = dims.as_ref().ok_or_else(|| {
        CompileError::Graph(format!("input `{name}` has no shape in the model: give it with --shape {name}=1x..."))
    })?;
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(v) if *v >= 0 => Ok(*v as usize),
            Dim::Named(n) => Err(CompileError::Graph(format!(
                "input `{name}` has dynamic dimension `{n}`: pin it with --shape {name}=..."
            ))),
            _ => Err(CompileError::Graph(format!(
                "input `{name}` has a dynamic dimension: pin it with --shape {name}=..."
            ))),
        })
        .collect()
}

/// Lowers `model`, with dynamic input dimensions pinned by `shapes`.
pub fn lower(model: &Model, shapes: &HashMap<String, Vec<usize>>) -> Result<Lowered> {
    lower_with(model, shapes, None)
}

/// Lowers `model`; with `images`, convolutions and matmuls read activations and weights as images.
pub fn lower_with(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    images: Option<image::ImageMode>,
) -> Result<Lowered> {
    lower_limited(model, shapes, images, budget::Limits::default())
}

/// [`lower_with`] within `limits` (see [`budget`]).
pub fn lower_limited(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    images: Option<image::ImageMode>,
    limits: budget::Limits,
) -> Result<Lowered> {
    lower_pinned(model, shapes, &pin::Pins::new(), images, limits, winograd::Policy::Off, 0)
}

/// [`lower_limited`] with the inputs in `pins` pinned to their values (see [`pin`]): folded like
/// initializers and left out of [`Lowered::inputs`]; convolutions take the Winograd path as `winograd`
/// says (the target's choice: [`winograd::Policy::Off`] for every target but the CPU); `lanes` is the
/// CPU target's f32 lanes per vector (0 for every other target).
pub fn lower_pinned(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    pins: &pin::Pins,
    images: Option<image::ImageMode>,
    limits: budget::Limits,
    winograd: winograd::Policy,
    lanes: usize,
) -> Result<Lowered> {
    crate::onnx::check::check(model)?;
    let folded = fold_affine::fold(&model.graph);
    // The CPU target batches products sharing a weight (the GPU targets' kernels read weights as
    // images and are tuned per product).
    let batched = if lanes > 0 { batch_products::plan(&folded) } else { None };
    let (g, groups) = match &batched {
        Some((g, groups)) => (g, groups.as_slice()),
        None => (&folded, &[][..]),
    };
    let opset = model.opsets.iter().find(|(d, _)| d.is_empty() || d == "ai.onnx").map(|(_, v)| *v).unwrap_or(1);
    let mut l = Lowerer {
        p: Program::new(),
        values: HashMap::new(),
        consts: HashMap::new(),
        uses: HashMap::new(),
        opset,
        images,
        packed: HashMap::new(),
        conv_inputs: first_inputs(g, &["Conv"]),
        matmul_inputs: first_inputs(g, &["MatMul", "Gemm"]),
        rejoining: rejoin::rejoining(g),
        limits,
        sources: pin::Sources::default(),
        winograd,
        lanes,
    };
    for name in shapes.keys() {
        if !g.real_inputs().any(|i| &i.name == name) {
            return Err(CompileError::Graph(format!("--shape names `{name}`, which is not a model input")));
        }
    }
    pin::check_names(g, pins)?;
    for (name, t) in &g.initializers {
        let x = l.p.constant(t.clone());
        l.values.insert(name.clone(), x);
        l.consts.insert(name.clone(), t.clone());
    }
    let mut inputs = Vec::new();
    for vi in g.real_inputs() {
        if let Some(t) = pins.get(&vi.name) {
            pin::check_value(vi, t, shapes.get(&vi.name))?;
            limits.check_value(&format!("--const {}", vi.name), t.dtype, &t.shape).map_err(CompileError::Graph)?;
            let x = l.p.constant(t.clone());
            l.values.insert(vi.name.clone(), x);
            l.consts.insert(vi.name.clone(), t.clone());
            continue;
        }
        let dtype = vi
            .dtype
            .ok_or_else(|| CompileError::Graph(format!("input `{}` has no supported element type", vi.name)))?;
        let shape = resolve_dims(&vi.name, &vi.dims, shapes.get(&vi.name))?;
        limits.check_value(&format!("input `{}`", vi.name), dtype, &shape).map_err(CompileError::Graph)?;
        let x = l.p.input(inputs.len(), dtype, &shape);
        l.values.insert(vi.name.clone(), x);
        l.sources.input(&vi.name);
        inputs.push(Port { name: vi.name.clone(), dtype, shape });
    }
    for n in &g.nodes {
        for i in n.inputs.iter().filter(|i| !i.is_empty()) {
            *l.uses.entry(i.clone()).or_default() += 1;
        }
    }
    for o in &g.outputs {
        *l.uses.entry(o.name.clone()).or_default() += 1;
    }

    let mut batched_members = HashSet::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if batched_members.contains(&i) {
            continue;
        }
        if let Some(members) = groups.iter().find(|m| m[0] == i) {
            if let Some(outs) = batch_products::lower(&mut l, g, members)? {
                for (&j, x) in members.iter().zip(outs) {
                    keep_outputs(&mut l, &g.nodes[j], vec![x])?;
                    batched_members.insert(j);
                }
                continue;
            }
        }
        let ml = node.domain == ml::DOMAIN && ml::lookup(&node.op_type).is_some();
        let optim = node.domain == optim::DOMAIN && optim::lookup(&node.op_type).is_some();
        if !(node.domain.is_empty() || node.domain == "ai.onnx" || ml || optim) {
            return Err(CompileError::Node {
                node: node.name.clone(),
                op: format!("{}:{}", node.domain, node.op_type),
                opset,
                reason: "operators outside the default ONNX domain are not supported".into(),
            });
        }
        let f = if ml {
            ml::lookup(&node.op_type)
        } else if optim {
            optim::lookup(&node.op_type)
        } else {
            lookup(&node.op_type)
        };
        let f = f.ok_or_else(|| CompileError::Node {
            node: node.name.clone(),
            op: node.op_type.clone(),
            opset,
            reason: "unsupported operator".into(),
        })?;
        let outs = f(&mut NodeCtx { l: &mut l, node })?;
        keep_outputs(&mut l, node, outs)?;
    }

    let mut outputs = Vec::new();
    for (i, o) in g.outputs.iter().enumerate() {
        let x = l
            .values
            .get(&o.name)
            .cloned()
            .ok_or_else(|| CompileError::Graph(format!("output `{}` is never computed", o.name)))?;
        let claimed = match l.p.is_buffer_view(&x) {
            Some(b) if l.p.bufs[b as usize].kind == BufKind::Scratch => {
                l.p.bufs[b as usize].kind = BufKind::Output(i);
                true
            }
            _ => false,
        };
        if !claimed {
            l.p.realize(&x, BufKind::Output(i), &o.name);
        }
        outputs.push(Port { name: o.name.clone(), dtype: x.dtype, shape: x.shape.clone() });
    }
    let weights: u64 =
        l.p.bufs.iter().filter(|b| matches!(b.kind, BufKind::Weight(_))).map(|b| b.nbytes() as u64).sum();
    if weights > limits.max_memory {
        return Err(CompileError::Graph(format!(
            "the weights need {}, the limit is {} ({})",
            budget::human(weights),
            budget::human(limits.max_memory),
            budget::MEMORY_KNOBS
        )));
    }
    Ok(Lowered { program: l.p, inputs, outputs })
}

/// Checks, settles and records the values `outs` a node computed, under its output names.
fn keep_outputs(l: &mut Lowerer, node: &Node, outs: Vec<Lazy>) -> Result<()> {
    for (name, x) in node.outputs.iter().zip(outs) {
        if name.is_empty() {
            continue;
        }
        NodeCtx { l, node }.check_value(&format!("output `{name}`"), x.dtype, &x.shape)?;
        let x = settle(l, node, name, x);
        if !l.p.is_constant(&x) {
            l.sources.derive(name, node.inputs.iter().chain(&node.captured()));
        }
        l.values.insert(name.clone(), x);
    }
    Ok(())
}

/// The values the nodes of these types take as their first input, less the graph's outputs (an
/// output keeps its full-precision buffer).
fn first_inputs(g: &crate::onnx::Graph, ops: &[&str]) -> HashSet<String> {
    let outputs: HashSet<&String> = g.outputs.iter().map(|o| &o.name).collect();
    g.nodes
        .iter()
        .filter(|n| ops.contains(&n.op_type.as_str()))
        .filter_map(|n| n.inputs.first().cloned())
        .filter(|i| !outputs.contains(i))
        .collect()
}

/// Decides what becomes of a node's output: folded to a constant, realized, or left lazy.
///
/// In image mode a value realized for several consumers, one of them a convolution or a matrix
/// product, is realized as the image that consumer reads (a convolution's input of batch 1 and
/// whole pixels of channels, a product's left operand of several rows with whole pixels along K:
/// the layouts [`image::conv`] and [`image::matmul`] read without a copy), so every consumer reads
/// that one image, as tinygrad's image mode does, instead of a buffer and an image copied from it.
fn settle(l: &mut Lowerer, node: &Node, name: &str, x: Lazy) -> Lazy {
    let p = &mut l.p;
    if p.is_buffer_view(&x).is_some() {
        return x;
    }
    if p.is_constant(&x) && x.numel() <= FOLD_LIMIT && !matches!(p.ctx.op(x.expr), crate::ir::Op::Const(_)) {
        if let Some(t) = p.fold(&x) {
            l.consts.insert(name.to_string(), t.clone());
            return p.constant(t);
        }
    }
    let mut uses = l.uses.get(name).copied().unwrap_or(0);
    // On the GPU targets a value whose reads rejoin is computed where they meet. The CPU target's
    // kernels are tuned on the realized layout and keep it.
    if l.lanes == 0 && l.rejoining.contains(name) {
        uses = 1;
    }
    if p.ctx.depth(x.expr) > MAX_FUSED_DEPTH {
        return p.realize(&x, BufKind::Scratch, name);
    }
    if uses > 1 && (p.ctx.has_reduce(x.expr) || p.ctx.cost_capped(x.expr, 4) >= 4) {
        let image = if x.rank() == 4 && x.shape[0] == 1 && x.shape[1].is_multiple_of(4) && l.conv_inputs.contains(name)
        {
            Some((&[0, 2][..], &[3][..]))
        } else if x.rank() == 2 && x.shape[0] > 1 && x.shape[1].is_multiple_of(4) && l.matmul_inputs.contains(name) {
            Some((&[0][..], &[][..]))
        } else {
            None
        };
        if let (Some(_), Some((rows, cols))) = (l.images, image) {
            if let Some(view) = (NodeCtx { l: &mut *l, node }).to_image(&x, 1, rows, cols) {
                return view;
            }
        }
        return l.p.realize(&x, BufKind::Scratch, name);
    }
    x
}
