//! The layouts the CPU lowering gives a product's right operand, through the whole CPU pipeline
//! (lowering, the C register tiles' loads, clang, the runtime) against products computed here in f64:
//! a constant stored in panels of 16 columns (`lower::nn::panels`, and which operands it packs), and a
//! computed operand read as a transpose copied row-major first (`lower::nn::contiguous_columns`); and a
//! convolution's constant weight stored in panels of 16 output channels (`lower::nn::conv_panels`); and
//! independent products sharing a constant weight computed as one (`lower::batch_products`).

mod common;

use common::close;
use common::proto::{floats, model_bytes, value};
use pilot_compiler::onnx::proto as pb;
use pilot_compiler::program::BufKind;
use pilot_compiler::tensor::Tensor;
use pilot_core::{Backend, Target};

/// Deterministic values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `y = x · w` for `x: [1, m, k]` and a constant `w: [k, n]`.
fn matmul_model(m: usize, k: usize, n: usize, w: &[f32]) -> Vec<u8> {
    let graph = pb::GraphProto {
        name: Some("mm".into()),
        node: vec![pb::NodeProto {
            name: Some("mm".into()),
            op_type: Some("MatMul".into()),
            input: vec!["x".into(), "w".into()],
            output: vec!["y".into()],
            ..Default::default()
        }],
        input: vec![value("x", &[1, m as i64, k as i64])],
        output: vec![value("y", &[1, m as i64, n as i64])],
        initializer: vec![floats("w", &[k as i64, n as i64], w)],
        ..Default::default()
    };
    model_bytes(graph)
}

fn product(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|r| f64::from(x[i * k + r]) * f64::from(w[r * n + j])).sum::<f64>() as f32;
        }
    }
    y
}

/// The shapes of the weights the kernels read, lowered for an 8-lane CPU, for `x: [1, m, k] · w: [k, n]`.
fn weight_shapes(m: usize, k: usize, n: usize) -> Vec<Vec<usize>> {
    read_constants(&matmul_model(m, k, n, &values(1, k * n)), 8)
}

#[test]
fn only_products_the_tiles_block_take_panels() {
    assert_eq!(weight_shapes(64, 96, 80), [vec![5, 96, 16]], "80 columns: 5 panels of 16");
    assert_eq!(weight_shapes(1, 96, 80), [vec![96, 80]], "a matrix-vector product keeps its rows");
    assert_eq!(weight_shapes(64, 96, 72), [vec![96, 72]], "72 columns are not whole panels");
    assert_eq!(weight_shapes(18, 96, 80), [vec![96, 80]], "18 rows do not block by 4");
    assert_eq!(weight_shapes(4, 96, 80), [vec![5, 96, 16]], "4 rows are one block");
    assert_eq!(weight_shapes(2, 96, 80), [vec![96, 80]], "2 rows do not block by 4");
}

/// Compiles `x: [1, m, k] · w: [k, n]` for the host CPU, steps it on 2 threads and compares it with
/// the product computed here in f64.
fn check_product_on_the_cpu(m: usize, k: usize, n: usize) {
    let w = values(2, k * n);
    let x = values(3, m * k);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mm.onnx");
    std::fs::write(&path, matmul_model(m, k, n, &w)).unwrap();
    let art = dir.path().join("mm.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    pilot_compiler::compile(&path, &art, &opts, &|_| {}).unwrap();
    let artifact = pilot_core::Artifact::open(&art).unwrap();
    let mut session = pilot_core::Session::new(artifact, Box::new(pilot_core::cpu::CpuDevice::new(2))).unwrap();
    let xt = Tensor::from_f32(vec![1, m, k], &x);
    session.step(&[xt.data.as_slice()]).unwrap();
    let got = Tensor { dtype: xt.dtype, shape: vec![1, m, n], data: session.outputs()[0].clone() };
    close(&got, &Tensor::from_f32(vec![1, m, n], &product(&x, &w, m, k, n)))
        .unwrap_or_else(|e| panic!("{m}×{k}×{n}: {e}"));
}

#[test]
fn products_by_panels_run_on_the_cpu_like_plain_ones() {
    // (4, 300, 3072): one block of rows, its columns cut into the parts of 2 threads; (64, 256,
    // 512): 16 blocks of rows, the columns cut all the same (each block would read all 512 KiB).
    for (m, k, n) in [(64, 96, 80), (20, 200, 48), (128, 37, 160), (4, 300, 3072), (64, 256, 512)] {
        check_product_on_the_cpu(m, k, n);
    }
}

#[test]
fn matrix_vector_products_streaming_their_weights_run_on_the_cpu() {
    // 3 MB of weights: eight rows per pass (`target::cpu::upcast`); 516 rows do not divide by
    // eight and take four per pass; 1 MB takes four.
    for (m, k, n) in [(1, 512, 1536), (1, 516, 1500), (1, 256, 1000)] {
        check_product_on_the_cpu(m, k, n);
    }
}

#[test]
fn a_product_by_a_transposed_input_reads_a_row_major_copy() {
    // y = x · zᵀ for x: [1, 32, 24], z: [1, 48, 24] (attention's scores: queries by keys).
    let (m, k, n) = (32, 24, 48);
    let graph = pb::GraphProto {
        name: Some("scores".into()),
        node: vec![
            pb::NodeProto {
                name: Some("t".into()),
                op_type: Some("Transpose".into()),
                input: vec!["z".into()],
                output: vec!["zt".into()],
                attribute: vec![pb::AttributeProto {
                    name: Some("perm".into()),
                    r#type: Some(7),
                    ints: vec![0, 2, 1],
                    ..Default::default()
                }],
                ..Default::default()
            },
            pb::NodeProto {
                name: Some("mm".into()),
                op_type: Some("MatMul".into()),
                input: vec!["x".into(), "zt".into()],
                output: vec!["y".into()],
                ..Default::default()
            },
        ],
        input: vec![value("x", &[1, m as i64, k as i64]), value("z", &[1, n as i64, k as i64])],
        output: vec![value("y", &[1, m as i64, n as i64])],
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scores.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    let art = dir.path().join("scores.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    let report = pilot_compiler::compile(&path, &art, &opts, &|_| {}).unwrap();
    assert_eq!(report.kernels, 2, "the row-major copy of zᵀ, then the product");
    let (x, z) = (values(4, m * k), values(5, n * k));
    let zt: Vec<f32> = (0..k * n).map(|i| z[(i % n) * k + i / n]).collect();
    let artifact = pilot_core::Artifact::open(&art).unwrap();
    let mut session = pilot_core::Session::new(artifact, Box::new(pilot_core::cpu::CpuDevice::new(2))).unwrap();
    let (xt, zz) = (Tensor::from_f32(vec![1, m, k], &x), Tensor::from_f32(vec![1, n, k], &z));
    session.step(&[xt.data.as_slice(), zz.data.as_slice()]).unwrap();
    let got = Tensor { dtype: xt.dtype, shape: vec![1, m, n], data: session.outputs()[0].clone() };
    close(&got, &Tensor::from_f32(vec![1, m, n], &product(&x, &zt, m, k, n))).unwrap();
}

fn ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto { name: Some(name.into()), r#type: Some(7), ints: v.to_vec(), ..Default::default() }
}

/// A 3×3 convolution, padding 1, of `x: [1, cin, h, w]` by a constant `w: [cout, cin, 3, 3]`.
fn conv_model(cin: usize, cout: usize, h: usize, w: usize, weight: &[f32]) -> Vec<u8> {
    let graph = pb::GraphProto {
        name: Some("conv".into()),
        node: vec![pb::NodeProto {
            name: Some("conv".into()),
            op_type: Some("Conv".into()),
            input: vec!["x".into(), "w".into()],
            output: vec!["y".into()],
            attribute: vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
            ..Default::default()
        }],
        input: vec![value("x", &[1, cin as i64, h as i64, w as i64])],
        output: vec![value("y", &[1, cout as i64, h as i64, w as i64])],
        initializer: vec![floats("w", &[cout as i64, cin as i64, 3, 3], weight)],
        ..Default::default()
    };
    model_bytes(graph)
}

/// `model` lowered for a CPU of `lanes` lanes (no Winograd path).
fn lower_for_cpu(model: &[u8], lanes: usize) -> pilot_compiler::lower::Lowered {
    let model = pilot_compiler::onnx::load_bytes(model, None).unwrap();
    pilot_compiler::lower::lower_pinned(
        &model,
        &Default::default(),
        &Default::default(),
        None,
        Default::default(),
        pilot_compiler::lower::winograd::Policy::Off,
        lanes,
    )
    .unwrap()
}

/// The shapes of the constants the kernels of `model` read, lowered for a CPU of `lanes` lanes.
fn read_constants(model: &[u8], lanes: usize) -> Vec<Vec<usize>> {
    let lowered = lower_for_cpu(model, lanes);
    let p = &lowered.program;
    let read: std::collections::BTreeSet<u32> = p.kernels.iter().flat_map(|k| p.kernel_inputs(k)).collect();
    read.iter()
        .filter_map(|&b| match &p.bufs[b as usize].kind {
            BufKind::Weight(t) => Some(t.shape.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_convolution_stores_its_weight_in_panels_of_output_channels() {
    let shapes =
        |cin: usize, cout: usize| read_constants(&conv_model(cin, cout, 40, 40, &values(4, cout * cin * 9)), 16);
    assert_eq!(shapes(8, 32), [vec![2, 72, 16]], "32 output channels: 2 panels of 16 by cin·3·3");
    assert_eq!(shapes(8, 24), [vec![24, 8, 3, 3]], "24 output channels are not whole panels");
    // On a 1×1 map the convolution runs channels-inner as a matrix-vector product: whole rows.
    let one = read_constants(&conv_model(8, 32, 1, 1, &values(4, 32 * 8 * 9)), 16);
    assert!(one.iter().all(|s| s.len() != 3), "{one:?}");
}

#[test]
fn a_convolution_by_panels_runs_on_the_cpu_like_a_plain_one() {
    let (cin, cout, h, w) = (5, 32, 9, 40);
    let weight = values(5, cout * cin * 9);
    let x = values(6, cin * h * w);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conv.onnx");
    std::fs::write(&path, conv_model(cin, cout, h, w, &weight)).unwrap();
    let art = dir.path().join("conv.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    pilot_compiler::compile(&path, &art, &opts, &|_| {}).unwrap();
    let artifact = pilot_core::Artifact::open(&art).unwrap();
    let mut session = pilot_core::Session::new(artifact, Box::new(pilot_core::cpu::CpuDevice::new(2))).unwrap();
    let xt = Tensor::from_f32(vec![1, cin, h, w], &x);
    session.step(&[xt.data.as_slice()]).unwrap();
    let got = Tensor { dtype: xt.dtype, shape: vec![1, cout, h, w], data: session.outputs()[0].clone() };
    let mut want = vec![0f32; cout * h * w];
    for (i, out) in want.iter_mut().enumerate() {
        let (o, y, xx) = (i / (h * w), i / w % h, i % w);
        let mut s = 0f64;
        for c in 0..cin {
            for t in 0..9 {
                let (yy, xs) = (y as i64 + (t / 3) as i64 - 1, xx as i64 + (t % 3) as i64 - 1);
                if (0..h as i64).contains(&yy) && (0..w as i64).contains(&xs) {
                    s += f64::from(x[(c * h + yy as usize) * w + xs as usize])
                        * f64::from(weight[(o * cin + c) * 9 + t]);
                }
            }
        }
        *out = s as f32;
    }
    close(&got, &Tensor::from_f32(vec![1, cout, h, w], &want)).unwrap();
}

fn node(op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
    pb::NodeProto {
        name: Some(output.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|&i| i.into()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

#[test]
fn products_sharing_a_weight_run_as_one_where_independent() {
    // y0 = a0·W and y1 = a1·W are independent: one product of 2 rows. y2 = tanh(y0)·W reads y0's
    // result and stays a product of its own.
    let k = 256;
    let w = values(7, k * k);
    let inputs: Vec<Vec<f32>> = (0..2).map(|i| values(8 + i, k)).collect();
    let graph = pb::GraphProto {
        name: Some("shared".into()),
        node: vec![
            node("MatMul", &["a0", "w"], "y0"),
            node("Tanh", &["y0"], "t"),
            node("MatMul", &["t", "w"], "y2"),
            node("MatMul", &["a1", "w"], "y1"),
        ],
        input: vec![value("a0", &[1, k as i64]), value("a1", &[1, k as i64])],
        output: vec![value("y1", &[1, k as i64]), value("y2", &[1, k as i64])],
        initializer: vec![floats("w", &[k as i64, k as i64], &w)],
        ..Default::default()
    };
    let bytes = model_bytes(graph);
    let lowered = lower_for_cpu(&bytes, 8);
    let names: Vec<&str> = lowered.program.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names.iter().filter(|n| n.ends_with("_rows")).count(), 1, "{names:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.onnx");
    std::fs::write(&path, &bytes).unwrap();
    let art = dir.path().join("shared.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    pilot_compiler::compile(&path, &art, &opts, &|_| {}).unwrap();
    let artifact = pilot_core::Artifact::open(&art).unwrap();
    let mut session = pilot_core::Session::new(artifact, Box::new(pilot_core::cpu::CpuDevice::new(2))).unwrap();
    let feeds: Vec<Tensor> = inputs.iter().map(|a| Tensor::from_f32(vec![1, k], a)).collect();
    session.step(&[feeds[0].data.as_slice(), feeds[1].data.as_slice()]).unwrap();
    let y0 = product(&inputs[0], &w, 1, k, k);
    let t: Vec<f32> = y0.iter().map(|v| v.tanh()).collect();
    let want = [product(&inputs[1], &w, 1, k, k), product(&t, &w, 1, k, k)];
    for (i, want) in want.iter().enumerate() {
        let got = Tensor { dtype: feeds[0].dtype, shape: vec![1, k], data: session.outputs()[i].clone() };
        close(&got, &Tensor::from_f32(vec![1, k], want)).unwrap_or_else(|e| panic!("output {i}: {e}"));
    }
}
