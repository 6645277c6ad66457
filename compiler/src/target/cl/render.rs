//! Renders one prepared kernel as OpenCL C 1.2, within what the Adreno 630's compiler accepts: no
//! double, no `cl_khr_fp16` arithmetic (half is storage only: `vload_half`/`vstore_half`, images read
//! and written as float), no local memory.
//!
//! Each work-item computes one output element, or the four channels of one pixel of an image output.
//! Output coordinates come from `get_global_id`: the innermost dimension is dimension 0. Every node is
//! rendered once into a private variable placed in the innermost loop among the variables it depends
//! on; reductions that share a variable (see [`super::prepare`]) run as one loop.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use pilot_core::DType;

use super::prepare::Prepared;
use super::texel::Texel;
use crate::error::{CompileError, Result};
use crate::ir::{BinOp, Const, Ctx, Op, RedOp, UnOp, N};
use crate::program::{Kernel, Program};
use crate::target::scoping::{flat_index, free_vars_by};

/// A rendered kernel.
#[derive(Clone, Debug)]
pub struct ClKernel {
    pub name: String,
    pub source: String,
    /// Buffers in argument order (output first).
    pub args: Vec<u32>,
    /// The NDRange in work-items.
    pub global: [u32; 3],
    /// The work-group size the kernel is written for (its reductions are shared by a work-group);
    /// `None` when any local size is correct.
    pub local: Option<[u32; 3]>,
}

/// Work-items that share one reduction (a power of two).
const LANES: u32 = 64;
/// Reductions at least this long are shared by a work-group when the kernel has few outputs.
const SHARED_REDUCTION: u64 = 256;
const FEW_OUTPUTS: usize = 4096;

/// The value type a node computes in: half and bfloat16 are computed as float.
pub fn value_type(d: DType) -> &'static str {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => "float",
        DType::F64 => "double",
        DType::I8 => "char",
        DType::U8 | DType::Bool => "uchar",
        DType::I16 => "short",
        DType::U16 => "ushort",
        DType::I32 => "int",
        DType::U32 => "uint",
        DType::I64 => "long",
        DType::U64 => "ulong",
    }
}

/// The element type of a buffer in memory.
fn storage_type(d: DType) -> &'static str {
    match d {
        DType::F16 => "half",
        DType::BF16 => "ushort",
        _ => value_type(d),
    }
}

fn literal(c: Const, d: DType) -> String {
    match c {
        Const::Float(bits) => {
            // Computed in float: a value beyond float's range is an infinity.
            let v = f64::from_bits(bits) as f32;
            if v.is_nan() {
                "NAN".into()
            } else if v.is_infinite() {
                if v > 0.0 { "INFINITY" } else { "(-INFINITY)" }.into()
            } else {
                format!("{v:e}f")
            }
        }
        Const::Int(i) if d == DType::I64 && i == i64::MIN => "(-0x7fffffffffffffffL - 1)".into(),
        Const::Int(i) => match d {
            DType::U64 => format!("{}UL", i as u64),
            DType::I64 => format!("{i}L"),
            _ => format!("(({}){i})", value_type(d)),
        },
    }
}

/// Renders a prepared kernel. Fails on float64, which the target lacks.
///
/// With `locals` (not `--nolocals`), a kernel with few outputs and a long outermost reduction runs
/// each output on a work-group of [`LANES`] work-items: each sums a strided share, then a tree
/// reduction in local memory combines them (global average pools, softmax denominators, norms).
pub fn render(p: &Program, k: &Kernel, prep: &Prepared, locals: bool) -> Result<ClKernel> {
    render_for(p, k, prep, locals, false)
}

/// [`render`] for a device with `double` (`cl_khr_fp64`) when `float64` is set: the AMD back end.
pub fn render_for(p: &Program, k: &Kernel, prep: &Prepared, locals: bool, float64: bool) -> Result<ClKernel> {
    let ctx = &p.ctx;
    let order = live_order(ctx, prep);
    if !float64 && order.iter().any(|&n| ctx.dtype(n) == DType::F64) {
        return Err(CompileError::Graph(format!(
            "kernel `{}` computes in float64, which the OpenCL target (Adreno 630) does not support",
            k.name
        )));
    }
    let mut args = vec![k.out];
    let mut inputs: Vec<u32> = prep.roots.iter().flat_map(|&r| ctx.loads(r)).filter(|&b| b != k.out).collect();
    inputs.sort_unstable();
    inputs.dedup();
    args.extend(inputs);

    let free = free_vars_by(ctx, &order, |n| deps(ctx, prep, n));
    let out_vars = prep.item_vars(k);
    let out_set: HashSet<u32> = out_vars.iter().map(|&(v, _)| v).collect();
    // Loop depth of each reduction variable: one below the deepest variable its reductions use.
    let mut depth: HashMap<u32, usize> = HashMap::new();
    for &n in order.iter().rev() {
        if let Op::Reduce { var, .. } = ctx.op(n) {
            let d = free[&n].iter().filter(|v| !out_set.contains(v)).map(|v| depth[v]).max().unwrap_or(0);
            let e = depth.entry(*var).or_insert(0);
            *e = (*e).max(d + 1);
        }
    }
    let scope_of =
        |n: N| -> Option<u32> { free[&n].iter().copied().filter(|v| !out_set.contains(v)).max_by_key(|v| depth[v]) };
    let mut by_scope: HashMap<Option<u32>, Vec<N>> = HashMap::new();
    let mut scope = HashMap::new();
    for &n in &order {
        if matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) {
            continue;
        }
        let s = scope_of(n);
        scope.insert(n, s);
        by_scope.entry(s).or_default().push(n);
    }
    let mut groups: HashMap<u32, Vec<N>> = HashMap::new();
    for &n in &order {
        if let Op::Reduce { var, .. } = ctx.op(n) {
            groups.entry(*var).or_default().push(n);
        }
    }

    let points: usize = out_vars.iter().map(|&(_, e)| e).product();
    let longest = order
        .iter()
        .filter_map(|&n| match ctx.op(n) {
            Op::Reduce { var, extent, .. } if depth[var] == 1 => Some(*extent),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let shared = locals
        && prep.roots.len() == 1
        && p.bufs[k.out as usize].image.is_none()
        && longest >= SHARED_REDUCTION
        && points <= FEW_OUTPUTS;
    let mut e = Emitter {
        ctx,
        p,
        prep,
        lanes: shared.then_some(LANES),
        names: HashMap::new(),
        texel_names: HashMap::new(),
        out: String::new(),
        by_scope,
        scope,
        depth,
        groups,
        done: HashSet::new(),
    };
    let name = k.name.clone();
    let params: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let buf = &p.bufs[b as usize];
            match (buf.image, i) {
                (Some(_), 0) => format!("write_only image2d_t b{b}"),
                (Some(_), _) => format!("read_only image2d_t b{b}"),
                (None, 0) => format!("__global {} *restrict b{b}", storage_type(buf.dtype)),
                (None, _) => format!("__global const {} *restrict b{b}", storage_type(buf.dtype)),
            }
        })
        .collect();
    let _ = writeln!(e.out, "__kernel void {name}({}) {{", params.join(", "));
    if k.shape.contains(&0) {
        // No output elements (an empty tensor): one work-item that writes nothing, since OpenCL 1.2
        // refuses an NDRange with a zero dimension.
        e.out.push_str("}\n");
        return Ok(ClKernel { name, source: e.out, args, global: [1; 3], local: None });
    }

    // The grid: innermost output dimensions first; dimension 2 holds the rest, unflattened. A shared
    // reduction puts its lanes in dimension 0.
    let grid: Vec<(u32, usize)> = out_vars.iter().rev().copied().filter(|&(_, ext)| ext > 1).collect();
    let mut global = [1u32; 3];
    for &(v, ext) in &out_vars {
        if ext == 1 {
            let _ = writeln!(e.out, "  const long v{v} = 0;");
        }
    }
    let first = usize::from(shared);
    if shared {
        global[0] = LANES;
        let _ = writeln!(e.out, "  const long lid = get_local_id(0);");
    }
    for (g, &(v, ext)) in grid.iter().take(2 - first).enumerate() {
        global[g + first] = ext as u32;
        let _ = writeln!(e.out, "  const long v{v} = get_global_id({});", g + first);
    }
    if grid.len() > 2 - first {
        let rest = &grid[2 - first..];
        global[2] = rest.iter().map(|&(_, ext)| ext as u32).product();
        let _ = writeln!(e.out, "  const long g2 = get_global_id(2);");
        let mut stride = 1usize;
        for &(v, ext) in rest {
            let _ = writeln!(e.out, "  const long v{v} = g2 / {stride} % {ext};");
            stride *= ext;
        }
    }
    e.emit_scope(None, 1)?;

    let out_buf = &p.bufs[k.out as usize];
    match out_buf.image {
        Some(_) => {
            // (y, x, channel): the pixel is (v_x, v_y), the roots are its four channels.
            let (vy, vx) = (k.vars[0], k.vars[1]);
            let vals: Vec<String> = prep.roots.iter().map(|&r| e.value(r)).collect();
            let _ = writeln!(
                e.out,
                "  write_imagef(b{}, (int2)((int)v{vx}, (int)v{vy}), (float4)({}));",
                k.out,
                vals.join(", ")
            );
        }
        None => {
            let flat = flat_index(k);
            let guard = if shared { "if (lid == 0) " } else { "" };
            for (j, &root) in prep.roots.iter().enumerate() {
                let v = e.value(root);
                // Four outputs per work-item: root j is the last axis at 4·quad + j.
                let (open, close) = match (prep.unrolled, prep.quad) {
                    (Some(last), Some((q, _))) => (format!("{{ const long v{last} = v{q} * 4 + {j}; "), " }"),
                    _ => (String::new(), ""),
                };
                let store = if out_buf.dtype == DType::F16 {
                    format!("vstore_half({v}, {flat}, b{});", k.out)
                } else if out_buf.dtype == DType::BF16 {
                    format!("b{}[{flat}] = pl_bf16_bits({v});", k.out)
                } else {
                    format!("b{}[{flat}] = {v};", k.out)
                };
                let _ = writeln!(e.out, "  {open}{guard}{store}{close}");
            }
        }
    }
    e.out.push_str("}\n");
    Ok(ClKernel { name, source: e.out, args, global, local: shared.then_some([LANES, 1, 1]) })
}

/// The children `n` is computed from: for an image load, its validity and texel coordinates.
pub(crate) fn deps(ctx: &Ctx, prep: &Prepared, n: N) -> Vec<N> {
    match (ctx.op(n), prep.texels.get(&n)) {
        (Op::Load { .. }, Some(t)) => t.valid.iter().copied().chain([t.x, t.y, t.c]).collect(),
        _ => ctx.children(n),
    }
}

/// The nodes the roots need, children first. An image load needs its validity but not its linear
/// index: its coordinates are written out where the pixel is read.
pub(crate) fn live_order(ctx: &Ctx, prep: &Prepared) -> Vec<N> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<(N, bool)> = prep.roots.iter().rev().map(|&r| (r, false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            out.push(n);
            continue;
        }
        if !seen.insert(n) {
            continue;
        }
        stack.push((n, true));
        for c in deps(ctx, prep, n).into_iter().rev() {
            if !seen.contains(&c) {
                stack.push((c, false));
            }
        }
    }
    out
}

struct Emitter<'a> {
    ctx: &'a Ctx,
    p: &'a Program,
    prep: &'a Prepared,
    /// Work-items sharing each outermost reduction, when the kernel is written for a work-group.
    lanes: Option<u32>,
    names: HashMap<N, String>,
    /// The `float4` holding each pixel read so far, by (image, x, y, validity).
    texel_names: HashMap<(u32, N, N, Option<N>), String>,
    out: String,
    by_scope: HashMap<Option<u32>, Vec<N>>,
    scope: HashMap<N, Option<u32>>,
    depth: HashMap<u32, usize>,
    /// Reductions by variable: one loop each.
    groups: HashMap<u32, Vec<N>>,
    done: HashSet<N>,
}

impl Emitter<'_> {
    fn value(&self, n: N) -> String {
        match self.ctx.op(n) {
            Op::Var(v) => format!("v{v}"),
            Op::Const(c) => literal(*c, self.ctx.dtype(n)),
            _ => self.names[&n].clone(),
        }
    }

    fn deps(&self, n: N) -> Vec<N> {
        deps(self.ctx, self.prep, n)
    }

    fn ready(&self, n: N) -> bool {
        self.deps(n).iter().all(|c| matches!(self.ctx.op(*c), Op::Var(_) | Op::Const(_)) || self.done.contains(c))
    }

    /// Nodes of scope `s` that the bodies of `members` need before their loop opens.
    fn loop_needs(&self, members: &[N], s: Option<u32>) -> Vec<N> {
        let here = s.map_or(0, |v| self.depth[&v]);
        let mut need = Vec::new();
        let mut seen = HashSet::new();
        let mut stack: Vec<N> = members.iter().flat_map(|&m| self.deps(m)).collect();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            let Some(&ns) = self.scope.get(&n) else { continue };
            if ns == s {
                need.push(n);
            } else if ns.map_or(0, |v| self.depth[&v]) > here {
                stack.extend(self.deps(n));
            }
        }
        need
    }

    /// Emits every node of scope `s`, opening one loop per reduction variable bound here.
    fn emit_scope(&mut self, s: Option<u32>, indent: usize) -> Result<()> {
        let mut pending = self.by_scope.remove(&s).unwrap_or_default();
        while !pending.is_empty() {
            let before = pending.len();
            let mut i = 0;
            while i < pending.len() {
                let n = pending[i];
                if self.done.contains(&n) {
                    pending.remove(i);
                    continue;
                }
                if let Op::Reduce { var, .. } = *self.ctx.op(n) {
                    let members = self.groups[&var].clone();
                    if self.loop_needs(&members, s).iter().all(|m| self.done.contains(m)) {
                        self.emit_loop(var, &members, indent)?;
                        pending.remove(i);
                        continue;
                    }
                } else if self.ready(n) {
                    self.emit(n, indent);
                    pending.remove(i);
                    continue;
                }
                i += 1;
            }
            if pending.len() == before {
                return Err(CompileError::Graph("OpenCL renderer: cyclic reduction grouping".into()));
            }
        }
        Ok(())
    }

    fn emit_loop(&mut self, var: u32, members: &[N], indent: usize) -> Result<()> {
        let pad = "  ".repeat(indent);
        let mut extent = 0;
        for &m in members {
            let Op::Reduce { op, extent: e, .. } = *self.ctx.op(m) else { unreachable!() };
            extent = e;
            let d = self.ctx.dtype(m);
            let init = literal(self.ctx.reduce_identity_const(op, d).expect("identity"), d);
            let name = format!("acc{}", m.0);
            let _ = writeln!(self.out, "{pad}{} {name} = {init};", value_type(d));
            self.names.insert(m, name);
        }
        // An outermost reduction of a work-group kernel: each lane takes every LANES-th element.
        let lanes = self.lanes.filter(|_| self.depth[&var] == 1);
        match lanes {
            Some(l) => writeln!(self.out, "{pad}for (long v{var} = lid; v{var} < {extent}; v{var} += {l}) {{"),
            None => writeln!(self.out, "{pad}for (long v{var} = 0; v{var} < {extent}; v{var}++) {{"),
        }
        .expect("writing to a String");
        self.emit_scope(Some(var), indent + 1)?;
        for &m in members {
            let Op::Reduce { op, body, .. } = *self.ctx.op(m) else { unreachable!() };
            let (a, b) = (self.names[&m].clone(), self.value(body));
            let _ = writeln!(self.out, "{pad}  {a} = {};", combine(op, self.ctx.dtype(m).is_float(), &a, &b));
            self.done.insert(m);
        }
        let _ = writeln!(self.out, "{pad}}}");
        if let Some(l) = lanes {
            // Tree reduction in local memory; every lane then holds the result. Every lane reaches
            // every barrier: the loops above are uniform across the work-group.
            for &m in members {
                let Op::Reduce { op, .. } = *self.ctx.op(m) else { unreachable!() };
                let d = self.ctx.dtype(m);
                let (a, red) = (self.names[&m].clone(), format!("red{}", m.0));
                let both = combine(op, d.is_float(), &format!("{red}[lid]"), &format!("{red}[lid + s]"));
                let _ = writeln!(self.out, "{pad}__local {} {red}[{l}];", value_type(d));
                let _ = writeln!(self.out, "{pad}{red}[lid] = {a};");
                let _ = writeln!(self.out, "{pad}barrier(CLK_LOCAL_MEM_FENCE);");
                let _ = writeln!(self.out, "{pad}for (long s = {}; s > 0; s >>= 1) {{", l / 2);
                let _ = writeln!(self.out, "{pad}  if (lid < s) {red}[lid] = {both};");
                let _ = writeln!(self.out, "{pad}  barrier(CLK_LOCAL_MEM_FENCE);");
                let _ = writeln!(self.out, "{pad}}}");
                let _ = writeln!(self.out, "{pad}{a} = {red}[0];");
            }
        }
        Ok(())
    }

    fn emit(&mut self, n: N, indent: usize) {
        let pad = "  ".repeat(indent);
        let d = self.ctx.dtype(n);
        let t = value_type(d);
        let name = format!("t{}", n.0);
        let expr = match self.ctx.op(n).clone() {
            Op::Var(_) | Op::Const(_) | Op::Reduce { .. } => unreachable!("not emitted as a value"),
            Op::Load { buf, index, valid } => match self.prep.texels.get(&n) {
                Some(&t) => self.texel(buf, t, &pad),
                None => {
                    let idx = self.value(index);
                    let idx = match valid {
                        Some(v) => format!("({} ? {idx} : 0)", self.value(v)),
                        None => idx,
                    };
                    let load = if self.p.bufs[buf as usize].dtype == DType::F16 {
                        format!("vload_half({idx}, b{buf})")
                    } else if self.p.bufs[buf as usize].dtype == DType::BF16 {
                        format!("pl_bits_bf16(b{buf}[{idx}])")
                    } else {
                        format!("b{buf}[{idx}]")
                    };
                    match valid {
                        Some(v) => format!("{} ? {load} : ({t})0", self.value(v)),
                        None => load,
                    }
                }
            },
            Op::Unary(op, x) => self.unary(op, x, d),
            Op::Binary(op, a, b) => self.binary(op, a, b),
            Op::Where(c, a, b) => format!("{} ? {} : {}", self.value(c), self.value(a), self.value(b)),
            Op::Cast(x) => self.cast(x, d),
            Op::Bitcast(x) => {
                let (from, v) = (self.ctx.dtype(x), self.value(x));
                match (from, d) {
                    (DType::F16, _) => format!("({t})pl_half_bits({v})"),
                    (_, DType::F16) => format!("pl_bits_half((ushort){v})"),
                    (DType::BF16, _) => format!("({t})pl_bf16_bits({v})"),
                    (_, DType::BF16) => format!("pl_bits_bf16((ushort){v})"),
                    _ => format!("as_{t}({v})"),
                }
            }
        };
        let _ = writeln!(self.out, "{pad}const {t} {name} = {expr};");
        self.names.insert(n, name);
        self.done.insert(n);
    }

    /// One channel of a pixel; the pixel is read once per (image, x, y, validity) and scope.
    fn texel(&mut self, buf: u32, t: Texel, pad: &str) -> String {
        let key = (buf, t.x, t.y, t.valid);
        let px = match self.texel_names.get(&key) {
            Some(px) => px.clone(),
            None => {
                let px = format!("px{}", self.texel_names.len());
                let coord = format!("(int2)((int)({}), (int)({}))", self.index(t.x), self.index(t.y));
                let read = format!("read_imagef(b{buf}, smp, {coord})");
                let read = match t.valid {
                    Some(v) => format!("{} ?{read} : (float4)(0.0f)", self.value(v)),
                    None => read,
                };
                let _ = writeln!(self.out, "{pad}const float4 {px} = {read};");
                self.texel_names.insert(key, px.clone());
                px
            }
        };
        match self.ctx.const_value(t.c) {
            Some(c) => format!("{px}.{}", ["x", "y", "z", "w"][c.as_i64() as usize]),
            None => format!("pl_channel({px}, {})", self.index(t.c)),
        }
    }

    /// An index expression written out in full (image coordinates are not nodes of the kernel).
    fn index(&self, n: N) -> String {
        if let Some(name) = self.names.get(&n) {
            return name.clone();
        }
        match self.ctx.op(n) {
            Op::Var(v) => format!("v{v}"),
            Op::Const(c) => literal(*c, self.ctx.dtype(n)),
            Op::Binary(op, a, b) => {
                let o = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::Rem => "%",
                    _ => return self.binary_inline(*op, *a, *b),
                };
                format!("({} {o} {})", self.index(*a), self.index(*b))
            }
            Op::Where(c, a, b) => format!("({} ? {} : {})", self.index(*c), self.index(*a), self.index(*b)),
            Op::Cast(x) => format!("(({}){})", value_type(self.ctx.dtype(n)), self.index(*x)),
            other => unreachable!("image coordinate {other:?}"),
        }
    }

    fn binary_inline(&self, op: BinOp, a: N, b: N) -> String {
        let (x, y) = (self.index(a), self.index(b));
        match op {
            BinOp::Max => format!("max({x}, {y})"),
            BinOp::Min => format!("min({x}, {y})"),
            BinOp::Lt => format!("({x} < {y})"),
            BinOp::Le => format!("({x} <= {y})"),
            BinOp::Eq => format!("({x} == {y})"),
            BinOp::Ne => format!("({x} != {y})"),
            BinOp::And => format!("({x} & {y})"),
            BinOp::Or => format!("({x} | {y})"),
            other => unreachable!("image coordinate op {other:?}"),
        }
    }

    fn cast(&self, x: N, d: DType) -> String {
        let (from, v) = (self.ctx.dtype(x), self.value(x));
        let t = value_type(d);
        if d == DType::Bool {
            return format!("(uchar)(({v}) != 0)");
        }
        if d == DType::F16 {
            return format!("pl_round_half((float)({v}))");
        }
        if d == DType::BF16 {
            return format!("pl_round_bf16((float)({v}))");
        }
        if from.is_float() && !d.is_float() {
            // The CPU backend's semantics: truncate to i64, saturating, NaN to 0; then wrap to the width.
            return format!("({t})convert_long_sat_rtz({v})");
        }
        format!("({t})({v})")
    }

    fn unary(&self, op: UnOp, x: N, d: DType) -> String {
        let v = self.value(x);
        let t = value_type(d);
        if !self.ctx.dtype(x).is_float() {
            return match op {
                UnOp::Neg => format!("({t})(-{v})"),
                UnOp::Not => format!("({t})!({v})"),
                UnOp::Abs => format!("({t})({v} < 0 ? -{v} : {v})"),
                UnOp::Sign => format!("({t})(({v} > 0) - ({v} < 0))"),
                UnOp::IsNan | UnOp::IsInf => format!("({t})0"),
                UnOp::Floor | UnOp::Ceil | UnOp::Round | UnOp::Trunc => v,
                _ => format!("({t})convert_long_sat_rtz({}((float){v}))", math_fn(op)),
            };
        }
        match op {
            UnOp::Neg => format!("-{v}"),
            UnOp::Not => format!("({t})!({v})"),
            UnOp::Recip => format!("1.0f / {v}"),
            UnOp::Sign => format!("({t})(({v} > 0) - ({v} < 0))"),
            UnOp::IsNan => format!("({t})isnan({v})"),
            UnOp::IsInf => format!("({t})isinf({v})"),
            _ => format!("{}({v})", math_fn(op)),
        }
    }

    fn binary(&self, op: BinOp, a: N, b: N) -> String {
        let (x, y) = (self.value(a), self.value(b));
        let d = self.ctx.dtype(a);
        let t = value_type(d);
        let f = d.is_float();
        let bits = d.size() * 8;
        match op {
            BinOp::Add => format!("({t})({x} + {y})"),
            BinOp::Sub => format!("({t})({x} - {y})"),
            BinOp::Mul => format!("({t})({x} * {y})"),
            BinOp::Div if f => format!("{x} / {y}"),
            BinOp::Rem if f => format!("fmod({x}, {y})"),
            BinOp::Div | BinOp::Rem => {
                let o = if op == BinOp::Div { "/" } else { "%" };
                match self.ctx.const_value(b) {
                    Some(c) if c.as_i64() != 0 => format!("({t})({x} {o} {y})"),
                    _ => format!("({y} == 0 ? ({t})0 : ({t})({x} {o} {y}))"),
                }
            }
            BinOp::Max if f => format!("pl_fmax({x}, {y})"),
            BinOp::Min if f => format!("pl_fmin({x}, {y})"),
            BinOp::Max => format!("({x} > {y} ? {x} : {y})"),
            BinOp::Min => format!("({x} < {y} ? {x} : {y})"),
            BinOp::Pow => format!("pow({x}, {y})"),
            BinOp::Atan2 => format!("atan2({x}, {y})"),
            BinOp::Lt => format!("(uchar)({x} < {y})"),
            BinOp::Le => format!("(uchar)({x} <= {y})"),
            BinOp::Eq => format!("(uchar)({x} == {y})"),
            BinOp::Ne => format!("(uchar)({x} != {y})"),
            BinOp::And => format!("({t})({x} & {y})"),
            BinOp::Or => format!("({t})({x} | {y})"),
            BinOp::Xor => format!("({t})({x} ^ {y})"),
            // Shifting by the width or more gives 0 (ONNX), not C's modulo-width shift.
            BinOp::Shl => format!("({t})((ulong){y} >= {bits} ? 0 : {x} << {y})"),
            BinOp::Shr => format!("({t})((ulong){y} >= {bits} ? ({x} < 0 ? -1 : 0) : {x} >> {y})"),
        }
    }
}

/// `a` combined with `b` by a reduction's operator.
fn combine(op: RedOp, float: bool, a: &str, b: &str) -> String {
    match (op, float) {
        (RedOp::Sum, _) => format!("{a} + {b}"),
        (RedOp::Prod, _) => format!("{a} * {b}"),
        (RedOp::Max, true) => format!("pl_fmax({a}, {b})"),
        (RedOp::Min, true) => format!("pl_fmin({a}, {b})"),
        (RedOp::Max, false) => format!("({b} > {a} ? {b} : {a})"),
        (RedOp::Min, false) => format!("({b} < {a} ? {b} : {a})"),
    }
}

fn math_fn(op: UnOp) -> &'static str {
    match op {
        UnOp::Exp => "exp",
        UnOp::Log => "log",
        UnOp::Sqrt => "sqrt",
        UnOp::Sin => "sin",
        UnOp::Cos => "cos",
        UnOp::Tan => "tan",
        UnOp::Tanh => "tanh",
        UnOp::Erf => "erf",
        UnOp::Floor => "floor",
        UnOp::Ceil => "ceil",
        UnOp::Round => "rint",
        UnOp::Trunc => "trunc",
        UnOp::Atan => "atan",
        UnOp::Asin => "asin",
        UnOp::Acos => "acos",
        UnOp::Abs => "fabs",
        _ => unreachable!("no math function for {op:?}"),
    }
}
