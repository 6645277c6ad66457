//! Winograd convolutions through the whole CPU pipeline (C code generator, CPU runtime) on shapes
//! the rule picks them for, with odd sizes and asymmetric padding, against direct convolutions
//! computed here in f64.

mod common;

use common::close;
use common::proto::{floats, model_bytes, value};
use pilot_compiler::onnx::proto as pb;
use pilot_compiler::tensor::Tensor;
use pilot_core::{Backend, Target};

/// Deterministic values in [-scale, scale).
fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn conv(name: &str, inputs: &[&str], out: &str, pads: [i64; 4]) -> pb::NodeProto {
    pb::NodeProto {
        name: Some(name.into()),
        op_type: Some("Conv".into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: vec![pb::AttributeProto {
            name: Some("pads".into()),
            r#type: Some(7),
            ints: pads.to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn relu(input: &str, out: &str) -> pb::NodeProto {
    pb::NodeProto {
        name: Some(format!("relu_{out}")),
        op_type: Some("Relu".into()),
        input: vec![input.into()],
        output: vec![out.into()],
        ..Default::default()
    }
}

/// `y = ReLU(conv(x, w) + b)` for `x: [cin, h, w]` (one image), 3×3 weights `[cout, cin, 3, 3]`,
/// padded by `pads` (rows, columns before; rows, columns after), computed in f64.
fn conv_relu(x: &[f32], dims: [usize; 3], w: &[f32], b: &[f32], pads: [i64; 4]) -> (Vec<f32>, [usize; 3]) {
    let [cin, h, wd] = dims;
    let cout = b.len();
    let (oh, ow) = ((h as i64 + pads[0] + pads[2] - 2) as usize, (wd as i64 + pads[1] + pads[3] - 2) as usize);
    let mut y = vec![0f32; cout * oh * ow];
    for co in 0..cout {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut s = b[co] as f64;
                for ci in 0..cin {
                    for ky in 0..3 {
                        let iy = oy as i64 + ky - pads[0];
                        if iy < 0 || iy >= h as i64 {
                            continue;
                        }
                        for kx in 0..3 {
                            let ix = ox as i64 + kx - pads[1];
                            if ix < 0 || ix >= wd as i64 {
                                continue;
                            }
                            let xv = x[(ci * h + iy as usize) * wd + ix as usize] as f64;
                            s += xv * w[((co * cin + ci) * 3 + ky as usize) * 3 + kx as usize] as f64;
                        }
                    }
                }
                y[(co * oh + oy) * ow + ox] = s.max(0.0) as f32;
            }
        }
    }
    (y, [cout, oh, ow])
}

const PADS1: [i64; 4] = [1, 0, 2, 1];
const PADS2: [i64; 4] = [0, 1, 0, 1];

/// `x [1, 40, 17, 37]` → Conv 3×3 to 48 channels, padded by [`PADS1`]: 18×36, in tiles of 6 rows →
/// ReLU → Conv 3×3 to 64 channels, padded by [`PADS2`]: 16×36, in tiles of 4 rows → ReLU.
fn two_convs(w1: &[f32], b1: &[f32], w2: &[f32], b2: &[f32]) -> Vec<u8> {
    let graph = pb::GraphProto {
        node: vec![
            conv("conv1", &["x", "w1", "b1"], "c1", PADS1),
            relu("c1", "r1"),
            conv("conv2", &["r1", "w2", "b2"], "c2", PADS2),
            relu("c2", "y"),
        ],
        input: vec![value("x", &[1, 40, 17, 37])],
        output: vec![value("y", &[1, 64, 16, 36])],
        initializer: vec![
            floats("w1", &[48, 40, 3, 3], w1),
            floats("b1", &[48], b1),
            floats("w2", &[64, 48, 3, 3], w2),
            floats("b2", &[64], b2),
        ],
        ..Default::default()
    };
    model_bytes(graph)
}

#[test]
fn winograd_convolutions_run_on_the_cpu_like_direct_ones() {
    let (w1, b1) = (values(1, 48 * 40 * 9, 0.1), values(2, 48, 0.5));
    let (w2, b2) = (values(3, 64 * 48 * 9, 0.1), values(4, 64, 0.5));
    let x = values(5, 40 * 17 * 37, 1.0);
    let (r1, dims1) = conv_relu(&x, [40, 17, 37], &w1, &b1, PADS1);
    let (want, dims2) = conv_relu(&r1, dims1, &w2, &b2, PADS2);
    assert_eq!(dims2, [64, 16, 36]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("convs.onnx");
    std::fs::write(&path, two_convs(&w1, &b1, &w2, &b2)).unwrap();
    let art = dir.path().join("convs.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    let report = pilot_compiler::compile(&path, &art, &opts, &|_| {}).unwrap();
    // Per convolution: the padded copy, the input transform and the matmul; the output transforms
    // fuse with the bias and ReLU into their consumers (the second convolution's padded copy, the
    // output): 3 + 3 + 1. (PILOT_WINOGRAD overrides the rule: then only the values are checked.)
    if std::env::var_os("PILOT_WINOGRAD").is_none() {
        assert_eq!(report.kernels, 7, "both convolutions take the Winograd path");
    }
    let artifact = pilot_core::Artifact::open(&art).unwrap();
    let mut session = pilot_core::Session::new(artifact, Box::new(pilot_core::cpu::CpuDevice::new(2))).unwrap();
    let xt = Tensor::from_f32(vec![1, 40, 17, 37], &x);
    session.step(&[xt.data.as_slice()]).unwrap();
    let got = Tensor { dtype: xt.dtype, shape: vec![1, 64, 16, 36], data: session.outputs()[0].clone() };
    close(&got, &Tensor::from_f32(vec![1, 64, 16, 36], &want)).unwrap();
    assert!(want.iter().filter(|&&v| v > 0.0).count() > want.len() / 4, "not all clipped by the ReLU");
}
