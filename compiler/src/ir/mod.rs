//! The kernel IR: hash-consed scalar expressions over integer loop variables.
//!
//! A tensor value is an expression of fresh coordinate variables, one per dimension (see [`crate::lazy`]).
//! Movement ops (reshape, permute, expand, pad, shrink, flip) substitute index expressions for
//! variables; elementwise ops build on expressions; reductions bind fresh variables. A kernel is one
//! expression stored over one iteration space, so every elementwise chain fuses into its producer
//! and consumer for free. The same IR is interpreted (constant folding) and rendered (C, OpenCL C).
//!
//! Invariants: nodes are immutable and deduplicated (`Ctx::intern`); integer division and remainder
//! follow C (truncating) semantics everywhere — interpreter and renderers agree.

pub mod interp;
pub mod simplify;
pub mod subst;

use std::collections::HashMap;

use pilot_core::DType;

/// A node id in a [`Ctx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct N(pub u32);

/// A typed constant, stored so that it hashes: integers as i64, floats as f64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Const {
    Int(i64),
    Float(u64),
}

impl Const {
    pub fn float(v: f64) -> Const {
        // Canonical NaN and zero signs stay distinct: -0.0 matters for division.
        Const::Float(v.to_bits())
    }
    pub fn as_f64(self) -> f64 {
        match self {
            Const::Int(i) => i as f64,
            Const::Float(b) => f64::from_bits(b),
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Const::Int(i) => i,
            Const::Float(b) => f64::from_bits(b) as i64,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Not,
    Abs,
    Exp,
    Log,
    Sqrt,
    Recip,
    Sin,
    Cos,
    Tan,
    Tanh,
    Erf,
    Floor,
    Ceil,
    /// Round half to even (ONNX Round).
    Round,
    Trunc,
    Sign,
    IsNan,
    IsInf,
    Atan,
    Asin,
    Acos,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Float division, or truncating integer division.
    Div,
    /// C remainder (sign of the dividend).
    Rem,
    Max,
    Min,
    Pow,
    Lt,
    Le,
    Eq,
    Ne,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Atan2,
}

impl BinOp {
    pub fn is_compare(self) -> bool {
        matches!(self, BinOp::Lt | BinOp::Le | BinOp::Eq | BinOp::Ne)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// An integer loop variable (coordinate or reduction variable).
    Var(u32),
    Const(Const),
    /// `buf[index]` where `valid` holds, else zero. Buffers are ids of [`crate::program::Program`].
    Load {
        buf: u32,
        index: N,
        valid: Option<N>,
    },
    Unary(UnOp, N),
    Binary(BinOp, N, N),
    Where(N, N, N),
    /// Convert to the node's dtype.
    Cast(N),
    /// Reinterpret the bits as the node's dtype (same size).
    Bitcast(N),
    /// Fold `body` over `var` in `0..extent` with `op`.
    Reduce {
        op: RedOp,
        var: u32,
        extent: u64,
        body: N,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: Op,
    pub dtype: DType,
}

/// The dtype of index arithmetic.
pub const INDEX: DType = DType::I64;

/// The arena of nodes, with interning and constructors that simplify as they build.
#[derive(Default, Debug)]
pub struct Ctx {
    nodes: Vec<Node>,
    /// Whether a reduction is reachable from each node (kept at intern time: asked per lowered node).
    reduces: Vec<bool>,
    /// The longest path from each node to a leaf, in nodes (kept at intern time).
    depths: Vec<u32>,
    dedup: HashMap<Node, N>,
    /// Extent of every loop variable: `Var(v)` ranges over `0..var_extents[v]`.
    var_extents: Vec<u64>,
    /// The variable given to reduction `.0` when its body became `.1` (see [`subst::substitute`]).
    renames: HashMap<(N, N), u32>,
}

impl Ctx {
    pub fn new() -> Ctx {
        Ctx::default()
    }

    pub fn node(&self, n: N) -> &Node {
        &self.nodes[n.0 as usize]
    }

    pub fn op(&self, n: N) -> &Op {
        &self.nodes[n.0 as usize].op
    }

    pub fn dtype(&self, n: N) -> DType {
        self.nodes[n.0 as usize].dtype
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Interns a node as is (no simplification).
    pub fn intern(&mut self, op: Op, dtype: DType) -> N {
        let node = Node { op, dtype };
        if let Some(&n) = self.dedup.get(&node) {
            return n;
        }
        let n = N(self.nodes.len() as u32);
        self.nodes.push(node.clone());
        let children = self.children(n);
        let reduces = matches!(node.op, Op::Reduce { .. }) || children.iter().any(|c| self.reduces[c.0 as usize]);
        self.reduces.push(reduces);
        let depth = children.iter().map(|c| self.depths[c.0 as usize]).max().unwrap_or(0).saturating_add(1);
        self.depths.push(depth);
        self.dedup.insert(node, n);
        n
    }

    pub fn var(&mut self, v: u32) -> N {
        self.intern(Op::Var(v), INDEX)
    }

    /// A fresh loop variable over `0..extent`. Variables are never reused, so substitution cannot
    /// capture one, and every variable's range is known wherever it appears.
    pub fn fresh_var(&mut self, extent: u64) -> u32 {
        self.var_extents.push(extent);
        self.var_extents.len() as u32 - 1
    }

    /// The fresh variable for reduction `reduce` rebuilt with body `body`, the same on every call.
    pub fn renamed_var(&mut self, reduce: N, body: N, extent: u64) -> u32 {
        if let Some(&v) = self.renames.get(&(reduce, body)) {
            return v;
        }
        let v = self.fresh_var(extent);
        self.renames.insert((reduce, body), v);
        v
    }

    /// Fresh variables for the coordinates of `shape`.
    pub fn fresh_vars(&mut self, shape: &[usize]) -> Vec<u32> {
        shape.iter().map(|&d| self.fresh_var(d as u64)).collect()
    }

    /// Extent of a loop variable.
    pub fn var_extent(&self, var: u32) -> u64 {
        self.var_extents[var as usize]
    }

    pub fn int(&mut self, v: i64) -> N {
        self.intern(Op::Const(Const::Int(v)), INDEX)
    }

    /// A constant of `dtype` with value `v` (converted as a C cast would).
    pub fn constant(&mut self, dtype: DType, v: f64) -> N {
        // Floats are rounded to their type, so folding sees the value compiled code uses.
        let c = match dtype {
            DType::F32 => Const::float(v as f32 as f64),
            DType::F16 => Const::float(half::f16::from_f64(v).to_f64()),
            DType::BF16 => Const::float(half::bf16::from_f64(v).to_f64()),
            DType::F64 => Const::float(v),
            _ => Const::Int(cast_int(dtype, v)),
        };
        self.intern(Op::Const(c), dtype)
    }

    pub fn const_value(&self, n: N) -> Option<Const> {
        match self.op(n) {
            Op::Const(c) => Some(*c),
            _ => None,
        }
    }

    pub fn load(&mut self, buf: u32, dtype: DType, index: N, valid: Option<N>) -> N {
        let valid = match valid.map(|v| self.const_value(v)) {
            Some(Some(c)) if c.as_i64() != 0 => None,
            Some(Some(_)) => return self.constant(dtype, 0.0),
            _ => valid,
        };
        self.intern(Op::Load { buf, index, valid }, dtype)
    }

    pub fn unary(&mut self, op: UnOp, x: N) -> N {
        let dtype = match op {
            UnOp::Not | UnOp::IsNan | UnOp::IsInf => DType::Bool,
            _ => self.dtype(x),
        };
        if let Some(c) = self.const_value(x) {
            let v = interp::unary(op, self.dtype(x), c);
            return self.intern(Op::Const(v), dtype);
        }
        self.intern(Op::Unary(op, x), dtype)
    }

    pub fn binary(&mut self, op: BinOp, a: N, b: N) -> N {
        let dtype = if op.is_compare() { DType::Bool } else { self.dtype(a) };
        debug_assert_eq!(self.dtype(a), self.dtype(b), "binary {op:?} on mixed dtypes");
        if let (Some(x), Some(y)) = (self.const_value(a), self.const_value(b)) {
            if let Some(v) = interp::binary(op, self.dtype(a), x, y) {
                return self.intern(Op::Const(v), dtype);
            }
        }
        if let Some(n) = simplify::binary(self, op, a, b) {
            return n;
        }
        self.intern(Op::Binary(op, a, b), dtype)
    }

    pub fn add(&mut self, a: N, b: N) -> N {
        self.binary(BinOp::Add, a, b)
    }
    pub fn sub(&mut self, a: N, b: N) -> N {
        self.binary(BinOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: N, b: N) -> N {
        self.binary(BinOp::Mul, a, b)
    }

    /// Index arithmetic helpers with an integer constant.
    pub fn add_i(&mut self, a: N, k: i64) -> N {
        let k = self.int(k);
        self.add(a, k)
    }
    pub fn mul_i(&mut self, a: N, k: i64) -> N {
        let k = self.int(k);
        self.mul(a, k)
    }
    pub fn div_i(&mut self, a: N, k: i64) -> N {
        let k = self.int(k);
        self.binary(BinOp::Div, a, k)
    }
    pub fn rem_i(&mut self, a: N, k: i64) -> N {
        let k = self.int(k);
        self.binary(BinOp::Rem, a, k)
    }
    pub fn lt_i(&mut self, a: N, k: i64) -> N {
        let k = self.int(k);
        self.binary(BinOp::Lt, a, k)
    }
    /// `a >= k` as `!(a < k)`.
    pub fn ge_i(&mut self, a: N, k: i64) -> N {
        let lt = self.lt_i(a, k);
        self.unary(UnOp::Not, lt)
    }
    pub fn and(&mut self, a: N, b: N) -> N {
        self.binary(BinOp::And, a, b)
    }

    pub fn where_(&mut self, c: N, a: N, b: N) -> N {
        if let Some(k) = self.const_value(c) {
            return if k.as_i64() != 0 { a } else { b };
        }
        if a == b {
            return a;
        }
        // A load guarded by `c` already reads as zero where `c` fails, converted or not.
        if self.const_value(b).is_some_and(|k| k.as_f64() == 0.0) {
            let read = match self.op(a) {
                Op::Cast(x) => *x,
                _ => a,
            };
            if let Op::Load { valid: Some(v), .. } = self.op(read) {
                if *v == c {
                    return a;
                }
            }
        }
        self.intern(Op::Where(c, a, b), self.dtype(a))
    }

    pub fn cast(&mut self, x: N, dtype: DType) -> N {
        if self.dtype(x) == dtype {
            return x;
        }
        if let Some(c) = self.const_value(x) {
            let v = if dtype.is_float() {
                Const::float(c.as_f64())
            } else if dtype == DType::Bool {
                Const::Int((c.as_f64() != 0.0) as i64)
            } else if let Const::Int(i) = c {
                Const::Int(wrap_int(dtype, i))
            } else {
                Const::Int(cast_int(dtype, c.as_f64()))
            };
            return self.intern(Op::Const(v), dtype);
        }
        self.intern(Op::Cast(x), dtype)
    }

    pub fn bitcast(&mut self, x: N, dtype: DType) -> N {
        if self.dtype(x) == dtype {
            return x;
        }
        self.intern(Op::Bitcast(x), dtype)
    }

    /// Reduces `body` (which may use `var`) over `0..extent`.
    ///
    /// Sums and products of float16 accumulate in float32 and round once at the end (as
    /// mixed-precision runtimes and tinygrad do): a float16 accumulator loses a bit of the running
    /// total at every step. A float16 body that is itself such a rounded float32 reduction (a
    /// convolution's nested window and channel loops) is taken before its rounding.
    pub fn reduce(&mut self, op: RedOp, var: u32, extent: u64, body: N) -> N {
        if extent == 1 {
            let zero = self.int(0);
            return subst::substitute(self, body, &HashMap::from([(var, zero)]), None);
        }
        let dtype = self.dtype(body);
        if matches!(dtype, DType::F16 | DType::BF16) && matches!(op, RedOp::Sum | RedOp::Prod) {
            let wide = match *self.op(body) {
                Op::Cast(inner) if self.dtype(inner) == DType::F32 && matches!(self.op(inner), Op::Reduce { .. }) => {
                    inner
                }
                _ => self.cast(body, DType::F32),
            };
            let acc = self.intern(Op::Reduce { op, var, extent, body: wide }, DType::F32);
            return self.cast(acc, dtype);
        }
        self.intern(Op::Reduce { op, var, extent, body }, dtype)
    }

    /// The identity element of `op` for `dtype`.
    pub fn reduce_identity(&mut self, op: RedOp, dtype: DType) -> N {
        let v = match op {
            RedOp::Sum => 0.0,
            RedOp::Prod => 1.0,
            RedOp::Max => min_value(dtype),
            RedOp::Min => max_value(dtype),
        };
        self.constant(dtype, v)
    }

    /// The children of a node, in order.
    pub fn children(&self, n: N) -> Vec<N> {
        match self.op(n) {
            Op::Var(_) | Op::Const(_) => vec![],
            Op::Load { index, valid, .. } => std::iter::once(*index).chain(*valid).collect(),
            Op::Unary(_, x) | Op::Cast(x) | Op::Bitcast(x) => vec![*x],
            Op::Binary(_, a, b) => vec![*a, *b],
            Op::Where(c, a, b) => vec![*c, *a, *b],
            Op::Reduce { body, .. } => vec![*body],
        }
    }

    /// All nodes reachable from `roots`, children before parents. Costs O(nodes reached), not
    /// O(nodes in the context): it runs once per kernel and per lowered node.
    pub fn toposort(&self, roots: &[N]) -> Vec<N> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut stack: Vec<(N, bool)> = roots.iter().rev().map(|&r| (r, false)).collect();
        while let Some((n, expanded)) = stack.pop() {
            if expanded {
                out.push(n);
                continue;
            }
            if !seen.insert(n.0) {
                continue;
            }
            stack.push((n, true));
            for c in self.children(n).into_iter().rev() {
                if !seen.contains(&c.0) {
                    stack.push((c, false));
                }
            }
        }
        out
    }

    /// Buffers loaded anywhere under `root`.
    pub fn loads(&self, root: N) -> Vec<u32> {
        let mut bufs: Vec<u32> = self
            .toposort(&[root])
            .into_iter()
            .filter_map(|n| match self.op(n) {
                Op::Load { buf, .. } => Some(*buf),
                _ => None,
            })
            .collect();
        bufs.sort_unstable();
        bufs.dedup();
        bufs
    }

    /// Whether any reduction occurs under `root`.
    pub fn has_reduce(&self, root: N) -> bool {
        self.reduces[root.0 as usize]
    }

    /// The longest path from `root` to a leaf, in nodes (1 for a leaf).
    pub fn depth(&self, root: N) -> u32 {
        self.depths[root.0 as usize]
    }

    /// Number of non-trivial operations under `root` (a cost estimate per output element).
    pub fn cost(&self, root: N) -> usize {
        self.cost_capped(root, usize::MAX)
    }

    /// [`Ctx::cost`], but counting stops at `cap`: the work is bounded by what is visited before
    /// the cap, so threshold tests on long fused chains stay cheap.
    pub fn cost_capped(&self, root: N, cap: usize) -> usize {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![root];
        let mut count = 0;
        while let Some(n) = stack.pop() {
            if count >= cap {
                break;
            }
            if !seen.insert(n.0) {
                continue;
            }
            if matches!(self.op(n), Op::Unary(..) | Op::Binary(..) | Op::Where(..) | Op::Reduce { .. })
                && self.dtype(n) != INDEX
            {
                count += 1;
            }
            stack.extend(self.children(n));
        }
        count
    }
}

/// Converts a float to an integer dtype as C would for in-range values (truncation), saturating.
pub fn cast_int(dtype: DType, v: f64) -> i64 {
    if dtype == DType::Bool {
        return (v != 0.0) as i64;
    }
    if v.is_nan() {
        return 0;
    }
    wrap_int(dtype, v.clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

/// Wraps an i64 into `dtype`'s range (two's complement), as a C conversion does.
pub fn wrap_int(dtype: DType, i: i64) -> i64 {
    match dtype {
        DType::I8 => i as i8 as i64,
        DType::U8 => i as u8 as i64,
        DType::I16 => i as i16 as i64,
        DType::U16 => i as u16 as i64,
        DType::I32 => i as i32 as i64,
        DType::U32 => i as u32 as i64,
        DType::Bool => (i != 0) as i64,
        _ => i,
    }
}

pub fn min_value(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => f64::NEG_INFINITY,
        DType::I8 => i8::MIN as f64,
        DType::I16 => i16::MIN as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
        _ => 0.0,
    }
}

pub fn max_value(dtype: DType) -> f64 {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 => f64::INFINITY,
        DType::I8 => i8::MAX as f64,
        DType::I16 => i16::MAX as f64,
        DType::I32 => i32::MAX as f64,
        DType::I64 => i64::MAX as f64,
        DType::U8 => u8::MAX as f64,
        DType::U16 => u16::MAX as f64,
        DType::U32 => u32::MAX as f64,
        DType::U64 => u64::MAX as f64,
        DType::Bool => 1.0,
    }
}

/// Whether `root` computes a transcendental function (`pl_expf`, `pl_tanhf`, ...): tens of cycles
/// per element in scalar code, a few in a vectorized loop.
pub fn transcendental(ctx: &Ctx, root: N) -> bool {
    ctx.toposort(&[root]).into_iter().any(|n| {
        matches!(ctx.op(n), Op::Unary(op, _) if matches!(op, UnOp::Exp | UnOp::Log | UnOp::Tanh | UnOp::Erf
            | UnOp::Sin | UnOp::Cos | UnOp::Tan | UnOp::Atan | UnOp::Asin | UnOp::Acos))
    })
}

/// Floating-point operations executed per evaluation of `root`, counting reduction bodies once per
/// iteration (index arithmetic, padding guards and other integer or boolean work excluded). A value
/// used several times (an activation reads its input twice) is computed once: the expression is a
/// DAG, evaluated as the code generator emits it.
pub fn flops_per_point(ctx: &Ctx, root: N) -> u64 {
    fn go(ctx: &Ctx, root: N, memo: &mut HashMap<N, u64>) -> u64 {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![root];
        let mut total = 0;
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            match *ctx.op(n) {
                Op::Reduce { extent, body, .. } => {
                    let per = match memo.get(&n) {
                        Some(&f) => f,
                        None => {
                            let f = extent * (go(ctx, body, memo) + 1);
                            memo.insert(n, f);
                            f
                        }
                    };
                    total += per;
                }
                Op::Unary(..) | Op::Binary(..) | Op::Where(..) => {
                    total += u64::from(ctx.dtype(n).is_float());
                    stack.extend(ctx.children(n));
                }
                _ => stack.extend(ctx.children(n)),
            }
        }
        total
    }
    go(ctx, root, &mut HashMap::new())
}

/// Checks the IR invariants under `roots`; returns the first violation. Run after every lowering
/// step in debug builds (see [`crate::program::Program::validate`]).
/// - every reduction variable is bound by exactly one Reduce node, and used only inside it;
/// - operand dtypes agree (binary operands, where branches), conditions and guards are bool,
///   indices are int64.
pub fn validate(ctx: &Ctx, roots: &[N]) -> Result<(), String> {
    let order = ctx.toposort(roots);
    let mut binder: HashMap<u32, N> = HashMap::new();
    for &n in &order {
        match ctx.op(n) {
            Op::Reduce { var, .. } => {
                if let Some(&other) = binder.get(var) {
                    if other != n {
                        return Err(format!("variable v{var} is bound by reductions %{} and %{}", other.0, n.0));
                    }
                }
                binder.insert(*var, n);
            }
            Op::Binary(op, a, b) if ctx.dtype(*a) != ctx.dtype(*b) => {
                return Err(format!("%{}: {op:?} of {} and {}", n.0, ctx.dtype(*a), ctx.dtype(*b)));
            }
            Op::Where(c, a, b) if ctx.dtype(*c) != DType::Bool || ctx.dtype(*a) != ctx.dtype(*b) => {
                return Err(format!(
                    "%{}: where with condition {} and branches {}/{}",
                    n.0,
                    ctx.dtype(*c),
                    ctx.dtype(*a),
                    ctx.dtype(*b)
                ));
            }
            Op::Load { index, valid, .. }
                if ctx.dtype(*index) != INDEX || valid.is_some_and(|v| ctx.dtype(v) != DType::Bool) =>
            {
                return Err(format!("%{}: load index {} / guard", n.0, ctx.dtype(*index)));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod simplify_tests;
#[cfg(test)]
mod tests;
