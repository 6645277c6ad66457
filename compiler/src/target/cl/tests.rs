//! The OpenCL renderer on small hand-built kernels: work-item mapping, accumulators, half storage
//! and images (writes by pixel, reads through the sampler, guarded reads counted as gated, guards the
//! border gives dropped).

use pilot_core::gates::read_image_counts;
use pilot_core::DType;

use super::prepare::prepare;
use super::render::{render, ClKernel};
use crate::ir::{BinOp, RedOp, UnOp};
use crate::program::{BufKind, Program};

/// Renders every kernel of `p`, as the back end does with local reductions (`locals`) or without.
fn render_with(p: &mut Program, locals: bool) -> Vec<ClKernel> {
    (0..p.kernels.len())
        .map(|i| {
            let k = p.kernels[i].clone();
            let prep = prepare(p, &k, !locals);
            render(p, &k, &prep, locals).unwrap()
        })
        .collect()
}

/// Renders every kernel of `p`, as the back end does.
fn render_all(p: &mut Program) -> Vec<ClKernel> {
    render_with(p, true)
}

#[test]
fn one_work_item_per_element_with_half_as_storage_only() {
    let mut p = Program::new();
    let x = p.input(0, DType::F16, &[4, 5]);
    let y = p.unary(UnOp::Exp, &x);
    p.realize(&y, BufKind::Output(0), "e");
    let k = &render_all(&mut p)[0];
    assert_eq!(k.global, [5, 4, 1], "innermost dimension first");
    let src = &k.source;
    assert!(src.starts_with("__kernel void k0_e(__global half *restrict b1, __global const half *restrict b0)"));
    assert!(src.contains("= get_global_id(0);") && src.contains("= get_global_id(1);"), "{src}");
    assert!(src.contains("vload_half(") && src.contains("vstore_half("), "{src}");
    assert!(!src.contains("b0[") && !src.contains(" half t"), "no half arithmetic or direct half reads:\n{src}");
}

#[test]
fn a_reduction_is_a_loop_with_a_private_accumulator() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[4, 8]);
    let e = p.unary(UnOp::Exp, &x);
    let m = p.reduce(RedOp::Max, &e, &[1]);
    p.realize(&m, BufKind::Output(0), "rowmax");
    let k = &render_all(&mut p)[0];
    let src = &k.source;
    assert_eq!(k.global, [4, 1, 1]);
    let acc = src.find("float acc").unwrap_or_else(|| panic!("{src}"));
    let lp = src.find("for (long v").unwrap();
    let fold = src.find("= pl_fmax(acc").unwrap();
    let store = src.find("b1[").unwrap();
    assert!(acc < lp && lp < fold && fold < store, "{src}");
    assert!(src.contains("(-INFINITY)"), "{src}");
}

#[test]
fn images_are_written_by_pixel_and_read_through_the_sampler() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[2, 3, 4]);
    let img = p.realize_image(&x, 2, 3, "img");
    let two = p.full(DType::F32, &[2, 3, 4], 2.0);
    let y = p.binary(BinOp::Mul, &img, &two);
    let s = p.reduce(RedOp::Sum, &y, &[2]);
    p.realize(&s, BufKind::Output(0), "out");
    let ks = render_all(&mut p);
    let (write, read) = (&ks[0], &ks[1]);
    // The writer: one work-item per pixel (width × height), four channels in one write.
    assert_eq!(write.global, [3, 2, 1]);
    assert!(write.source.contains("write_only image2d_t b1"), "{}", write.source);
    assert!(write.source.contains("write_imagef(b1, (int2)(") && write.source.contains("(float4)("));
    // The reader: the channel reduction is unrolled over one pixel read, no gate.
    assert!(read.source.contains("read_only image2d_t b1"), "{}", read.source);
    assert_eq!(read_image_counts(&read.source), (1, 0), "{}", read.source);
    assert!(read.source.contains("read_imagef(b1, smp, (int2)("));
    for c in ["x", "y", "z", "w"] {
        assert!(read.source.contains(&format!("px0.{c}")), "{}", read.source);
    }
    assert!(!read.source.contains("for ("), "unrolled:\n{}", read.source);
}

#[test]
fn padded_image_reads_leave_the_border_to_the_sampler_and_half_images_store_half() {
    let mut p = Program::new();
    let x = p.input(0, DType::F16, &[2, 3, 4]);
    let img = p.realize_image(&x, 2, 3, "img");
    // Rows and columns padded: a read outside the image is the sampler's transparent black.
    let padded = p.pad(&img, &[1, 2, 0], &[1, 1, 0], 0.0);
    p.realize(&padded, BufKind::Output(0), "out");
    let ks = render_all(&mut p);
    assert!(ks[0].source.contains("vload_half("), "a half input is read as float:\n{}", ks[0].source);
    let src = &ks[1].source;
    assert_eq!(read_image_counts(src), (1, 0), "{src}");
    assert!(!src.contains("?read_imagef("), "{src}");
    assert_eq!(ks[1].global, [4, 6, 4]);
}

#[test]
fn guards_the_border_cannot_give_stay() {
    let mut p = Program::new();
    let x = p.input(0, DType::F32, &[2, 3, 4]);
    let img = p.realize_image(&x, 2, 3, "img");
    // Padding the channels inside a pixel: channel -1 of a pixel is the previous pixel's last.
    let padded = p.pad(&img, &[0, 0, 1], &[0, 0, 1], 0.0);
    p.realize(&padded, BufKind::Output(0), "out");
    let src = &render_all(&mut p)[1].source;
    assert_eq!(read_image_counts(src), (1, 1), "{src}");
    assert!(src.contains("?read_imagef(") && src.contains(": (float4)(0.0f)"), "{src}");
    assert!(src.contains("pl_channel(px0,"), "a channel chosen at run time:\n{src}");
}

/// Renders every kernel of `p` as the no-locals targets do (`--nolocals`, ir3).
fn render_all_per_item(p: &mut Program) -> Vec<ClKernel> {
    render_with(p, false)
}

/// `y[n] = Σ_k x[k]·w[k, n]` over `n` outputs: a vector every output reads, a matrix it does not share.
fn product(p: &mut Program, n: usize) {
    let x = p.input(0, DType::F32, &[8, 1]);
    let w = p.input(1, DType::F32, &[8, n]);
    let xe = p.expand(&x, &[8, n]);
    let prod = p.binary(BinOp::Mul, &xe, &w);
    let y = p.reduce(RedOp::Sum, &prod, &[0]);
    p.realize(&y, BufKind::Output(0), "y");
}

#[test]
fn a_wide_reduction_writes_four_outputs_per_work_item_that_share_the_vector() {
    let mut p = Program::new();
    product(&mut p, 1 << 15);
    let k = &render_all_per_item(&mut p)[0];
    let src = &k.source;
    assert_eq!(k.global, [1 << 13, 1, 1], "a quarter of the outputs:\n{src}");
    assert_eq!(src.matches("for (").count(), 1, "the four outputs' reductions are one loop:\n{src}");
    assert_eq!(src.matches("b0[").count(), 1, "the vector is read once per iteration:\n{src}");
    assert_eq!(src.matches("b1[").count(), 4, "{src}");
    for j in 0..4 {
        assert!(src.contains(&format!(" * 4 + {j}; b2[")), "output {j} stored at 4·q + {j}:\n{src}");
    }
    // With local reductions (or too few outputs to fill the GPU) a work-item keeps one output.
    let mut p = Program::new();
    product(&mut p, 1 << 15);
    assert_eq!(render_all(&mut p)[0].global, [1 << 15, 1, 1]);
    let mut p = Program::new();
    product(&mut p, 1024);
    assert_eq!(render_all_per_item(&mut p)[0].global, [1024, 1, 1]);
}

#[test]
fn outermost_reductions_of_one_extent_share_a_loop() {
    let mut p = Program::new();
    let a = p.input(0, DType::F32, &[8, 16]);
    let b = p.input(1, DType::F32, &[8, 16]);
    let sa = p.reduce(RedOp::Sum, &a, &[0]);
    let eb = p.unary(UnOp::Exp, &b);
    let sb = p.reduce(RedOp::Max, &eb, &[0]);
    let y = p.binary(BinOp::Mul, &sa, &sb);
    p.realize(&y, BufKind::Output(0), "y");
    let src = &render_all_per_item(&mut p)[0].source;
    assert_eq!(src.matches("for (").count(), 1, "{src}");
    assert!(src.contains("acc") && src.contains("pl_fmax(acc"), "both accumulators in the one loop:\n{src}");
}
