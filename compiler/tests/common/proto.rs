//! ONNX protobuf builders for tests that write small models by hand.
#![allow(dead_code)] // several test binaries share `common`, each using part of it

use pilot_compiler::onnx::proto as pb;
use prost::Message;

/// A float32 value of shape `dims`.
pub fn value(name: &str, dims: &[i64]) -> pb::ValueInfoProto {
    let dim = |d: i64| pb::tensor_shape_proto::Dimension {
        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
        ..Default::default()
    };
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto { dim: dims.iter().map(|&d| dim(d)).collect() }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A float32 initializer.
pub fn floats(name: &str, dims: &[i64], v: &[f32]) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        data_type: Some(1),
        dims: dims.to_vec(),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// `graph` as a serialized model (IR 8, default domain at opset 17).
pub fn model_bytes(graph: pb::GraphProto) -> Vec<u8> {
    let m = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    m.encode_to_vec()
}
