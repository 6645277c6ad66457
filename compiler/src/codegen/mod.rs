//! Code generation for the CPU target: [`c`] renders kernels as freestanding C (with [`cexpr`] for
//! single operations and [`cmath`] for the math prelude), [`build`] compiles them to objects.
//! [`crate::emit`] puts the objects into an artifact.

pub mod build;
pub mod c;
pub mod cexpr;
pub mod cmath;

pub use c::{render, CKernel};
