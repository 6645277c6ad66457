//! pilot-qcom: the Adreno 630 backend over KGSL (`/dev/kgsl-3d0`) and the fake KGSL.
//!
//! Layers, bottom up:
//! - [`sys`]: the KGSL ABI as plain data (structs, ioctl numbers, flags);
//! - [`pm4`]: PM4 packet headers, opcodes, registers, and a strict decoder;
//! - [`reloc`]: dword buffers with a relocation table, so a step is encoded once and linked later;
//! - [`dispatch`]: the compute dispatch sequence and the texture/sampler descriptors;
//! - [`ioctl`]: the [`ioctl::KgslFile`] seam (ioctl + mmap) and its implementation over the real device node;
//! - [`kgsl`]: owning types: [`kgsl::KgslDevice`], contexts, GPU objects, user-memory mappings;
//! - [`fake`]: an in-process KGSL that decodes and checks every submission;
//! - [`fake_shader`]: the shader image `--qcom-compiler fake` writes: a kernel's OpenCL source and argument layout.
//!
//! This crate never depends on the compiler or on protobuf/ONNX.

pub mod dispatch;
pub mod fake;
pub mod fake_shader;
pub mod ioctl;
pub mod kgsl;
pub mod pm4;
pub mod reloc;
#[allow(non_camel_case_types)]
pub mod sys;
