//! Unit tests on hand-built protos (no Python needed); file-level tests live in tests/onnx_import.rs.

use pilot_core::DType;
use prost::Message;

use super::proto::attribute_proto::AttributeType;
use super::proto::tensor_proto::{DataLocation, DataType};
use super::proto::tensor_shape_proto::{dimension, Dimension};
use super::proto::{self as pb, type_proto};
use super::*;

fn tensor(name: &str, ty: DataType, dims: &[i64]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.to_string()),
        data_type: Some(ty as i32),
        dims: dims.to_vec(),
        ..Default::default()
    }
}

fn decode(t: pb::TensorProto) -> Result<Tensor, ImportError> {
    data::decode_tensor(t, None)
}

fn model(graph: pb::GraphProto) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn load_proto(m: &pb::ModelProto) -> Result<Model, ImportError> {
    load_bytes(&m.encode_to_vec(), None)
}

fn value(name: &str, elem: i32, dims: Vec<Dimension>) -> pb::ValueInfoProto {
    let tensor = type_proto::Tensor { elem_type: Some(elem), shape: Some(pb::TensorShapeProto { dim: dims }) };
    pb::ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(pb::TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

fn dim_value(v: i64) -> Dimension {
    Dimension { value: Some(dimension::Value::DimValue(v)), ..Default::default() }
}

fn node_with_attr(a: pb::AttributeProto) -> pb::GraphProto {
    let node = pb::NodeProto { op_type: Some("Foo".into()), attribute: vec![a], ..Default::default() };
    pb::GraphProto { node: vec![node], ..Default::default() }
}

fn message(e: ImportError) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "multi-line error: {s}");
    s
}

#[test]
fn dtype_codes_round_trip() {
    for d in DType::ALL {
        assert_eq!(dtype_from_onnx(onnx_dtype_code(d)), Some(d), "{d}");
    }
    assert_eq!(onnx_dtype_name(16), "BFLOAT16");
    assert_eq!(dtype_from_onnx(i64::MAX), None);
    assert!(onnx_dtype_name(-5).contains("-5"));
}

#[test]
fn typed_fields_decode_to_little_endian() {
    let mut t = tensor("f", DataType::Float, &[2]);
    t.float_data = vec![1.5, -2.0];
    assert_eq!(decode(t).unwrap(), Tensor::from_f32(vec![2], &[1.5, -2.0]));

    let mut t = tensor("d", DataType::Double, &[1]);
    t.double_data = vec![0.25];
    assert_eq!(decode(t).unwrap().data, 0.25f64.to_le_bytes());

    let mut t = tensor("i64", DataType::Int64, &[2, 1]);
    t.int64_data = vec![-1, 1 << 40];
    assert_eq!(decode(t).unwrap(), Tensor::from_i64(vec![2, 1], &[-1, 1 << 40]));

    let mut t = tensor("u64", DataType::Uint64, &[1]);
    t.uint64_data = vec![u64::MAX];
    assert_eq!(decode(t).unwrap().data, u64::MAX.to_le_bytes());

    let mut t = tensor("u32", DataType::Uint32, &[1]);
    t.uint64_data = vec![0xdead_beef];
    assert_eq!(decode(t).unwrap().data, 0xdead_beefu32.to_le_bytes());

    let cases: [(DataType, Vec<i32>, Vec<u8>); 7] = [
        (DataType::Int32, vec![-2], (-2i32).to_le_bytes().to_vec()),
        (DataType::Int16, vec![-2], (-2i16).to_le_bytes().to_vec()),
        (DataType::Uint16, vec![65535], vec![0xff, 0xff]),
        (DataType::Float16, vec![0x3c00], vec![0x00, 0x3c]),
        (DataType::Int8, vec![-3], vec![0xfd]),
        (DataType::Uint8, vec![200], vec![200]),
        (DataType::Bool, vec![1], vec![1]),
    ];
    for (ty, values, want) in cases {
        let mut t = tensor("x", ty, &[1]);
        t.int32_data = values;
        let got = decode(t).unwrap();
        assert_eq!(got.data, want, "{ty:?}");
        assert_eq!(got.dtype, dtype_from_onnx(ty as i64).unwrap());
    }
    let mut t = tensor("b", DataType::Bool, &[3]);
    t.int32_data = vec![0, 5, 1];
    assert_eq!(decode(t).unwrap().data, [0, 1, 1]);
}

#[test]
fn raw_data_wins_and_is_checked() {
    let mut t = tensor("w", DataType::Float, &[2]);
    t.raw_data = Some([1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat());
    t.float_data = vec![9.0];
    assert_eq!(decode(t).unwrap().to_f32(), [1.0, 2.0]);

    let mut t = tensor("w", DataType::Float, &[3]);
    t.raw_data = Some(vec![0; 8]);
    let e = message(decode(t).unwrap_err());
    assert!(e.contains("\"w\"") && e.contains("raw_data has 8 bytes"), "{e}");
}

#[test]
fn scalars_and_empty_tensors() {
    let mut t = tensor("s", DataType::Int64, &[]);
    t.int64_data = vec![7];
    let s = decode(t).unwrap();
    assert_eq!((s.shape.len(), s.to_i64()), (0, vec![7]));

    let e = decode(tensor("e", DataType::Float, &[0, 3])).unwrap();
    assert_eq!((e.shape, e.data.len()), (vec![0, 3], 0));
}

#[test]
fn bad_sizes_are_errors_not_allocations() {
    let e = message(decode(tensor("neg", DataType::Float, &[2, -1])).unwrap_err());
    assert!(e.contains("\"neg\"") && e.contains("negative dimension -1"), "{e}");

    let e = message(decode(tensor("huge", DataType::Float, &[i64::MAX, i64::MAX])).unwrap_err());
    assert!(e.contains("overflow"), "{e}");

    let mut t = tensor("big", DataType::Float, &[1 << 40]);
    t.float_data = vec![1.0];
    let e = message(decode(t).unwrap_err());
    assert!(e.contains("float_data has 1 values"), "{e}");

    let e = message(decode(tensor("none", DataType::Int32, &[2])).unwrap_err());
    assert!(e.contains("int32_data has 0 values, dims need 2"), "{e}");
}

/// bfloat16 is the top half of a float32's bits, in `raw_data` or one value per `int32_data` entry.
#[test]
fn bfloat16_tensors_decode() {
    let mut t = tensor("b", DataType::Bfloat16, &[2]);
    t.raw_data = Some([0x3fc0u16, 0xc020].iter().flat_map(|v| v.to_le_bytes()).collect());
    let got = decode(t).unwrap();
    assert_eq!((got.dtype, got.to_f64()), (DType::BF16, vec![1.5, -2.5]));
    let mut t = tensor("b", DataType::Bfloat16, &[1]);
    t.int32_data = vec![0x3f80];
    assert_eq!(decode(t).unwrap().to_f64(), vec![1.0]);
}

#[test]
fn unsupported_dtypes_name_tensor_and_type() {
    for (ty, name) in [
        (DataType::String, "STRING"),
        (DataType::Int4, "INT4"),
        (DataType::Complex64, "COMPLEX64"),
        (DataType::Float8e4m3fn, "FLOAT8E4M3FN"),
        (DataType::Undefined, "UNDEFINED"),
    ] {
        let e = decode(tensor("t1", ty, &[1])).unwrap_err();
        assert!(matches!(e, ImportError::UnsupportedDType { .. }));
        let e = message(e);
        assert!(e.contains("\"t1\"") && e.contains(name), "{e}");
    }
    let mut t = tensor("t2", DataType::Float, &[1]);
    t.data_type = Some(999);
    assert!(message(decode(t).unwrap_err()).contains("unknown data type 999"));
}

#[test]
fn odd_storage_is_refused() {
    let mut t = tensor("seg", DataType::Float, &[0]);
    t.segment = Some(pb::tensor_proto::Segment { begin: Some(0), end: Some(0) });
    assert!(message(decode(t).unwrap_err()).contains("segmented"));

    let mut t = tensor("loc", DataType::Float, &[0]);
    t.data_location = Some(7);
    assert!(message(decode(t).unwrap_err()).contains("data_location 7"));
}

#[test]
fn external_data_needs_base_dir_and_a_relative_location() {
    let ext = |loc: &str| {
        let mut t = tensor("x", DataType::Float, &[1]);
        t.data_location = Some(DataLocation::External as i32);
        let kv = |k: &str, v: &str| pb::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
        t.external_data = vec![kv("location", loc), kv("offset", "0")];
        t
    };
    let e = message(decode(ext("w.bin")).unwrap_err());
    assert!(e.contains("\"x\"") && e.contains("without one"), "{e}");
    for (loc, why) in [("../w.bin", ".."), ("a/../../w.bin", ".."), ("/etc/passwd", "absolute"), ("", "empty")] {
        let err = data::decode_tensor(ext(loc), Some(Path::new("/tmp"))).unwrap_err();
        assert!(matches!(err, ImportError::ExternalData { .. }));
        let e = message(err);
        assert!(e.contains(why), "{loc}: {e}");
    }
}

#[test]
fn external_data_stays_inside_the_model_directory_and_in_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), [7u8; 4]).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("w.bin")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("sub")).unwrap();
    nix::unistd::mkfifo(&dir.path().join("fifo.bin"), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    std::fs::write(dir.path().join("ok.bin"), 1.5f32.to_le_bytes()).unwrap();
    std::os::unix::fs::symlink("ok.bin", dir.path().join("inner.bin")).unwrap();
    let ext = |loc: &str| {
        let mut t = tensor("x", DataType::Float, &[1]);
        t.data_location = Some(DataLocation::External as i32);
        t.external_data = vec![pb::StringStringEntryProto { key: Some("location".into()), value: Some(loc.into()) }];
        data::decode_tensor(t, Some(dir.path()))
    };
    for (loc, why) in [("w.bin", "through a symlink"), ("sub/secret", "through a symlink"), ("fifo.bin", "FIFO")] {
        let e = message(ext(loc).unwrap_err());
        assert!(e.contains(why), "{loc}: {e}");
    }
    assert_eq!(ext("inner.bin").unwrap().to_f32(), [1.5]);
    let mut huge = tensor("x", DataType::Float, &[1 << 33]);
    huge.data_location = Some(DataLocation::External as i32);
    huge.external_data =
        vec![pb::StringStringEntryProto { key: Some("location".into()), value: Some("ok.bin".into()) }];
    let e = message(data::decode_tensor(huge, Some(dir.path())).unwrap_err());
    assert!(e.contains("34359738368 bytes, more than the 17179869184 one tensor may take"), "{e}");
}

#[test]
fn model_level_checks() {
    let e = load_proto(&pb::ModelProto { ir_version: Some(8), ..Default::default() }).unwrap_err();
    assert!(matches!(e, ImportError::MissingGraph));

    let mut m = model(pb::GraphProto::default());
    m.opset_import.clear();
    assert!(matches!(load_proto(&m).unwrap_err(), ImportError::NotOnnx(_)));
    m.ir_version = Some(2);
    assert_eq!(load_proto(&m).unwrap().opsets, [(String::new(), 1)]);

    let mut m = model(pb::GraphProto::default());
    m.opset_import[0].domain = Some("ai.onnx".into());
    m.opset_import.push(pb::OperatorSetIdProto { domain: Some("com.microsoft".into()), version: Some(1) });
    assert_eq!(load_proto(&m).unwrap().opsets, [(String::new(), 17), ("com.microsoft".into(), 1)]);

    assert!(matches!(load_bytes(&[], None).unwrap_err(), ImportError::NotOnnx(_)));
}

#[test]
fn initializer_names_are_unique_and_present() {
    let mut t = tensor("w", DataType::Float, &[1]);
    t.float_data = vec![1.0];
    let g = pb::GraphProto { initializer: vec![t.clone(), t.clone()], ..Default::default() };
    assert!(message(load_proto(&model(g)).unwrap_err()).contains("duplicate"));
    t.name = None;
    let g = pb::GraphProto { initializer: vec![t], ..Default::default() };
    assert!(message(load_proto(&model(g)).unwrap_err()).contains("no name"));
}

#[test]
fn value_infos() {
    let named = Dimension { value: Some(dimension::Value::DimParam("batch".into())), ..Default::default() };
    let dims = vec![named, dim_value(3), dim_value(-1), Dimension::default()];
    let g = pb::GraphProto {
        input: vec![
            value("x", DataType::Float as i32, dims),
            pb::ValueInfoProto { name: Some("u".into()), ..Default::default() },
        ],
        value_info: vec![value("s", DataType::String as i32, vec![])],
        ..Default::default()
    };
    let m = load_proto(&model(g)).unwrap();
    let x = &m.graph.inputs[0];
    assert_eq!(x.dtype, Some(DType::F32));
    assert_eq!(x.dims, Some(vec![Dim::Named("batch".into()), Dim::Fixed(3), Dim::Unknown, Dim::Unknown]));
    assert_eq!(m.graph.inputs[1], ValueInfo { name: "u".into(), dtype: None, dims: None });
    assert_eq!(m.graph.value_info[0], ValueInfo { name: "s".into(), dtype: None, dims: None });

    let g = pb::GraphProto { output: vec![value("y", DataType::Float8e5m2 as i32, vec![])], ..Default::default() };
    let e = message(load_proto(&model(g)).unwrap_err());
    assert!(e.contains("\"y\"") && e.contains("FLOAT8E5M2"), "{e}");

    let seq = pb::TypeProto { value: Some(type_proto::Value::SequenceType(Box::default())), ..Default::default() };
    let v = pb::ValueInfoProto { name: Some("q".into()), r#type: Some(seq), ..Default::default() };
    let g = pb::GraphProto { input: vec![v], ..Default::default() };
    assert!(message(load_proto(&model(g)).unwrap_err()).contains("sequence"));
}

#[test]
fn attributes() {
    let typeless = pb::AttributeProto { name: Some("alpha".into()), f: Some(0.5), ..Default::default() };
    let m = load_proto(&model(node_with_attr(typeless))).unwrap();
    assert_eq!(m.graph.nodes[0].attr_float("alpha"), Some(0.5));
    assert_eq!(m.graph.nodes[0].attr_int("alpha"), None);
    assert_eq!(m.graph.nodes[0].attr_int("missing"), None);

    let empty = pb::AttributeProto { name: Some("e".into()), ..Default::default() };
    let e = message(load_proto(&model(node_with_attr(empty))).unwrap_err());
    assert!(e.contains("node #0 (Foo) attribute \"e\"") && e.contains("no type"), "{e}");

    let sparse = pb::AttributeProto {
        name: Some("sp".into()),
        r#type: Some(AttributeType::SparseTensor as i32),
        ..Default::default()
    };
    assert!(message(load_proto(&model(node_with_attr(sparse))).unwrap_err()).contains("SPARSE_TENSOR"));

    let no_tensor =
        pb::AttributeProto { name: Some("t".into()), r#type: Some(AttributeType::Tensor as i32), ..Default::default() };
    assert!(message(load_proto(&model(node_with_attr(no_tensor))).unwrap_err()).contains("without a value"));

    let unnamed = pb::AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(pb::TensorProto { data_type: Some(DataType::Float as i32), dims: vec![2], ..Default::default() }),
        ..Default::default()
    };
    let e = message(load_proto(&model(node_with_attr(unnamed))).unwrap_err());
    assert!(e.contains("tensor \"#0:value\""), "{e}");
}

#[test]
fn constant_values() {
    let constant = |a: pb::AttributeProto| {
        let node = pb::NodeProto { op_type: Some("Constant".into()), attribute: vec![a], ..Default::default() };
        let m = load_proto(&model(pb::GraphProto { node: vec![node], ..Default::default() })).unwrap();
        m.graph.nodes[0].constant_value().unwrap()
    };
    let attr = |name: &str, ty: AttributeType| pb::AttributeProto {
        name: Some(name.into()),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    let v = constant(pb::AttributeProto { f: Some(2.5), ..attr("value_float", AttributeType::Float) });
    assert_eq!((v.shape.len(), v.to_f32()), (0, vec![2.5]));
    let v = constant(pb::AttributeProto { ints: vec![1, 2, 3], ..attr("value_ints", AttributeType::Ints) });
    assert_eq!(v, Tensor::from_i64(vec![3], &[1, 2, 3]));
}

#[test]
fn nesting_is_bounded_by_the_recursion_limit() {
    let nest = |depth: usize| {
        let mut g = pb::GraphProto::default();
        for _ in 0..depth {
            let a = pb::AttributeProto {
                name: Some("body".into()),
                r#type: Some(AttributeType::Graph as i32),
                g: Some(g),
                ..Default::default()
            };
            g = node_with_attr(a);
        }
        model(g).encode_to_vec()
    };
    let m = load_bytes(&nest(20), None).unwrap();
    assert!(m.graph.nodes[0].attr_graph("body").is_some());
    let e = load_bytes(&nest(500), None).unwrap_err();
    assert!(matches!(e, ImportError::NotOnnx(_)), "{e}");
}

#[test]
fn every_prefix_of_a_model_is_handled() {
    let mut w = tensor("w", DataType::Float, &[4]);
    w.raw_data = Some(vec![0; 16]);
    let a = pb::AttributeProto { name: Some("k".into()), ints: vec![1, 2], ..Default::default() };
    let mut g = node_with_attr(a);
    g.initializer.push(w);
    g.input.push(value("x", DataType::Float as i32, vec![dim_value(4)]));
    let bytes = model(g).encode_to_vec();
    let full = load_bytes(&bytes, None).unwrap();
    let mut truncated = 0;
    for n in 0..bytes.len() {
        match load_bytes(&bytes[..n], None) {
            Ok(m) => assert_eq!(m.graph, full.graph, "prefix {n} decoded to a different graph"),
            Err(e) => truncated += usize::from(matches!(e, ImportError::Truncated(_))),
        }
    }
    assert!(truncated > bytes.len() / 2, "{truncated} of {} prefixes reported as truncated", bytes.len());
}

#[test]
fn the_reference_checks_refuse_bad_models() {
    let relu = |name: &str, input: &str, out: &str| pb::NodeProto {
        name: Some(name.into()),
        op_type: Some("Relu".into()),
        input: vec![input.into()],
        output: vec![out.into()],
        ..Default::default()
    };
    let graph = |nodes: Vec<pb::NodeProto>| pb::GraphProto {
        node: nodes,
        input: vec![value("x", DataType::Float as i32, vec![dim_value(2)])],
        output: vec![value("y", DataType::Float as i32, vec![dim_value(2)])],
        ..Default::default()
    };
    let checked = |m: pb::ModelProto| check::check(&load_proto(&m).unwrap()).map_err(message);
    assert_eq!(checked(model(graph(vec![relu("a", "x", "y")]))), Ok(()));

    let mut cases: Vec<(pb::ModelProto, &str)> = Vec::new();
    let empty = pb::GraphProto { name: Some("main".into()), ..Default::default() };
    cases.push((model(empty), "graph \"main\" has no outputs"));
    cases.push((
        model(graph(vec![relu("a", "x", "y"), relu("b", "x", "y")])),
        "node `b` (Relu): output `y` is already produced by node `a` (Relu)",
    ));
    cases.push((
        model(graph(vec![relu("a", "y", "x")])),
        "node `a` (Relu): output `x` is already produced by a graph input",
    ));
    for (ir, why) in [(0, "ir_version 0 is not set"), (999, "ir_version 999 is not supported")] {
        let mut m = model(graph(vec![relu("a", "x", "y")]));
        m.ir_version = Some(ir);
        cases.push((m, why));
    }
    for (domain, version, why) in [
        ("", 0, "opset 0 of domain ai.onnx"),
        ("", 99, "opset 99 of domain ai.onnx"),
        ("com.x", 0, "opset 0 of domain com.x"),
    ] {
        let mut m = model(graph(vec![relu("a", "x", "y")]));
        m.opset_import.push(pb::OperatorSetIdProto { domain: Some(domain.into()), version: Some(version) });
        if domain.is_empty() {
            m.opset_import.remove(0);
        }
        cases.push((m, why));
    }
    for (m, want) in cases {
        let e = checked(m).unwrap_err();
        assert!(e.contains(want), "{e:?} lacks {want:?}");
    }
}
