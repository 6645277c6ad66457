//! Semantic verification of the step: hand-edited dispatches that pass the structural checks but would
//! make a kernel reach outside its buffers (the crashes a hostile user found on cpu, cl and qcom) are
//! refused, each with the path of the argument or field at fault.

use super::{arg, manifest, refused};
use crate::artifact::schema::{Manifest, ParamKind};
use crate::device::{Arg, StepOp};
use crate::DType;

/// Edits dispatch `op` of the test manifest (0: `k`, 2: `img`).
fn dispatch(op: usize, edit: impl FnOnce(&mut Vec<Arg>, &mut [u32; 3], &mut [u32; 3])) -> impl FnOnce(&mut Manifest) {
    move |m| match &mut m.step[op] {
        StepOp::Dispatch { args, global, local, .. } => edit(args, global, local),
        StepOp::Copy { .. } => unreachable!("op {op} is a dispatch"),
    }
}

#[test]
fn arguments_must_hold_the_extent_the_kernel_reaches() {
    // An offset exactly at the end of a buffer: in range as an address, but the kernel reads 16 bytes.
    refused(
        dispatch(0, |a, _, _| a[0] = arg(0, 16)),
        "step[0].args[0]: `k` reaches 16 bytes from offset 16, past the end of buffer 0 (16 bytes)",
    );
    // The 64-byte weight argument pointed at a 4-byte scratch, or at the 16-byte output.
    refused(
        dispatch(0, |a, _, _| a[1] = arg(3, 0)),
        "`k` reaches 64 bytes from offset 0, past the end of buffer 3 (4 bytes)",
    );
    refused(dispatch(0, |a, _, _| a[1] = arg(2, 0)), "past the end of buffer 2 (16 bytes)");
    // Two arguments swapped: the 16-byte input where 64 bytes are read.
    refused(
        dispatch(0, |a, _, _| a.swap(0, 1)),
        "step[0].args[1]: `k` reaches 64 bytes from offset 0, past the end of buffer 0",
    );
    // Inside a byte arena: up to its last byte, aligned to the element type.
    refused(dispatch(2, |a, _, _| a[1] = arg(5, 1012)), "step[2].args[1]: `img` reaches 16 bytes from offset 1012");
    refused(dispatch(2, |a, _, _| a[1] = arg(5, 514)), "step[2].args[1]: offset 514 is not aligned to float32");
    let mut m = manifest();
    dispatch(2, |a, _, _| a[1] = arg(5, 1008))(&mut m);
    super::write(&mut m, &[0u8; 64], b"code").expect("the arena's last 16 bytes are in bounds");
}

#[test]
fn kernels_never_write_weights_or_inputs() {
    // The weight may be a read-only map of the artifact (CPU), the input host memory (QCOM).
    refused(dispatch(0, |a, _, _| a[2] = arg(1, 0)), "step[0].args[2]: `k` writes here, buffer 1 is a weight buffer");
    refused(dispatch(0, |a, _, _| a[2] = arg(0, 0)), "step[0].args[2]: `k` writes here, buffer 0 is a input buffer");
}

#[test]
fn images_where_images_are_read_and_plain_buffers_elsewhere() {
    refused(
        dispatch(2, |a, _, _| a[0] = arg(2, 0)),
        "step[2].args[0]: `img` takes an image here, buffer 2 is a plain buffer",
    );
    refused(
        dispatch(0, |a, _, _| a[0] = arg(4, 0)),
        "step[0].args[0]: `k` takes a plain buffer here, buffer 4 is an image",
    );
    refused(
        |m| m.programs[1].params[0].kind = ParamKind::Image { width: 4, height: 1 },
        "`img` takes a 4x1 image, buffer 4 is 2x2",
    );
    refused(
        |m| m.programs[0].params[1].dtype = DType::F16,
        "step[0].args[1]: `k` takes float16 here, buffer 1 holds float32",
    );
}

#[test]
fn the_grid_is_the_one_the_kernel_was_compiled_for() {
    // Doubling a dispatch's global size; the qcom case: global[1] 2 -> 6.
    refused(dispatch(0, |_, g, _| g[0] = 8), "step[0].global: [8, 1, 1], but program `k` was compiled for [4, 1, 1]");
    refused(dispatch(2, |_, g, _| g[1] = 6), "step[2].global: [2, 6, 1], but program `img` was compiled for [2, 2, 1]");
    refused(
        dispatch(2, |_, _, l| *l = [2, 2, 1]),
        "step[2].local: [2, 2, 1], but program `img` was compiled for [0, 0, 0]",
    );
}

#[test]
fn argument_counts_agree() {
    refused(
        |m| m.programs[0].params.pop().map(drop).unwrap_or(()),
        "programs[0].params: describes 2 arguments, the program takes 3",
    );
    refused(dispatch(0, |a, _, _| a.push(arg(0, 0))), "step[0].args: 4 arguments, program `k` takes 3");
}
