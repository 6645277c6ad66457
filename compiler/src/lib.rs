//! pilot-compiler: ONNX import, graph passes, scheduling, code generation and the artifact writer.

pub mod artifact;
mod driver;
pub mod error;
pub mod exec;
pub mod ir;
pub mod lazy;
pub mod lower;
pub mod onnx;
pub mod plan;
pub mod program;
pub mod target;
pub mod tensor;

pub use driver::{compile, CompileOptions, CompileReport};
pub use error::CompileError;
