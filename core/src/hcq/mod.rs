//! The hardware-neutral half of a command-queue GPU backend (tinygrad keeps it in `runtime/support/hcq.py`).
//!
//! A backend encodes a whole step once into a command stream plus kernel-argument blocks with symbolic addresses,
//! links it when the step is created, and at each submit only patches the timeline value and rings the queue:
//!
//! - [`reloc`]: dword buffers with a relocation table ([`reloc::RelocBuf`], [`reloc::Resolve`]), so a step is
//!   encoded once and linked later, and re-patched in place;
//! - [`args`]: the argument blocks laid out back to back in one allocation ([`args::ArgsArena`]) and where buffer
//!   addresses sit in them ([`args::BufferRef`]), to re-point a buffer without relinking;
//! - [`signal`]: the timeline signal's layout and the host side of its wait ([`signal::Timeline`]).
//!
//! What stays in a backend: the packets (PM4 for Adreno or AMD), the kernel interface (KGSL, USB), and its fence.
//! Nothing here allocates on the submit path.

pub mod args;
pub mod reloc;
pub mod signal;
