//! Errors of code generation, native compilation and artifact emission. Display is one line.

use pilot_core::ArtifactError;

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// No usable C compiler was found.
    #[error("no C compiler found (tried {tried}); install one with `apt-get install clang-19`, or pass --cc PATH / set PILOT_CC")]
    NoCompiler { tried: String },
    /// The compiler cannot build for the requested target.
    #[error("{cc} cannot compile for {arch}: {reason}")]
    Target {
        cc: String,
        arch: String,
        reason: String,
    },
    /// The C compiler rejected a kernel (first lines of its diagnostics, joined with ` | `).
    #[error("kernel `{kernel}`: {cc} failed: {stderr}")]
    Cc {
        kernel: String,
        cc: String,
        stderr: String,
    },
    /// A program the code generator cannot render (a bug upstream, or an unsupported op).
    #[error("kernel `{kernel}`: {reason}")]
    Codegen { kernel: String, reason: String },
    /// The program as a whole is inconsistent (buffers, inputs, outputs).
    #[error("program: {0}")]
    Program(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("artifact: {0}")]
    Artifact(#[from] ArtifactError),
}

impl CompileError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> CompileError {
        CompileError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
