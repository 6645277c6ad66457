//! The AMD GPU behind the bridge, driven from userspace the way tinygrad's "AM" driver does
//! (tinygrad `runtime/support/am/amdev.py`, `ip.py`; `runtime/ops_amd.py`), with `GMMU=0`.
//!
//! - [`bus`]: the seam every layer above talks through (registers, VRAM, doorbells), over the bridge.

pub mod boot;
pub mod bus;
pub mod discovery;
pub mod regs;
