//! Loops the CPU code generator cuts by their index arithmetic, through the whole pipeline (C code
//! generator, CPU runtime on two threads), against onnxruntime:
//! - guarded reads of padding: pooling windows (max pooling over rows of more than two vectors
//!   reads its input through guards) and padded copies, cut around the range where every guard
//!   holds, on odd sizes, strides, dilations and asymmetric pads (`target::cpu::guards`);
//! - divided indices: nearest upsampling and depth-to-space, run in whole periods of their
//!   divisors, on rows that are not whole periods and after padding (`target::cpu::period`);
//!   attention's per-head products written as one row per token, the row split back into heads
//!   (`target::cpu::merge`);
//! - transposed outputs: depthwise convolutions written channels-last, computed rows innermost and
//!   copied transposed, and a product with packed weights written channels-first, computed
//!   channels innermost (`target::cpu::reorder`); a stride-2 convolution reading its unpadded input
//!   up to its last element two vectors at a time (`target::cpu::READ_PAST`);
//! - a swish before depthwise convolutions whose padded copy has short or phase-split rows,
//!   computed on its own before the copy (`lower::LowerCtx::windowed_input`);
//! - an elementwise consumer of a convolution folded into its epilogue (`target::cpu::epilogue`).

use std::path::Path;
use std::process::Command;

#[allow(dead_code)] // the helpers this file does not use (`close`, ...)
mod common;

use common::node::run_case_on;
use pilot_core::{Backend, Target};

/// Builds the model of `snippet` with the venv's onnx, runs it with onnxruntime, and writes it as
/// a node test: `model.onnx` and `test_data_set_0/{input,output}_K.pb`. The snippet calls
/// `run(nodes, ins, outs)`: `ins` are `(name, array)`, `outs` `(name, shape)` pairs.
const HARNESS: &str = r#"
import os, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(0)

def run(nodes, ins, outs):
    g = h.make_graph(
        nodes, "t",
        [h.make_tensor_value_info(n, T.FLOAT, a.shape) for n, a in ins],
        [h.make_tensor_value_info(n, T.FLOAT, None) for n in outs],
    )
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 19)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    data = os.path.join(out, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for j, (n, a) in enumerate(ins):
        open(os.path.join(data, f"input_{j}.pb"), "wb").write(nh.from_array(a, n).SerializeToString())
    for k, v in enumerate(sess.run(None, dict(ins))):
        open(os.path.join(data, f"output_{k}.pb"), "wb").write(nh.from_array(v).SerializeToString())

def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)
"#;

fn two_threads() -> Result<Box<dyn pilot_core::Device>, String> {
    Ok(Box::new(pilot_core::cpu::CpuDevice::new(2)))
}

/// Builds the case of `snippet` (see [`HARNESS`]), compiles it for this machine's CPU and steps it
/// on two threads; returns the names of the artifact's kernels, in step order.
fn check(name: &str, snippet: &str) -> Vec<String> {
    let py = pilot_test_support::venv_python().expect("the venv with onnx and onnxruntime (scripts/setup.sh)");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(py).arg("-c").arg(format!("{HARNESS}\n{snippet}")).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{name}: building the model failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    run_case_on(Path::new(dir.path()), &opts, two_threads, None).unwrap_or_else(|e| panic!("{name}: {e}"));
    let art = dir.path().join("names.pkl");
    pilot_compiler::compile(&dir.path().join("model.onnx"), &art, &opts, &|_| {}).unwrap();
    pilot_core::Artifact::open(&art).unwrap().manifest.programs.iter().map(|p| p.name.clone()).collect()
}

#[test]
fn max_pooling_with_strides_dilations_and_asymmetric_pads() {
    check(
        "maxpool_s2",
        r#"run([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
    [("x", f32(1, 6, 37, 75))], ["y"])"#,
    );
    check(
        "maxpool_dilated_asymmetric",
        r#"run([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 3], pads=[2, 1, 0, 2])],
    [("x", f32(1, 3, 29, 45))], ["y"])"#,
    );
    check(
        "maxpool_ceil",
        r#"run([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1)],
    [("x", f32(2, 4, 30, 69))], ["y"])"#,
    );
}

#[test]
fn average_pooling_excluding_the_padding() {
    check(
        "averagepool_exclude_pad",
        r#"run([h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
    [("x", f32(1, 5, 30, 31))], ["y"])"#,
    );
}

#[test]
fn padded_copies_and_strided_depthwise_convolutions() {
    check(
        "pad_asymmetric",
        r#"pads = nh.from_array(np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64))
run([h.make_node("Constant", [], ["p"], value=pads),
     h.make_node("Constant", [], ["v"], value=nh.from_array(np.array(0.5, np.float32))),
     h.make_node("Add", ["x", "z"], ["s"]),
     h.make_node("Pad", ["s", "p", "v"], ["y"]),
     h.make_node("Relu", ["y"], ["r"])],
    [("x", f32(1, 4, 19, 23)), ("z", f32(1, 4, 19, 23))], ["r"])"#,
    );
    check(
        "depthwise_s2",
        r#"w = nh.from_array(f32(8, 1, 3, 3))
run([h.make_node("Constant", [], ["w"], value=w),
     h.make_node("Add", ["x", "z"], ["s"]),
     h.make_node("Conv", ["s", "w"], ["y"], group=8, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
    [("x", f32(1, 8, 30, 34)), ("z", f32(1, 8, 30, 34))], ["y"])"#,
    );
}

#[test]
fn nearest_upsampling_added_concatenated_and_padded() {
    // An FPN's merge: a coarse map upsampled 2× and 4× (nearest) onto a fine one, then padded for a
    // 3×3 convolution; odd widths leave a partial period.
    check(
        "upsample_add_pad",
        r#"scales = lambda s: nh.from_array(np.array([1, 1, s, s], np.float32))
w = nh.from_array(f32(4, 4, 3, 3))
run([h.make_node("Constant", [], ["s2"], value=scales(2)),
     h.make_node("Constant", [], ["s4"], value=scales(4)),
     h.make_node("Constant", [], ["w"], value=w),
     h.make_node("Resize", ["a", "", "s2"], ["a2"], mode="nearest"),
     h.make_node("Resize", ["b", "", "s4"], ["b4"], mode="nearest"),
     h.make_node("Add", ["a2", "x"], ["s"]),
     h.make_node("Add", ["s", "b4"], ["t"]),
     h.make_node("Conv", ["t", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
    [("x", f32(1, 4, 24, 44)), ("a", f32(1, 4, 12, 22)), ("b", f32(1, 4, 6, 11))], ["y"])"#,
    );
    check(
        "upsample_concat",
        r#"run([h.make_node("Constant", [], ["s2"], value=nh.from_array(np.array([1, 1, 2, 2], np.float32))),
     h.make_node("Resize", ["a", "", "s2"], ["a2"], mode="nearest"),
     h.make_node("Concat", ["a2", "x"], ["y"], axis=1)],
    [("x", f32(1, 3, 26, 38)), ("a", f32(1, 5, 13, 19))], ["y"])"#,
    );
}

#[test]
fn depth_to_space_and_its_sigmoid() {
    check(
        "depth_to_space",
        r#"run([h.make_node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="CRD"),
     h.make_node("Sigmoid", ["d"], ["y"])],
    [("x", f32(1, 8, 17, 35))], ["y"])"#,
    );
}

#[test]
fn attention_context_written_as_one_row_per_token() {
    // probs · v per head, transposed and reshaped to [tokens, heads·size]: the product's output row
    // is split back into heads (`target::cpu::merge::split_dims`) on heads of 32 and 64 values.
    for (heads, size) in [(3, 64), (5, 32)] {
        check(
            &format!("attention_context_{heads}x{size}"),
            &format!(
                r#"t, hs = 50, {heads} * {size}
shape = nh.from_array(np.array([1, t, hs], np.int64))
run([h.make_node("Constant", [], ["shape"], value=shape),
     h.make_node("Softmax", ["s"], ["p"], axis=-1),
     h.make_node("MatMul", ["p", "v"], ["c"]),
     h.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
     h.make_node("Reshape", ["ct", "shape"], ["r"]),
     h.make_node("Add", ["r", "x"], ["y"])],
    [("s", f32(1, {heads}, t, t)), ("v", f32(1, {heads}, t, {size})), ("x", f32(1, t, hs))], ["y"])"#
            ),
        );
    }
}

#[test]
fn depthwise_convolutions_written_channels_last() {
    // ConvNeXt's block: a 7×7 depthwise convolution transposed to channels-last before its
    // LayerNorm. The convolution is computed rows innermost, then transposed
    // (`target::cpu::reorder`), on maps of 7 to 29 columns.
    for (c, hw) in [(24, 29), (40, 7)] {
        check(
            &format!("depthwise_channels_last_{c}x{hw}"),
            &format!(
                r#"c = {c}
run([h.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=c),
     h.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 3, 1]),
     h.make_node("LayerNormalization", ["t", "g", "beta"], ["n"], axis=-1, epsilon=1e-6)],
    [("x", f32(1, c, {hw}, {hw})), ("w", f32(c, 1, 7, 7)), ("b", f32(c)), ("g", f32(c)), ("beta", f32(c))], ["n"])"#
            ),
        );
    }
}

#[test]
fn a_pointwise_product_on_a_narrow_map_written_channels_first() {
    // ConvNeXt's last stage: the product over channels-last rows of a 7×7 map, transposed back to
    // channels-first and added: computed channels innermost over 49 rows, then transposed.
    let names = check(
        "pointwise_7x7_channels_first",
        r#"run([h.make_node("MatMul", ["x", "w"], ["m"]),
     h.make_node("Transpose", ["m"], ["y"], perm=[0, 3, 1, 2]),
     h.make_node("Add", ["y", "r"], ["z"])],
    [("x", f32(1, 7, 7, 48)), ("w", f32(48, 40)), ("r", f32(1, 40, 7, 7))], ["z"])"#,
    );
    assert!(names.iter().any(|n| n.ends_with("_transposed")), "{names:?}");
}

#[test]
fn a_swish_before_short_or_phase_split_padded_copies_is_computed_before_them() {
    // EfficientNet's expansion: Sigmoid·x, then a 3×3 stride-2 depthwise convolution (its copy splits
    // the two phases) or a 5×5 one on a 14-column map (rows of 18 cut by the padding's guards).
    for (k, stride, hw) in [(3, 2, 29), (5, 1, 14)] {
        let names = check(
            &format!("swish_depthwise_{k}x{k}_s{stride}"),
            &format!(
                r#"c, k = 24, {k}
run([h.make_node("Sigmoid", ["x"], ["s"]),
     h.make_node("Mul", ["x", "s"], ["a"]),
     h.make_node("Conv", ["a", "w"], ["y"], kernel_shape=[k, k], strides=[{stride}, {stride}], pads=[k // 2] * 4,
                 group=c, name="dw")],
    [("x", f32(1, c, {hw}, {hw})), ("w", f32(c, 1, k, k))], ["y"])"#
            ),
        );
        let at = |suffix: &str| names.iter().position(|n| n.ends_with(suffix));
        assert!(matches!((at("dw_in"), at("dw_pad")), (Some(a), Some(b)) if a < b), "{names:?}");
    }
}

#[test]
fn an_elementwise_consumer_of_a_convolution_runs_in_its_epilogue() {
    // The convolution's output is used twice (y·y + y), so lowering realizes it; the kernel that
    // reads it back is folded into the convolution (`target::cpu::epilogue`).
    let names = check(
        "conv_square_add",
        r#"run([h.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
     h.make_node("Mul", ["y", "y"], ["s"]),
     h.make_node("Add", ["s", "y"], ["z"]),
     h.make_node("Relu", ["z"], ["r"])],
    [("x", f32(1, 8, 21, 37)), ("w", f32(16, 8, 3, 3))], ["r"])"#,
    );
    // The padded copy, then the convolution (realized as `y`) writing the model's output.
    assert!(names.len() == 2 && names[1].ends_with("_y"), "{names:?}");
}

#[test]
fn a_channels_last_product_added_channels_first_then_downsampled() {
    // ConvNeXt's stage boundary: the block's second product over channels-last rows (constant
    // weights, packed in panels), transposed back and added to the residual, then the 2×2 stride-2
    // downsampling convolution. The product is computed channels innermost and transposed; the
    // convolution reads its unpadded input two vectors at a time, its last one a float past it (the
    // loads themselves are checked by `target::cpu::tests`; here, the results).
    let names = check(
        "channels_last_product_then_downsample",
        r#"def const(name, a):
    return h.make_node("Constant", [], [name], value=nh.from_array(a, name))
run([const("w", f32(96, 48)), const("d", f32(32, 48, 2, 2)),
     h.make_node("MatMul", ["x", "w"], ["m"]),
     h.make_node("Transpose", ["m"], ["y"], perm=[0, 3, 1, 2]),
     h.make_node("Add", ["y", "r"], ["z"]),
     h.make_node("Conv", ["z", "d"], ["o"], kernel_shape=[2, 2], strides=[2, 2])],
    [("x", f32(1, 28, 28, 96)), ("r", f32(1, 48, 28, 28))], ["o"])"#,
    );
    assert!(names.iter().any(|n| n.ends_with("_transposed")), "{names:?}");
}
