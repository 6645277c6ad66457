//! The emulator runs OpenCL C kernels built by clang-19 for gfx1100; every result is compared with the
//! same computation in Rust (the cases: kernel_cases/cases.rs, shared with rdna4_kernels.rs).

mod rdna3_support;

const ISA: pilot_rdna3::Isa = pilot_rdna3::Isa::Gfx11;

include!("kernel_cases/cases.rs");
