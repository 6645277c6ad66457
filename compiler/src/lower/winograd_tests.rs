use std::collections::HashMap;

use prost::Message;

use super::*;
use crate::onnx::proto as pb;

/// Deterministic values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// The largest |got − want| / max(1, |want|).
fn scaled_error(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(&g, &w)| (g as f64 - w as f64).abs() / (w as f64).abs().max(1.0)).fold(0.0, f64::max)
}

/// A one-node model: `y = Relu(Conv(x, w, b) + r)` with `w` and `b` initializers, `x` and `r`
/// inputs; `pads` as ONNX orders them (begins, then ends).
fn conv_model(x: [usize; 4], cout: usize, pads: [i64; 4], seed: u64) -> crate::onnx::Model {
    let dims = |d: &[usize]| d.iter().map(|&v| v as i64).collect::<Vec<_>>();
    let value = |name: &str, d: &[usize]| pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto {
                    dim: dims(d)
                        .into_iter()
                        .map(|v| pb::tensor_shape_proto::Dimension {
                            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let floats = |name: &str, d: &[usize], v: Vec<f32>| pb::TensorProto {
        name: Some(name.into()),
        data_type: Some(1),
        dims: dims(d),
        float_data: v,
        ..Default::default()
    };
    let node = |op: &str, inputs: &[&str], out: &str, attribute: Vec<pb::AttributeProto>| pb::NodeProto {
        name: Some(format!("n_{out}")),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute,
        ..Default::default()
    };
    let pads_attr =
        pb::AttributeProto { name: Some("pads".into()), r#type: Some(7), ints: pads.to_vec(), ..Default::default() };
    let wshape = [cout, x[1], 3, 3];
    let (oh, ow) = (x[2] + (pads[0] + pads[2]) as usize - 2, x[3] + (pads[1] + pads[3]) as usize - 2);
    let yshape = [x[0], cout, oh, ow];
    let graph = pb::GraphProto {
        node: vec![
            node("Conv", &["x", "w", "b"], "c", vec![pads_attr]),
            node("Add", &["c", "r"], "s", vec![]),
            node("Relu", &["s"], "y", vec![]),
        ],
        input: vec![value("x", &x), value("r", &yshape)],
        output: vec![value("y", &yshape)],
        initializer: vec![
            floats("w", &wshape, values(seed, wshape.iter().product())),
            floats("b", &[cout], values(seed + 1, cout)),
        ],
        ..Default::default()
    };
    let m = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    crate::onnx::load_bytes(&m.encode_to_vec(), None).expect("a valid model")
}

/// Lowers `model` with `policy`.
fn lower(model: &crate::onnx::Model, policy: Policy) -> Program {
    lower_for_lanes(model, policy, 0)
}

/// Lowers `model` with `policy` for a CPU of `lanes` f32 lanes (0: not the CPU).
fn lower_for_lanes(model: &crate::onnx::Model, policy: Policy, lanes: usize) -> Program {
    super::super::lower_pinned(model, &HashMap::new(), &Default::default(), None, Default::default(), policy, lanes)
        .expect("lowers")
        .program
}

/// Whether the program lowered from `model` with `policy` takes the Winograd path.
fn uses_winograd(model: &crate::onnx::Model, policy: Policy) -> bool {
    lower(model, policy).kernels.iter().any(|k| k.name.contains("_wino_"))
}

/// Lowers `model` with `policy` and runs it on the reference executor; also returns the kernel names.
fn run(model: &crate::onnx::Model, policy: Policy, inputs: &[Tensor]) -> (Vec<f32>, Vec<String>) {
    let program = lower(model, policy);
    let names = program.kernels.iter().map(|k| k.name.clone()).collect();
    let out = crate::exec::run(&program, inputs).expect("runs");
    (out[0].to_f32(), names)
}

#[test]
fn winograd_equals_the_direct_convolution_with_its_fused_epilogue() {
    // Odd sizes (partial last tiles), asymmetric and absent padding, batches, odd channel counts.
    let cases: [([usize; 4], usize, [i64; 4]); 5] = [
        ([1, 3, 7, 9], 5, [1, 1, 1, 1]),
        ([2, 4, 6, 5], 8, [0, 0, 0, 0]),
        ([1, 5, 9, 6], 3, [2, 0, 1, 2]),
        ([1, 8, 5, 11], 4, [0, 1, 2, 0]),
        ([3, 2, 4, 4], 7, [1, 2, 0, 1]),
    ];
    for (i, (x, cout, pads)) in cases.into_iter().enumerate() {
        let model = conv_model(x, cout, pads, 10 + i as u64);
        let (oh, ow) = (x[2] + (pads[0] + pads[2]) as usize - 2, x[3] + (pads[1] + pads[3]) as usize - 2);
        let xs = Tensor::from_f32(x.to_vec(), &values(100 + i as u64, x.iter().product()));
        let r = Tensor::from_f32(vec![x[0], cout, oh, ow], &values(200 + i as u64, x[0] * cout * oh * ow));
        let inputs = [xs, r];
        let (direct, names) = run(&model, Policy::Off, &inputs);
        assert!(!names.iter().any(|n| n.contains("wino")), "{names:?}");
        let (wino, names) = run(&model, Policy::All, &inputs);
        // The padded copy, the input transform, the matmul, and the output transform with the bias,
        // add and ReLU fused.
        assert_eq!(names.iter().filter(|n| n.contains("_wino_")).count(), 2, "case {i}: {names:?}");
        assert!(names.iter().all(|n| n.ends_with("_pad") || n.contains("_wino_") || n.ends_with("_y")), "{names:?}");
        assert!(names.last().is_some_and(|n| n.ends_with("_y")), "{names:?}");
        let e = scaled_error(&wino, &direct);
        assert!(e <= 1e-5, "case {i} {x:?}→{cout} pads {pads:?}: scaled error {e}");
        assert!(direct.iter().any(|&v| v > 0.0) && direct.contains(&0.0), "ReLU applied");
    }
}

#[test]
fn every_algorithm_matches_a_float64_convolution() {
    let (n, cin, h, w, cout) = (2, 6, 11, 7, 4);
    let x = values(1, n * cin * h * w);
    let g = values(2, cout * cin * 9);
    let out = [h - 2, w - 2];
    let mut want = vec![0f32; n * cout * out[0] * out[1]];
    for (o, want) in want.iter_mut().enumerate() {
        let (b, co, oy, ox) =
            (o / (cout * out[0] * out[1]), o / (out[0] * out[1]) % cout, o / out[1] % out[0], o % out[1]);
        let mut s = 0f64;
        for ci in 0..cin {
            for ky in 0..3 {
                for kx in 0..3 {
                    let xv = x[((b * cin + ci) * h + oy + ky) * w + ox + kx] as f64;
                    s += xv * g[(co * cin + ci) * 9 + ky * 3 + kx] as f64;
                }
            }
        }
        *want = s as f32;
    }
    let win = Window {
        kernel: vec![3, 3],
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pad_lo: vec![0, 0],
        pad_hi: vec![0, 0],
        declared_hi: vec![0, 0],
        out: out.to_vec(),
    };
    for alg in [&F4, &F6] {
        let mut p = Program::new();
        let xl = p.input(0, DType::F32, &[n, cin, h, w]);
        let (lo, hi) = input_padding(alg, &[h, w], &win);
        let xp = p.pad(&xl, &[0, 0, lo[0], lo[1]], &[0, 0, hi[0], hi[1]], 0.0);
        let u = transform_weights(alg, &Tensor::from_f32(vec![cout, cin, 3, 3], &g));
        let y = conv(&mut p, alg, &xp, u, None, &out, "t");
        p.realize(&y, BufKind::Output(0), "y");
        let got = crate::exec::run(&p, &[Tensor::from_f32(vec![n, cin, h, w], &x)]).expect("runs")[0].to_f32();
        let e = scaled_error(&got, &want);
        assert!(e <= 1e-5, "F({}, 3): scaled error {e}", alg.m);
    }
}

#[test]
fn only_the_cpu_takes_winograd_and_pilot_winograd_overrides_the_rule() {
    assert_eq!(Policy::for_backend(Backend::Cpu, None), Ok(Policy::Measured));
    assert_eq!(Policy::for_backend(Backend::Cpu, Some("0")), Ok(Policy::Off));
    assert_eq!(Policy::for_backend(Backend::Cpu, Some("1")), Ok(Policy::All));
    for other in [Backend::Null, Backend::Cl, Backend::Qcom, Backend::UsbAmd] {
        assert_eq!(Policy::for_backend(other, Some("1")), Ok(Policy::Off), "{other:?}");
    }
    let e = Policy::for_backend(Backend::Cpu, Some("yes")).unwrap_err();
    assert!(e.starts_with("PILOT_WINOGRAD=yes: expected 0") && !e.contains('\n'), "{e}");
}

#[test]
fn only_3x3_stride_1_float_convolutions_are_eligible() {
    let win = |k: usize, s: usize, d: usize, pad: i64| Window {
        kernel: vec![k, k],
        strides: vec![s, s],
        dilations: vec![d, d],
        pad_lo: vec![pad, pad],
        pad_hi: vec![pad, pad],
        declared_hi: vec![pad, pad],
        out: vec![8, 8],
    };
    let w3 = [8, 8, 3, 3];
    assert!(eligible(DType::F32, &w3, &win(3, 1, 1, 1), 1));
    assert!(!eligible(DType::F16, &w3, &win(3, 1, 1, 1), 1));
    assert!(!eligible(DType::F32, &w3, &win(3, 2, 1, 1), 1));
    assert!(!eligible(DType::F32, &w3, &win(3, 1, 2, 1), 1));
    assert!(!eligible(DType::F32, &[8, 4, 3, 3], &win(3, 1, 1, 1), 2));
    assert!(!eligible(DType::F32, &[8, 8, 5, 5], &win(5, 1, 1, 2), 1));
    assert!(!eligible(DType::F32, &w3, &win(3, 1, 1, -1), 1));
}

#[test]
fn the_rule_picks_winograd_for_wide_convolutions_on_outputs_it_tiles_well() {
    let m = |a: Option<&Algorithm>| a.map(|a| a.m);
    // The driver-monitoring net's residual blocks: 128→128 at 30×45 and 64→64 at 60×90 in tiles
    // of 6 rows, 256→256 at 15×23 in tiles of 4 (as few multiply-adds as 6, and more accurate).
    assert_eq!(m(rule(128, 128, 30, 45)), Some(6));
    assert_eq!(m(rule(64, 64, 60, 90)), Some(6));
    assert_eq!(m(rule(256, 256, 15, 23)), Some(4));
    assert_eq!(m(rule(256, 256, 8, 12)), Some(4));
    assert_eq!(m(rule(128, 64, 30, 45)), Some(6));
    assert_eq!(m(rule(32, 32, 120, 180)), Some(6));
    assert_eq!(m(rule(96, 24, 64, 128)), Some(6));
    // Too few channels: the transforms' memory traffic eats the saving; or too little work.
    assert_eq!(m(rule(16, 16, 120, 180)), None);
    assert_eq!(m(rule(96, 24, 8, 16)), None);
    // Outputs so small that partial tiles leave less than a third of the multiply-adds saved.
    assert_eq!(m(rule(256, 256, 2, 2)), None);
    assert_eq!(m(rule(256, 256, 5, 3)), None);
    assert!((macs(&F6, 30, 45) - 4.0 * 47.0 / 45.0).abs() < 1e-12);
}

#[test]
fn winograd_goes_where_the_policy_says() {
    let wide = conv_model([1, 64, 16, 18], 64, [1, 1, 1, 1], 3);
    assert!(uses_winograd(&wide, Policy::Measured));
    assert!(uses_winograd(&wide, Policy::All));
    assert!(!uses_winograd(&wide, Policy::Off));
    let narrow = conv_model([1, 8, 12, 10], 8, [1, 1, 1, 1], 3);
    assert!(!uses_winograd(&narrow, Policy::Measured));
    assert!(uses_winograd(&narrow, Policy::All));
}

#[test]
fn a_convolution_on_a_small_map_computes_along_its_channels_and_equals_the_direct_one() {
    // Rows of 4–7 outputs keep at most 7 of 16 lanes busy; 32 output channels keep all 16.
    for (i, (x, cout, pads)) in
        [([1, 5, 3, 6], 32, [1, 1, 1, 1]), ([2, 3, 5, 4], 48, [0, 1, 2, 1])].into_iter().enumerate()
    {
        let model = conv_model(x, cout, pads, 30 + i as u64);
        let (oh, ow) = (x[2] + (pads[0] + pads[2]) as usize - 2, x[3] + (pads[1] + pads[3]) as usize - 2);
        let xs = Tensor::from_f32(x.to_vec(), &values(300 + i as u64, x.iter().product()));
        let r = Tensor::from_f32(vec![x[0], cout, oh, ow], &values(400 + i as u64, x[0] * cout * oh * ow));
        let (direct, inner) = (lower_for_lanes(&model, Policy::Off, 0), lower_for_lanes(&model, Policy::Off, 16));
        assert!(!direct.kernels.iter().any(|k| k.name.ends_with("_ci")));
        assert!(inner.kernels.iter().any(|k| k.name.ends_with("_ci")), "lanes 16 picks the channels-inner form");
        let a = crate::exec::run(&direct, &[xs.clone(), r.clone()]).expect("runs")[0].to_f32();
        let b = crate::exec::run(&inner, &[xs, r]).expect("runs")[0].to_f32();
        assert_eq!(a.len(), b.len());
        for (u, v) in a.iter().zip(&b) {
            assert!((u - v).abs() <= 1e-5 * (1.0 + u.abs()), "{u} vs {v}");
        }
    }
    // Rows of 32 outputs fill their lanes: the direct form stays.
    let wide = conv_model([1, 3, 4, 34], 32, [0, 0, 0, 0], 50);
    let p = lower_for_lanes(&wide, Policy::Off, 16);
    assert!(!p.kernels.iter().any(|k| k.name.ends_with("_ci")));
}
