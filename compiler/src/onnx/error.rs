//! The importer's error type.

use std::path::PathBuf;

/// Why an ONNX model could not be imported. Every variant displays as one line.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The model file itself could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// The bytes are not a protobuf `ModelProto` (or not one that ONNX allows).
    #[error("not an ONNX model: {0}")]
    NotOnnx(String),
    /// The protobuf stream ends in the middle of a field.
    #[error("truncated ONNX model: {0}")]
    Truncated(String),
    /// A well-formed `ModelProto` without a graph.
    #[error("ONNX model has no graph")]
    MissingGraph,
    /// A tensor (initializer or attribute value) whose data is malformed.
    #[error("tensor {name:?}: {reason}")]
    BadTensor { name: String, reason: String },
    /// A tensor or value whose element type pilot does not support (string, bfloat16, complex, float8, ...).
    #[error("{what}: unsupported dtype {dtype}")]
    UnsupportedDType { what: String, dtype: String },
    /// A tensor stored outside the model file whose location, range or file is unusable.
    #[error("tensor {name:?}: external data: {reason}")]
    ExternalData { name: String, reason: String },
    /// Any other structural problem, prefixed with where it was found (graph, node, attribute).
    #[error("{0}")]
    Invalid(String),
}

impl ImportError {
    pub(crate) fn bad_tensor(name: &str, reason: impl Into<String>) -> ImportError {
        ImportError::BadTensor { name: name.to_string(), reason: reason.into() }
    }

    pub(crate) fn external(name: &str, reason: impl Into<String>) -> ImportError {
        ImportError::ExternalData { name: name.to_string(), reason: reason.into() }
    }
}
