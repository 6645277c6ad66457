//! The step linker every command-queue backend shares: encode → arena → resolve → link → write.
//!
//! A backend encodes a step once as an [`Encoded`]: its command stream and one kernel-argument block per dispatch,
//! with symbolic addresses, and the [`ArgsArena`] that lays the blocks out in one allocation. [`Encoded::place`]
//! allocates that memory through the backend's [`StepMemory`], resolves every symbol (the argument blocks through
//! the arena, the rest through the backend), and writes the linked dwords. What it returns is what a submit
//! needs: where the stream is, which of its dwords hold the timeline value (patched per submission), and where
//! each buffer address sits in the argument memory (re-pointed without relinking).

use super::args::{ArgsArena, BufferRef};
use super::reloc::{BackendSym, FnResolve, LinkError, RelocBuf, Sym, ValueSlot, ValueSym};
use crate::device::{DeviceError, DeviceResult};

/// A step as the backend encoded it.
#[derive(Clone, Debug)]
pub struct Encoded<B> {
    /// The command stream: the dispatches in order, then (on backends whose step signals itself) the signal.
    pub stream: RelocBuf<B>,
    /// One argument block per dispatch, in [`Sym::Args`] order.
    pub blocks: Vec<RelocBuf<B>>,
    /// Where each block sits in the argument memory.
    pub arena: ArgsArena,
}

/// GPU memory a step is written to.
pub trait StepMemory {
    type Mem;
    /// At least `bytes` (> 0) of GPU memory whose address is a multiple of `align`.
    fn alloc(&mut self, bytes: u64, align: u64) -> DeviceResult<Self::Mem>;
    /// The GPU address of `mem`.
    fn va(&self, mem: &Self::Mem) -> u64;
    /// Writes `words` at the start of `mem`.
    fn write(&mut self, mem: &mut Self::Mem, words: &[u32]) -> DeviceResult<()>;
}

/// A step in GPU memory.
#[derive(Debug)]
pub struct Placed<M> {
    pub stream: M,
    pub stream_dwords: usize,
    /// The argument memory (`None` for a step without dispatches).
    pub args: Option<M>,
    /// The stream's dwords that hold the timeline value (linked as 0).
    pub timeline_at: Vec<ValueSlot>,
    /// Every buffer address in the argument memory.
    pub buffer_refs: Vec<BufferRef>,
}

/// Both allocations are aligned to this (an AMD indirect buffer and kernarg segment need 256 bytes; KGSL objects
/// are whole pages).
pub const STEP_ALIGN: u64 = 256;

impl<B: BackendSym> Encoded<B> {
    /// Allocates the argument memory, then the stream's, and writes both linked: [`Sym::Args`] resolves through the
    /// arena, every other address through `resolve` (`None`: unknown), and every value symbol links as 0.
    /// Fails (op `link_step`) on an unresolved symbol and when an allocation or write fails.
    pub fn place<M: StepMemory>(
        &self,
        mem: &mut M,
        resolve: impl Fn(Sym<B>) -> Option<u64>,
    ) -> DeviceResult<Placed<M::Mem>> {
        let mut args = if self.arena.is_empty() { None } else { Some(mem.alloc(self.arena.size(), STEP_ALIGN)?) };
        let args_va = args.as_ref().map_or(0, |m| mem.va(m));
        let arena = &self.arena;
        let resolver = FnResolve(
            |s: Sym<B>| match s {
                Sym::Args(n) => arena.addr(args_va, n),
                s => resolve(s),
            },
            |_: ValueSym| Some(0),
        );
        let link_err = |e: LinkError| DeviceError::Failed { op: "link_step", reason: e.to_string() };
        let mut image = vec![0u32; self.arena.size().div_ceil(4) as usize];
        for (n, (block, &at)) in self.blocks.iter().zip(arena.offsets()).enumerate() {
            let words = block.link(&resolver).map_err(link_err)?;
            let at = at as usize / 4;
            let dst = image.get_mut(at..at + words.len()).ok_or_else(|| DeviceError::Failed {
                op: "link_step",
                reason: format!("argument block {n} ({} dwords) passes its arena slot", words.len()),
            })?;
            dst.copy_from_slice(&words);
        }
        let stream = self.stream.link(&resolver).map_err(link_err)?;
        if let Some(m) = args.as_mut() {
            mem.write(m, &image)?;
        }
        let mut stream_mem = mem.alloc(stream.len() as u64 * 4, STEP_ALIGN)?;
        mem.write(&mut stream_mem, &stream)?;
        Ok(Placed {
            stream: stream_mem,
            stream_dwords: stream.len(),
            args,
            timeline_at: self.stream.value_slots(ValueSym::Timeline),
            buffer_refs: arena.buffer_refs(&self.blocks),
        })
    }
}
