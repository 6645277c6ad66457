//! The C renderer on small hand-built kernels: the loop structure the CPU's speed depends on.

use pilot_core::DType;

use super::isa::VecUnit;
use super::render::render;

/// A 4-lane vector unit with 16 registers (SSE): register tiles of 4 × 2 accumulators.
const SCALAR4: VecUnit = VecUnit { lanes: 4, regs: 16 };
use std::collections::HashMap;

use crate::ir::subst::substitute;
use crate::ir::{BinOp, RedOp, UnOp};
use crate::lazy::Lazy;
use crate::program::{BufKind, Program};

/// The line index of the first line containing `needle`.
fn line_of(source: &str, needle: &str) -> usize {
    source.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("`{needle}` not in:\n{source}"))
}

/// `out[i, j] = Σ_k a[i, k] · b[k, j]` for `a: [m, kk]`, `b: [kk, n]`.
pub(super) fn matmul(m: usize, kk: usize, n: usize) -> Program {
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[m, kk]);
    let b = p.input(1, DType::F32, &[kk, n]);
    realize_product(&mut p, &a, &b);
    p
}

/// `a · b` (`[m, kk]·[kk, n]`) realized as the output, kernel `mm`.
fn realize_product(p: &mut Program, a: &Lazy, b: &Lazy) {
    let (m, kk, n) = (a.shape[0], a.shape[1], b.shape[1]);
    let a3 = p.reshape(a, &[m, kk, 1]);
    let b3 = p.reshape(b, &[1, kk, n]);
    let ab = p.broadcast(&[&a3, &b3]).unwrap();
    let prod = p.binary(BinOp::Mul, &ab[0], &ab[1]);
    let sum = p.reduce(RedOp::Sum, &prod, &[1]);
    let out = p.reshape(&sum, &[m, n]);
    p.realize(&out, BufKind::Output(0), "mm");
}

/// A `k`×`k` window over `c` channels of an `h`×`w` output, reading a padded input as
/// `lower::LowerCtx::windowed_input` pads it (its slack rows after the last one) and, when
/// `weighted`, a per-channel weight `[c, k, k]`: `op` over dy, dx of `x[c, y + dy, x + dx]`, times
/// `wt[c, dy, dx]` when weighted.
fn window(c: usize, h: usize, w: usize, k: usize, op: RedOp, weighted: bool) -> Program {
    let mut p = Program::new();
    let (hp, wp) = (h + k - 1, w + k - 1);
    let x = p.input(0, DType::F32, &[c, hp + crate::lower::ROW_SLACK.div_ceil(wp), wp]);
    let shape = vec![c, h, w];
    let vars = p.ctx.fresh_vars(&shape);
    let (dy, dx) = (p.ctx.fresh_var(k as u64), p.ctx.fresh_var(k as u64));
    let [vc, vy, vx, vdy, vdx] = [vars[0], vars[1], vars[2], dy, dx].map(|v| p.ctx.var(v));
    let (row, col) = (p.ctx.add(vy, vdy), p.ctx.add(vx, vdx));
    let mut body =
        substitute(&mut p.ctx, x.expr, &HashMap::from([(x.vars[0], vc), (x.vars[1], row), (x.vars[2], col)]), None);
    if weighted {
        let wt = p.input(1, DType::F32, &[c, k, k]);
        let map = HashMap::from([(wt.vars[0], vc), (wt.vars[1], vdy), (wt.vars[2], vdx)]);
        let wv = substitute(&mut p.ctx, wt.expr, &map, None);
        body = p.ctx.mul(body, wv);
    }
    let inner = p.ctx.reduce(op, dx, k as u64, body);
    let outer = p.ctx.reduce(op, dy, k as u64, inner);
    p.realize(&Lazy { dtype: DType::F32, shape, vars, expr: outer }, BufKind::Output(0), "window");
    p
}

/// A depthwise `k`×`k` convolution ([`window`]): `out[c, y, x] = Σ_dy Σ_dx x[c, y + dy, x + dx] · wt[c, dy, dx]`.
pub(super) fn depthwise(c: usize, h: usize, w: usize, k: usize) -> Program {
    window(c, h, w, k, RedOp::Sum, true)
}

/// A `k`×`k` max pooling ([`window`]): `out[c, y, x] = max_dy max_dx x[c, y + dy, x + dx]`.
pub(super) fn max_pool(c: usize, h: usize, w: usize, k: usize) -> Program {
    window(c, h, w, k, RedOp::Max, false)
}

/// A `k`×`k` stride-2 convolution of `cin` to `cout` channels over an `h`×`w` output from a padded
/// input read in place (its slack rows after the last one): `out[o, y, x] = Σ_c Σ_dy Σ_dx x[c, 2y + dy, 2x + dx] · wt[o, c, dy, dx]`.
pub(super) fn conv_stride2(cin: usize, cout: usize, h: usize, w: usize, k: usize) -> Program {
    let wp = 2 * w + k - 2;
    conv_stride2_rows(cin, cout, h, w, k, 2 * h + k - 2 + crate::lower::ROW_SLACK.div_ceil(wp))
}

/// [`conv_stride2`] from an input of `rows` rows (no slack where `rows` is `2h + k - 2`).
fn conv_stride2_rows(cin: usize, cout: usize, h: usize, w: usize, k: usize, rows: usize) -> Program {
    let mut p = Program::new();
    let wp = 2 * w + k - 2;
    let x = p.input(0, DType::F32, &[cin, rows, wp]);
    let wt = p.input(1, DType::F32, &[cout, cin, k, k]);
    let shape = vec![cout, h, w];
    let vars = p.ctx.fresh_vars(&shape);
    let (ci, dy, dx) = (p.ctx.fresh_var(cin as u64), p.ctx.fresh_var(k as u64), p.ctx.fresh_var(k as u64));
    let [vo, vy, vx, vc, vdy, vdx] = [vars[0], vars[1], vars[2], ci, dy, dx].map(|v| p.ctx.var(v));
    let (y2, x2) = (p.ctx.mul_i(vy, 2), p.ctx.mul_i(vx, 2));
    let (row, col) = (p.ctx.add(y2, vdy), p.ctx.add(x2, vdx));
    let xv =
        substitute(&mut p.ctx, x.expr, &HashMap::from([(x.vars[0], vc), (x.vars[1], row), (x.vars[2], col)]), None);
    let map = HashMap::from([(wt.vars[0], vo), (wt.vars[1], vc), (wt.vars[2], vdy), (wt.vars[3], vdx)]);
    let wv = substitute(&mut p.ctx, wt.expr, &map, None);
    let prod = p.ctx.mul(xv, wv);
    let sx = p.ctx.reduce(RedOp::Sum, dx, k as u64, prod);
    let sy = p.ctx.reduce(RedOp::Sum, dy, k as u64, sx);
    let sum = p.ctx.reduce(RedOp::Sum, ci, cin as u64, sy);
    p.realize(&Lazy { dtype: DType::F32, shape, vars, expr: sum }, BufKind::Output(0), "conv");
    p
}

#[test]
fn a_stride_2_window_loads_two_vectors_and_keeps_the_even_lanes() {
    let p = conv_stride2(3, 16, 8, 40, 3);
    let unit = VecUnit { lanes: 16, regs: 32 };
    let src = render(&p, &p.kernels[0], unit, None).source;
    // Output channels share the input row: one strided load per tap serves every replica.
    assert!(src.contains("acc0_u3_v0"), "{src}");
    let evens: Vec<String> = (0..16).map(|i| (2 * i).to_string()).collect();
    assert!(src.contains(&format!("__builtin_shufflevector(lo_, hi_, {})", evens.join(", "))), "{src}");
    assert!(!src.contains("float s"), "no staged operand: {src}");
}

#[test]
fn a_stride_2_load_reaching_a_scratch_buffers_end_reads_into_the_arenas_slack() {
    // A 2×2 stride-2 convolution of an unpadded 28×28 map (ConvNeXt's downsampling): the last
    // vector's odd neighbour is one element past the input.
    let mut p = conv_stride2_rows(4, 16, 14, 14, 2, 28);
    let unit = VecUnit { lanes: 16, regs: 32 };
    let src = render(&p, &p.kernels[0], unit, None).source;
    assert!(
        src.contains("float s") && !src.contains("__builtin_shufflevector(lo_"),
        "a model input is gathered: {src}"
    );
    let x = p.bufs.iter().position(|b| b.kind == BufKind::Input(0)).unwrap();
    p.bufs[x].kind = BufKind::Scratch;
    let src = render(&p, &p.kernels[0], unit, None).source;
    assert!(!src.contains("float s") && src.contains("__builtin_shufflevector(lo_"), "{src}");
    // The arena keeps the element read past a scratch buffer inside itself (16·14·14 floats: a
    // whole number of cache lines without it).
    let out = p.kernels[0].out as usize;
    p.bufs[out].kind = BufKind::Scratch;
    assert_eq!(crate::plan::plan(&p, 64, 0).arena_bytes, p.bufs[out].nbytes());
    assert_eq!(crate::plan::plan(&p, 64, super::READ_PAST).arena_bytes, p.bufs[out].nbytes() + 64);
}

#[test]
fn a_max_pooling_on_short_rows_keeps_its_maxima_in_registers() {
    let p = max_pool(4, 10, 10, 5);
    let unit = VecUnit { lanes: 16, regs: 32 };
    let ck = render(&p, &p.kernels[0], unit, None);
    let src = &ck.source;
    // Ten output rows side by side, each a vector of 16 lanes starting at -inf, folded by PL_VMAX.
    assert!(ck.tilings.iter().any(|t| t.block == 10), "{:?}", ck.tilings);
    assert!(src.contains("pl_v16 acc0_u9_v0 = ((pl_v16){0}) - (float)PL_INF;"), "{src}");
    assert!(src.contains("acc0_u9_v0 = PL_VMAX(acc0_u9_v0, f"), "{src}");
    assert_eq!(src.matches("PL_UNROLL for").count(), 2, "{src}");
}

#[test]
fn a_depthwise_convolution_on_a_narrow_row_replicates_its_output_rows() {
    // 14 output rows of 14: no variable shares the input row (each channel and row reads its
    // own), so the output rows are replicated, each loading its own input rows, and the 5×5
    // window is unrolled so that a row is loaded once for every output row reading it.
    let p = depthwise(8, 14, 14, 5);
    let unit = VecUnit { lanes: 16, regs: 32 };
    let ck = render(&p, &p.kernels[0], unit, None);
    let src = &ck.source;
    assert!(ck.tilings.iter().any(|t| t.block == 7) && ck.tilings.iter().any(|t| t.block == 14), "{:?}", ck.tilings);
    assert!(ck.tilings.iter().all(|t| 14 % t.block == 0), "{:?}", ck.tilings);
    // Untimed: 14 replicas of one 16-lane vector (the row of 14 overhangs into the slack).
    assert!(src.contains("pl_v16 acc0_u13_v0 = {0};") && !src.contains("acc0_u14"), "{src}");
    assert_eq!(src.matches("PL_UNROLL for").count(), 2, "{src}");
    // Each replica loads its own input row: the vector loads name the replica.
    assert!(src.contains("const pl_v16 f") && src.contains("_u13_0 = ({"), "{src}");
    // A wide row keeps one accumulator chain per vector, without replicas.
    let wide = depthwise(8, 14, 64, 5);
    let src = render(&wide, &wide.kernels[0], unit, None).source;
    assert!(!src.contains("PL_UNROLL") && !src.contains("_u1"), "{src}");
}

#[test]
fn matmul_accumulates_in_arrays_around_a_vectorized_inner_loop() {
    let p = matmul(8, 32, 16);
    let ck = render(&p, &p.kernels[0], SCALAR4, None);
    let src = &ck.source;
    assert_eq!(ck.args, vec![2, 0, 1], "output first, then the inputs");
    assert!(src.starts_with("void k0_mm(void *const *args, unsigned part, unsigned nparts) {"), "{src}");
    // Rows are blocked by 4: one accumulator array per replica, as wide as a tile (2 vectors of 4).
    for u in 0..4 {
        assert!(src.contains(&format!("float acc0_u{u}[8] __attribute__((aligned(64)));")), "{src}");
    }
    assert_eq!(ck.parts, 2, "8 rows in blocks of 4 make two independent parts");
    assert!(src.contains("part / nparts"), "{src}");
    // Reduction loop outside, vectorized loop over the output row inside; the row of `a` (b0) is
    // loaded once per reduction step, outside the inner loop, the column of `b` (b1) inside it.
    let red = line_of(src, "< 32;");
    let simd = line_of(src, "PL_SIMD for");
    let a_load = line_of(src, "= b0[");
    let b_load = line_of(src, "= b1[");
    assert!(red < a_load && a_load < simd && simd < b_load, "{src}");
    assert!(src.contains("acc0_u3[") && src.contains("+= "), "{src}");
}

#[test]
fn elementwise_hoists_what_the_inner_loop_does_not_change() {
    let mut p = Program::new();
    let x = p.input(0, DType::F16, &[4, 5]);
    let y = p.unary(UnOp::Exp, &x);
    p.realize(&y, BufKind::Output(0), "e");
    let ck = render(&p, &p.kernels[0], SCALAR4, None);
    let src = &ck.source;
    assert!(src.contains("const f16 *restrict b0") && src.contains("f16 *restrict b1"), "{src}");
    // The row offset depends only on the outer variable: computed before the inner loop opens.
    let inner = line_of(src, "< 5; v");
    let row = line_of(src, "* 5LL)");
    assert!(row < inner, "{src}");
    // Half is computed in float (through the prelude's double-precision exp) and stored as half.
    assert!(src.contains("pl_exp("), "{src}");
    assert!(src.contains("b1[") && src.contains("] = "), "{src}");
    assert_eq!(ck.parts, 4);
}

#[test]
fn a_row_reduction_reads_its_rows_with_lanes_side_by_side() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[4, 37]);
    let e = p.unary(UnOp::Exp, &x);
    let m = p.reduce(RedOp::Max, &e, &[1]);
    p.realize(&m, BufKind::Output(0), "rowmax");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    // One row per output, read contiguously: 8 partial maxima (2 vectors of 4) side by side from
    // -inf, folded with the NaN-propagating pl_fmaxf, then the last 5 elements, then the lanes.
    let (row, lanes) = (line_of(&src, "< (i64)4LL * (part + 1) / nparts"), line_of(&src, "_l[8]"));
    assert!(row < lanes && src.contains("_0 < 32;") && src.contains("_0 += 8)"), "{src}");
    let simd = line_of(&src, "PL_SIMD for");
    assert!(src[src.find("PL_SIMD for").unwrap()..].contains("_l[v"), "{src}");
    assert!(src.contains("= 32; v") && src.contains("< 37; v"), "the remainder: {src}");
    let fold =
        src.lines().collect::<Vec<_>>().iter().rposition(|l| l.contains("for (int l = 0; l < 8; l++) t")).unwrap();
    assert!(fold > simd && src.lines().nth(fold).unwrap().contains("_l[l])"), "{src}");
    assert!(src.contains("= pl_fmaxf(") && src.contains("(-PL_INF)"), "{src}");
}

#[test]
fn matmul_keeps_a_register_tile_of_accumulators() {
    let p = matmul(16, 32, 56);
    let unit = VecUnit { lanes: 16, regs: 32 };
    let ck = render(&p, &p.kernels[0], unit, None);
    let src = &ck.source;
    // 32 registers: rows blocked by 8, two vectors of 16 columns each = 16 accumulator vectors.
    assert_eq!(ck.parts, 2, "16 rows in blocks of 8");
    for u in 0..8 {
        for j in 0..2 {
            assert!(src.contains(&format!("pl_v16 acc0_u{u}_v{j} = {{0}};")), "{src}");
        }
    }
    assert!(!src.contains("acc0_u0_v2"), "{src}");
    // Tiles of 32 columns; the row of `b` is loaded as vectors straight from the buffer, the
    // element of `a` is one scalar per row, broadcast.
    assert!(src.contains("xs += 32)") && src.contains("if (xt - x0 == 32) {"), "{src}");
    assert!(src.contains("__builtin_memcpy(&v_, &b1["), "{src}");
    let red = line_of(src, "v22 < 32; v22 += 1) {");
    let vload = line_of(src, "__builtin_memcpy(&v_, &b1[");
    assert!(red < vload, "{src}");
    // The last 24 columns (56 = 32 + 24) are a full tile shifted back to end at column 56, of which
    // only the 24 new columns are stored; the scalar path remains for ranges narrower than a tile.
    assert!(src.contains("x_hi - 32;") && src.contains("for (i64 v21 = xs; v21 < xe; v21++)"), "{src}");
    // The accumulator arrays are zero-filled only on the scalar path: a full tile stores all 32
    // elements of each from its registers.
    let (tile, scalar) = (line_of(src, "if (xt - x0 == 32) {"), line_of(src, "} else {"));
    let fills: Vec<usize> =
        src.lines().enumerate().filter(|(_, l)| l.contains("] = ((float)0e0);")).map(|(i, _)| i).collect();
    assert_eq!(fills.len(), 8, "{src}");
    assert!(fills.iter().all(|&i| i > scalar && scalar > tile), "{src}");
    for u in 0..8 {
        assert!(src.contains(&format!("*(pl_v16 *)&acc0_u{u}[16] = acc0_u{u}_v1;")), "{src}");
    }
}

/// Renders `[1, 256] · [256, n]` and checks that each pass over its accumulator array (`width`
/// wide) adds `rows` rows of the weight, in the order one at a time would add them, inside the
/// vectorized loop.
fn assert_rows_per_pass(n: usize, width: usize, rows: usize) {
    let p = matmul(1, 256, n);
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    assert!(src.contains(&format!("float acc0[{width}]")), "{src}");
    assert!(src.contains(&format!("v19 < 256; v19 += {rows}) {{")), "{src}");
    assert!(src.contains(&format!("b0[(v19 + {})]", rows - 1)), "{src}");
    let adds: Vec<usize> = src
        .lines()
        .filter(|l| l.contains("acc0[v18 - x0] += t"))
        .map(|l| l.trim_end_matches(';').rsplit("_k").next().and_then(|u| u.parse().ok()).expect("an unrolled step"))
        .collect();
    assert_eq!(adds, (0..rows).collect::<Vec<usize>>(), "{src}");
    assert!(line_of(&src, "PL_SIMD for") < line_of(&src, "acc0[v18 - x0] += t"), "{src}");
}

#[test]
fn a_matrix_vector_product_adds_four_rows_per_pass_in_order() {
    // 256 × 1000 weights (1 MB), whose passes run from cache. No blocked variable, no tile (the
    // reduction is long): whole-row accumulator arrays (at most MAX_INNER wide).
    assert_rows_per_pass(1000, 1000, 4);
}

#[test]
fn a_matrix_vector_product_streaming_its_weights_adds_eight_rows_per_pass() {
    // 256 × 3000 weights (3 MB, past `STREAMED_BYTES`): eight rows in flight per pass.
    assert_rows_per_pass(3000, 2048, 8);
}

#[test]
fn small_kernels_run_as_one_part_and_large_ones_split() {
    let small = matmul(8, 32, 16);
    assert_eq!(super::render_all(&small, SCALAR4)[0].parts, 1, "8·32·16·2 FLOPs: not worth a second thread");
    let large = matmul(64, 256, 64);
    assert_eq!(super::render_all(&large, SCALAR4)[0].parts, 16, "64 rows in blocks of 4");
}

#[test]
fn a_product_of_few_rows_splits_its_columns() {
    // 4 rows are one block: the parts are cut from the 512 columns, whole tiles (2 vectors of 4) each.
    let few = matmul(4, 256, 512);
    let ck = &super::render_all(&few, SCALAR4)[0];
    assert!(ck.source.contains("xs += 8)"), "{}", ck.source);
    assert_eq!(ck.parts, 64, "{}", ck.source);
    assert!(ck.source.contains("x_lo = (i64)64LL * (part) / nparts * 8"), "{}", ck.source);
    // 256 rows are 64 blocks that each read a 64 × 64 weight (16 KiB), a quarter of the rows'
    // 64 KiB: the rows are split.
    let many = matmul(256, 64, 64);
    assert_eq!(super::render_all(&many, SCALAR4)[0].parts, 64);
}

#[test]
fn a_product_whose_row_blocks_would_each_read_a_large_weight_splits_its_columns() {
    // 64 rows are 16 blocks, but each would read all of the 512 KiB weight (eight times the rows'
    // 64 KiB): the parts are cut from the columns, whole tiles, and read their own columns.
    let p = matmul(64, 256, 512);
    let ck = &super::render_all(&p, SCALAR4)[0];
    assert_eq!(ck.parts, 64, "{}", ck.source);
    assert!(ck.source.contains("x_lo = (i64)64LL * (part) / nparts * 8"), "{}", ck.source);
}

#[test]
fn kernels_on_little_data_need_more_work_to_split() {
    // 2^18 FLOPs on 32 KiB of buffers: one part; 2^19 FLOPs streaming a 1 MiB matrix: split.
    let little = matmul(32, 64, 64);
    assert_eq!(little.kernel_flops(&little.kernels[0]), 1 << 18);
    assert_eq!(super::render_all(&little, SCALAR4)[0].parts, 1);
    let streaming = matmul(1, 512, 512);
    assert_eq!(streaming.kernel_flops(&streaming.kernels[0]), 1 << 19);
    assert!(super::render_all(&streaming, SCALAR4)[0].parts > 1);
}

#[test]
fn copies_split_only_when_they_move_megabytes() {
    // A transpose of `n`×`n` floats reads and writes 8·n² bytes and does no arithmetic.
    let transpose = |n: usize| {
        let mut p = Program::new();
        let x = p.input(0, DType::F32, &[n, n]);
        let t = p.permute(&x, &[1, 0]);
        p.realize(&t, BufKind::Output(0), "t");
        p
    };
    let small = transpose(256); // 512 KiB moved
    assert_eq!(small.kernel_flops(&small.kernels[0]), 0);
    assert_eq!(super::render_all(&small, SCALAR4)[0].parts, 1, "a copy under 2 MiB stays on one thread");
    let large = transpose(1024); // 8 MiB moved
    assert!(super::render_all(&large, SCALAR4)[0].parts > 1, "a copy of 8 MiB splits");
}

#[test]
fn a_copy_of_a_value_written_in_parts_runs_in_parts() {
    // A 256×256 product (33 MFLOP: parts) then a transpose of it (512 KiB moved, under the copy
    // threshold): the transpose follows its producer onto both threads. The same transpose of a model
    // input stays on one thread (`copies_split_only_when_they_move_megabytes`).
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[256, 256, 1]);
    let b = p.input(1, DType::F32, &[1, 256, 256]);
    let ab = p.broadcast(&[&a, &b]).unwrap();
    let prod = p.binary(BinOp::Mul, &ab[0], &ab[1]);
    let sum = p.reduce(RedOp::Sum, &prod, &[1]);
    let product = p.realize(&sum, BufKind::Scratch, "mm");
    let flat = p.reshape(&product, &[256, 256]);
    let t = p.permute(&flat, &[1, 0]);
    p.realize(&t, BufKind::Output(0), "t");
    let parts: Vec<u32> = p.kernels.iter().map(|k| render(&p, k, SCALAR4, None).parts).collect();
    assert_eq!(super::parallel_plan(&p, &parts), [true, true]);
    assert_eq!(super::parallel_plan(&p, &[parts[0], 1]), [true, false], "one part is one thread");
    assert!(super::render_all(&p, SCALAR4)[1].parts > 1);
}

#[test]
fn a_reduction_read_twice_counts_its_flops_once() {
    // (a·b)² : the product's 8 multiply-adds per output are computed once, then one multiply.
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[2, 8]);
    let b = p.input(1, DType::F32, &[8, 4]);
    let a3 = p.reshape(&a, &[2, 8, 1]);
    let b3 = p.reshape(&b, &[1, 8, 4]);
    let ab = p.broadcast(&[&a3, &b3]).unwrap();
    let prod = p.binary(BinOp::Mul, &ab[0], &ab[1]);
    let sum = p.reduce(RedOp::Sum, &prod, &[1]);
    let sq = p.binary(BinOp::Mul, &sum, &sum);
    let out = p.reshape(&sq, &[2, 4]);
    p.realize(&out, BufKind::Output(0), "sq");
    assert_eq!(p.kernel_flops(&p.kernels[0]), 8 * (8 * 2 + 1));
}

#[test]
fn a_padded_copy_peels_its_inner_loop_into_fill_copy_fill() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 10]);
    let y = p.pad(&x, &[0, 2], &[0, 3], -1.0);
    p.realize(&y, BufKind::Output(0), "pad");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    // The split points: columns below 2 fill, 2..12 copy, from 12 fill again.
    assert!(src.contains("2LL - r") && src.contains("12LL - r"), "{src}");
    let loops: Vec<&str> = src.lines().filter(|l| l.contains("for (i64") && l.contains("= s")).collect();
    assert_eq!(loops.len(), 3, "{src}");
    // In the middle loop both comparisons are known: the load is unguarded.
    let middle = &src[src.find(loops[1]).unwrap()..src.find(loops[2]).unwrap()];
    assert!(middle.contains("!(((u8)0))") && middle.contains("((u8)1)"), "{middle}");
    assert!(!middle.contains("< 2LL") && !middle.contains("< 12LL"), "{middle}");
}

#[test]
fn short_contiguous_rows_are_vectorized_with_a_masked_tail_and_strided_or_long_ones_are_not() {
    let short_loops = |p: &Program| {
        let src = render(p, &p.kernels[0], SCALAR4, None).source;
        src.lines().filter(|l| l.contains("PL_SHORT for (i64")).count()
    };
    // 15 padded columns (at most 4 vectors of 4): each of the three segments is masked.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 10]);
    let y = p.pad(&x, &[0, 2], &[0, 3], 0.0);
    p.realize(&y, BufKind::Output(0), "short");
    assert_eq!(short_loops(&p), 3);
    // 105 columns: clang's own choice.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 100]);
    let y = p.pad(&x, &[0, 2], &[0, 3], 0.0);
    p.realize(&y, BufKind::Output(0), "long");
    assert_eq!(short_loops(&p), 0);
    // Every other column of a short padded row (a phase of a stride-2 window): a masked gather
    // would be slower than the scalar loop.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 13]);
    let y = p.pad(&x, &[0, 1], &[0, 0], 0.0);
    let phase = p.slice(&y, &[0, 0], &[1, 2], &[3, 7]);
    p.realize(&phase, BufKind::Output(0), "phase");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    assert!(src.contains("= s"), "the phase's row is peeled: {src}");
    assert_eq!(short_loops(&p), 0, "{src}");
}

#[test]
fn long_rows_of_transcendental_math_are_vectorized_four_full_vectors_per_iteration() {
    let wide_loops = |p: &Program| {
        let src = render(p, &p.kernels[0], SCALAR4, None).source;
        src.lines().filter(|l| l.contains("PL_WIDE(4) for (i64")).count()
    };
    let swish = |p: &mut Program, x: &Lazy| {
        let neg = p.unary(UnOp::Neg, x);
        let e = p.unary(UnOp::Exp, &neg);
        let one = p.full(DType::F32, &x.shape, 1.0);
        let d = p.binary(BinOp::Add, &e, &one);
        p.binary(BinOp::Div, x, &d)
    };
    // A swish over 64 elements (16 vectors of 4), split by the parts as one loop: widened.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[64]);
    let y = swish(&mut p, &x);
    p.realize(&y, BufKind::Output(0), "swish");
    assert_eq!(wide_loops(&p), 1);
    // Rows of 80 under loops over the others: the inner loop is widened.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 40, 80]);
    let y = swish(&mut p, &x);
    p.realize(&y, BufKind::Output(0), "rows");
    assert_eq!(wide_loops(&p), 1);
    // Shorter than 16 vectors, or without transcendental math: clang's own choice.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 60]);
    let y = swish(&mut p, &x);
    p.realize(&y, BufKind::Output(0), "short");
    assert_eq!(wide_loops(&p), 0);
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[64]);
    let y = p.binary(BinOp::Mul, &x, &x);
    p.realize(&y, BufKind::Output(0), "square");
    assert_eq!(wide_loops(&p), 0);
}

#[test]
fn a_strided_index_peels_at_rounded_up_split_points() {
    // Column 2j + 1 of a 7-wide row padded by 2 on the left: valid from j = 1 (2·1 + 1 ≥ 2).
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[7]);
    let y = p.pad(&x, &[2], &[1], 0.0);
    let s = p.slice(&y, &[1], &[2], &[5]);
    p.realize(&s, BufKind::Output(0), "strided");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    assert!(src.contains(" / 2 : -(("), "a stride of 2 divides rounding up: {src}");
}

#[test]
fn contiguous_dims_merge_and_windowed_ones_do_not() {
    // A bias add over [C, H, W]: every index walks H and W as one, and C too.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[4, 6, 10]);
    let e = p.unary(UnOp::Exp, &x);
    p.realize(&e, BufKind::Output(0), "ew");
    let mut k = p.kernels[0].clone();
    super::merge::merge_dims(&mut p.ctx, &mut k);
    assert_eq!(k.shape, vec![240]);
    let src = render(&p, &k, SCALAR4, None).source;
    assert!(src.contains("< (i64)240LL * (part + 1) / nparts"), "{src}");

    // A transposed read steps along W by 6 but along H by 1: nothing merges.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[10, 6]);
    let t = p.permute(&x, &[1, 0]);
    p.realize(&t, BufKind::Output(0), "t");
    let mut k = p.kernels[0].clone();
    super::merge::merge_dims(&mut p.ctx, &mut k);
    assert_eq!(k.shape, vec![6, 10]);

    // A padded copy compares its coordinates: its rows stay apart.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 10]);
    let y = p.pad(&x, &[0, 1], &[0, 1], 0.0);
    p.realize(&y, BufKind::Output(0), "pad");
    let mut k = p.kernels[0].clone();
    super::merge::merge_dims(&mut p.ctx, &mut k);
    assert_eq!(k.shape, vec![3, 12]);

    // Channels-last over a channels-first input: the channels stay apart, the rows outside merge.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[5, 6, 10]);
    let t = p.permute(&x, &[1, 2, 0]);
    p.realize(&t, BufKind::Output(0), "nhwc");
    let mut k = p.kernels[0].clone();
    super::merge::merge_dims(&mut p.ctx, &mut k);
    assert_eq!(k.shape, vec![60, 5]);
}

#[test]
fn tiles_are_sized_to_compute_the_fewest_points() {
    use super::tile::Geometry;
    let width = |extent, overhang| Geometry::fit(16, 2, extent, overhang).map(Geometry::width);
    // 40 columns: three tiles of 16 (48 points) beat two of 32 (64).
    assert_eq!(width(40, false), Some(16));
    // 6625 columns: 6656 points in tiles of 32 are within 1/8 of 6640 in tiles of 16.
    assert_eq!(width(6625, false), Some(32));
    // 56: two of 32 or four of 16 compute 64 either way; the wider tile makes fewer passes.
    assert_eq!(width(56, false), Some(32));
    // 20 columns: a tile of 32 fits only where it may overhang the row.
    assert_eq!(width(20, false), Some(16));
    assert_eq!(width(20, true), Some(32));
    assert_eq!(width(8, false), None);
}

#[test]
fn a_tile_overhangs_a_row_only_where_its_reads_stay_in_the_buffer() {
    // A 3-wide window over rows of 20 (a stride-1 convolution's padded input, one row of slack):
    // the reads of a 32-wide tile reach 32 + 2 columns into a row.
    let conv = |rows_of_slack: usize| {
        let mut p = Program::new();
        let x = p.input(0, DType::F32, &[8, 2 + rows_of_slack, 20]);
        let w = p.input(1, DType::F32, &[16, 8, 3]);
        let vars = p.ctx.fresh_vars(&[16, 2, 18]);
        let (ci, kx) = (p.ctx.fresh_var(8), p.ctx.fresh_var(3));
        let (vco, vy, vx, vci, vkx) =
            (p.ctx.var(vars[0]), p.ctx.var(vars[1]), p.ctx.var(vars[2]), p.ctx.var(ci), p.ctx.var(kx));
        let xi = {
            let c = p.ctx.mul_i(vci, ((2 + rows_of_slack) * 20) as i64);
            let y = p.ctx.mul_i(vy, 20);
            let col = p.ctx.add(vx, vkx);
            let cy = p.ctx.add(c, y);
            p.ctx.add(cy, col)
        };
        let wi = {
            let co = p.ctx.mul_i(vco, 24);
            let c = p.ctx.mul_i(vci, 3);
            let cc = p.ctx.add(co, c);
            p.ctx.add(cc, vkx)
        };
        let (xb, wb) = (p.is_buffer_view(&x).unwrap(), p.is_buffer_view(&w).unwrap());
        let xl = p.ctx.load(xb, DType::F32, xi, None);
        let wl = p.ctx.load(wb, DType::F32, wi, None);
        let prod = p.ctx.mul(xl, wl);
        let r = p.ctx.reduce(RedOp::Sum, kx, 3, prod);
        let r = p.ctx.reduce(RedOp::Sum, ci, 8, r);
        let y = crate::lazy::Lazy { dtype: DType::F32, shape: vec![16, 2, 18], vars, expr: r };
        p.realize(&y, BufKind::Output(0), "conv");
        render(&p, &p.kernels[0], VecUnit { lanes: 16, regs: 32 }, None).source
    };
    // No slack: the last channel's last row would be read past the buffer's end.
    assert!(!conv(0).contains("x0 = xs, xt = xs + 32;"), "{}", conv(0));
    assert!(conv(2).contains("x0 = xs, xt = xs + 32;"), "{}", conv(2));
}

#[test]
fn a_concatenation_peels_its_outer_loop_by_source() {
    // Channels 0..2 from `a`, 2..5 from `b`: the channel loop splits in two, and in each segment only
    // that source's load remains.
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[2, 40]);
    let b = p.input(1, DType::F32, &[3, 40]);
    let pa = p.pad(&a, &[0, 0], &[3, 0], 0.0);
    let pb = p.pad(&b, &[2, 0], &[0, 0], 0.0);
    let cat = p.binary(BinOp::Add, &pa, &pb);
    p.realize(&cat, BufKind::Output(0), "cat");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    let channel_loops = src.lines().filter(|l| l.contains("for (i64") && l.contains("= s")).count();
    assert_eq!(channel_loops, 2, "channels below 2, then the rest: {src}");
    assert!(!src.contains("< 2LL;"), "the channel comparison is known in every segment: {src}");
    assert!(src.contains("!(((u8)1))") && src.contains("!(((u8)0))"), "{src}");
}

#[test]
fn the_innermost_loop_is_peeled_first_then_the_outermost() {
    // Two sources concatenated by channel (70 channels: the parts split that loop alone), each padded
    // by one row and one column on every side: three levels of guards, more copies than the budget
    // allows for all of them. The column loop (the one that vectorizes) and the channel loop (whose
    // sources no run-time range can serve together) are peeled; the row loop keeps its comparisons,
    // which the column loop's guard-free range takes out at run time.
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[40, 6, 40]);
    let b = p.input(1, DType::F32, &[30, 6, 40]);
    let pa = p.pad(&a, &[0, 1, 1], &[30, 1, 1], 0.0);
    let pb = p.pad(&b, &[40, 1, 1], &[0, 1, 1], 0.0);
    let cat = p.binary(BinOp::Add, &pa, &pb);
    p.realize(&cat, BufKind::Output(0), "cat");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    let peeled = |var: &str| src.lines().filter(|l| l.contains(&format!("for (i64 {var} = s{}", &var[1..]))).count();
    let vars: Vec<String> = (0..3).map(|i| format!("v{}", p.kernels[0].vars[i])).collect();
    assert_eq!(peeled(&vars[0]), 2, "{src}");
    assert_eq!(peeled(&vars[1]), 0, "{src}");
    // 3 column segments in each of the 2 channel segments, the interior's cut by the rows' guards.
    assert_eq!(peeled(&vars[2]), 4, "{src}");
    let v = &vars[2][1..];
    assert_eq!(src.matches(&format!("for (i64 {} = g{v}_lo; ", vars[2])).count(), 2, "{src}");
}

#[test]
fn panel_indices_run_by_one_within_aligned_vectors_only() {
    // Column `n` of row `k` of a 96-row weight in panels of 16: (n / 16)·96·16 + k·16 + n % 16.
    let mut ctx = crate::ir::Ctx::new();
    let (n, k) = (ctx.fresh_var(48), ctx.fresh_var(96));
    let (vn, vk) = (ctx.var(n), ctx.var(k));
    let panel = ctx.div_i(vn, 16);
    let panel_base = ctx.mul_i(panel, 96 * 16);
    let row = ctx.mul_i(vk, 16);
    let column = ctx.rem_i(vn, 16);
    let head = ctx.add(panel_base, row);
    let index = ctx.add(head, column);
    let half = ctx.div_i(vn, 2);
    let halves = ctx.add(row, half);
    let free = super::render::free_vars(&ctx, &ctx.toposort(&[index, halves]));
    let runs = |i, lanes, extent| super::tile::runs_of(&ctx, &free, i, n, lanes, extent);
    assert!(runs(index, 8, 48) && runs(index, 16, 48) && runs(index, 4, 48));
    assert!(!runs(index, 32, 64), "a run of 32 crosses a panel");
    assert!(!runs(index, 8, 44), "44 is not whole vectors: the last tile would start unaligned");
    assert!(!runs(halves, 8, 48), "n / 2 does not step by one");
}

/// A `k`×`k` max pooling with stride `s` of `x: [c, h, w]` padded by `pad` with -inf on every
/// side, read through guards (as ONNX MaxPool lowers, no padded copy).
fn guarded_max_pool(c: usize, h: usize, w: usize, k: usize, s: usize, pad: i64) -> Program {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[c, h, w]);
    let y = p.pad(&x, &[0, pad, pad], &[0, pad, pad], f64::NEG_INFINITY);
    let (oh, ow) = ((h + 2 * pad as usize - k) / s + 1, (w + 2 * pad as usize - k) / s + 1);
    let shape = vec![c, oh, ow];
    let vars = p.ctx.fresh_vars(&shape);
    let (dy, dx) = (p.ctx.fresh_var(k as u64), p.ctx.fresh_var(k as u64));
    let [vc, vy, vx, vdy, vdx] = [vars[0], vars[1], vars[2], dy, dx].map(|v| p.ctx.var(v));
    let stride = p.ctx.int(s as i64);
    let (sy, sx) = (p.ctx.mul(vy, stride), p.ctx.mul(vx, stride));
    let (row, col) = (p.ctx.add(sy, vdy), p.ctx.add(sx, vdx));
    let body =
        substitute(&mut p.ctx, y.expr, &HashMap::from([(y.vars[0], vc), (y.vars[1], row), (y.vars[2], col)]), None);
    let inner = p.ctx.reduce(RedOp::Max, dx, k as u64, body);
    let outer = p.ctx.reduce(RedOp::Max, dy, k as u64, inner);
    p.realize(&Lazy { dtype: DType::F32, shape, vars, expr: outer }, BufKind::Output(0), "pool");
    p
}

/// The loops over `v` of `src` and what each contains up to the next one.
fn loops_over<'s>(src: &'s str, v: &str) -> Vec<&'s str> {
    let head = format!("for (i64 {v} = ");
    let starts: Vec<usize> = src.match_indices(&head).map(|(i, _)| i).collect();
    starts.iter().enumerate().map(|(i, &s)| &src[s..starts.get(i + 1).copied().unwrap_or(src.len())]).collect()
}

#[test]
fn a_row_guard_the_parts_fuse_cuts_the_column_loop_around_its_unguarded_range() {
    // The channel and row loops are one counter: the row guard is a value, not a loop's peel.
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[8, 30, 40]);
    let y = p.pad(&x, &[0, 1, 1], &[0, 1, 1], 0.0);
    p.realize(&y, BufKind::Output(0), "pad");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    assert!(src.contains("for (i64 c3 = "), "{src}");
    // Border, interior, border; the interior cut in three by the row's guard.
    let loops = loops_over(&src, "v5");
    assert_eq!(loops.len(), 5, "{src}");
    assert!(src.contains("g5_ok &= (i64)(v4) + 0LL >= 1LL;") && src.contains("g5_ok &= (i64)(v4) + 0LL < 31LL;"));
    let unguarded: Vec<&&str> = loops.iter().filter(|l| !l.contains("t20")).collect();
    assert_eq!(unguarded.len(), 1, "{src}");
    assert!(unguarded[0].contains("b0[((u8)1) ? ") && std::ptr::eq(*unguarded[0], loops[2]), "{src}");
}

#[test]
fn a_pooling_window_runs_unguarded_between_its_border_columns_and_rows() {
    // 3×3, stride 2, padded by 1 on 21×37: output columns 1..18 read no padding, nor rows 1..10.
    let p = guarded_max_pool(4, 21, 37, 3, 2, 1);
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    let loops = loops_over(&src, "v8");
    assert_eq!(loops.len(), 3, "{src}");
    // The row's window fits for rows with 2y ≥ 1 and 2y + 2 < 22, whatever the window's offset.
    assert!(src.contains("g8_ok &= (i64)((t47 + 0)) + 0LL >= 1LL;"), "{src}");
    assert!(src.contains("g8_ok &= (i64)((t47 + 0)) + 2LL < 22LL;"), "{src}");
    // The columns: from ⌈1 / 2⌉, up to ⌊35 / 2⌋.
    assert!(src.contains("(1LL - (i64)(((0 * 2LL) + 0)) >= 0 ? (1LL - (i64)(((0 * 2LL) + 0)) + 1) / 2"), "{src}");
    assert!(src.contains("(35LL - (i64)(((0 * 2LL) + 0)) >= 0 ? (35LL - (i64)(((0 * 2LL) + 0))) / 2"), "{src}");
    assert!(!loops[1].contains(" < 1LL") && !loops[1].contains(" < 38LL"), "{}", loops[1]);
    assert!(loops[1].contains("b0[((u8)1) ? "), "{}", loops[1]);
    assert!(loops[0].contains(" < 1LL") && loops[2].contains(" < 38LL"), "{src}");
}

#[test]
fn a_nearest_upsampling_runs_in_whole_periods_of_its_divisor() {
    // y[c, Y, X] = x[c, Y / 2, X / 2] on a row of 21 (ten whole periods and one more column).
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[3, 4, 11]);
    let shape = vec![3, 8, 21];
    let vars = p.ctx.fresh_vars(&shape);
    let [vc, vy, vx] = [vars[0], vars[1], vars[2]].map(|v| p.ctx.var(v));
    let (y2, x2) = (p.ctx.div_i(vy, 2), p.ctx.div_i(vx, 2));
    let body =
        substitute(&mut p.ctx, x.expr, &HashMap::from([(x.vars[0], vc), (x.vars[1], y2), (x.vars[2], x2)]), None);
    p.realize(&Lazy { dtype: DType::F32, shape, vars: vars.clone(), expr: body }, BufKind::Output(0), "up");
    let src = render(&p, &p.kernels[0], SCALAR4, None).source;
    let v = vars[2];
    // Whole periods from ⌈0 / 2⌉ to ⌊21 / 2⌋, the body once per offset with the column's half fixed.
    assert!(src.contains(&format!("PL_SIMD for (i64 q{v} = ql{v}; q{v} < qh{v}; q{v}++)")), "{src}");
    assert!(src.contains(&format!("const i64 v{v} = 2LL * q{v} + 0LL;")), "{src}");
    assert!(src.contains(&format!("const i64 v{v} = 2LL * q{v} + 1LL;")), "{src}");
    assert_eq!(src.matches(&format!("(1LL * q{v} + 0LL)")).count(), 2, "{src}");
    // The rows' halves are outside the inner loop: not cut.
    assert_eq!(src.matches("PL_SIMD for (i64 q").count(), 1, "{src}");
}

/// Attention's context product: `probs [h, t, t] · v [h, t, s]` written as `[t, h·s]` (a Transpose
/// and a Reshape fused into the product).
fn heads_merged_product(h: usize, t: usize, s: usize) -> Program {
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[h, t, t]);
    let b = p.input(1, DType::F32, &[h, t, s]);
    let a4 = p.reshape(&a, &[h, t, t, 1]);
    let b4 = p.reshape(&b, &[h, 1, t, s]);
    let ab = p.broadcast(&[&a4, &b4]).unwrap();
    let prod = p.binary(BinOp::Mul, &ab[0], &ab[1]);
    let sum = p.reduce(RedOp::Sum, &prod, &[2]);
    let ctx = p.reshape(&sum, &[h, t, s]);
    let ctx = p.permute(&ctx, &[1, 0, 2]);
    let out = p.reshape(&ctx, &[t, h * s]);
    p.realize(&out, BufKind::Output(0), "ctx");
    p
}

#[test]
fn a_divided_inner_dimension_splits_into_a_product_a_tile_takes() {
    let mut p = heads_merged_product(3, 20, 16);
    let mut k = p.kernels[0].clone();
    assert_eq!(k.shape, vec![20, 48]);
    let before = render(&p, &k, SCALAR4, None).source;
    assert!(before.contains("/ 16LL") && !before.contains("pl_v4 acc0_u0_v0"), "{before}");
    super::merge::split_dims(&mut p.ctx, &mut k, &|_| false, 8);
    assert_eq!(k.shape, vec![20, 3, 16]);
    let src = render(&p, &k, SCALAR4, None).source;
    assert!(!src.contains("/ 16LL") && !src.contains("% 16LL"), "{src}");
    assert!(src.contains("pl_v4 acc0_u0_v0 = {0};"), "{src}");

    // Heads of 4 values: rows of 4 would not fill two vectors, the row of 12 stays whole.
    let mut p = heads_merged_product(3, 20, 4);
    let mut k = p.kernels[0].clone();
    super::merge::split_dims(&mut p.ctx, &mut k, &|_| false, 8);
    assert_eq!(k.shape, vec![20, 12]);

    // The same divisions inside a weight's index (a packed panel layout) do not count.
    let mut p = heads_merged_product(3, 20, 16);
    let mut k = p.kernels[0].clone();
    super::merge::split_dims(&mut p.ctx, &mut k, &|_| true, 8);
    assert_eq!(k.shape, vec![20, 48]);
}

#[test]
fn a_depthwise_convolution_written_channels_last_is_computed_rows_innermost() {
    use super::reorder::{natural_order, reorder_transposed_outputs};
    // `out[y, x, c]`: the channel innermost, the input read a plane apart along it.
    let mut p = depthwise(16, 12, 20, 3);
    assert_eq!(natural_order(&p, &p.kernels[0], 4), None, "rows innermost already");
    let k = &mut p.kernels[0];
    let (vars, shape) = (k.vars.clone(), k.shape.clone());
    k.vars = vec![vars[1], vars[2], vars[0]];
    k.shape = vec![shape[1], shape[2], shape[0]];
    assert_eq!(natural_order(&p, &p.kernels[0], 4), Some(vec![0, 2, 1]));
    let out = p.kernels[0].out;
    reorder_transposed_outputs(&mut p, 4);
    let [computed, copy] = &p.kernels[..] else { panic!("two kernels: {:?}", p.kernels) };
    assert_eq!((computed.shape.clone(), copy.shape.clone()), (vec![12, 16, 20], vec![12, 20, 16]));
    assert_eq!(copy.out, out);
    assert!(copy.name.ends_with("_transposed") && computed.out != out);
    let src = render(&p, computed, SCALAR4, None).source;
    assert!(src.contains("pl_v4 acc0_v0 = {0};"), "a register tile along the rows: {src}");

    // A matrix product written transposed gathers its row operand along the innermost dimension
    // (the columns, now outer, would share each gathered row): its columns become the innermost
    // dimension where they fill two vectors, whether its rows are many or fewer than a vector.
    let transposed = |m, n| {
        let mut p = matmul(m, 16, n);
        let k = &mut p.kernels[0];
        k.vars.reverse();
        k.shape.reverse();
        natural_order(&p, &p.kernels[0], 4)
    };
    assert_eq!(transposed(32, 24), Some(vec![1, 0]));
    assert_eq!(transposed(3, 24), Some(vec![1, 0]));
    assert_eq!(transposed(32, 6), None, "6 columns fill less than two vectors");
}

/// `out[i, j] = Σ_k a[i, k] · b[k, j]` with `b` packed in panels of `panel` columns (`[n / panel,
/// kk, panel]`, as `lower::nn` packs a product's constant right operand) and, when `a_columns`,
/// `a` stored transposed (`[kk, m]`).
fn panel_matmul(m: usize, kk: usize, n: usize, panel: usize, a_columns: bool) -> Program {
    let mut p = Program::new();
    let a = if a_columns {
        let at = p.input(0, DType::F32, &[kk, m]);
        p.permute(&at, &[1, 0])
    } else {
        p.input(0, DType::F32, &[m, kk])
    };
    let packed = p.input(1, DType::F32, &[n / panel, kk, panel]);
    let moved = p.permute(&packed, &[1, 0, 2]);
    let b = p.reshape(&moved, &[kk, n]);
    realize_product(&mut p, &a, &b);
    p
}

#[test]
fn weights_packed_in_panels_read_as_contiguous_rows_for_reordering() {
    use super::reorder::natural_order;
    // Written transposed (`out[n, m]`): the gathered row operand is replaced by the panels,
    // which step by one within each vector of 4 columns.
    let mut p = panel_matmul(20, 16, 24, 4, false);
    let k = &mut p.kernels[0];
    k.vars.reverse();
    k.shape.reverse();
    assert_eq!(natural_order(&p, &p.kernels[0], 4), Some(vec![1, 0]));
    // Panels of 2 columns (18 of them, which 4 does not divide either): no aligned vector of 4
    // steps by one.
    let mut p = panel_matmul(20, 16, 18, 2, false);
    let k = &mut p.kernels[0];
    k.vars.reverse();
    k.shape.reverse();
    assert_eq!(natural_order(&p, &p.kernels[0], 4), None);
    // In place order the panels are the innermost dimension's tile operand: nothing moves, though
    // the rows (of a transposed `a`) step by one.
    let p = panel_matmul(20, 16, 24, 4, true);
    assert_eq!(natural_order(&p, &p.kernels[0], 4), None);
}

/// A product `[m, kk]·[kk, n]` realized into scratch, and `consumer` of it realized as the output.
fn product_then(m: usize, kk: usize, n: usize, consumer: impl Fn(&mut Program, &Lazy) -> Lazy) -> Program {
    let mut p = matmul(m, kk, n);
    let out = p.kernels[0].out;
    p.bufs[out as usize].kind = BufKind::Scratch;
    let y = p.view_buf(out, &[m, n]);
    let z = consumer(&mut p, &y);
    p.realize(&z, BufKind::Output(0), "consumer");
    p
}

#[test]
fn an_elementwise_consumer_becomes_its_producers_epilogue() {
    use super::epilogue::fold_elementwise_consumers;
    // y·y + y: the one kernel reading the product, at its own coordinates.
    let mut p = product_then(8, 32, 16, |p, y| {
        let sq = p.binary(BinOp::Mul, y, y);
        p.binary(BinOp::Add, &sq, y)
    });
    let (scratch, out) = (p.kernels[0].out, p.kernels[1].out);
    fold_elementwise_consumers(&mut p);
    let [k] = &p.kernels[..] else { panic!("{:?}", p.kernels) };
    assert_eq!((k.name.as_str(), k.out), ("k0_mm", out));
    assert!(p.ctx.has_reduce(k.expr) && !p.ctx.loads(k.expr).contains(&scratch));

    // Read shifted (a transpose), or with a transcendental function: both kernels stay.
    let mut p = product_then(16, 32, 16, |p, y| p.permute(y, &[1, 0]));
    fold_elementwise_consumers(&mut p);
    assert_eq!(p.kernels.len(), 2);
    let mut p = product_then(8, 32, 16, |p, y| p.unary(UnOp::Exp, y));
    fold_elementwise_consumers(&mut p);
    assert_eq!(p.kernels.len(), 2);
}

#[test]
fn rows_that_four_does_not_divide_are_blocked_by_a_divisor() {
    // 49 rows (a 7×7 map): blocks of 7 replicas, two vectors of 16 columns each.
    let p = matmul(49, 32, 64);
    let src = render(&p, &p.kernels[0], VecUnit { lanes: 16, regs: 32 }, None).source;
    assert!(src.contains("pl_v16 acc0_u6_v1 = {0};") && !src.contains("acc0_u7_"), "{src}");
    assert_eq!(super::upcast::block_for(49), Some(7));
    assert_eq!(super::upcast::block_for(24), Some(4));
    assert_eq!(super::upcast::block_for(11), None);
}
