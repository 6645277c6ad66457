//! Renders one [`Kernel`] as a freestanding C11 translation unit for the CPU backend.
//!
//! ```c
//! void NAME(void *const *args, unsigned part, unsigned nparts);
//! ```
//! `args` are the kernel's buffers in [`CKernel::args`] order: the output, then
//! [`Program::kernel_inputs`]. The loops run over the kernel's variables in order (variables of
//! extent 1 are the constant 0); the outermost loop with extent > 1 is split into `nparts`
//! contiguous ranges, `[extent*part/nparts, extent*(part+1)/nparts)`, and its extent is
//! [`CKernel::parts`] (1 when there is no loop).
//!
//! Scheduling: every node is rendered once (CSE by node id) into a `const` local, placed in the
//! innermost open loop among the variables it depends on — so a node that does not depend on a
//! loop's variable is hoisted out of it (weight loads, index arithmetic). A `Reduce` is an
//! accumulator and a loop placed the same way; the nodes of its body that depend on its variable
//! go inside the loop, the others are hoisted. Nested reductions nest. Float sum/product loops carry
//! `#pragma clang fp reassociate(on)` so that they may vectorize (nothing else is reassociated).
//!
//! Guarded loads are `guard ? buf[index] : 0`: the guard and the index are computed first, and the
//! buffer is read only when the guard holds (the index may be out of range otherwise).

use std::collections::{HashMap, HashSet};

use super::cexpr::{self, BinHints, Uses};
use super::cmath;
use crate::error::{CompileError, Result};
use crate::ir::{Op, RedOp, INDEX, N};
use crate::lazy::strides;
use crate::program::{Kernel, Program};

/// A kernel rendered as a C translation unit (math prelude included).
#[derive(Clone, Debug)]
pub struct CKernel {
    /// The entry symbol (the kernel's name).
    pub name: String,
    pub source: String,
    /// Program buffers in argument order: the output, then the inputs in ascending id order.
    pub args: Vec<u32>,
    /// The dispatch's part count (`global[0]`).
    pub parts: u32,
}

/// Free variables and whether a load occurs, per node.
#[derive(Clone, Debug, Default)]
struct Info {
    free: Vec<u32>,
    loads: bool,
}

/// An open scope: the top of the function or the body of a loop over `var`.
#[derive(Default)]
struct Scope {
    var: Option<u32>,
    lines: Vec<String>,
    /// Nodes whose locals live in this scope (forgotten when it closes).
    emitted: Vec<N>,
}

struct Renderer<'a> {
    p: &'a Program,
    kernel: &'a str,
    info: HashMap<N, Info>,
    names: HashMap<N, String>,
    scopes: Vec<Scope>,
    /// Kernel variables of extent 1: the constant 0, visible everywhere.
    unit_vars: HashSet<u32>,
    uses: Uses,
}

const RESERVED: &[&str] = &[
    "args", "part", "nparts", "lo", "hi", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "auto",
    "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for",
    "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof", "static",
    "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
];

/// Whether `name` can be a kernel's C symbol: an identifier that no generated name can collide with.
pub fn valid_symbol(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let local = name.len() > 1
        && matches!(name.as_bytes()[0], b't' | b'a' | b'v' | b'b')
        && name[1..].bytes().all(|c| c.is_ascii_digit());
    first_ok
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && !name.starts_with("pl_")
        && !name.starts_with("__")
        && !local
        && !RESERVED.contains(&name)
}

fn merge(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = a.iter().chain(b).copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn indent(lines: Vec<String>) -> impl Iterator<Item = String> {
    lines.into_iter().map(|l| format!("    {l}"))
}

impl<'a> Renderer<'a> {
    fn err(&self, reason: impl Into<String>) -> CompileError {
        CompileError::Codegen { kernel: self.kernel.to_string(), reason: reason.into() }
    }

    fn analyze(&mut self, root: N) {
        let ctx = &self.p.ctx;
        for n in ctx.toposort(&[root]) {
            let mut info = Info::default();
            for c in ctx.children(n) {
                let ci = &self.info[&c];
                info.free = merge(&info.free, &ci.free);
                info.loads |= ci.loads;
            }
            match ctx.op(n) {
                Op::Var(v) => info.free = vec![*v],
                Op::Load { .. } => info.loads = true,
                Op::Reduce { var, .. } => info.free.retain(|v| v != var),
                _ => {}
            }
            self.info.insert(n, info);
        }
    }

    /// The scope a node belongs in: the innermost one binding any of its free variables.
    fn level(&self, n: N) -> Result<usize> {
        let mut level = 0;
        for v in &self.info[&n].free {
            if self.unit_vars.contains(v) {
                continue;
            }
            match self.scopes.iter().rposition(|s| s.var == Some(*v)) {
                Some(i) => level = level.max(i),
                None => return Err(self.err(format!("variable v{v} is used outside its loop"))),
            }
        }
        Ok(level)
    }

    /// Variables and constants are spelled inline; everything else is a local.
    fn atom(&self, n: N) -> Option<String> {
        match self.p.ctx.op(n) {
            Op::Var(v) if self.unit_vars.contains(v) => Some("0ll".to_string()),
            Op::Var(v) => Some(format!("v{v}")),
            Op::Const(c) => Some(cexpr::constant(self.p.ctx.dtype(n), *c)),
            _ => None,
        }
    }

    fn name(&self, n: N) -> String {
        self.atom(n).unwrap_or_else(|| self.names[&n].clone())
    }

    fn ready(&self, n: N) -> bool {
        self.names.contains_key(&n) || self.atom(n).is_some()
    }

    /// Renders `root` and everything it needs that is not rendered yet; returns its spelling.
    fn ensure(&mut self, root: N) -> Result<String> {
        let mut stack = vec![(root, false)];
        let mut seen = HashSet::new();
        while let Some((n, expanded)) = stack.pop() {
            if self.ready(n) {
                continue;
            }
            if expanded || matches!(self.p.ctx.op(n), Op::Reduce { .. }) {
                self.emit(n)?;
                continue;
            }
            if !seen.insert(n) {
                continue;
            }
            stack.push((n, true));
            for c in self.p.ctx.children(n).into_iter().rev() {
                if !self.ready(c) {
                    stack.push((c, false));
                }
            }
        }
        Ok(self.name(root))
    }

    fn place(&mut self, n: N, level: usize, lines: Vec<String>, name: String) {
        let scope = &mut self.scopes[level];
        scope.lines.extend(lines);
        scope.emitted.push(n);
        self.names.insert(n, name);
    }

    /// Emits one node whose operands are all rendered (a reduction renders its own body).
    fn emit(&mut self, n: N) -> Result<()> {
        let ctx = &self.p.ctx;
        let d = ctx.dtype(n);
        let op = ctx.op(n).clone();
        if let Op::Reduce { op, var, extent, body } = op {
            return self.emit_reduce(n, op, var, extent, body);
        }
        let kids: Vec<String> = ctx.children(n).into_iter().map(|c| self.name(c)).collect();
        let kernel = self.kernel;
        let bad = |reason: String| CompileError::Codegen { kernel: kernel.to_string(), reason };
        let uses = &mut self.uses;
        let expr = match op {
            Op::Load { buf, valid, .. } => {
                let v = cexpr::load(d, &format!("b{buf}"), &kids[0], uses);
                match valid {
                    Some(_) => format!("({} ? {v} : 0)", kids[1]),
                    None => v,
                }
            }
            Op::Unary(u, x) => cexpr::unary(u, ctx.dtype(x), &kids[0], uses),
            Op::Binary(b, x, y) => {
                let hints = BinHints { rhs: ctx.const_value(y), index: d == INDEX && !self.info[&n].loads };
                cexpr::binary(b, ctx.dtype(x), &kids[0], &kids[1], hints, uses).map_err(bad)?
            }
            Op::Where(..) => format!("({} ? {} : {})", kids[0], kids[1], kids[2]),
            Op::Cast(x) => cexpr::cast(ctx.dtype(x), d, &kids[0], uses),
            Op::Bitcast(x) if ctx.dtype(x).size() != d.size() => {
                return Err(bad(format!("bitcast from {} to {d}", ctx.dtype(x))));
            }
            Op::Bitcast(x) => cexpr::bitcast(ctx.dtype(x), d, &kids[0], uses),
            Op::Var(_) | Op::Const(_) | Op::Reduce { .. } => unreachable!("atoms and reductions are not emitted here"),
        };
        let local = format!("t{}", n.0);
        let line = format!("const {} {local} = {expr};", cexpr::value_type(d));
        let level = self.level(n)?;
        self.place(n, level, vec![line], local);
        Ok(())
    }

    fn emit_reduce(&mut self, n: N, op: RedOp, var: u32, extent: u64, body: N) -> Result<()> {
        let d = self.p.ctx.dtype(n);
        let level = self.level(n)?;
        // Scopes deeper than `level` do not enclose this loop; they resume after it.
        let suspended = self.scopes.split_off(level + 1);
        self.scopes.push(Scope { var: Some(var), ..Scope::default() });
        let x = self.ensure(body);
        let scope = self.scopes.pop().expect("the reduction's scope");
        for e in &scope.emitted {
            self.names.remove(e);
        }
        let x = x?;
        let acc = format!("a{}", n.0);
        let identity = self.p.ctx.reduce_identity_const(op, d).expect("every reduction has an identity");
        let hints = BinHints::default();
        let next = cexpr::binary(cexpr::combine_op(op), d, &acc, &x, hints, &mut self.uses).map_err(|e| self.err(e))?;
        let mut lines = vec![
            format!("{} {acc} = {};", cexpr::value_type(d), cexpr::constant(d, identity)),
            format!("for (i64 v{var} = 0; v{var} < {extent}ll; v{var}++) {{"),
        ];
        if d.is_float() && matches!(op, RedOp::Sum | RedOp::Prod) {
            lines.push("    #pragma clang fp reassociate(on)".to_string());
        }
        lines.extend(indent(scope.lines));
        lines.push(format!("    {acc} = {next};"));
        lines.push("}".to_string());
        self.place(n, level, lines, acc);
        self.scopes.extend(suspended);
        Ok(())
    }
}

/// Renders kernel `k` of `p`. Errors name the kernel: an invalid symbol, a variable used outside its
/// loop, an operation C cannot express.
pub fn render(p: &Program, k: &Kernel) -> Result<CKernel> {
    let err = |reason: String| CompileError::Codegen { kernel: k.name.clone(), reason };
    if !valid_symbol(&k.name) {
        return Err(err("not usable as a C symbol".to_string()));
    }
    if k.vars.len() != k.shape.len() {
        return Err(err(format!("{} variables for a rank-{} shape", k.vars.len(), k.shape.len())));
    }
    let inputs = p.kernel_inputs(k);
    if p.ctx.loads(k.expr).contains(&k.out) {
        return Err(err("the kernel reads its own output".to_string()));
    }
    let out_dtype = p.bufs.get(k.out as usize).ok_or_else(|| err(format!("output buffer {} missing", k.out)))?.dtype;
    if out_dtype != p.ctx.dtype(k.expr) {
        return Err(err(format!("a {} value stored into a {out_dtype} buffer", p.ctx.dtype(k.expr))));
    }
    let loops: Vec<(u32, usize)> =
        k.vars.iter().copied().zip(k.shape.iter().copied()).filter(|&(_, e)| e > 1).collect();
    let mut r = Renderer {
        p,
        kernel: &k.name,
        info: HashMap::new(),
        names: HashMap::new(),
        scopes: vec![Scope::default()],
        unit_vars: k.vars.iter().zip(&k.shape).filter(|(_, &e)| e <= 1).map(|(&v, _)| v).collect(),
        uses: Uses::new(),
    };
    r.scopes.extend(loops.iter().map(|&(v, _)| Scope { var: Some(v), ..Scope::default() }));
    r.analyze(k.expr);
    let value = r.ensure(k.expr)?;
    let flat: Vec<String> = k
        .vars
        .iter()
        .zip(strides(&k.shape))
        .zip(&k.shape)
        .filter(|(_, &e)| e > 1)
        .map(|((v, s), _)| if s == 1 { format!("v{v}") } else { format!("v{v} * {s}ll") })
        .collect();
    let index = if flat.is_empty() { "0".to_string() } else { flat.join(" + ") };
    let stored = cexpr::store(out_dtype, &value, &mut r.uses);
    r.scopes.last_mut().expect("top scope").lines.push(format!("b{}[{index}] = {stored};", k.out));
    while r.scopes.len() > 1 {
        let s = r.scopes.pop().expect("a loop scope");
        let v = s.var.expect("loops have variables");
        let extent = loops[r.scopes.len() - 1].1;
        let (lo, hi) = if r.scopes.len() == 1 {
            ("lo".to_string(), "hi".to_string())
        } else {
            ("0".into(), format!("{extent}ll"))
        };
        let mut lines = vec![format!("for (i64 v{v} = {lo}; v{v} < {hi}; v{v}++) {{")];
        lines.extend(indent(s.lines));
        lines.push("}".to_string());
        r.scopes.last_mut().expect("top scope").lines.extend(lines);
    }

    let mut src = format!("/* pilot-compiler: kernel {} */\n", k.name);
    src.push_str(&cmath::prelude(r.uses.iter().copied()));
    src.push_str(&format!("\nvoid {}(void *const *args, unsigned part, unsigned nparts) {{\n", k.name));
    for (i, &b) in std::iter::once(&k.out).chain(&inputs).enumerate() {
        let t = cexpr::storage_type(p.bufs[b as usize].dtype);
        let q = if i == 0 { "" } else { "const " };
        src.push_str(&format!("    {q}{t} *restrict b{b} = ({q}{t} *)args[{i}];\n"));
    }
    let parts = match loops.first() {
        Some(&(_, extent)) => {
            src.push_str(&format!(
                "    const i64 lo = (i64)({extent}ull * part / nparts), hi = (i64)({extent}ull * (part + 1u) / nparts);\n"
            ));
            u32::try_from(extent).unwrap_or(u32::MAX)
        }
        None => {
            src.push_str("    (void)nparts;\n    if (part != 0) return;\n");
            1
        }
    };
    for l in r.scopes.pop().expect("top scope").lines {
        src.push_str(&format!("    {l}\n"));
    }
    src.push_str("}\n");
    Ok(CKernel { name: k.name.clone(), source: src, args: std::iter::once(k.out).chain(inputs).collect(), parts })
}
