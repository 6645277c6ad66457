//! pilot's OpenCL backend: [`pilot_core::device::Device`] on any OpenCL 1.2 device, for validating the
//! OpenCL kernels the compiler generates on a desktop (PoCL, Mesa rusticl, vendor drivers) before they
//! meet the Adreno backend.
//!
//! # Loading
//! libOpenCL is opened at run time, never linked: a machine without OpenCL builds and runs `pilot`
//! and gets `device not available: OpenCL: <reason>` from [`ClDevice::open`].
//!
//! Dependency choice: `cl3` (maintained, OpenCL 3.0 API) loads `libOpenCL.so.1` through `dlopen2`
//! with its default `dynamic` feature, which resolves every entry point as optional (a missing one is
//! an error code, not a load failure) and passes no `-lOpenCL` to the linker (its `opencl-sys`
//! declares extern functions only with the `static` feature). That saves a hand-written FFI table:
//! the signatures and constants come from the Khronos headers' bindgen output in `opencl-sys`. cl3's
//! `unsafe` wrappers are called only from `handles`, behind safe methods on owned handles.
//!
//! # Model
//! See [`ClDevice`]: one context and one in-order queue; a program is one kernel of an OpenCL C source
//! (sources are built once, by content); `link_step` makes a kernel object per dispatch with its
//! arguments set; `submit` enqueues the step's commands and flushes; `wait`/`synchronize` finish the
//! queue.

mod device;
mod error;
mod handles;
mod platform;
mod quiet;
mod step;

pub use device::ClDevice;
pub use platform::{list_devices, ClDeviceEntry, ClLimits, DEVICE_ENV};
