//! The hardware-neutral half of a command-queue GPU backend.
//!
//! - [`reloc`]: dword buffers with a relocation table, so a step is encoded once and linked later.
pub mod reloc;
