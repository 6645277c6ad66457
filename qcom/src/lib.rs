//! pilot-qcom: the Adreno 630 backend over KGSL (`/dev/kgsl-3d0`) and the fake KGSL.
//!
//! Layers, bottom up:
//! - [`sys`]: the KGSL ABI as plain data (structs, ioctl numbers, flags);
//! - [`a6xx`]: the a6xx registers pilot programs, with packers by field name (generated from `qcom/regs/a6xx.regs`);
//! - [`pm4`]: PM4 packet headers, opcodes, register offsets, and a strict decoder;
//! - [`reloc`]: dword buffers with a relocation table (core's shared [`pilot_core::hcq::reloc`] with the a6xx symbols);
//! - [`dispatch`]: the compute dispatch sequence and the texture/sampler descriptors;
//! - [`ioctl`]: the [`ioctl::KgslFile`] seam (ioctl + mmap) and its implementation over the real device node;
//! - [`kgsl`]: owning types: [`kgsl::KgslDevice`], contexts, GPU objects, user-memory mappings;
//! - [`blob`]: the Qualcomm "lib" shader blob parser;
//! - [`ir3`]: how a program Mesa's ir3 compiled is laid out (registers, const file, descriptors) from its record;
//! - [`device`]: [`device::QcomDevice`], the `pilot_core::device::Device` over KGSL (prebuilt steps, one
//!   `IOCTL_KGSL_GPU_COMMAND` per submit);
//!
//! Behind the `fake` feature (tests and desktop checks; the on-device runtime contains none of it):
//! - `fake`: an in-process KGSL that decodes every submission with its own register and descriptor tables, checks
//!   it, and tracks the memory each dispatch writes;
//! - `fake_shader`: the shader image `--qcom-compiler fake` writes (a kernel's OpenCL source and argument layout)
//!   and the blob around it;
//! - `fake_exec` (feature `fake-cl`): an executor that runs those kernels on OpenCL behind the fake KGSL;
//! - `fake_emu` (feature `fake-emu`): an executor that runs ir3 programs' a6xx machine code on the a6xx emulator.
//!
//! The hardware-neutral half (relocations, argument arena, the step linker, the barrier policy, the signal layout) is
//! [`pilot_core::hcq`], which the AMD backend (`pilot-amd`) stands on too; the timeline is
//! [`pilot_core::timeline::Timeline`]. This crate never depends on the compiler or on protobuf/ONNX.

// `pub mod a6xx`, generated from `qcom/regs/a6xx.regs` by build.rs.
include!(concat!(env!("OUT_DIR"), "/a6xx.rs"));
pub mod blob;
pub mod device;
pub mod dispatch;
#[cfg(feature = "fake")]
pub mod fake;
#[cfg(feature = "fake-emu")]
pub mod fake_emu;
#[cfg(feature = "fake-cl")]
pub mod fake_exec;
#[cfg(feature = "fake")]
pub mod fake_shader;
pub mod ioctl;
pub mod ir3;
pub mod kgsl;
pub mod pm4;
pub mod reloc;
#[allow(non_camel_case_types)]
pub mod sys;
