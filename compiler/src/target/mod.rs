//! The CPU back end: C rendering, the math prelude, building objects, memory planning, and writing
//! the artifact.

pub mod build;
pub mod c;
pub mod cl;
pub mod cmath;
pub mod emit;
pub mod plan;
pub mod upcast;
