//! ONNX import: a `.onnx` file (protobuf `ModelProto`, plus any external data files) → plain Rust
//! types that the rest of the compiler uses.
//!
//! Decoding uses `prost` with types generated from the official `onnx.proto` into [`proto`] (the
//! generated file is committed; see `README.md` next to this file for how to regenerate it). The
//! importer checks the encoding only: names, types, tensor sizes, external data. It does not check
//! operator semantics, topological order or that names resolve; that is the graph builder's job.
//!
//! Contracts the compiler relies on:
//! - Domains are normalized: `""` is the default domain (`"ai.onnx"` is rewritten to `""`), in
//!   [`Model::opsets`] and [`Node::domain`].
//! - Some exporters (old PyTorch, IR version < 4) list initializers in `graph.input` too. Those
//!   inputs stay in [`Graph::inputs`], but an input that has an initializer is a constant, not a
//!   model input: use [`Graph::real_inputs`].
//! - `Constant` nodes stay nodes; their value is an attribute (`value`, `value_float(s)`,
//!   `value_int(s)`), see [`Node::constant_value`].
//! - Malformed input gives an [`ImportError`], never a panic. Nested graphs (If/Loop/Scan bodies)
//!   are bounded by prost's recursion limit of 100 messages.

pub mod check;
mod convert;
pub mod data;
mod error;
mod external;
pub mod proto;
#[cfg(test)]
mod tests;

use std::path::Path;

use pilot_core::DType;
use prost::Message;

use crate::tensor::Tensor;
pub use data::{dtype_from_onnx, onnx_dtype_code, onnx_dtype_name};
pub use error::ImportError;

/// An imported ONNX model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub graph: Graph,
    /// Operator set imports: (domain, version); `""` is the default ai.onnx domain. Never empty:
    /// models older than IR version 3 get the implicit `("", 1)`.
    pub opsets: Vec<(String, i64)>,
    /// `metadata_props` in file order (openpilot keeps e.g. `output_slices` here, base64 encoded).
    pub metadata_props: Vec<(String, String)>,
    /// `producer_name` ("pytorch", "tf2onnx", ...), empty if absent.
    pub producer: String,
    /// 0 if absent.
    pub ir_version: i64,
}

/// A graph: the main graph or a subgraph attribute (If/Loop/Scan bodies).
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub name: String,
    /// Nodes in file order (ONNX requires topological order; the importer does not check it).
    pub nodes: Vec<Node>,
    /// As listed in the file, possibly including initializers; see [`Graph::real_inputs`].
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    /// Named constants, names unique and non-empty.
    pub initializers: Vec<(String, Tensor)>,
    /// Shape/type hints for intermediate values; unsupported types there read as unknown.
    pub value_info: Vec<ValueInfo>,
}

/// One operator invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op_type: String,
    /// `""` for the default ai.onnx domain.
    pub domain: String,
    /// Value names; `""` marks an omitted optional input.
    pub inputs: Vec<String>,
    /// Value names; `""` marks an omitted optional output.
    pub outputs: Vec<String>,
    pub attrs: Vec<(String, Attr)>,
}

/// An attribute value. Strings are bytes, as in ONNX.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Float(f32),
    Int(i64),
    Str(Vec<u8>),
    Tensor(Tensor),
    Graph(Box<Graph>),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strs(Vec<Vec<u8>>),
    Tensors(Vec<Tensor>),
    Graphs(Vec<Graph>),
}

/// The declared type of a value. Graph inputs and outputs with a dtype pilot does not support are
/// import errors; `dtype: None` means "not declared".
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    pub name: String,
    pub dtype: Option<DType>,
    /// `None`: rank unknown.
    pub dims: Option<Vec<Dim>>,
}

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known size (never negative).
    Fixed(i64),
    /// A symbolic size (`dim_param`, e.g. "batch_size"); equal names mean equal sizes.
    Named(String),
    Unknown,
}

/// The largest model file read: protobuf messages are limited to 2 GiB.
pub const MAX_MODEL_BYTES: u64 = i32::MAX as u64;

/// Reads the model file at `path` (a regular file of at most [`MAX_MODEL_BYTES`]).
pub fn read_model_file(path: &Path) -> Result<Vec<u8>, ImportError> {
    pilot_core::fsio::read_regular(path, MAX_MODEL_BYTES)
        .map_err(|source| ImportError::Io { path: path.to_path_buf(), source })
}

/// Reads and imports the model at `path`; external data is resolved relative to its directory.
pub fn load(path: &Path) -> Result<Model, ImportError> {
    let bytes = read_model_file(path)?;
    let dir = path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    load_bytes(&bytes, dir)
}

/// Imports a serialized `ModelProto`. `base_dir` is the directory that external data locations
/// are relative to; without it, a model with external data is an error.
pub fn load_bytes(bytes: &[u8], base_dir: Option<&Path>) -> Result<Model, ImportError> {
    if bytes.is_empty() {
        return Err(ImportError::NotOnnx("empty file".to_string()));
    }
    if bytes.len() > i32::MAX as usize {
        return Err(ImportError::NotOnnx(format!("{} bytes is over protobuf's 2 GiB limit", bytes.len())));
    }
    let proto = proto::ModelProto::decode(bytes).map_err(|e| {
        let full = e.to_string();
        let msg = full.strip_prefix("failed to decode Protobuf message: ").unwrap_or(&full).to_string();
        // prost reports a message cut short as an underflow or an unterminated varint.
        if msg.contains("buffer underflow") || msg.contains("invalid varint") {
            ImportError::Truncated(msg)
        } else {
            ImportError::NotOnnx(msg)
        }
    })?;
    convert::model(proto, base_dir)
}

impl Graph {
    /// The inputs that are not initializers: the values a caller must feed.
    pub fn real_inputs(&self) -> impl Iterator<Item = &ValueInfo> + '_ {
        let constants: std::collections::HashSet<&str> = self.initializers.iter().map(|(n, _)| n.as_str()).collect();
        self.inputs.iter().filter(move |v| !constants.contains(v.name.as_str()))
    }

    /// The initializer called `name`.
    pub fn initializer(&self, name: &str) -> Option<&Tensor> {
        self.initializers.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

impl Node {
    /// A default-domain node without attributes, named after its output (for tests).
    #[cfg(test)]
    pub(crate) fn plain(op: &str, inputs: &[&str], output: &str) -> Node {
        Node {
            name: output.into(),
            op_type: op.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|&i| i.into()).collect(),
            outputs: vec![output.into()],
            attrs: Vec::new(),
        }
    }

    /// The attribute called `name` (the first, if a malformed file repeats it).
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// Each typed accessor is `None` if the attribute is absent or has another type.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        match self.attr(name)? {
            Attr::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        match self.attr(name)? {
            Attr::Ints(v) => Some(v),
            _ => None,
        }
    }

    pub fn attr_float(&self, name: &str) -> Option<f32> {
        match self.attr(name)? {
            Attr::Float(v) => Some(*v),
            _ => None,
        }
    }

    pub fn attr_floats(&self, name: &str) -> Option<&[f32]> {
        match self.attr(name)? {
            Attr::Floats(v) => Some(v),
            _ => None,
        }
    }

    /// A string attribute, with invalid UTF-8 replaced by U+FFFD.
    pub fn attr_str(&self, name: &str) -> Option<String> {
        match self.attr(name)? {
            Attr::Str(v) => Some(String::from_utf8_lossy(v).into_owned()),
            _ => None,
        }
    }

    pub fn attr_tensor(&self, name: &str) -> Option<&Tensor> {
        match self.attr(name)? {
            Attr::Tensor(v) => Some(v),
            _ => None,
        }
    }

    pub fn attr_graph(&self, name: &str) -> Option<&Graph> {
        match self.attr(name)? {
            Attr::Graph(v) => Some(v),
            _ => None,
        }
    }

    /// The values of enclosing scopes that this node's subgraphs (If branches, Loop and Scan bodies)
    /// read: names their nodes use that they do not define themselves, sorted, once each.
    pub fn captured(&self) -> Vec<String> {
        fn walk(g: &Graph, out: &mut Vec<String>) {
            let mut defined: std::collections::HashSet<&str> = g.inputs.iter().map(|v| v.name.as_str()).collect();
            defined.extend(g.initializers.iter().map(|(n, _)| n.as_str()));
            defined.extend(g.nodes.iter().flat_map(|n| n.outputs.iter().map(String::as_str)));
            for n in &g.nodes {
                out.extend(n.inputs.iter().filter(|i| !i.is_empty() && !defined.contains(i.as_str())).cloned());
                out.extend(n.captured().into_iter().filter(|i| !defined.contains(i.as_str())));
            }
        }
        let mut out = Vec::new();
        for (_, a) in &self.attrs {
            match a {
                Attr::Graph(g) => walk(g, &mut out),
                Attr::Graphs(gs) => gs.iter().for_each(|g| walk(g, &mut out)),
                _ => {}
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The value of a `Constant` node as a tensor: `value` as is, `value_float`/`value_int` as
    /// f32/i64 scalars, `value_floats`/`value_ints` as 1-D f32/i64 tensors. `None` for other
    /// nodes and for `value_string(s)`/`sparse_value` (not supported).
    pub fn constant_value(&self) -> Option<Tensor> {
        if self.op_type != "Constant" || !self.domain.is_empty() {
            return None;
        }
        self.attrs.iter().find_map(|(name, a)| match (name.as_str(), a) {
            ("value", Attr::Tensor(t)) => Some(t.clone()),
            ("value_float", Attr::Float(v)) => Some(Tensor::from_f32(vec![], &[*v])),
            ("value_floats", Attr::Floats(v)) => Some(Tensor::from_f32(vec![v.len()], v)),
            ("value_int", Attr::Int(v)) => Some(Tensor::from_i64(vec![], &[*v])),
            ("value_ints", Attr::Ints(v)) => Some(Tensor::from_i64(vec![v.len()], v)),
            _ => None,
        })
    }
}

/// Decodes a serialized `TensorProto` (the `input_0.pb` files of the ONNX backend tests) into its
/// name and tensor. External data is resolved relative to `base_dir`.
pub fn load_tensor(bytes: &[u8], base_dir: Option<&Path>) -> Result<(String, Tensor), ImportError> {
    let t = proto::TensorProto::decode(bytes).map_err(|e| ImportError::NotOnnx(e.to_string()))?;
    let name = t.name.clone().unwrap_or_default();
    Ok((name, data::decode_tensor(t, base_dir)?))
}
