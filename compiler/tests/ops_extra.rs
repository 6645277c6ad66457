//! Tests of the Resize/Upsample, recurrent (LSTM, GRU, RNN) and miscellaneous operators.
//!
//! Two kinds of checks, both through import → lowering → the reference executor:
//! - ONNX backend node cases whose shape-like inputs (Resize scales/sizes, TopK's k, ...) are graph
//!   inputs there: the case's own input values are folded in as initializers first, which is how a
//!   deployed model carries them;
//! - small models built and run with onnxruntime by the project's venv (openpilot-like shapes),
//!   compared at scaled error ≤ 1e-4.

use std::path::Path;
use std::process::Command;

mod common;

use common::{close, data_sets, read_pb};
use pilot_compiler::onnx;
use pilot_compiler::tensor::Tensor;

fn run_folded(dir: &Path, fold: &[&str]) -> Result<(), String> {
    let model = onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let sets = data_sets(dir)?;
    let names: Vec<String> = model.graph.real_inputs().map(|v| v.name.clone()).collect();
    for set in sets {
        let mut m = model.clone();
        let mut inputs = Vec::new();
        for (j, name) in names.iter().enumerate() {
            let t = read_pb(&set.join(format!("input_{j}.pb")));
            if fold.contains(&name.as_str()) {
                m.graph.initializers.push((name.clone(), t));
            } else {
                inputs.push(t);
            }
        }
        let lowered = pilot_compiler::lower::lower(&m, &Default::default()).map_err(|e| e.to_string())?;
        let outs = pilot_compiler::exec::run(&lowered.program, &inputs)?;
        for (k, got) in outs.iter().enumerate() {
            let want = read_pb(&set.join(format!("output_{k}.pb")));
            close(got, &want).map_err(|e| format!("output {k}: {e}"))?;
        }
    }
    Ok(())
}

/// Runs `cases` (name, inputs to fold), reporting every failure at once.
fn run_cases(cases: &[(&str, &[&str])]) {
    let dir = common::node::node_dir();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|&(c, fold)| run_folded(&dir.join(c), fold).err().map(|e| format!("{c}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn resize_node_cases() {
    let cases: Vec<(&str, &[&str])> = [
        "test_resize_downsample_scales_cubic",
        "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_downsample_scales_cubic_align_corners",
        "test_resize_downsample_scales_cubic_antialias",
        "test_resize_downsample_scales_linear",
        "test_resize_downsample_scales_linear_align_corners",
        "test_resize_downsample_scales_linear_antialias",
        "test_resize_downsample_scales_linear_half_pixel_symmetric",
        "test_resize_downsample_scales_nearest",
        "test_resize_upsample_scales_cubic",
        "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_upsample_scales_cubic_align_corners",
        "test_resize_upsample_scales_cubic_asymmetric",
        "test_resize_upsample_scales_linear",
        "test_resize_upsample_scales_linear_align_corners",
        "test_resize_upsample_scales_linear_half_pixel_symmetric",
        "test_resize_upsample_scales_nearest",
        "test_resize_upsample_scales_nearest_axes_2_3",
        "test_resize_upsample_scales_nearest_axes_3_2",
        "test_resize_downsample_sizes_cubic",
        "test_resize_downsample_sizes_cubic_antialias",
        "test_resize_downsample_sizes_linear_antialias",
        "test_resize_downsample_sizes_linear_pytorch_half_pixel",
        "test_resize_downsample_sizes_nearest",
        "test_resize_downsample_sizes_nearest_not_larger",
        "test_resize_downsample_sizes_nearest_not_smaller",
        "test_resize_tf_crop_and_resize",
        "test_resize_tf_crop_and_resize_axes_2_3",
        "test_resize_tf_crop_and_resize_axes_3_2",
        "test_resize_tf_crop_and_resize_extrapolation_value",
        "test_resize_upsample_sizes_cubic",
        "test_resize_upsample_sizes_nearest",
        "test_resize_upsample_sizes_nearest_axes_2_3",
        "test_resize_upsample_sizes_nearest_axes_3_2",
        "test_resize_upsample_sizes_nearest_ceil_half_pixel",
        "test_resize_upsample_sizes_nearest_floor_align_corners",
        "test_resize_upsample_sizes_nearest_not_larger",
        "test_resize_upsample_sizes_nearest_not_smaller",
        "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
        "test_upsample_nearest",
    ]
    .iter()
    .map(|&c| (c, &["roi", "scales", "sizes"][..]))
    .collect();
    run_cases(&cases);
}

#[test]
fn shape_input_node_cases() {
    let mut cases: Vec<(&str, &[&str])> =
        vec![("test_lstm_with_peepholes", &["sequence_lens"]), ("test_nonzero_example", &["condition"])];
    for c in ["test_compress_0", "test_compress_1", "test_compress_default_axis", "test_compress_negative_axis"] {
        cases.push((c, &["condition"]));
    }
    for c in [
        "test_onehot_negative_indices",
        "test_onehot_out_of_range_indices",
        "test_onehot_with_axis",
        "test_onehot_with_negative_axis",
        "test_onehot_without_axis",
    ] {
        cases.push((c, &["depth"]));
    }
    for c in [
        "test_top_k",
        "test_top_k_negative_axis",
        "test_top_k_same_values",
        "test_top_k_same_values_2d",
        "test_top_k_same_values_largest",
        "test_top_k_smallest",
        "test_top_k_uint64",
    ] {
        cases.push((c, &["k"]));
    }
    run_cases(&cases);
}

/// Builds a model with the venv's onnx, runs it with onnxruntime, and writes `model.onnx`,
/// `in{j}.npy` (graph input order) and `out{k}.npy` to the directory in argv[1]. The snippet calls
/// `run(node, ins, outs, inits=(), opset=...)`: `ins` and `inits` are `(name, array)` lists, `outs`
/// `(name, onnx element type)` pairs.
const HARNESS: &str = r#"
import os, sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(0)

def run(node, ins, outs, inits=(), opset=19):
    g = h.make_graph(
        [node], "t",
        [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in ins],
        [h.make_tensor_value_info(n, t, None) for n, t in outs],
        [nh.from_array(a, n) for n, a in inits],
    )
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, "model.onnx"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = dict(ins)
    for j, (n, a) in enumerate(ins):
        np.save(os.path.join(out, f"in{j}.npy"), a)
    for k, v in enumerate(sess.run(None, feeds)):
        np.save(os.path.join(out, f"out{k}.npy"), np.ascontiguousarray(v))

def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)
"#;

fn read_npy(path: &Path) -> Tensor {
    let a = pilot_core::npy::read(path).unwrap();
    Tensor { dtype: a.dtype, shape: a.shape, data: a.data }
}

/// Runs `snippet` (see [`HARNESS`]) and compares pilot's reference executor with onnxruntime.
fn check_ort(name: &str, snippet: &str) {
    let Some(py) = pilot_test_support::venv_python() else { return };
    let dir = std::env::temp_dir().join(format!("pilot_ops_extra_{}_{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(py).arg("-c").arg(format!("{HARNESS}\n{snippet}")).arg(&dir).output().expect("python runs");
    assert!(
        out.status.success(),
        "{name}: building/running the model failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = onnx::load(&dir.join("model.onnx")).unwrap();
    let lowered = pilot_compiler::lower::lower(&model, &Default::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let inputs: Vec<Tensor> = (0..lowered.inputs.len()).map(|j| read_npy(&dir.join(format!("in{j}.npy")))).collect();
    let outs = pilot_compiler::exec::run(&lowered.program, &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (k, got) in outs.iter().enumerate() {
        let want = read_npy(&dir.join(format!("out{k}.npy")));
        assert_eq!(got.shape.iter().product::<usize>(), want.numel(), "{name} output {k}");
        close(got, &want).unwrap_or_else(|e| panic!("{name} output {k}: {e}"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn resize_nearest_2x_half_pixel_and_asymmetric() {
    for (coord, nearest) in [("half_pixel", "round_prefer_floor"), ("asymmetric", "floor")] {
        check_ort(
            &format!("resize_nearest_{coord}"),
            &format!(
                r#"
node = h.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                   coordinate_transformation_mode="{coord}", nearest_mode="{nearest}")
run(node, [("x", f32(1, 16, 32, 64))], [("y", T.FLOAT)],
    [("scales", np.array([1, 1, 2, 2], np.float32))])
"#
            ),
        );
    }
}

#[test]
fn resize_bilinear_align_corners_and_half_pixel() {
    for (coord, c, h, w) in
        [("align_corners", 16, 32, 64), ("half_pixel", 4, 16, 24), ("pytorch_half_pixel", 4, 16, 24)]
    {
        check_ort(
            &format!("resize_linear_{coord}"),
            &format!(
                r#"
node = h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                   coordinate_transformation_mode="{coord}")
run(node, [("x", f32(1, {c}, {h}, {w}))], [("y", T.FLOAT)],
    [("sizes", np.array([1, {c}, {}, {}], np.int64))])
"#,
                2 * h,
                2 * w
            ),
        );
    }
}

#[test]
fn resize_other_modes_and_opsets() {
    check_ort(
        "resize_opset11_tf_half_pixel_for_nn",
        r#"
node = h.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest",
                   coordinate_transformation_mode="tf_half_pixel_for_nn")
run(node, [("x", f32(1, 3, 6, 5))], [("y", T.FLOAT)],
    [("roi", np.array([], np.float32)), ("scales", np.array([1, 1, 1.5, 2], np.float32))],
    opset=11)
"#,
    );
    check_ort(
        "resize_opset18_axes_not_smaller",
        r#"
node = h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[3, 2],
                   keep_aspect_ratio_policy="not_smaller")
run(node, [("x", f32(1, 3, 6, 5))], [("y", T.FLOAT)],
    [("sizes", np.array([9, 8], np.int64))], opset=18)
"#,
    );
    check_ort(
        "resize_int8_nearest_ceil",
        r#"
x = rng.integers(-100, 100, (1, 2, 5, 7)).astype(np.int8)
node = h.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                   coordinate_transformation_mode="align_corners", nearest_mode="ceil")
run(node, [("x", x)], [("y", T.INT8)], [("scales", np.array([1, 1, 1.6, 0.6], np.float32))],
    opset=13)
"#,
    );
}

#[test]
fn resize_linear_1d_cubic_and_legacy() {
    check_ort(
        "resize_linear_1d",
        r#"
node = h.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
run(node, [("x", f32(2, 3, 10))], [("y", T.FLOAT)],
    [("scales", np.array([1, 1, 2.5], np.float32))])
"#,
    );
    check_ort(
        "resize_cubic_down",
        r#"
node = h.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")
run(node, [("x", f32(1, 2, 12, 10))], [("y", T.FLOAT)],
    [("scales", np.array([1, 1, 0.5, 0.7], np.float32))])
"#,
    );
    check_ort(
        "resize_opset10_nearest",
        r#"
node = h.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")
run(node, [("x", f32(1, 4, 5, 6))], [("y", T.FLOAT)],
    [("scales", np.array([1, 1, 2, 3], np.float32))], opset=10)
"#,
    );
    check_ort(
        "upsample_opset9_linear",
        r#"
node = h.make_node("Upsample", ["x", "scales"], ["y"], mode="linear")
run(node, [("x", f32(1, 4, 5, 6))], [("y", T.FLOAT)],
    [("scales", np.array([1, 1, 2, 2], np.float32))], opset=9)
"#,
    );
}

/// `(X, W, R, B)` of a recurrent layer with `gates` gates, as snippet code.
fn rnn_inputs(gates: usize, dirs: usize, seq: usize, input: usize, hidden: usize) -> String {
    format!(
        r#"
x = f32({seq}, 1, {input})
w = f32({dirs}, {gh}, {input}) * 0.3
r = f32({dirs}, {gh}, {hidden}) * 0.3
b = f32({dirs}, {gh2}) * 0.3
h0 = f32({dirs}, 1, {hidden}) * 0.5
c0 = f32({dirs}, 1, {hidden}) * 0.5
"#,
        gh = gates * hidden,
        gh2 = 2 * gates * hidden
    )
}

#[test]
fn lstm_bidirectional_and_variants() {
    let base = rnn_inputs(4, 2, 5, 24, 16);
    check_ort(
        "lstm_bidirectional",
        &format!(
            r#"{base}
p = f32(2, 48) * 0.3
node = h.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0", "p"], ["y", "yh", "yc"],
                   hidden_size=16, direction="bidirectional")
run(node, [("x", x), ("w", w), ("r", r), ("b", b), ("h0", h0), ("c0", c0), ("p", p)],
    [("y", T.FLOAT), ("yh", T.FLOAT), ("yc", T.FLOAT)])
"#
        ),
    );
    let base = rnn_inputs(4, 1, 5, 24, 16);
    check_ort(
        "lstm_clip_input_forget_reverse",
        &format!(
            r#"{base}
node = h.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh", "yc"],
                   hidden_size=16, direction="reverse", clip=0.7, input_forget=1)
run(node, [("x", x * 3), ("w", w), ("r", r), ("b", b), ("h0", h0), ("c0", c0 * 4)],
    [("y", T.FLOAT), ("yh", T.FLOAT), ("yc", T.FLOAT)])
"#
        ),
    );
    check_ort(
        "lstm_activations_constant_weights",
        &format!(
            r#"{base}
node = h.make_node("LSTM", ["x", "w", "r", "b", "seq"], ["y", "yh"], hidden_size=16,
                   activations=["HardSigmoid", "LeakyRelu", "Softsign"],
                   activation_alpha=[0.3, 0.05], activation_beta=[0.4])
run(node, [("x", x)], [("y", T.FLOAT), ("yh", T.FLOAT)],
    [("w", w), ("r", r), ("b", b), ("seq", np.array([5], np.int32))])
"#
        ),
    );
}

#[test]
fn gru_bidirectional_both_reset_orders() {
    let base = rnn_inputs(3, 2, 5, 24, 16);
    for lbr in [0, 1] {
        check_ort(
            &format!("gru_bidirectional_lbr{lbr}"),
            &format!(
                r#"{base}
node = h.make_node("GRU", ["x", "w", "r", "b", "", "h0"], ["y", "yh"], hidden_size=16,
                   direction="bidirectional", linear_before_reset={lbr})
run(node, [("x", x), ("w", w), ("r", r), ("b", b), ("h0", h0)], [("y", T.FLOAT), ("yh", T.FLOAT)])
"#
            ),
        );
    }
    let base = rnn_inputs(3, 1, 4, 8, 6);
    check_ort(
        "gru_no_bias_clip_relu",
        &format!(
            r#"{base}
node = h.make_node("GRU", ["x", "w", "r"], ["y", "yh"], hidden_size=6, clip=0.5,
                   activations=["Sigmoid", "Relu"])
run(node, [("x", x * 3), ("w", w), ("r", r)], [("y", T.FLOAT), ("yh", T.FLOAT)])
"#
        ),
    );
}

#[test]
fn rnn_relu_bidirectional() {
    let base = rnn_inputs(1, 2, 5, 12, 16);
    check_ort(
        "rnn_relu_bidirectional",
        &format!(
            r#"{base}
node = h.make_node("RNN", ["x", "w", "r", "b", "", "h0"], ["y", "yh"], hidden_size=16,
                   direction="bidirectional", activations=["Relu", "Tanh"])
run(node, [("x", x), ("w", w), ("r", r), ("b", b), ("h0", h0)], [("y", T.FLOAT), ("yh", T.FLOAT)])
"#
        ),
    );
}

#[test]
fn top_k_and_einsum() {
    check_ort(
        "top_k",
        r#"
x = f32(3, 40)
x[1, 5:9] = 0.25
node = h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=1)
run(node, [("x", x)], [("v", T.FLOAT), ("i", T.INT64)], [("k", np.array([7], np.int64))])
"#,
    );
    check_ort(
        "top_k_smallest_axis0",
        r#"
node = h.make_node("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0)
run(node, [("x", f32(12, 5))], [("v", T.FLOAT), ("i", T.INT64)], [("k", np.array([4], np.int64))])
"#,
    );
    for (name, eq, a, b) in [
        ("attention", "bhqd,bhkd->bhqk", "2, 3, 5, 8", "2, 3, 6, 8"),
        ("ellipsis_matmul", "...ij,...jk", "2, 3, 4", "2, 4, 5"),
        ("outer_broadcast", "i,j->ij", "5", "7"),
    ] {
        check_ort(
            &format!("einsum_{name}"),
            &format!(
                r#"
node = h.make_node("Einsum", ["a", "b"], ["y"], equation="{eq}")
run(node, [("a", f32({a})), ("b", f32({b}))], [("y", T.FLOAT)], opset=12)
"#
            ),
        );
    }
}

#[test]
fn scatter_gather_with_constant_indices() {
    check_ort(
        "scatter_nd_constant",
        r#"
node = h.make_node("ScatterND", ["x", "i", "u"], ["y"])
run(node, [("x", f32(4, 5, 6)), ("u", f32(2, 6))], [("y", T.FLOAT)],
    [("i", np.array([[1, 2], [3, -1]], np.int64))], opset=13)
"#,
    );
    check_ort(
        "scatter_elements_add",
        r#"
node = h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="add")
run(node, [("x", f32(3, 6)), ("u", f32(2, 4))], [("y", T.FLOAT)],
    [("i", np.array([[0, 5, 0, 2], [1, 1, -1, 3]], np.int64))], opset=16)
"#,
    );
    check_ort(
        "gather_nd_batch",
        r#"
node = h.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
run(node, [("x", f32(2, 4, 5, 3))], [("y", T.FLOAT)],
    [("i", np.array([[[1, 2], [3, 4]], [[0, 0], [2, -1]]], np.int64))], opset=13)
"#,
    );
}

#[test]
fn normalizations_and_pools() {
    check_ort(
        "group_norm_opset18",
        r#"
node = h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4, epsilon=1e-3)
run(node, [("x", f32(2, 8, 5, 3))], [("y", T.FLOAT)], [("s", f32(4)), ("b", f32(4))], opset=18)
"#,
    );
    check_ort(
        "lrn_size5",
        r#"
node = h.make_node("LRN", ["x"], ["y"], size=5, alpha=0.01, beta=0.6, bias=1.5)
run(node, [("x", f32(1, 7, 4, 5))], [("y", T.FLOAT)])
"#,
    );
    check_ort(
        "lp_pool_p3_strided_padded",
        r#"
node = h.make_node("LpPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], p=3)
run(node, [("x", f32(1, 3, 9, 8))], [("y", T.FLOAT)], opset=18)
"#,
    );
    check_ort(
        "hardmax_opset11_coerced",
        r#"
x = f32(2, 3, 4)
x[0, 1, :] = 1.0
node = h.make_node("Hardmax", ["x"], ["y"], axis=1)
run(node, [("x", x)], [("y", T.FLOAT)], opset=11)
"#,
    );
}

#[test]
fn conv_transpose_with_kernel_equal_to_stride() {
    // The per-tap matrix product (lower/patch_transpose.rs), 2-D with a bias and 1-D without.
    check_ort(
        "convtranspose_2x2_s2_bias",
        r#"
node = h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
run(node, [("x", f32(1, 8, 5, 7))], [("y", T.FLOAT)], [("w", f32(8, 3, 2, 2)), ("b", f32(3))])
"#,
    );
    check_ort(
        "convtranspose_1d_k3_s3",
        r#"
node = h.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3], strides=[3])
run(node, [("x", f32(2, 4, 9))], [("y", T.FLOAT)], [("w", f32(4, 5, 3))])
"#,
    );
}

/// With `--image --float16`, an LSTM's input projection reads half images but its recurrence does not:
/// the hidden state (and `R`) stay in float32 buffers, so the state is not rounded to half at every
/// step. Over 6 steps a state packed into an image would add one image per step.
#[test]
fn lstm_state_stays_float32_with_half_images() {
    use common::proto::{floats, model_bytes, value};
    use pilot_compiler::lower::image::ImageMode;
    use pilot_compiler::onnx::proto as pb;
    use pilot_core::DType;

    let (seq, input, hidden) = (6usize, 8usize, 8usize);
    let ramp = |n: usize| (0..n).map(|i| ((i % 7) as f32 - 3.0) * 0.05).collect::<Vec<f32>>();
    let g = pb::GraphProto {
        node: vec![pb::NodeProto {
            op_type: Some("LSTM".into()),
            input: vec!["x".into(), "w".into(), "r".into()],
            output: vec!["y".into()],
            attribute: vec![pb::AttributeProto {
                name: Some("hidden_size".into()),
                i: Some(hidden as i64),
                r#type: Some(pb::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            }],
            ..Default::default()
        }],
        initializer: vec![
            floats("w", &[1, 4 * hidden as i64, input as i64], &ramp(4 * hidden * input)),
            floats("r", &[1, 4 * hidden as i64, hidden as i64], &ramp(4 * hidden * hidden)),
        ],
        input: vec![value("x", &[seq as i64, 1, input as i64])],
        output: vec![value("y", &[seq as i64, 1, 1, hidden as i64])],
        ..Default::default()
    };
    let model = onnx::load_bytes(&model_bytes(g), None).unwrap();
    let mode = ImageMode { float16: true, max_width: 16384 };
    let lowered = pilot_compiler::lower::lower_with(&model, &Default::default(), Some(mode)).unwrap();
    let images: Vec<_> = lowered.program.bufs.iter().filter(|b| b.image.is_some()).collect();
    assert!(images.iter().all(|b| b.dtype == DType::F16), "--float16 stores images as half");
    // The projection's two operands (x and W) and nothing per step.
    assert_eq!(images.len(), 2, "{} half images", images.len());
}

/// A recurrence reads one folded copy of `Rᵀ` per direction, not one per time step: ddddocr's
/// recognizer (20 steps, two directions of 2048 × 512) carried 40 copies, 168 MB of its 216 MB of
/// weights. Every weight the lowering writes is distinct.
#[test]
fn recurrent_weights_are_folded_once_per_direction() {
    use common::proto::{floats, model_bytes, value};
    use pilot_compiler::onnx::proto as pb;
    use pilot_compiler::program::BufKind;

    let (seq, input, hidden) = (6usize, 8usize, 4usize);
    let ramp = |n: usize| (0..n).map(|i| ((i % 7) as f32 - 3.0) * 0.05).collect::<Vec<f32>>();
    for (op, gates) in [("LSTM", 4usize), ("GRU", 3), ("RNN", 1)] {
        let g = pb::GraphProto {
            node: vec![pb::NodeProto {
                op_type: Some(op.into()),
                input: vec!["x".into(), "w".into(), "r".into()],
                output: vec!["y".into()],
                attribute: vec![
                    pb::AttributeProto {
                        name: Some("hidden_size".into()),
                        i: Some(hidden as i64),
                        r#type: Some(pb::attribute_proto::AttributeType::Int as i32),
                        ..Default::default()
                    },
                    pb::AttributeProto {
                        name: Some("direction".into()),
                        s: Some(b"bidirectional".to_vec()),
                        r#type: Some(pb::attribute_proto::AttributeType::String as i32),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            initializer: vec![
                floats("w", &[2, (gates * hidden) as i64, input as i64], &ramp(2 * gates * hidden * input)),
                floats("r", &[2, (gates * hidden) as i64, hidden as i64], &ramp(2 * gates * hidden * hidden)),
            ],
            input: vec![value("x", &[seq as i64, 1, input as i64])],
            output: vec![value("y", &[seq as i64, 2, 1, hidden as i64])],
            ..Default::default()
        };
        let model = onnx::load_bytes(&model_bytes(g), None).unwrap();
        let lowered = pilot_compiler::lower::lower(&model, &Default::default()).unwrap();
        let weights: Vec<&Tensor> = lowered
            .program
            .bufs
            .iter()
            .filter_map(|b| match &b.kind {
                BufKind::Weight(t) => Some(t),
                _ => None,
            })
            .collect();
        for (i, a) in weights.iter().enumerate() {
            for b in &weights[..i] {
                assert!(a.shape != b.shape || a.data != b.data, "{op}: a {:?} weight is stored twice", a.shape);
            }
        }
        let bytes: usize = weights.iter().map(|t| t.data.len()).sum();
        let model_bytes = 4 * 2 * gates * hidden * (input + hidden);
        assert!(bytes <= 2 * model_bytes, "{op}: {bytes} bytes of weights for {model_bytes} in the model");
    }
}

fn graph_attr(name: &str, g: pilot_compiler::onnx::proto::GraphProto) -> pilot_compiler::onnx::proto::AttributeProto {
    use pilot_compiler::onnx::proto as pb;
    pb::AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(pb::attribute_proto::AttributeType::Graph as i32),
        ..Default::default()
    }
}

/// An If: a run-time condition selects between the branches elementwise when they agree in shape;
/// a shape computed inside a branch from a run-time input names that input to pin.
#[test]
fn if_on_a_run_time_condition_and_shapes_from_branches() {
    use common::proto::{model_bytes, value};
    use pilot_compiler::onnx::proto as pb;

    let node = |op: &str, ins: &[&str], out: &str, attrs: Vec<pb::AttributeProto>| pb::NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: attrs,
        ..Default::default()
    };
    let branch = |name: &str, nodes: Vec<pb::NodeProto>, out: &str, dims: &[i64]| pb::GraphProto {
        name: Some(name.into()),
        node: nodes,
        output: vec![value(out, dims)],
        ..Default::default()
    };
    let typed = |name: &str, elem: i32, dims: &[i64]| {
        let mut v = value(name, dims);
        if let Some(pb::type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            t.elem_type = Some(elem);
        }
        v
    };
    // y = cond ? x * 2 : -x, with cond a run-time bool input.
    let g = pb::GraphProto {
        node: vec![node(
            "If",
            &["cond"],
            "y",
            vec![
                graph_attr("then_branch", branch("t", vec![node("Add", &["x", "x"], "t_out", vec![])], "t_out", &[4])),
                graph_attr("else_branch", branch("e", vec![node("Neg", &["x"], "e_out", vec![])], "e_out", &[4])),
            ],
        )],
        input: vec![typed("cond", 9, &[]), value("x", &[4])],
        output: vec![value("y", &[4])],
        ..Default::default()
    };
    let model = onnx::load_bytes(&model_bytes(g), None).unwrap();
    let lowered = pilot_compiler::lower::lower(&model, &Default::default()).unwrap();
    let x = Tensor::from_f32(vec![4], &[1.0, -2.0, 3.0, 0.5]);
    for (c, want) in [(1u8, [2.0, -4.0, 6.0, 1.0]), (0, [-1.0, 2.0, -3.0, -0.5])] {
        let cond = Tensor { dtype: pilot_core::DType::Bool, shape: vec![], data: vec![c] };
        let out = pilot_compiler::exec::run(&lowered.program, &[cond, x.clone()]).unwrap();
        assert_eq!(out[0].to_f64(), want.map(f64::from).to_vec(), "cond {c}");
    }

    // A Reshape whose shape a constant-condition branch computes from the run-time input `n`.
    let then_g = branch("t", vec![node("Identity", &["n"], "shape", vec![])], "shape", &[2]);
    let else_g = branch("e", vec![node("Identity", &["n"], "shape2", vec![])], "shape2", &[2]);
    let mut konst =
        pb::TensorProto { name: Some("c".into()), data_type: Some(9), int32_data: vec![1], ..Default::default() };
    konst.dims = vec![];
    let g = pb::GraphProto {
        node: vec![
            node("If", &["c"], "s", vec![graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)]),
            node("Reshape", &["x", "s"], "y", vec![]),
        ],
        initializer: vec![konst],
        input: vec![value("x", &[4]), typed("n", 7, &[2])],
        output: vec![value("y", &[2, 2])],
        ..Default::default()
    };
    let model = onnx::load_bytes(&model_bytes(g), None).unwrap();
    let e = pilot_compiler::lower::lower(&model, &Default::default()).unwrap_err().to_string();
    assert!(e.contains("computed from the run-time model input(s) `n`") && e.contains("--const n=FILE.npy"), "{e}");
}
