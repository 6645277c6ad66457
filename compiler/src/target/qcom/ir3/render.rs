//! One prepared kernel (`super::super::super::cl::prepare`) as a NIR compute shader, compiled by Mesa's
//! ir3 for the Adreno 630.
//!
//! The shape is the OpenCL renderer's (`compiler/src/target/cl/render.rs`), so both back ends agree
//! on arguments and the NDRange: each invocation computes one output element (or the four channels of
//! an image pixel); every node is computed once, in the innermost loop among the variables it depends
//! on; reductions that share a variable run as one loop, their accumulators in function-local
//! variables that Mesa turns into SSA.
//!
//! Kernel parameters: the 64-bit address of every buffer argument, in argument order, at 8-byte
//! slots of UBO 0 (ir3 pushes it into the const file). Images: the written image (argument 0) is
//! image 0 of the IBO path; read images are images 0.. of the texture path in argument order.
//! Integer index arithmetic whose value range fits in i32 is computed in 32 bits.

use std::collections::{HashMap, HashSet};

use pilot_core::DType;

use super::alu::{self, bits};
use super::ffi::{Compiled, Def, Shader, Var};
use crate::error::{CompileError, Result};
use crate::ir::{simplify, Const, Ctx, Op, INDEX, N};
use crate::lazy::strides;
use crate::program::{Kernel, Program};
use crate::target::cl::prepare::Prepared;
use crate::target::cl::render::{deps, live_order, ClKernel};
use crate::target::cl::texel::Texel;
use crate::target::scoping::free_vars_by;

/// A four-word load: its buffer and the linear form (terms, constant) of its first word's index.
type QuadKey = (u32, Vec<(N, i64)>, i64);

/// Where each argument is bound in an ir3 program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// A buffer's 64-bit address at this byte offset of the kernel parameters.
    Param(u32),
    /// A read image, texture-path image index.
    Texture(u32),
    /// The written image, IBO-path image index.
    Ibo(u32),
}

/// The argument bindings of `ck`'s arguments.
pub fn bindings(p: &Program, ck: &ClKernel) -> Vec<Binding> {
    let (mut params, mut textures) = (0u32, 0u32);
    ck.args
        .iter()
        .enumerate()
        .map(|(i, &b)| match (p.bufs[b as usize].image.is_some(), i == 0) {
            (true, true) => Binding::Ibo(0),
            (true, false) => {
                textures += 1;
                Binding::Texture(textures - 1)
            }
            (false, _) => {
                params += 1;
                Binding::Param(8 * (params - 1))
            }
        })
        .collect()
}

/// Compiles `k` (prepared as `prep`, rendered to OpenCL as `ck`, whose arguments and NDRange it
/// keeps) for work-groups of `local`.
pub fn compile(p: &Program, k: &Kernel, prep: &Prepared, ck: &ClKernel, local: [u32; 3]) -> Result<Compiled> {
    let ctx = &p.ctx;
    let mut s = Shader::new(&k.name, local)?;
    if k.shape.contains(&0) {
        // No output elements (an empty tensor): a program that writes nothing.
        return s.compile();
    }
    let binds = bindings(p, ck);
    let mut ptrs = HashMap::new();
    let mut textures = HashMap::new();
    for (&b, bind) in ck.args.iter().zip(&binds) {
        match *bind {
            Binding::Param(off) => {
                let d = s.param(off, 64);
                ptrs.insert(b, d);
            }
            Binding::Texture(t) => {
                textures.insert(b, t);
            }
            Binding::Ibo(_) => {}
        }
    }
    let order = live_order(ctx, prep);
    let free = free_vars_by(ctx, &order, |n| deps(ctx, prep, n));
    let out_vars = prep.item_vars(k);
    let out_set: HashSet<u32> = out_vars.iter().map(|&(v, _)| v).collect();
    let mut depth: HashMap<u32, usize> = HashMap::new();
    for &n in order.iter().rev() {
        if let Op::Reduce { var, .. } = ctx.op(n) {
            let d = free[&n].iter().filter(|v| !out_set.contains(v)).map(|v| depth[v]).max().unwrap_or(0);
            let e = depth.entry(*var).or_insert(0);
            *e = (*e).max(d + 1);
        }
    }
    let mut by_scope: HashMap<Option<u32>, Vec<N>> = HashMap::new();
    for &n in &order {
        if matches!(ctx.op(n), Op::Var(_) | Op::Const(_)) {
            continue;
        }
        let sc = free[&n].iter().copied().filter(|v| !out_set.contains(v)).max_by_key(|v| depth[v]);
        by_scope.entry(sc).or_default().push(n);
    }
    let scope: HashMap<N, Option<u32>> =
        by_scope.iter().flat_map(|(&sc, ns)| ns.iter().map(move |&n| (n, sc))).collect();
    let mut groups: HashMap<u32, Vec<N>> = HashMap::new();
    for &n in &order {
        if let Op::Reduce { var, .. } = ctx.op(n) {
            groups.entry(*var).or_default().push(n);
        }
    }
    let mut narrow = HashMap::new();
    for &n in &order {
        let nw = is_narrow(ctx, n, &narrow);
        narrow.insert(n, nw);
    }
    let mut e = Emitter {
        ctx,
        p,
        prep,
        s,
        values: HashMap::new(),
        narrow,
        ptrs,
        textures,
        pixels: HashMap::new(),
        quads: HashMap::new(),
        by_scope,
        scope,
        depth,
        groups,
        done: HashSet::new(),
        vars: HashMap::new(),
    };

    // The grid, as the OpenCL renderer lays it out: innermost output dimensions first, dimension 2
    // holds the rest, unflattened.
    let grid: Vec<(u32, usize)> = out_vars.iter().rev().copied().filter(|&(_, ext)| ext > 1).collect();
    for &(v, ext) in &out_vars {
        if ext == 1 {
            let z = e.s.imm(32, 0);
            e.bind_var(v, z);
        }
    }
    for (g, &(v, _)) in grid.iter().take(2).enumerate() {
        let id = e.s.global_id(g as u32);
        e.bind_var(v, id);
    }
    if grid.len() > 2 {
        let g2 = e.s.global_id(2);
        let mut stride = 1usize;
        for &(v, ext) in &grid[2..] {
            let st = e.s.imm(32, stride as u64);
            let q = e.s.alu("udiv", &[g2, st]);
            let ex = e.s.imm(32, ext as u64);
            let r = e.s.alu("umod", &[q, ex]);
            e.bind_var(v, r);
            stride *= ext;
        }
    }
    e.emit_scope(None)?;

    let out_buf = &p.bufs[k.out as usize];
    match out_buf.image {
        Some(_) => {
            let (vy, vx) = (k.vars[0], k.vars[1]);
            let vals: Vec<Def> = prep.roots.iter().map(|&r| e.float(r)).collect();
            let rgba = e.s.vec4([vals[0], vals[1], vals[2], vals[3]]);
            let (x, y) = (e.var_value(vx), e.var_value(vy));
            e.s.image_store(0, x, y, rgba);
        }
        None => {
            // The output's byte size bounds every flat offset: 32 bits when it fits in i32.
            let st = strides(&k.shape);
            let ob = if out_buf.nbytes() <= i32::MAX as usize { 32 } else { 64 };
            let vals: Vec<Def> = prep
                .roots
                .iter()
                .map(|&root| {
                    let v = e.value(root);
                    e.storage_value(v, ctx.dtype(root), out_buf.dtype, e.ibits(root))
                })
                .collect();
            for (j, v) in vals.into_iter().enumerate() {
                // Four outputs per work-item: root j is the last axis at 4·quad + j.
                if let (Some(last), Some((q, _))) = (prep.unrolled, prep.quad) {
                    let qv = e.var_value(q);
                    let (four, jj) = (e.s.imm(32, 4), e.s.imm(32, j as u64));
                    let at = e.s.alu("imul", &[qv, four]);
                    let at = e.s.alu("iadd", &[at, jj]);
                    e.bind_var(last, at);
                }
                let mut flat = e.s.imm(ob, 0);
                for ((&v, &stv), &d) in k.vars.iter().zip(&st).zip(&k.shape) {
                    if d > 1 {
                        let vv = e.var_value(v);
                        let vw = alu::resize(&mut e.s, vv, 32, false, ob);
                        let kk = e.s.imm(ob, stv as u64);
                        let t = e.s.alu("imul", &[vw, kk]);
                        flat = e.s.alu("iadd", &[flat, t]);
                    }
                }
                e.store(k.out, flat, ob, out_buf.dtype, v);
            }
        }
    }
    e.s.compile()
}

/// Whether integer node `n` (of the index type) can be computed in 32 bits: its value range, and
/// that of everything it is computed from, fits in i32.
fn is_narrow(ctx: &Ctx, n: N, known: &HashMap<N, bool>) -> bool {
    if ctx.dtype(n) != INDEX {
        return false;
    }
    let fits = |r: Option<(i64, i64)>| r.is_some_and(|(lo, hi)| lo >= i64::from(i32::MIN) && hi <= i64::from(i32::MAX));
    match ctx.op(n) {
        Op::Var(_) | Op::Const(_) => fits(simplify::range(ctx, n)),
        Op::Binary(_, a, b) => {
            fits(simplify::range(ctx, n))
                && [a, b].iter().all(|c| known.get(c).copied().unwrap_or_else(|| is_narrow(ctx, **c, known)))
        }
        _ => false,
    }
}

struct Emitter<'a> {
    ctx: &'a Ctx,
    p: &'a Program,
    prep: &'a Prepared,
    s: Shader,
    values: HashMap<N, Def>,
    /// Index-typed nodes computed in 32 bits.
    narrow: HashMap<N, bool>,
    ptrs: HashMap<u32, Def>,
    textures: HashMap<u32, u32>,
    /// Pixels read so far, by (image, x, y, validity).
    pixels: HashMap<(u32, N, N, Option<N>), Def>,
    /// Four-word buffer loads by (buffer, the linear terms and constant of their first word).
    quads: HashMap<QuadKey, Def>,
    by_scope: HashMap<Option<u32>, Vec<N>>,
    scope: HashMap<N, Option<u32>>,
    depth: HashMap<u32, usize>,
    groups: HashMap<u32, Vec<N>>,
    done: HashSet<N>,
    vars: HashMap<u32, Def>,
}

impl Emitter<'_> {
    /// Binds loop or grid variable `v` to a 32-bit value.
    fn bind_var(&mut self, v: u32, x: Def) {
        self.vars.insert(v, x);
    }

    fn var_value(&self, v: u32) -> Def {
        self.vars[&v]
    }

    /// Bits node `n` is computed in.
    fn ibits(&self, n: N) -> u32 {
        if self.narrow.get(&n).copied().unwrap_or(false) || matches!(self.ctx.op(n), Op::Var(_)) {
            32
        } else {
            bits(self.ctx.dtype(n))
        }
    }

    fn value(&mut self, n: N) -> Def {
        let d = self.ctx.dtype(n);
        match *self.ctx.op(n) {
            Op::Var(v) => self.vars[&v],
            Op::Const(c) => {
                let b = self.ibits(n);
                match c {
                    Const::Float(x) if d.is_float() => alu::fimm(&mut self.s, f64::from_bits(x) as f32),
                    _ if d.is_float() => alu::fimm(&mut self.s, c.as_f64() as f32),
                    _ => self.s.imm(b, c.as_i64() as u64),
                }
            }
            _ => self.values[&n],
        }
    }

    /// `n`'s value at its full type width.
    fn full(&mut self, n: N) -> Def {
        let v = self.value(n);
        let d = self.ctx.dtype(n);
        let ib = self.ibits(n);
        alu::resize(&mut self.s, v, ib, alu::signed(d) || d == INDEX, bits(d))
    }

    /// `n` as a 32-bit float (image channels).
    fn float(&mut self, n: N) -> Def {
        let v = self.value(n);
        let d = self.ctx.dtype(n);
        let ib = self.ibits(n);
        if d.is_float() {
            v
        } else {
            alu::cast(&mut self.s, v, d, ib, DType::F32)
        }
    }

    /// `n` as a signed 32-bit integer (image coordinates).
    fn int32(&mut self, n: N) -> Def {
        let v = self.value(n);
        let ib = self.ibits(n);
        alu::resize(&mut self.s, v, ib, true, 32)
    }

    /// The address of element `index` (a def of `bits` bits: 32 when the byte offset fits in i32)
    /// of buffer `buf` holding `dtype`.
    fn address(&mut self, buf: u32, index: Def, bits: u32, dtype: DType) -> Def {
        let size = self.s.imm(bits, dtype.size() as u64);
        let off = self.s.alu("imul", &[index, size]);
        let off = alu::resize(&mut self.s, off, bits, true, 64);
        let base = self.ptrs[&buf];
        self.s.alu("iadd", &[base, off])
    }

    /// Stores `v` (already in `dtype`'s storage form) as element `index` (a def of `bits` bits) of
    /// buffer `buf`. A 32-bit element at a 32-bit index is addressed by the store itself (a word
    /// offset from the buffer's base); others by 64-bit address arithmetic.
    fn store(&mut self, buf: u32, index: Def, bits: u32, dtype: DType, v: Def) {
        if bits == 32 && dtype.size() == 4 {
            let base = self.ptrs[&buf];
            self.s.store_global_at(base, index, v);
        } else {
            let addr = self.address(buf, index, bits, dtype);
            self.s.store_global(addr, v);
        }
    }

    /// Bits the byte offset of element `index` of a `size`-byte type needs: 32 when it fits in i32.
    fn offset_bits(&self, index: N, size: usize) -> u32 {
        let fits = self.narrow.get(&index).copied().unwrap_or(false)
            && simplify::range(self.ctx, index).is_some_and(|(lo, hi)| {
                lo.checked_mul(size as i64).is_some_and(|x| x >= i64::from(i32::MIN))
                    && hi.checked_mul(size as i64).is_some_and(|x| x <= i64::from(i32::MAX))
            });
        if fits || matches!(self.ctx.op(index), Op::Var(_)) {
            32
        } else {
            64
        }
    }

    /// A value of IR type `d` as buffer element type `storage` (half rounded to even, bool as a byte).
    fn storage_value(&mut self, v: Def, d: DType, storage: DType, ibits: u32) -> Def {
        match storage {
            DType::F16 => self.s.alu("f2f16_rtne", &[v]),
            DType::BF16 => alu::bf16_bits(&mut self.s, v),
            DType::Bool => alu::resize(&mut self.s, v, 1, false, 8),
            _ => alu::resize(&mut self.s, v, ibits, alu::signed(d) || d == INDEX, bits(storage)),
        }
    }

    fn ready(&self, n: N) -> bool {
        deps(self.ctx, self.prep, n)
            .iter()
            .all(|c| matches!(self.ctx.op(*c), Op::Var(_) | Op::Const(_)) || self.done.contains(c))
    }

    /// Nodes of scope `s` that the bodies of `members` need before their loop opens.
    fn loop_needs(&self, members: &[N], s: Option<u32>) -> Vec<N> {
        let here = s.map_or(0, |v| self.depth[&v]);
        let mut need = Vec::new();
        let mut seen = HashSet::new();
        let mut stack: Vec<N> = members.iter().flat_map(|&m| deps(self.ctx, self.prep, m)).collect();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            let Some(&ns) = self.scope.get(&n) else { continue };
            if ns == s {
                need.push(n);
            } else if ns.map_or(0, |v| self.depth[&v]) > here {
                stack.extend(deps(self.ctx, self.prep, n));
            }
        }
        need
    }

    fn emit_scope(&mut self, sc: Option<u32>) -> Result<()> {
        let mut pending = self.by_scope.remove(&sc).unwrap_or_default();
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
                    if self.loop_needs(&members, sc).iter().all(|m| self.done.contains(m)) {
                        self.emit_loop(var, &members)?;
                        pending.remove(i);
                        continue;
                    }
                } else if self.ready(n) {
                    self.emit(n)?;
                    pending.remove(i);
                    continue;
                }
                i += 1;
            }
            if pending.len() == before {
                return Err(CompileError::Graph("ir3 renderer: cyclic reduction grouping".into()));
            }
        }
        Ok(())
    }

    fn emit_loop(&mut self, var: u32, members: &[N]) -> Result<()> {
        let mut accs: Vec<(N, Var)> = Vec::new();
        let mut extent = 0;
        for &m in members {
            let Op::Reduce { op, extent: e, .. } = *self.ctx.op(m) else { unreachable!() };
            extent = e;
            let d = self.ctx.dtype(m);
            let init = self.ctx.reduce_identity_const(op, d).expect("identity");
            let acc = self.s.var(bits(d));
            let v = if d.is_float() {
                alu::fimm(&mut self.s, init.as_f64() as f32)
            } else if d == DType::Bool {
                self.s.imm(1, u64::from(init.as_i64() != 0))
            } else {
                self.s.imm(bits(d), init.as_i64() as u64)
            };
            self.s.store(acc, v);
            accs.push((m, acc));
        }
        if extent > i32::MAX as u64 {
            return Err(CompileError::Graph(format!("a reduction of {extent} elements exceeds ir3's 32-bit loops")));
        }
        let counter = self.s.var(32);
        let zero = self.s.imm(32, 0);
        self.s.store(counter, zero);
        let l = self.s.begin_loop();
        let i = self.s.load(counter);
        let end = self.s.imm(32, extent);
        let past = self.s.alu("uge", &[i, end]);
        self.s.break_if(past);
        self.bind_var(var, i);
        self.emit_scope(Some(var))?;
        for &(m, acc) in &accs {
            let Op::Reduce { op, body, .. } = *self.ctx.op(m) else { unreachable!() };
            let d = self.ctx.dtype(m);
            let a = self.s.load(acc);
            let b = self.full(body);
            let r = alu::combine(&mut self.s, op, d, a, b);
            self.s.store(acc, r);
        }
        let one = self.s.imm(32, 1);
        let next = self.s.alu("iadd", &[i, one]);
        self.s.store(counter, next);
        self.s.end_loop(l);
        for &(m, acc) in &accs {
            let v = self.s.load(acc);
            self.values.insert(m, v);
            self.done.insert(m);
        }
        Ok(())
    }

    fn emit(&mut self, n: N) -> Result<()> {
        let d = self.ctx.dtype(n);
        let v = match self.ctx.op(n).clone() {
            Op::Var(_) | Op::Const(_) | Op::Reduce { .. } => unreachable!("not emitted as a value"),
            Op::Load { buf, index, valid } => match self.prep.texels.get(&n) {
                Some(&t) => self.texel(buf, t),
                None => self.load(buf, index, valid, d),
            },
            Op::Unary(op, x) => {
                let (from, ib) = (self.ctx.dtype(x), self.ibits(x));
                let xv = self.value(x);
                alu::unary(&mut self.s, op, from, ib, xv, d)
            }
            Op::Binary(op, a, b) => {
                let ad = self.ctx.dtype(a);
                // Both operands at the width this node computes in (32 bits when narrow).
                let narrow_cmp = d == DType::Bool && self.ibits(a) == 32 && self.ibits(b) == 32;
                let w = if ad == INDEX && (self.narrow.get(&n).copied().unwrap_or(false) || narrow_cmp) {
                    32
                } else {
                    bits(ad)
                };
                let (av, bv) = (self.at_width(a, w), self.at_width(b, w));
                alu::binary(&mut self.s, op, ad, w, av, bv)
            }
            Op::Where(c, a, b) => {
                let cd = self.ctx.dtype(c);
                let (cv, cb) = (self.value(c), self.ibits(c));
                let cond = alu::truthy(&mut self.s, cv, cd, cb);
                let w = self.ibits(n);
                let (av, bv) = (self.at_width(a, w), self.at_width(b, w));
                self.s.alu("bcsel", &[cond, av, bv])
            }
            Op::Cast(x) => {
                let (from, ib) = (self.ctx.dtype(x), self.ibits(x));
                let xv = self.value(x);
                alu::cast(&mut self.s, xv, from, ib, d)
            }
            Op::Bitcast(x) => {
                let (from, ib) = (self.ctx.dtype(x), self.ibits(x));
                let xv = self.value(x);
                alu::bitcast(&mut self.s, xv, from, ib, d)
            }
        };
        self.values.insert(n, v);
        self.done.insert(n);
        Ok(())
    }

    /// Integer (or other) node `n` at `w` bits: narrow index values are widened where needed.
    fn at_width(&mut self, n: N, w: u32) -> Def {
        let v = self.value(n);
        let ib = self.ibits(n);
        let d = self.ctx.dtype(n);
        if d.is_float() || d == DType::Bool || ib == w {
            v
        } else {
            alu::resize(&mut self.s, v, ib, alu::signed(d) || d == INDEX, w)
        }
    }

    /// A buffer element (`valid`: the load reads element 0 and gives 0 where it is false).
    fn load(&mut self, buf: u32, index: N, valid: Option<N>, d: DType) -> Def {
        let storage = self.p.bufs[buf as usize].dtype;
        let ob = self.offset_bits(index, storage.size());
        let mut idx = self.at_width(index, ob);
        let cond = valid.map(|v| {
            let (vd, vv, vb) = (self.ctx.dtype(v), self.value(v), self.ibits(v));
            alu::truthy(&mut self.s, vv, vd, vb)
        });
        if let Some(c) = cond {
            let z = self.s.imm(ob, 0);
            idx = self.s.alu("bcsel", &[c, idx, z]);
        }
        let raw = if ob == 32 && storage.size() == 4 {
            match cond.is_none().then(|| self.quad(buf, index)).flatten() {
                Some(raw) => raw,
                None => {
                    let base = self.ptrs[&buf];
                    self.s.load_global_at(base, idx, 1)
                }
            }
        } else {
            let addr = self.address(buf, idx, ob, storage);
            self.s.load_global(addr, 8 * storage.size() as u32)
        };
        let v = match storage {
            DType::F16 => self.s.alu("f2f32", &[raw]),
            DType::BF16 => alu::bf16_value(&mut self.s, raw),
            DType::Bool => {
                let z = self.s.imm(8, 0);
                self.s.alu("ine", &[raw, z])
            }
            _ => raw,
        };
        // Index-typed values loaded from memory are full width; a narrow node is never a load.
        match cond {
            Some(c) => {
                let z = if d.is_float() { alu::fimm(&mut self.s, 0.0) } else { self.s.imm(bits(d), 0) };
                self.s.alu("bcsel", &[c, v, z])
            }
            None => v,
        }
    }

    /// Element `index` of 32-bit buffer `buf` as one word of a four-word load (`ldg` of 4), or
    /// `None` where that does not apply. `index` must be `4·q + lane` with `q` linear in the
    /// variables: the four words from `4·q` are read once and shared by the loads of its four
    /// lanes, which a pixel of an image would give. A buffer of whole quads holds all four words
    /// wherever it holds one (an unguarded load is in bounds).
    fn quad(&mut self, buf: u32, index: N) -> Option<Def> {
        if !self.p.bufs[buf as usize].nbytes().is_multiple_of(16) {
            return None;
        }
        let (terms, constant) = simplify::linear_form(self.ctx, index);
        if terms.iter().any(|&(_, k)| k % 4 != 0) {
            return None;
        }
        let lane = constant.rem_euclid(4);
        let key = (buf, terms, constant - lane);
        let words = match self.quads.get(&key) {
            Some(&w) => w,
            None => {
                let mut idx = self.at_width(index, 32);
                if lane != 0 {
                    let back = self.s.imm(32, (-lane) as u64);
                    idx = self.s.alu("iadd", &[idx, back]);
                }
                let base = self.ptrs[&buf];
                let w = self.s.load_global_at(base, idx, 4);
                self.quads.insert(key, w);
                w
            }
        };
        Some(self.s.channel(words, lane as u32))
    }

    /// One channel of an image pixel; the pixel is read once per (image, x, y, validity).
    fn texel(&mut self, buf: u32, t: Texel) -> Def {
        let key = (buf, t.x, t.y, t.valid);
        let px = match self.pixels.get(&key) {
            Some(&px) => px,
            None => {
                let (mut x, mut y) = (self.int32(t.x), self.int32(t.y));
                let cond = t.valid.map(|v| {
                    let (vd, vv, vb) = (self.ctx.dtype(v), self.value(v), self.ibits(v));
                    alu::truthy(&mut self.s, vv, vd, vb)
                });
                if let Some(c) = cond {
                    let z = self.s.imm(32, 0);
                    x = self.s.alu("bcsel", &[c, x, z]);
                    y = self.s.alu("bcsel", &[c, y, z]);
                }
                let mut px = self.s.image_load(self.textures[&buf], x, y);
                if let Some(c) = cond {
                    let z = alu::fimm(&mut self.s, 0.0);
                    let zero = self.s.vec4([z, z, z, z]);
                    px = self.s.alu("bcsel", &[c, px, zero]);
                }
                self.pixels.insert(key, px);
                px
            }
        };
        match self.ctx.const_value(t.c) {
            Some(c) => self.s.channel(px, c.as_i64() as u32),
            None => {
                let c = self.int32(t.c);
                let mut r = self.s.channel(px, 3);
                for j in (0..3).rev() {
                    let jj = self.s.imm(32, j);
                    let is = self.s.alu("ieq", &[c, jj]);
                    let ch = self.s.channel(px, j as u32);
                    r = self.s.alu("bcsel", &[is, ch, r]);
                }
                r
            }
        }
    }
}
