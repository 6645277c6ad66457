//! prost types → the importer's plain types. Every function consumes its proto so that tensor data
//! moves instead of being copied.

use std::collections::HashSet;
use std::path::Path;

use super::data::{decode_tensor, dtype_from_onnx, onnx_dtype_name};
use super::error::ImportError;
use super::proto::attribute_proto::AttributeType;
use super::proto::tensor_shape_proto::{dimension, Dimension};
use super::proto::{self, type_proto};
use super::{Attr, Dim, Graph, Model, Node, ValueInfo};

/// Builds the [`Model`]; `base_dir` resolves external tensor data.
pub(crate) fn model(m: proto::ModelProto, base_dir: Option<&Path>) -> Result<Model, ImportError> {
    let graph = m.graph.ok_or(ImportError::MissingGraph)?;
    let ir_version = m.ir_version.unwrap_or(0);
    let mut opsets: Vec<(String, i64)> = m
        .opset_import
        .into_iter()
        .map(|o| (normalize_domain(o.domain.unwrap_or_default()), o.version.unwrap_or(0)))
        .collect();
    if opsets.is_empty() {
        // IR version 3 introduced opset_import; earlier models implicitly use ai.onnx opset 1.
        if ir_version >= 3 {
            return Err(ImportError::NotOnnx(format!("IR version {ir_version} model without opset_import")));
        }
        opsets.push((String::new(), 1));
    }
    Ok(Model {
        graph: self::graph(graph, base_dir)?,
        opsets,
        metadata_props: m
            .metadata_props
            .into_iter()
            .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
            .collect(),
        producer: m.producer_name.unwrap_or_default(),
        ir_version,
    })
}

/// `"ai.onnx"` and `""` both name the default domain; the importer always uses `""`.
fn normalize_domain(domain: String) -> String {
    if domain == "ai.onnx" {
        String::new()
    } else {
        domain
    }
}

fn graph(g: proto::GraphProto, base_dir: Option<&Path>) -> Result<Graph, ImportError> {
    let name = g.name.unwrap_or_default();
    if !g.sparse_initializer.is_empty() {
        return Err(ImportError::Invalid(format!("graph {name:?}: sparse initializers are not supported")));
    }
    let mut seen = HashSet::new();
    let mut initializers = Vec::with_capacity(g.initializer.len());
    for t in g.initializer {
        let tname = t.name.clone().unwrap_or_default();
        if tname.is_empty() {
            return Err(ImportError::bad_tensor("", format!("initializer of graph {name:?} has no name")));
        }
        if !seen.insert(tname.clone()) {
            return Err(ImportError::bad_tensor(&tname, format!("duplicate initializer in graph {name:?}")));
        }
        initializers.push((tname, decode_tensor(t, base_dir)?));
    }
    let strict = |v| value_info(v, true);
    Ok(Graph {
        nodes: g.node.into_iter().enumerate().map(|(i, n)| node(n, i, base_dir)).collect::<Result<_, _>>()?,
        inputs: g.input.into_iter().map(strict).collect::<Result<_, _>>()?,
        outputs: g.output.into_iter().map(strict).collect::<Result<_, _>>()?,
        initializers,
        value_info: g.value_info.into_iter().map(|v| value_info(v, false)).collect::<Result<_, _>>()?,
        name,
    })
}

/// Graph inputs and outputs are `strict`: a non-tensor type or an unsupported element type is an
/// error. `value_info` entries are only hints, so there such types become "unknown".
fn value_info(v: proto::ValueInfoProto, strict: bool) -> Result<ValueInfo, ImportError> {
    let name = v.name.unwrap_or_default();
    let unknown = |name| Ok(ValueInfo { name, dtype: None, dims: None });
    let tensor = match v.r#type.and_then(|t| t.value) {
        None => return unknown(name),
        Some(type_proto::Value::TensorType(t)) => t,
        Some(other) if strict => {
            let kind = match other {
                type_proto::Value::SequenceType(_) => "sequence",
                type_proto::Value::MapType(_) => "map",
                type_proto::Value::OptionalType(_) => "optional",
                type_proto::Value::SparseTensorType(_) => "sparse tensor",
                type_proto::Value::OpaqueType(_) => "opaque",
                type_proto::Value::TensorType(_) => "tensor",
            };
            return Err(ImportError::Invalid(format!("value {name:?}: {kind} values are not supported")));
        }
        Some(_) => return unknown(name),
    };
    let code = i64::from(tensor.elem_type.unwrap_or(0));
    let dtype = match dtype_from_onnx(code) {
        Some(d) => Some(d),
        None if code == 0 => None,
        None if strict => {
            let what = format!("value {name:?}");
            return Err(ImportError::UnsupportedDType { what, dtype: onnx_dtype_name(code) });
        }
        None => return unknown(name),
    };
    let dims = tensor.shape.map(|s| s.dim.into_iter().map(dim).collect());
    Ok(ValueInfo { name, dtype, dims })
}

/// Negative `dim_value`s (written by some exporters for "dynamic") and empty `dim_param`s are unknown.
fn dim(d: Dimension) -> Dim {
    match d.value {
        Some(dimension::Value::DimValue(v)) if v >= 0 => Dim::Fixed(v),
        Some(dimension::Value::DimParam(p)) if !p.is_empty() => Dim::Named(p),
        _ => Dim::Unknown,
    }
}

fn node(n: proto::NodeProto, index: usize, base_dir: Option<&Path>) -> Result<Node, ImportError> {
    let name = n.name.unwrap_or_default();
    let op_type = n.op_type.unwrap_or_default();
    let label =
        if name.is_empty() { format!("node #{index} ({op_type})") } else { format!("node {name:?} ({op_type})") };
    let short = if name.is_empty() { format!("#{index}") } else { name.clone() };
    let attrs = n
        .attribute
        .into_iter()
        .map(|a| {
            let aname = a.name.clone().unwrap_or_default();
            let label = format!("{label} attribute {aname:?}");
            let value = attr(a, &label, &format!("{short}:{aname}"), base_dir)?;
            Ok((aname, value))
        })
        .collect::<Result<_, ImportError>>()?;
    Ok(Node {
        name,
        op_type,
        domain: normalize_domain(n.domain.unwrap_or_default()),
        inputs: n.input,
        outputs: n.output,
        attrs,
    })
}

/// `label` prefixes errors about the attribute; `tensor_name` ("node:attr") stands in for the name
/// of unnamed attribute tensors.
fn attr(
    a: proto::AttributeProto,
    label: &str,
    tensor_name: &str,
    base_dir: Option<&Path>,
) -> Result<Attr, ImportError> {
    let invalid = |why: String| ImportError::Invalid(format!("{label}: {why}"));
    if a.ref_attr_name.is_some() {
        return Err(invalid("refers to a function attribute outside a function".to_string()));
    }
    let ty = match a.r#type.unwrap_or(0) {
        0 => infer_type(&a).ok_or_else(|| invalid("has no type and no value".to_string()))?,
        v => AttributeType::try_from(v).map_err(|_| invalid(format!("unknown attribute type {v}")))?,
    };
    let tensor = |mut t: proto::TensorProto| {
        if t.name.as_deref().unwrap_or_default().is_empty() {
            t.name = Some(tensor_name.to_string());
        }
        decode_tensor(t, base_dir)
    };
    let missing = || invalid(format!("{} attribute without a value", ty.as_str_name()));
    Ok(match ty {
        AttributeType::Float => Attr::Float(a.f.unwrap_or_default()),
        AttributeType::Int => Attr::Int(a.i.unwrap_or_default()),
        AttributeType::String => Attr::Str(a.s.unwrap_or_default()),
        AttributeType::Tensor => Attr::Tensor(tensor(a.t.ok_or_else(missing)?)?),
        AttributeType::Graph => Attr::Graph(Box::new(graph(a.g.ok_or_else(missing)?, base_dir)?)),
        AttributeType::Floats => Attr::Floats(a.floats),
        AttributeType::Ints => Attr::Ints(a.ints),
        AttributeType::Strings => Attr::Strs(a.strings),
        AttributeType::Tensors => Attr::Tensors(a.tensors.into_iter().map(tensor).collect::<Result<_, _>>()?),
        AttributeType::Graphs => {
            Attr::Graphs(a.graphs.into_iter().map(|g| graph(g, base_dir)).collect::<Result<_, _>>()?)
        }
        other => return Err(invalid(format!("{} attributes are not supported", other.as_str_name()))),
    })
}

/// IR version 1 attributes carry no type: the first field holding a value decides.
fn infer_type(a: &proto::AttributeProto) -> Option<AttributeType> {
    let ty = if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else {
        return None;
    };
    Some(ty)
}
