//! ONNX importer tests on real files: models written by the venv's `onnx` package (skipped with a
//! message when `.venv` is absent; `just setup` creates it) and malformed files built here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use pilot_compiler::onnx::{self, proto, Attr, Dim, ImportError, Model, ValueInfo};
use pilot_compiler::tensor::Tensor;
use pilot_core::DType;
use prost::Message;

/// Writes full.onnx, external/{model.onnx,weights.bin} (the same model, every tensor external)
/// and old.onnx (IR 3, initializers listed as inputs) into argv[1].
const GEN_PY: &str = r#"
import base64, os, sys
import numpy as np
import onnx
from onnx import TensorProto as TP, helper, numpy_helper

out = sys.argv[1]
os.makedirs(os.path.join(out, "external"), exist_ok=True)

def typed(name, dtype, dims, vals):
    return helper.make_tensor(name, dtype, dims, vals, raw=False)

inits = [
    numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) / 4, "w_raw"),
    numpy_helper.from_array(np.array([-1, 2**40], dtype=np.int64), "i64_raw"),
    numpy_helper.from_array(np.array([1.5, -2], dtype=np.float16), "f16_raw"),
    typed("f32_typed", TP.FLOAT, [3], [0.5, -1.25, 3.0]),
    typed("f64_typed", TP.DOUBLE, [2], [0.1, -7.0]),
    typed("i64_typed", TP.INT64, [2], [-3, 2**33]),
    typed("i32_typed", TP.INT32, [2], [-5, 7]),
    typed("i16_typed", TP.INT16, [2], [-300, 300]),
    typed("i8_typed", TP.INT8, [3], [-128, 0, 127]),
    typed("u8_typed", TP.UINT8, [2], [0, 255]),
    typed("u16_typed", TP.UINT16, [1], [65535]),
    typed("u32_typed", TP.UINT32, [1], [4000000000]),
    typed("u64_typed", TP.UINT64, [1], [2**63 + 5]),
    typed("bool_typed", TP.BOOL, [3], [True, False, True]),
    typed("f16_typed", TP.FLOAT16, [2], np.array([1.0, -0.5], dtype=np.float16)),
    typed("scalar", TP.FLOAT, [], [42.0]),
]

then_g = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["t_out"])], "then_branch", [],
    [helper.make_tensor_value_info("t_out", TP.FLOAT, ["batch", 3])])
else_g = helper.make_graph(
    [helper.make_node("Neg", ["x"], ["e_out"])], "else_branch", [],
    [helper.make_tensor_value_info("e_out", TP.FLOAT, None)])

nodes = [
    helper.make_node("Constant", [], ["c_tensor"], name="const_tensor",
                     value=numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64))),
    helper.make_node("Constant", [], ["c_float"], value_float=2.5),
    helper.make_node("Constant", [], ["c_floats"], value_floats=[1.0, 2.0]),
    helper.make_node("Constant", [], ["c_int"], value_int=-7),
    helper.make_node("Constant", [], ["c_ints"], value_ints=[4, 5, 6]),
    helper.make_node(
        "Everything", ["x", "", "w_raw"], ["y", ""], name="every_attr", domain="com.pilot",
        f=0.25, i=-9, s="hello", t=numpy_helper.from_array(np.array([1.0, 2.0], dtype=np.float32), "t_attr"), g=then_g,
        floats=[0.5, 1.5], ints=[1, -2, 3], strings=["a", "bc"],
        tensors=[typed("ta", TP.INT32, [1], [3]), typed("tb", TP.UINT8, [2], [1, 2])],
        graphs=[then_g, else_g]),
    helper.make_node("If", ["cond"], ["z"], then_branch=then_g, else_branch=else_g),
    helper.make_node("Add", ["y", "f32_typed"], ["out"], domain="ai.onnx"),
]
graph = helper.make_graph(
    nodes, "main",
    [helper.make_tensor_value_info("x", TP.FLOAT, ["batch", 3]),
     helper.make_tensor_value_info("cond", TP.BOOL, []),
     helper.make_tensor_value_info("idx", TP.INT64, [None, "n", 4])],
    [helper.make_tensor_value_info("out", TP.FLOAT, ["batch", 3]),
     helper.make_tensor_value_info("z", TP.FLOAT, None)],
    inits,
    value_info=[helper.make_tensor_value_info("y", TP.FLOAT, ["batch", 3])])
model = helper.make_model(graph, producer_name="pilot-test",
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.pilot", 2)])
model.ir_version = 8
slices = base64.b64encode(b"\x80\x05\x95fake-pickle-of-output-slices.").decode()
helper.set_model_props(model, {"output_slices": slices, "author": "pilot"})
onnx.save_model(model, os.path.join(out, "full.onnx"))
onnx.save_model(model, os.path.join(out, "external", "model.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="weights.bin", size_threshold=0, convert_attribute=True)

old_inits = [numpy_helper.from_array(np.ones((3, 2), dtype=np.float32), "W"),
             numpy_helper.from_array(np.zeros(2, dtype=np.float32), "B")]
old = helper.make_graph(
    [helper.make_node("Gemm", ["x", "W", "B"], ["y"])], "old",
    [helper.make_tensor_value_info("x", TP.FLOAT, [1, 3]),
     helper.make_tensor_value_info("W", TP.FLOAT, [3, 2]),
     helper.make_tensor_value_info("B", TP.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TP.FLOAT, [1, 2])], old_inits)
old_model = helper.make_model(old, producer_name="pytorch", opset_imports=[helper.make_opsetid("", 8)])
old_model.ir_version = 3
onnx.save_model(old_model, os.path.join(out, "old.onnx"))
"#;

const OUTPUT_SLICES_B64: &str = "gAWVZmFrZS1waWNrbGUtb2Ytb3V0cHV0LXNsaWNlcy4=";

/// A fresh directory under cargo's per-test-target scratch space.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("onnx_import-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The directory of generated models, generated once per run; `None` without the venv.
fn models() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let python = pilot_test_support::venv_python()?;
        let dir = scratch("models");
        let script = dir.join("gen.py");
        std::fs::write(&script, GEN_PY).unwrap();
        let out = Command::new(&python).arg(&script).arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "gen.py failed: {stderr}");
        Some(dir)
    })
    .as_deref()
}

fn full() -> Option<Model> {
    Some(onnx::load(&models()?.join("full.onnx")).unwrap())
}

fn init<'a>(m: &'a Model, name: &str) -> &'a Tensor {
    m.graph.initializer(name).unwrap_or_else(|| panic!("no initializer {name}"))
}

fn vi(name: &str, dtype: DType, dims: Option<Vec<Dim>>) -> ValueInfo {
    ValueInfo { name: name.into(), dtype: Some(dtype), dims }
}

#[test]
fn model_header_opsets_and_metadata() {
    let Some(m) = full() else { return };
    assert_eq!(m.ir_version, 8);
    assert_eq!(m.producer, "pilot-test");
    assert_eq!(m.opsets, [(String::new(), 17), ("com.pilot".into(), 2)]);
    let props = [("output_slices", OUTPUT_SLICES_B64), ("author", "pilot")];
    let props: Vec<(String, String)> = props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(m.metadata_props, props);
    assert_eq!(m.graph.name, "main");
}

#[test]
fn initializers_raw_and_typed() {
    let Some(m) = full() else { return };
    let w = init(&m, "w_raw");
    assert_eq!((w.dtype, w.shape.clone()), (DType::F32, vec![2, 3]));
    assert_eq!(w.to_f32(), [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]);
    assert_eq!(init(&m, "i64_raw").to_i64(), [-1, 1 << 40]);
    assert_eq!(init(&m, "f16_raw").data, [0x00, 0x3e, 0x00, 0xc0]);
    let cases: [(&str, DType, Vec<f64>); 13] = [
        ("f32_typed", DType::F32, vec![0.5, -1.25, 3.0]),
        ("f64_typed", DType::F64, vec![0.1, -7.0]),
        ("i64_typed", DType::I64, vec![-3.0, (1u64 << 33) as f64]),
        ("i32_typed", DType::I32, vec![-5.0, 7.0]),
        ("i16_typed", DType::I16, vec![-300.0, 300.0]),
        ("i8_typed", DType::I8, vec![-128.0, 0.0, 127.0]),
        ("u8_typed", DType::U8, vec![0.0, 255.0]),
        ("u16_typed", DType::U16, vec![65535.0]),
        ("u32_typed", DType::U32, vec![4e9]),
        ("u64_typed", DType::U64, vec![((1u64 << 63) + 5) as f64]),
        ("bool_typed", DType::Bool, vec![1.0, 0.0, 1.0]),
        ("f16_typed", DType::F16, vec![1.0, -0.5]),
        ("scalar", DType::F32, vec![42.0]),
    ];
    for (name, dtype, values) in cases {
        let t = init(&m, name);
        assert_eq!(t.dtype, dtype, "{name}");
        assert_eq!(t.to_f64(), values, "{name}");
    }
    assert_eq!(init(&m, "u64_typed").data, ((1u64 << 63) + 5).to_le_bytes());
    assert!(init(&m, "scalar").shape.is_empty());
    assert_eq!(m.graph.initializers.len(), 16);
}

#[test]
fn constant_nodes() {
    let Some(m) = full() else { return };
    let values: Vec<Tensor> = m.graph.nodes[..5].iter().map(|n| n.constant_value().unwrap()).collect();
    assert_eq!(m.graph.nodes[0].name, "const_tensor");
    assert_eq!(values[0], Tensor::from_i64(vec![3], &[1, 2, 3]));
    assert_eq!(values[1], Tensor::from_f32(vec![], &[2.5]));
    assert_eq!(values[2], Tensor::from_f32(vec![2], &[1.0, 2.0]));
    assert_eq!(values[3], Tensor::from_i64(vec![], &[-7]));
    assert_eq!(values[4], Tensor::from_i64(vec![3], &[4, 5, 6]));
    assert_eq!(m.graph.nodes[1].attr_float("value_float"), Some(2.5));
    assert!(m.graph.nodes[5].constant_value().is_none());
}

#[test]
fn attributes_of_every_kind() {
    let Some(m) = full() else { return };
    let n = &m.graph.nodes[5];
    assert_eq!((n.name.as_str(), n.op_type.as_str(), n.domain.as_str()), ("every_attr", "Everything", "com.pilot"));
    assert_eq!(n.inputs, ["x", "", "w_raw"]);
    assert_eq!(n.outputs, ["y", ""]);
    assert_eq!(n.attr_float("f"), Some(0.25));
    assert_eq!(n.attr_int("i"), Some(-9));
    assert_eq!(n.attr_str("s").as_deref(), Some("hello"));
    assert_eq!(n.attr_tensor("t"), Some(&Tensor::from_f32(vec![2], &[1.0, 2.0])));
    assert_eq!(n.attr_graph("g").map(|g| g.name.as_str()), Some("then_branch"));
    assert_eq!(n.attr_floats("floats"), Some(&[0.5, 1.5][..]));
    assert_eq!(n.attr_ints("ints"), Some(&[1, -2, 3][..]));
    assert_eq!(n.attr("strings"), Some(&Attr::Strs(vec![b"a".to_vec(), b"bc".to_vec()])));
    let Some(Attr::Tensors(ts)) = n.attr("tensors") else { panic!("tensors: {:?}", n.attr("tensors")) };
    assert_eq!(ts[0], Tensor::from_bytes(DType::I32, vec![1], 3i32.to_le_bytes().to_vec()).unwrap());
    assert_eq!(ts[1], Tensor::from_bytes(DType::U8, vec![2], vec![1, 2]).unwrap());
    let Some(Attr::Graphs(gs)) = n.attr("graphs") else { panic!("graphs: {:?}", n.attr("graphs")) };
    assert_eq!(gs.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), ["then_branch", "else_branch"]);
    assert_eq!(gs[1].nodes[0].op_type, "Neg");
    assert_eq!(gs[1].outputs[0], ValueInfo { name: "e_out".into(), dtype: Some(DType::F32), dims: None });
    assert_eq!(n.attrs.len(), 10);

    let if_node = &m.graph.nodes[6];
    assert_eq!(if_node.attr_graph("else_branch"), Some(&gs[1]));
    assert_eq!(m.graph.nodes[7].domain, "", "ai.onnx is normalized to the empty domain");
}

#[test]
fn dynamic_dims_and_value_info() {
    let Some(m) = full() else { return };
    let batch = || Dim::Named("batch".into());
    let g = &m.graph;
    assert_eq!(g.inputs[0], vi("x", DType::F32, Some(vec![batch(), Dim::Fixed(3)])));
    assert_eq!(g.inputs[1], vi("cond", DType::Bool, Some(vec![])));
    let idx = vec![Dim::Unknown, Dim::Named("n".into()), Dim::Fixed(4)];
    assert_eq!(g.inputs[2], vi("idx", DType::I64, Some(idx)));
    assert_eq!(g.outputs[1], vi("z", DType::F32, None));
    assert_eq!(g.value_info, [vi("y", DType::F32, Some(vec![batch(), Dim::Fixed(3)]))]);
    assert_eq!(g.real_inputs().count(), 3);
}

#[test]
fn external_data_matches_inline_data() {
    let Some(dir) = models() else { return };
    let inline = onnx::load(&dir.join("full.onnx")).unwrap();
    let path = dir.join("external/model.onnx");
    let external = onnx::load(&path).unwrap();
    assert_eq!(external, inline);

    let bytes = std::fs::read(&path).unwrap();
    let e = onnx::load_bytes(&bytes, None).unwrap_err();
    assert!(matches!(e, ImportError::ExternalData { .. }), "{e}");
}

#[test]
fn old_style_initializers_listed_as_inputs() {
    let Some(dir) = models() else { return };
    let m = onnx::load(&dir.join("old.onnx")).unwrap();
    assert_eq!((m.ir_version, m.producer.as_str()), (3, "pytorch"));
    assert_eq!(m.opsets, [(String::new(), 8)]);
    let names = |it: &mut dyn Iterator<Item = &ValueInfo>| it.map(|v| v.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&mut m.graph.inputs.iter()), ["x", "W", "B"]);
    assert_eq!(names(&mut m.graph.real_inputs()), ["x"]);
    assert_eq!(m.graph.initializer("W").unwrap().to_f32(), [1.0; 6]);
}

#[test]
fn every_prefix_of_a_real_model_is_an_error_or_the_same_graph() {
    let Some(dir) = models() else { return };
    for file in ["full.onnx", "external/model.onnx"] {
        let path = dir.join(file);
        let bytes = std::fs::read(&path).unwrap();
        let full = onnx::load(&path).unwrap();
        let base = path.parent();
        let mut errors = 0;
        for n in 0..bytes.len() {
            // A cut right after a complete top-level field is a valid, shorter model.
            match onnx::load_bytes(&bytes[..n], base) {
                Ok(m) => assert_eq!(m.graph, full.graph, "{file}: prefix {n}"),
                Err(e) => {
                    assert!(!e.to_string().contains('\n'));
                    errors += 1;
                }
            }
        }
        assert!(errors > bytes.len() * 9 / 10, "{file}: only {errors} of {} prefixes failed", bytes.len());
    }
}

#[test]
fn missing_empty_and_random_files_are_errors() {
    let dir = scratch("garbage");
    let missing = dir.join("nope.onnx");
    let e = onnx::load(&missing).unwrap_err();
    assert!(matches!(e, ImportError::Io { .. }) && e.to_string().contains("nope.onnx"), "{e}");

    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let e = onnx::load(&empty).unwrap_err();
    assert!(e.to_string().starts_with("not an ONNX model"), "{e}");

    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in (1..200).chain([4096, 65536]) {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        let r = onnx::load_bytes(&bytes, Some(&dir));
        assert!(r.is_err(), "{len} random bytes decoded as a model");
    }
}

/// A model whose one initializer "w" (4 floats) is external data described by `entries`.
fn external_model(entries: &[(&str, &str)]) -> Vec<u8> {
    let w = proto::TensorProto {
        name: Some("w".into()),
        data_type: Some(onnx::onnx_dtype_code(DType::F32) as i32),
        dims: vec![4],
        data_location: Some(proto::tensor_proto::DataLocation::External as i32),
        external_data: entries
            .iter()
            .map(|(k, v)| proto::StringStringEntryProto { key: Some(k.to_string()), value: Some(v.to_string()) })
            .collect(),
        ..Default::default()
    };
    let graph = proto::GraphProto { name: Some("g".into()), initializer: vec![w], ..Default::default() };
    let opset = proto::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) };
    proto::ModelProto { ir_version: Some(8), opset_import: vec![opset], graph: Some(graph), ..Default::default() }
        .encode_to_vec()
}

#[test]
fn external_data_is_confined_and_range_checked() {
    let root = scratch("external");
    let dir = root.join("model");
    std::fs::create_dir_all(dir.join("subdir")).unwrap();
    let values = [1.0f32, 2.0, 3.0, 4.0];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("weights.bin"), [&[0u8; 4][..], &bytes].concat()).unwrap();
    std::fs::write(root.join("secret.bin"), &bytes).unwrap();
    let secret = root.join("secret.bin").display().to_string();

    let load = |entries: &[(&str, &str)]| {
        let path = dir.join("model.onnx");
        std::fs::write(&path, external_model(entries)).unwrap();
        onnx::load(&path)
    };
    let m = load(&[("location", "weights.bin"), ("offset", "4"), ("length", "16")]).unwrap();
    assert_eq!(m.graph.initializer("w").unwrap().to_f32(), values);
    let m = load(&[("location", "./weights.bin"), ("offset", "4"), ("checksum", "x")]).unwrap();
    assert_eq!(m.graph.initializer("w").unwrap().to_f32(), values);

    let bad: [(&[(&str, &str)], &str); 11] = [
        (&[("location", "../secret.bin")], ".."),
        (&[("location", "subdir/../../secret.bin")], ".."),
        (&[("location", &secret)], "absolute"),
        (&[("location", "weights.bin"), ("length", "32")], "length 32"),
        (&[("location", "weights.bin"), ("offset", "8")], "outside"),
        (&[("location", "weights.bin"), ("offset", "18446744073709551615")], "outside"),
        (&[("location", "weights.bin"), ("offset", "-1")], "bad offset"),
        (&[("location", "weights.bin"), ("length", "lots")], "bad length"),
        (&[("location", "absent.bin")], "absent.bin"),
        (&[("location", "subdir")], "not a regular file"),
        (&[("offset", "0")], "no location"),
    ];
    for (entries, why) in bad {
        let e = load(entries).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ImportError::ExternalData { .. }), "{entries:?}: {msg}");
        assert!(msg.starts_with("tensor \"w\": external data:") && msg.contains(why), "{entries:?}: {msg}");
    }
}
