//! pilot-core: the lean runtime.
//!
//! - [`artifact`]: the openpilot out-of-band container, the strict pickle subset, the typed schema and
//!   its two-pass verification, and the memory-mapped loader.
//! - [`device`]: the narrow [`device::Device`] trait every backend implements.
//! - [`target`]: what an artifact is compiled for ([`target::Target`]: backend, arch, modes) and the
//!   rules of which backend takes which architecture and modes.
//! - [`session`]: load → verify → allocate → upload → link → ready, then allocation-free steps.
//! - [`timeline`]: the values every device's submissions signal, and the host's account of them.
//! - [`cpu`] and [`null`]: the desktop CPU backend (own ELF loader, thread pool) and the compile-only backend.
//!
//! This crate never depends on protobuf or ONNX code; the compiler depends on it, not the reverse.

pub mod artifact;
pub mod bounds;
pub mod cpu;
pub mod device;
pub mod dtype;
pub mod fsio;
pub mod gates;
pub mod hcq;
pub mod npy;
pub mod null;
pub mod session;
pub mod target;
pub mod timeline;

pub use artifact::{Artifact, ArtifactError};

pub use device::{Device, DeviceError};
pub use dtype::DType;
pub use session::{Session, SessionError};
pub use target::{Arch, Backend, Target};
