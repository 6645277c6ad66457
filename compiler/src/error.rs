//! Compiler errors. Display is one line; node errors name the node, its op and the opset.

/// Why a model could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// A problem with one node: unsupported op or attribute, inconsistent shapes, non-constant
    /// shape input, ...
    #[error("node `{node}` ({op}, opset {opset}): {reason}")]
    Node { node: String, op: String, opset: i64, reason: String },
    /// A problem with the graph as a whole (inputs, outputs, dynamic dimensions).
    #[error("{0}")]
    Graph(String),
    /// The C compiler or another tool failed.
    #[error("{0}")]
    Tool(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("writing the artifact: {0}")]
    Artifact(#[from] pilot_core::ArtifactError),
    #[error("{0}")]
    Import(#[from] crate::onnx::ImportError),
    /// The `ALLOWED_KERNEL_COUNT` gate.
    #[error("the model compiles to {found} kernels, {expected} allowed")]
    KernelCount { expected: usize, found: usize },
    /// `ALLOWED_READ_IMAGE` or `ALLOWED_GATED_READ_IMAGE`.
    #[error("{gate}: the kernels have {found}, {expected} allowed")]
    Gate { gate: &'static str, expected: usize, found: usize },
}

pub type Result<T, E = CompileError> = std::result::Result<T, E>;
