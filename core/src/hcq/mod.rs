//! The hardware-neutral half of a command-queue GPU backend (tinygrad keeps it in `runtime/support/hcq.py`): what
//! Adreno and AMD share, so a third GPU backend is its packets and its kernel interface, not a third copy.
//!
//! A backend encodes a whole step once into a command stream plus kernel-argument blocks with symbolic addresses,
//! links it when the step is created, and at each submit only patches the timeline value (or, on AMD, writes the
//! value into the ring submission) and rings the queue:
//!
//! - [`reloc`]: dword buffers with a relocation table ([`reloc::RelocBuf`], [`reloc::Resolve`]), generic over the
//!   backend's own address symbols, so a step is encoded once, linked later, and re-patched in place;
//! - [`args`]: the argument blocks laid out back to back in one allocation ([`args::ArgsArena`]) and where buffer
//!   addresses sit in them ([`args::BufferRef`]), to re-point a buffer without relinking;
//! - [`link`]: the one step linker ([`link::Encoded::place`]: arena → resolve → link → write to GPU memory);
//! - [`hazard`]: the one barrier policy ([`hazard::Hazards`]: a barrier before a dispatch that touches what an
//!   earlier one touched);
//! - [`signal`]: the timeline signal's memory layout; the host side is [`crate::timeline::Timeline`], which every
//!   device uses.
//!
//! What stays in a backend: the packets (PM4 for Adreno or AMD), the kernel interface (KGSL, USB), its fence, and
//! its own symbols. Nothing here allocates on the submit path.

pub mod args;
pub mod hazard;
pub mod link;
pub mod reloc;
pub mod signal;
