//! The a6xx instance of the shared relocations ([`pilot_core::hcq::reloc`]): the addresses only an Adreno step
//! uses, and the names the rest of the crate uses for the generic types.

use pilot_core::hcq::reloc as hcq;
use std::fmt;

pub use hcq::{addr_words, FnResolve, LinkError, Resolve, ValueSlot, ValueSym};

/// Addresses an a6xx step uses besides buffers, programs, argument blocks and the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum A6xx {
    /// The private-memory (stack) buffer.
    Stack,
    /// The scratch page that cache-flush timestamps are written to.
    Dummy,
    /// The zeroed border-color buffer for samplers.
    BorderColor,
}

impl fmt::Display for A6xx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            A6xx::Stack => "stack",
            A6xx::Dummy => "dummy page",
            A6xx::BorderColor => "border color",
        })
    }
}

pub type Sym = hcq::Sym<A6xx>;
pub type Addr = hcq::Addr<A6xx>;
pub type Word = hcq::Word<A6xx>;
pub type RelocBuf = hcq::RelocBuf<A6xx>;
pub type Reloc = hcq::Reloc<A6xx>;
pub type RelocKind = hcq::RelocKind<A6xx>;
