//! `pilot compile --const NAME=FILE.npy`: an input pinned at compile time is folded, recorded in the
//! artifact (`pilot inspect`), gone from the runtime signature, and checked by `--selftest`; every
//! bad pin is one line, exit 2, nothing written.

use std::path::Path;
use std::process::{Command, Output};

use pilot_compiler::onnx::proto as pb;
use pilot_core::npy;
use pilot_core::DType;
use prost::Message;

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot")).args(args).env_remove("SELFTEST").output().expect("pilot runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refused(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "not one line: {e:?}");
    e
}

fn value(name: &str, elem_type: i32, dims: &[i64]) -> pb::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| pb::tensor_shape_proto::Dimension {
            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(elem_type),
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = Reshape(x, shape)` with `x` float32 [2, 3, 4] and `shape` int64 [2], both graph inputs.
fn reshape_model(path: &Path) {
    let node = pb::NodeProto {
        op_type: Some("Reshape".into()),
        name: Some("reshape".into()),
        input: vec!["x".into(), "shape".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let graph = pb::GraphProto {
        node: vec![node],
        input: vec![value("x", 1, &[2, 3, 4]), value("shape", 7, &[2])],
        output: vec![value("y", 1, &[4, 6])],
        ..Default::default()
    };
    let model = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    std::fs::write(path, model.encode_to_vec()).unwrap();
}

fn save_i64(path: &Path, values: &[i64]) {
    let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy::write(path, &npy::Array { dtype: DType::I64, shape: vec![values.len()], data }).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_pinned_input_is_folded_recorded_and_leaves_the_signature() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, shape, out) = (d.join("m.onnx"), d.join("shape.npy"), d.join("m.pkl"));
    reshape_model(&model);
    save_i64(&shape, &[4, 6]);
    let o = pilot(&["compile", s(&model), "-o", s(&out), "--const", &format!("shape={}", s(&shape)), "--selftest"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}{stdout}", stderr(&o));
    assert!(stdout.contains("selftest y: max scaled error") && stdout.contains(" ok"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("pinned") && l.contains("shape") && l.contains("xxh3:")), "{stdout}");

    let o = pilot(&["inspect", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let inputs: Vec<&str> = j["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(inputs, ["x"], "the pinned input is not a runtime input");
    let pinned = &j["metadata"]["pinned"][0];
    assert_eq!((pinned["name"].as_str(), pinned["dtype"].as_str()), (Some("shape"), Some("int64")));
    assert_eq!(pinned["shape"], serde_json::json!([2]));
    let bytes: Vec<u8> = [4i64, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    let hash = format!("xxh3:{:016x}", pilot_core::artifact::checksum(&bytes));
    assert_eq!(pinned["hash"].as_str(), Some(hash.as_str()), "the hash of the value's bytes");
    let text = String::from_utf8_lossy(&pilot(&["inspect", s(&out)]).stdout).into_owned();
    assert!(text.lines().any(|l| l.starts_with("pinned") && l.contains(&hash)), "{text}");

    // Without the pin, the run-time shape is refused, naming the input and the flag.
    let e = refused(&pilot(&["compile", s(&model), "-o", s(&d.join("no.pkl"))]));
    assert!(e.contains("`shape`") && e.contains("--const shape=FILE.npy"), "{e}");
    assert!(!d.join("no.pkl").exists());
}

#[test]
fn bad_pins_are_one_line_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (model, out) = (d.join("m.onnx"), d.join("m.pkl"));
    reshape_model(&model);
    save_i64(&d.join("good.npy"), &[4, 6]);
    save_i64(&d.join("long.npy"), &[4, 6, 1]);
    let i32s: Vec<u8> = [4i32, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    npy::write(d.join("i32.npy"), &npy::Array { dtype: DType::I32, shape: vec![2], data: i32s }).unwrap();
    std::fs::write(d.join("junk.npy"), b"\x93NUMPY\x01\x00junk").unwrap();
    let good = format!("shape={}", s(&d.join("good.npy")));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![format!("nope={}", s(&d.join("good.npy")))], "not a model input"),
        (vec![format!("shape={}", s(&d.join("i32.npy")))], "int32"),
        (vec![format!("shape={}", s(&d.join("long.npy")))], "[3]"),
        (vec![format!("shape={}", s(&d.join("junk.npy")))], "junk.npy"),
        (vec![format!("shape={}", s(&d.join("absent.npy")))], "absent.npy"),
        (vec!["shape".into()], "NAME=FILE.npy"),
        (vec![good.clone(), good], "twice"),
    ];
    for (pins, needle) in cases {
        let mut args = vec!["compile", s(&model), "-o", s(&out)];
        for p in &pins {
            args.extend(["--const", p.as_str()]);
        }
        let e = refused(&pilot(&args));
        assert!(e.contains(needle), "{pins:?}: {e}");
        assert!(!out.exists(), "{pins:?}: nothing is written");
    }
}
