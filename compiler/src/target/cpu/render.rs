//! Renders one [`Kernel`] as freestanding C for the CPU backend.
//!
//! Signature: `void NAME(void *const *args, unsigned part, unsigned nparts)`; `args` are the output
//! buffer then [`Program::kernel_inputs`], each at its byte offset. The outer loops are cut into
//! `parts` units of work (the dispatch's `global[0]`) as [`super::split`] describes.
//!
//! Every node is rendered once (CSE) into a local, placed in the innermost loop among the variables it
//! depends on — loop-invariant values (weights, index arithmetic) are hoisted for free. A reduction is
//! an accumulator and a loop; the nodes of its body that depend on its variable go inside.

use std::collections::HashMap;
use std::fmt::Write;

use pilot_core::DType;

use super::split::{Loop, Split};
use crate::ir::{BinOp, Const, Ctx, Op, RedOp, UnOp, N};
use crate::program::{Kernel, Program};
use crate::target::scoping::{flat_index, free_vars_by};

use super::guards::Guards;
use super::peel::{self, Peel};
use super::period::Period;

/// A rendered kernel.
pub struct CKernel {
    pub name: String,
    pub source: String,
    /// Buffers in argument order (output first).
    pub args: Vec<u32>,
    /// Number of independent parts.
    pub parts: u32,
    /// The register-tile shapes this kernel may be rendered with (empty: it has no register tile),
    /// for [`super::tune`] to time.
    pub tilings: Vec<super::upcast::Tiling>,
}

pub fn ctype(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I8 => "i8",
        DType::U8 | DType::Bool => "u8",
        DType::I16 => "i16",
        DType::U16 => "u16",
        DType::I32 => "i32",
        DType::U32 => "u32",
        DType::I64 => "i64",
        DType::U64 => "u64",
    }
}

pub(crate) fn literal(c: Const, d: DType) -> String {
    match c {
        Const::Float(bits) => {
            let v = f64::from_bits(bits);
            let s = if v.is_nan() {
                "PL_NAN".to_string()
            } else if v.is_infinite() {
                if v > 0.0 {
                    "PL_INF".into()
                } else {
                    "(-PL_INF)".into()
                }
            } else {
                format!("{v:e}")
            };
            match d {
                DType::F64 => format!("((double){s})"),
                DType::F16 => format!("((f16){s})"),
                DType::BF16 => format!("((bf16){s})"),
                _ => format!("((float){s})"),
            }
        }
        Const::Int(i) if d == DType::I64 && i == i64::MIN => "(-0x7fffffffffffffffLL - 1)".into(),
        Const::Int(i) => match d {
            DType::U64 => format!("{}ULL", i as u64),
            DType::I64 => format!("{i}LL"),
            _ => format!("(({}){i}LL)", ctype(d)),
        },
    }
}

/// Free variables of every node under `root` (a reduction's own variable is bound, not free).
pub(super) fn free_vars(ctx: &Ctx, order: &[N]) -> HashMap<N, Vec<u32>> {
    free_vars_by(ctx, order, |n| ctx.children(n))
}

/// The signature and typed buffer pointers.
pub(super) fn header(p: &Program, name: &str, args: &[u32], out: &mut String) {
    let _ = writeln!(out, "void {name}(void *const *args, unsigned part, unsigned nparts) {{");
    for (i, &b) in args.iter().enumerate() {
        let t = ctype(p.bufs[b as usize].dtype);
        let q = if i == 0 { "" } else { "const " };
        let _ = writeln!(out, "  {q}{t} *restrict b{b} = ({q}{t} *)args[{i}];");
    }
}

/// Renders `k` (as [`super::upcast`] when it applies, else with the generic loop nest), with
/// register tiles sized for `unit`.
/// Renders `k` for `unit`; `tiling` picks one of the register-tile shapes the kernel offers
/// (`None`: the default shape).
pub fn render(p: &Program, k: &Kernel, unit: super::isa::VecUnit, tiling: Option<super::upcast::Tiling>) -> CKernel {
    if let Some(ck) = super::upcast::render(p, k, unit, tiling) {
        return ck;
    }
    render_generic(p, k, unit)
}

fn render_generic(p: &Program, k: &Kernel, unit: super::isa::VecUnit) -> CKernel {
    let ctx = &p.ctx;
    let mut args = vec![k.out];
    args.extend(p.kernel_inputs(k));
    let order = ctx.toposort(&[k.expr]);
    // Loop nesting: output vars in order, each reduce var nested under its reduce's scope.
    let mut depth: HashMap<u32, usize> = k.vars.iter().enumerate().map(|(i, &v)| (v, i + 1)).collect();
    let free = free_vars(ctx, &order);
    // Assign reduce vars a depth one below the deepest var their reduce depends on.
    for &n in order.iter().rev() {
        if let Op::Reduce { var, .. } = ctx.op(n) {
            let d = free[&n].iter().map(|v| depth.get(v).copied().unwrap_or(0)).max().unwrap_or(0);
            let d = d.max(k.vars.len());
            depth.insert(*var, depth.get(var).copied().unwrap_or(0).max(d + 1));
        }
    }
    let scope_of =
        |n: N| -> Option<u32> { free[&n].iter().copied().max_by_key(|v| depth.get(v).copied().unwrap_or(0)) };
    // Nodes per scope, in topological order (None = outside every loop).
    let mut by_scope: HashMap<Option<u32>, Vec<N>> = HashMap::new();
    for &n in &order {
        if matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) {
            continue;
        }
        by_scope.entry(scope_of(n)).or_default().push(n);
    }

    let mut r = Renderer::new(ctx, &args, by_scope);
    r.reduce_lanes = 2 * unit.lanes;
    let name = &k.name;
    header(p, name, &args, &mut r.out);
    let loops = k.vars.iter().zip(&k.shape).map(|(&var, &e)| Loop { var, extent: e as u64, step: 1 });
    let split = Split::new(loops.collect(), true);
    let parts = split.as_ref().map_or(1, Split::parts);
    r.emit_scope(None, 1);
    let store = format!("b{}[{}]", k.out, flat_index(k));
    if !ctx.has_reduce(k.expr) {
        let peels = Nest::plan(&r, k, &free);
        let inner = k.shape.last().copied().unwrap_or(1);
        let short_inner = inner > 1
            && inner <= SHORT_ROW_VECTORS * unit.lanes
            && k.vars.last().is_some_and(|&v| r.unit_stride(&free, v));
        let guards = k.vars.last().map(|&v| {
            let inner = r.by_scope.get(&Some(v)).map_or(&[][..], Vec::as_slice);
            Guards::new(ctx, &free, &order, v).with_period(Period::find(ctx, &free, inner, v))
        });
        let wide_inner =
            (inner >= WIDE_ROW_VECTORS * unit.lanes && crate::ir::transcendental(ctx, k.expr)).then_some(unit.lanes);
        let nest =
            Nest { k, free: &free, split: split.as_ref(), store: &store, peels, short_inner, wide_inner, guards };
        nest.emit(&mut r, 0, 1);
    } else {
        let mut indent = 1;
        let mut stored = false;
        for (i, (&v, &extent)) in k.vars.iter().zip(&k.shape).enumerate() {
            let header = split.as_ref().and_then(|s| s.header(v));
            let range = plain_range(split.as_ref(), v, extent);
            if let Some((lo, hi)) = range.filter(|_| i + 1 == k.vars.len() && extent > 1) {
                let guards = Guards::new(ctx, &free, &order, v);
                let span = LoopSpan { v, lo: &lo, hi: &hi, indent, pragma: "" };
                guards.emit_loop(&mut r, span, &mut |r, ind| {
                    r.emit_scope(Some(v), ind);
                    let root = r.value(k.expr);
                    let _ = writeln!(r.out, "{}{store} = {root};", "  ".repeat(ind));
                });
                stored = true;
                break;
            }
            open_loop(&mut r.out, indent, v, extent, 1, header);
            indent += 1;
            r.emit_scope(Some(v), indent);
        }
        if !stored {
            let root = r.value(k.expr);
            let _ = writeln!(r.out, "{}{store} = {root};", "  ".repeat(indent));
        }
        for i in (1..indent).rev() {
            let _ = writeln!(r.out, "{}}}", "  ".repeat(i));
        }
    }
    r.out.push_str("}\n");
    CKernel { name: name.clone(), source: r.out, args, parts, tilings: Vec::new() }
}

/// Opens the loop over `v` (one `{`): a constant where `extent` is 1, the parts' `header` where the
/// loop is split, else `0..extent` in steps of `step`.
pub(super) fn open_loop(out: &mut String, indent: usize, v: u32, extent: usize, step: usize, header: Option<String>) {
    let pad = "  ".repeat(indent);
    let _ = match header {
        _ if extent == 1 => writeln!(out, "{pad}{{ const i64 v{v} = 0;"),
        Some(header) => writeln!(out, "{pad}{header}"),
        None if step == 1 => writeln!(out, "{pad}for (i64 v{v} = 0; v{v} < {extent}; v{v}++) {{"),
        None => writeln!(out, "{pad}for (i64 v{v} = 0; v{v} < {extent}; v{v} += {step}) {{"),
    };
}

/// An innermost loop to emit: `v` over `lo..hi` (C expressions) at `indent`, headed by `pragma`.
#[derive(Clone, Copy)]
pub(super) struct LoopSpan<'a> {
    pub v: u32,
    pub lo: &'a str,
    pub hi: &'a str,
    pub indent: usize,
    pub pragma: &'a str,
}

/// The bounds (C expressions) of the loop over `v` when it runs over a plain range: not split by
/// the parts, or split alone; `None` where the parts fuse it with other loops into one counter.
fn plain_range(split: Option<&Split>, v: u32, extent: usize) -> Option<(String, String)> {
    match split.and_then(|s| s.range(v)) {
        Some(range) => Some(range),
        None if split.and_then(|s| s.header(v)).is_none() => Some(("0".to_string(), format!("{extent}"))),
        None => None,
    }
}

/// The most loop copies peeling may make of an elementwise kernel's innermost body.
const MAX_SEGMENTS: usize = 16;

/// Vectors from which an elementwise kernel's innermost loop is long enough for clang's own choice.
/// Up to this many, the loop is vectorized with its last partial vector masked (`PL_SHORT`) where
/// its loads are contiguous: otherwise clang's cost model keeps a row shorter than a vector scalar
/// (the 10-element interior rows of yolov8n's SiLU pad copies on 10×10 maps: 109 µs scalar, 10 µs
/// masked on Zen 4). Not where a load strides: masked gathers made orientation_lcnet's stride-2
/// phase-split copy 49 → 145 µs.
const SHORT_ROW_VECTORS: usize = 4;

/// Vectors from which an elementwise kernel's innermost loop with transcendental math is vectorized
/// at the unit's full width, four vectors per iteration (`PL_WIDE`): clang's own choice on a Zen 4,
/// one vector of 8 lanes, ran a swish at 0.58 ns per element, 16 lanes × 4 at 0.50.
const WIDE_ROW_VECTORS: usize = 16;

/// The loop nest of an elementwise kernel, each loop peeled where comparisons of its variable guard
/// the body ([`Peel`]): a concatenation's channel loop splits by source, a padded copy's row and
/// column loops into border and interior, so the innermost loop runs without the guards.
struct Nest<'k> {
    k: &'k Kernel,
    free: &'k HashMap<N, Vec<u32>>,
    split: Option<&'k Split>,
    store: &'k str,
    /// The peel of each loop, planned by [`Nest::plan`].
    peels: Vec<Option<Peel>>,
    /// The innermost loop is at most [`SHORT_ROW_VECTORS`] vectors long (and more than one element).
    short_inner: bool,
    /// The unit's lanes where the innermost loop is at least [`WIDE_ROW_VECTORS`] vectors long and
    /// computes transcendental math.
    wide_inner: Option<usize>,
    /// The innermost loop's guards.
    guards: Option<Guards<'k>>,
}

impl Nest<'_> {
    /// Each loop's peel, chosen for the innermost loop first (the one that vectorizes), then from
    /// the outermost inward, while the copies of the innermost body stay within [`MAX_SEGMENTS`]:
    /// an outer loop's cuts split a concatenation by source (loads of different sources, whose
    /// guards [`Guards`] cannot run together), a middle one's are mostly padded rows, whose guards
    /// [`Guards`] takes out of the inner loop at run time.
    fn plan(r: &Renderer<'_>, k: &Kernel, free: &HashMap<N, Vec<u32>>) -> Vec<Option<Peel>> {
        let mut budget = MAX_SEGMENTS;
        let n = k.vars.len();
        let order = (0..n).rev().take(1).chain(0..n.saturating_sub(1));
        let mut peels: Vec<Option<Peel>> = (0..n).map(|_| None).collect();
        for i in order {
            let (v, extent) = (k.vars[i], k.shape[i]);
            let nodes = r.by_scope.get(&Some(v)).map_or(&[][..], Vec::as_slice);
            let Some(peel) = (extent > 1).then(|| Peel::find(r.ctx, free, nodes, v)).flatten() else { continue };
            let copies = peel.cuts.len() + 1;
            if copies <= budget {
                budget /= copies;
                peels[i] = Some(peel);
            }
        }
        peels
    }

    /// Loops `i..` at `indent`.
    fn emit(&self, r: &mut Renderer<'_>, i: usize, indent: usize) {
        let pad = "  ".repeat(indent);
        let Some((&v, &extent)) = self.k.vars.get(i).zip(self.k.shape.get(i)) else {
            let root = r.value(self.k.expr);
            let _ = writeln!(r.out, "{pad}{} = {root};", self.store);
            return;
        };
        let nodes = r.by_scope.get(&Some(v)).cloned().unwrap_or_default();
        // A loop the parts split is peeled only where it is split alone, as a plain range.
        let header = self.split.and_then(|s| s.header(v));
        let bounds = plain_range(self.split, v, extent);
        let innermost = i + 1 == self.k.vars.len();
        let short = if self.short_inner && innermost { "PL_SHORT " } else { "" };
        // A long row is widened, unless peeled: a peeled row's segments may be short.
        let wide = self.wide_inner.filter(|_| innermost).map(|lanes| format!("PL_WIDE({lanes}) "));
        let pragma = if short.is_empty() { wide.as_deref().unwrap_or("") } else { short };
        let guards = self.guards.as_ref().filter(|_| innermost && extent > 1);
        let mut body = |r: &mut Renderer<'_>, ind: usize| {
            for &n in &nodes {
                r.emit(n, ind);
            }
            self.emit(r, i + 1, ind);
        };
        match (&self.peels[i], &bounds, guards) {
            (Some(peel), Some(bounds), _) => {
                peel::emit(r, self.free, peel, v, bounds, indent, short, guards, &mut body);
                return;
            }
            (None, Some((lo, hi)), Some(g)) => {
                g.emit_loop(r, LoopSpan { v, lo, hi, indent, pragma }, &mut body);
                return;
            }
            _ => {}
        }
        if header.is_none() && extent > 1 && !pragma.is_empty() {
            let _ = writeln!(r.out, "{pad}{}", pragma.trim_end());
        }
        open_loop(&mut r.out, indent, v, extent, 1, header);
        body(r, indent + 1);
        let _ = writeln!(r.out, "{pad}}}");
    }
}

pub(super) struct Renderer<'a> {
    pub ctx: &'a Ctx,
    /// C name of each emitted node; `@` stands for the current replica's suffix.
    pub names: HashMap<N, String>,
    pub out: String,
    pub by_scope: HashMap<Option<u32>, Vec<N>>,
    pub args: &'a [u32],
    /// Nodes emitted once per replica of a blocked loop (see `upcast`), named with `suffix`.
    pub blocked: std::collections::HashSet<N>,
    pub suffix: String,
    /// A variable rendered as an expression (the blocked variable plus the replica's offset).
    pub var_override: Option<(u32, String)>,
    /// A second variable rendered as an expression (a register tile's inner variable at a vector's
    /// offset), beside [`Renderer::var_override`].
    pub inner_override: Option<(u32, String)>,
    /// Comparisons whose value is known in the loop being emitted (see [`super::peel`]).
    pub known: HashMap<N, bool>,
    /// Nodes rendered as these C expressions instead of their own (see [`super::period`]).
    pub exprs: HashMap<N, String>,
    /// Partial results of an innermost reduction folded side by side (0: one at a time).
    pub reduce_lanes: usize,
}

impl<'a> Renderer<'a> {
    pub fn new(ctx: &'a Ctx, args: &'a [u32], by_scope: HashMap<Option<u32>, Vec<N>>) -> Renderer<'a> {
        Renderer {
            ctx,
            names: HashMap::new(),
            out: String::new(),
            by_scope,
            args,
            blocked: Default::default(),
            suffix: String::new(),
            var_override: None,
            inner_override: None,
            known: HashMap::new(),
            exprs: HashMap::new(),
            reduce_lanes: 0,
        }
    }
}

fn is_f(d: DType) -> bool {
    d.is_float()
}

impl Renderer<'_> {
    /// The C expression for an already emitted (or inline) node.
    pub fn value(&self, n: N) -> String {
        if let Some(&k) = self.known.get(&n) {
            return if k { "((u8)1)" } else { "((u8)0)" }.into();
        }
        if let Some(e) = self.exprs.get(&n) {
            return e.clone();
        }
        match self.ctx.op(n) {
            Op::Var(v) => [&self.inner_override, &self.var_override]
                .into_iter()
                .flatten()
                .find(|(o, _)| o == v)
                .map_or_else(|| format!("v{v}"), |(_, e)| e.clone()),
            Op::Const(c) => literal(*c, self.ctx.dtype(n)),
            _ => self.names[&n].replace('@', &self.suffix),
        }
    }

    /// Whether every load in the loop over `v` steps by one element per iteration or not at all
    /// (a masked vector of a strided load is a gather, slower than the scalar loop).
    fn unit_stride(&self, free: &HashMap<N, Vec<u32>>, v: u32) -> bool {
        self.by_scope.get(&Some(v)).is_some_and(|nodes| {
            nodes.iter().all(|&n| match *self.ctx.op(n) {
                Op::Load { index, .. } if free[&n].contains(&v) => {
                    super::tile::coefficient(self.ctx, free, index, v) == Some(1)
                }
                _ => true,
            })
        })
    }

    /// Emits the nodes of `scope` (again for each copy of a loop that is emitted more than once).
    fn emit_scope(&mut self, scope: Option<u32>, indent: usize) {
        let nodes = self.by_scope.get(&scope).cloned().unwrap_or_default();
        for n in nodes {
            self.emit(n, indent);
        }
    }

    pub fn emit(&mut self, n: N, indent: usize) {
        let pad = "  ".repeat(indent);
        let d = self.ctx.dtype(n);
        let t = ctype(d);
        let stored = if self.blocked.contains(&n) { format!("t{}@", n.0) } else { format!("t{}", n.0) };
        let name = stored.replace('@', &self.suffix);
        if self.known.contains_key(&n) || self.exprs.contains_key(&n) {
            return;
        }
        let expr = match self.ctx.op(n).clone() {
            Op::Var(_) | Op::Const(_) => return,
            Op::Load { buf, index, valid } => {
                debug_assert!(self.args.contains(&buf));
                let idx = self.value(index);
                match valid {
                    // The index is made safe instead of the load conditional, so the load can be
                    // vectorized: element 0 is read where the guard fails, then discarded.
                    Some(v) => {
                        let v = self.value(v);
                        format!("{v} ? b{buf}[{v} ? {idx} : 0] : ({t})0")
                    }
                    None => format!("b{buf}[{idx}]"),
                }
            }
            Op::Unary(op, x) => self.unary(op, x, d),
            Op::Binary(op, a, b) => self.binary(op, a, b),
            Op::Where(c, a, b) => format!("{} ? {} : {}", self.value(c), self.value(a), self.value(b)),
            Op::Cast(x) => {
                let from = self.ctx.dtype(x);
                let v = self.value(x);
                if d == DType::Bool {
                    format!("({v}) != 0")
                } else if is_f(from) && !is_f(d) {
                    format!("({t})pl_f2i((double)({v}))")
                } else if matches!(d, DType::F16 | DType::BF16) && from == DType::F64 {
                    // Through float: double→half needs a libgcc helper the loader does not provide.
                    format!("({t})(float)({v})")
                } else {
                    format!("({t})({v})")
                }
            }
            Op::Bitcast(x) => {
                let v = self.value(x);
                let from = ctype(self.ctx.dtype(x));
                format!("({{ {from} s_ = {v}; {t} d_; __builtin_memcpy(&d_, &s_, sizeof d_); d_; }})")
            }
            Op::Reduce { op, var, extent, body } => {
                let init = {
                    let c = self.ctx.reduce_identity_const(op, d).expect("identity");
                    literal(c, d)
                };
                let _ = writeln!(self.out, "{pad}{t} {name} = {init};");
                let lanes = self.reduce_lanes;
                if lanes > 0 && extent >= 2 * lanes as u64 && self.reads_along(var, body) {
                    self.emit_lane_reduction(n, op, var, extent, body, indent);
                    self.names.insert(n, stored);
                    return;
                }
                let _ = writeln!(self.out, "{pad}for (i64 v{var} = 0; v{var} < {extent}; v{var}++) {{");
                let _ = writeln!(self.out, "{pad}  PL_REASSOC");
                self.emit_scope(Some(var), indent + 1);
                let b = self.value(body);
                let step = fold(op, d, &name, &b);
                let _ = writeln!(self.out, "{pad}  {step}");
                let _ = writeln!(self.out, "{pad}}}");
                self.names.insert(n, stored);
                return;
            }
        };
        let _ = writeln!(self.out, "{pad}const {t} {name} = {expr};");
        self.names.insert(n, stored);
    }

    fn unary(&self, op: UnOp, x: N, d: DType) -> String {
        let v = self.value(x);
        let t = ctype(d);
        let from = self.ctx.dtype(x);
        if !is_f(from) {
            return match op {
                UnOp::Neg => format!("({t})(-{v})"),
                UnOp::Not => format!("!({v})"),
                UnOp::Abs => format!("({t})({v} < 0 ? -{v} : {v})"),
                UnOp::Sign => format!("({t})(({v} > 0) - ({v} < 0))"),
                UnOp::IsNan | UnOp::IsInf => "0".into(),
                _ => format!("({t})pl_f2i({}((double){v}))", math_fn(op)),
            };
        }
        let f32 = from == DType::F32;
        match op {
            UnOp::Neg => format!("-{v}"),
            UnOp::Not => format!("!({v})"),
            UnOp::Abs => narrow(d, format!("__builtin_fabs((double){v})")),
            UnOp::Sqrt if f32 => format!("__builtin_sqrtf({v})"),
            UnOp::Sqrt => narrow(d, format!("__builtin_sqrt((double){v})")),
            UnOp::Recip => format!("({t})1 / {v}"),
            UnOp::Exp if f32 => format!("pl_expf({v})"),
            UnOp::Tanh if f32 => format!("pl_tanhf({v})"),
            UnOp::Erf if f32 => format!("pl_erff({v})"),
            UnOp::Sign => format!("({t})(({v} > 0) - ({v} < 0))"),
            UnOp::IsNan => format!("({v} != {v})"),
            UnOp::IsInf => format!("({v} == PL_INF || {v} == -PL_INF)"),
            _ => narrow(d, format!("{}((double){v})", math_fn(op))),
        }
    }

    fn binary(&self, op: BinOp, a: N, b: N) -> String {
        let (x, y) = (self.value(a), self.value(b));
        let d = self.ctx.dtype(a);
        let t = ctype(d);
        let f = is_f(d);
        match op {
            BinOp::Add => format!("({t})({x} + {y})"),
            BinOp::Sub => format!("({t})({x} - {y})"),
            BinOp::Mul => format!("({t})({x} * {y})"),
            BinOp::Div if f => format!("{x} / {y}"),
            BinOp::Rem if f => narrow(d, format!("pl_fmod((double){x}, (double){y})")),
            BinOp::Div | BinOp::Rem => {
                let o = if op == BinOp::Div { "/" } else { "%" };
                format!("({y} == 0 ? ({t})0 : ({t})({x} {o} {y}))")
            }
            BinOp::Max if d == DType::F32 => format!("pl_fmaxf({x}, {y})"),
            BinOp::Min if d == DType::F32 => format!("pl_fminf({x}, {y})"),
            BinOp::Max if f => narrow(d, format!("pl_fmax((double){x}, (double){y})")),
            BinOp::Min if f => narrow(d, format!("pl_fmin((double){x}, (double){y})")),
            BinOp::Max => format!("({x} > {y} ? {x} : {y})"),
            BinOp::Min => format!("({x} < {y} ? {x} : {y})"),
            BinOp::Pow => narrow(d, format!("pl_pow((double){x}, (double){y})")),
            BinOp::Atan2 => narrow(d, format!("pl_atan2((double){x}, (double){y})")),
            BinOp::Lt => format!("{x} < {y}"),
            BinOp::Le => format!("{x} <= {y}"),
            BinOp::Eq => format!("{x} == {y}"),
            BinOp::Ne => format!("{x} != {y}"),
            BinOp::And => format!("({t})({x} & {y})"),
            BinOp::Or => format!("({t})({x} | {y})"),
            BinOp::Xor => format!("({t})({x} ^ {y})"),
            // Shifting by the width or more gives 0 (ONNX), not C's undefined behaviour.
            BinOp::Shl => format!("({t})((u64){y} >= {} ? 0 : {x} << {y})", d.size() * 8),
            BinOp::Shr => format!("({t})((u64){y} >= {} ? ({x} < 0 ? -1 : 0) : {x} >> {y})", d.size() * 8),
        }
    }
}

/// A double-valued C expression converted to `d`. Half goes through float: double→half needs a
/// libgcc helper (`__truncdfhf2`) the loader does not provide.
/// `max`/`min` of two floats of type `d`, NaN-propagating: single precision stays single (so a
/// vectorized fold keeps 16 lanes, not 8 doubles), other widths go through double.
fn float_fold(op: RedOp, d: DType, a: &str, b: &str) -> String {
    let f = if op == RedOp::Max { "pl_fmax" } else { "pl_fmin" };
    match d {
        DType::F32 => format!("{f}f({a}, {b})"),
        _ => narrow(d, format!("{f}({a}, {b})")),
    }
}

/// `acc = acc op value` for a reduction of `op` over `d`.
pub(super) fn fold(op: RedOp, d: DType, acc: &str, value: &str) -> String {
    match (op, is_f(d)) {
        (RedOp::Sum, _) => format!("{acc} += {value};"),
        (RedOp::Prod, _) => format!("{acc} *= {value};"),
        (RedOp::Max | RedOp::Min, true) => format!("{acc} = {};", float_fold(op, d, acc, value)),
        (RedOp::Max, false) => format!("{acc} = {value} > {acc} ? {value} : {acc};"),
        (RedOp::Min, false) => format!("{acc} = {value} < {acc} ? {value} : {acc};"),
    }
}

impl Renderer<'_> {
    /// Whether the innermost reduction over `var` reads every buffer it loads along `var` with
    /// unit stride (a row of a softmax or a normalization): then its lanes vectorize.
    fn reads_along(&self, var: u32, body: N) -> bool {
        let order = self.ctx.toposort(&[body]);
        if self.ctx.has_reduce(body) {
            return false;
        }
        let free = free_vars(self.ctx, &order);
        let loads: Vec<N> = order
            .iter()
            .copied()
            .filter(|&n| matches!(self.ctx.op(n), Op::Load { .. }) && free[&n].contains(&var))
            .collect();
        !loads.is_empty()
            && loads.iter().all(|&n| match *self.ctx.op(n) {
                Op::Load { index, .. } => super::tile::coefficient(self.ctx, &free, index, var) == Some(1),
                _ => false,
            })
    }

    /// The reduction `n` over `var` with `reduce_lanes` partial results folded side by side (a loop
    /// the C compiler vectorizes; sums are reassociated, as `PL_REASSOC` allows anyway), then the
    /// remainder, then the lanes folded into `n`'s variable, already declared with the identity.
    fn emit_lane_reduction(&mut self, n: N, op: RedOp, var: u32, extent: u64, body: N, indent: usize) {
        let pad = "  ".repeat(indent);
        let d = self.ctx.dtype(n);
        let (t, lanes) = (ctype(d), self.reduce_lanes);
        let name = format!("t{}", n.0);
        let init = literal(self.ctx.reduce_identity_const(op, d).expect("identity"), d);
        let nodes = self.by_scope.get(&Some(var)).cloned().unwrap_or_default();
        let full = extent / lanes as u64 * lanes as u64;
        let _ = writeln!(self.out, "{pad}{t} {name}_l[{lanes}] __attribute__((aligned(64)));");
        let _ = writeln!(self.out, "{pad}for (int l = 0; l < {lanes}; l++) {name}_l[l] = {init};");
        let _ = writeln!(self.out, "{pad}for (i64 v{var}_0 = 0; v{var}_0 < {full}; v{var}_0 += {lanes}) {{");
        let _ =
            writeln!(self.out, "{pad}  PL_SIMD for (i64 v{var} = v{var}_0; v{var} < v{var}_0 + {lanes}; v{var}++) {{");
        let names = self.names.clone();
        for &m in &nodes {
            self.emit(m, indent + 2);
        }
        let b = self.value(body);
        let _ = writeln!(self.out, "{pad}    {}", fold(op, d, &format!("{name}_l[v{var} - v{var}_0]"), &b));
        let _ = writeln!(self.out, "{pad}  }}");
        let _ = writeln!(self.out, "{pad}}}");
        self.names = names.clone();
        let _ = writeln!(self.out, "{pad}for (i64 v{var} = {full}; v{var} < {extent}; v{var}++) {{");
        for &m in &nodes {
            self.emit(m, indent + 1);
        }
        let b = self.value(body);
        let _ = writeln!(self.out, "{pad}  {}", fold(op, d, &name, &b));
        let _ = writeln!(self.out, "{pad}}}");
        self.names = names;
        let _ = writeln!(
            self.out,
            "{pad}for (int l = 0; l < {lanes}; l++) {}",
            fold(op, d, &name, &format!("{name}_l[l]"))
        );
    }
}

fn narrow(d: DType, expr: String) -> String {
    match d {
        DType::F16 => format!("(f16)(float)({expr})"),
        DType::BF16 => format!("(bf16)(float)({expr})"),
        _ => format!("({})({expr})", ctype(d)),
    }
}

fn math_fn(op: UnOp) -> &'static str {
    match op {
        UnOp::Exp => "pl_exp",
        UnOp::Log => "pl_log",
        UnOp::Sqrt => "__builtin_sqrt",
        UnOp::Sin => "pl_sin",
        UnOp::Cos => "pl_cos",
        UnOp::Tan => "pl_tan",
        UnOp::Tanh => "pl_tanh",
        UnOp::Erf => "pl_erf",
        UnOp::Floor => "pl_floor",
        UnOp::Ceil => "pl_ceil",
        UnOp::Round => "pl_rint",
        UnOp::Trunc => "pl_trunc",
        UnOp::Atan => "pl_atan",
        UnOp::Asin => "pl_asin",
        UnOp::Acos => "pl_acos",
        UnOp::Abs => "pl_fabs",
        _ => "",
    }
}
