//! The emulator runs OpenCL C kernels built by clang-19 for gfx1201 (gfx12); every result is compared with the
//! same computation in Rust (the cases: kernel_cases/cases.rs, shared with rdna3_kernels.rs).

mod rdna3_support;

const ISA: pilot_rdna3::Isa = pilot_rdna3::Isa::Gfx12;

include!("kernel_cases/cases.rs");
