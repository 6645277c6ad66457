//! The timeline signal's memory: what the last packets of every submission write (the submission's value) and
//! where. The host side that hands values out and waits for them is [`crate::timeline::Timeline`].

/// Byte offset of the signal's value (u32 compared, see [`crate::timeline::reached`]; the GPU writes 32 bits).
pub const SIGNAL_VALUE: u64 = 0;
/// Byte offset of the 64-bit GPU timestamp next to the value.
pub const SIGNAL_TIMESTAMP: u64 = 8;
