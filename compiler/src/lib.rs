//! pilot-compiler: ONNX import, graph passes, scheduling, code generation and the artifact writer.
//!
//! Not built yet (the compiler issue). `pilot compile` reports that it is unavailable.
