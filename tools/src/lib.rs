//! The `pilot` command's modules; `main.rs` holds only the argument parsing. Devices and the one-line error text
//! come from `pilot-runtime`, which the C ABI and the Python module stand on too.

#[cfg(feature = "compiler")]
pub mod compile;
pub mod gate;
pub mod inspect;
pub mod keys;
pub use pilot_core::npy;
pub use pilot_runtime::{devices, one_line};
pub mod profile;
pub mod rd_capture;
pub mod run;
#[cfg(feature = "compiler")]
pub mod selftest;
#[cfg(feature = "smi")]
pub mod smi;
pub mod usb;
