//! `pilot compile --selftest` compares with onnxruntime; a reference that holds no finite value
//! compares nothing (NaN against NaN is not a match), so it fails instead of passing vacuously.

use std::process::Command;

use pilot_compiler::onnx::proto as pb;
use prost::Message;

fn value(name: &str) -> pb::ValueInfoProto {
    let dim = |d: i64| pb::tensor_shape_proto::Dimension {
        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
        ..Default::default()
    };
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto { dim: vec![dim(2), dim(8)] }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, input: &str, output: &str) -> pb::NodeProto {
    pb::NodeProto {
        op_type: Some(op.into()),
        name: Some(output.into()),
        input: vec![input.into()],
        output: vec![output.into()],
        ..Default::default()
    }
}

#[test]
fn a_reference_of_nans_fails_the_selftest() {
    // y = sqrt(-exp(x)): NaN for every x, in onnxruntime and in pilot alike.
    let graph = pb::GraphProto {
        node: vec![node("Exp", "x", "e"), node("Neg", "e", "n"), node("Sqrt", "n", "y")],
        input: vec![value("x")],
        output: vec![value("y")],
        ..Default::default()
    };
    let model = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let (path, out) = (dir.path().join("nan.onnx"), dir.path().join("nan.pkl"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_pilot"))
        .args(["compile", path.to_str().unwrap(), "-o", out.to_str().unwrap(), "--selftest"])
        .env_remove("SELFTEST")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("selftest y: onnxruntime's output holds no finite value"), "{stdout}");
}
