//! The kernel-argument blocks of a step: laid out back to back in one GPU allocation, linked once, and the places
//! where buffer addresses sit in them, so a buffer can be re-pointed (say, at host memory) without relinking.

use super::reloc::{addr_words, BackendSym, RelocBuf, RelocKind, Sym};

/// The extent of one argument block: `stride` bytes to the next block, and the `footprint` bytes from its start that
/// the GPU may read, which can be more than the stride (an a6xx constant load reads 4 KiB whatever the block size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockExtent {
    pub stride: u64,
    pub footprint: u64,
}

/// Where each argument block of a step sits in the step's argument allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArgsArena {
    offsets: Vec<u64>,
    size: u64,
}

impl ArgsArena {
    /// Places the blocks back to back at multiples of their strides; the allocation covers every footprint.
    pub fn new(blocks: impl IntoIterator<Item = BlockExtent>) -> Self {
        let mut arena = ArgsArena::default();
        let mut next = 0;
        for b in blocks {
            arena.offsets.push(next);
            arena.size = arena.size.max(next + b.footprint);
            next += b.stride;
        }
        arena
    }

    /// Bytes to allocate (0 without blocks).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Byte offset of each block, in order.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The GPU address of block `n` when the allocation starts at `base`.
    pub fn addr(&self, base: u64, n: u32) -> Option<u64> {
        self.offsets.get(n as usize).map(|o| base + o)
    }

    /// Every buffer address in `blocks` (block `n` placed at `offsets()[n]`), in block then dword order.
    pub fn buffer_refs<'a, B: BackendSym + 'a>(
        &self,
        blocks: impl IntoIterator<Item = &'a RelocBuf<B>>,
    ) -> Vec<BufferRef> {
        blocks
            .into_iter()
            .zip(&self.offsets)
            .flat_map(|(b, &off)| {
                b.relocs().iter().filter_map(move |r| match r.kind {
                    RelocKind::Addr64(a) => match a.sym {
                        Sym::Buffer(buffer) => Some(BufferRef { buffer, at: off + r.at as u64 * 4, addend: a.offset }),
                        _ => None,
                    },
                    RelocKind::Value32 { .. } => None,
                })
            })
            .collect()
    }
}

/// A buffer's address in the argument allocation: the two dwords at byte `at` hold the buffer's base plus
/// `addend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferRef {
    pub buffer: u32,
    pub at: u64,
    pub addend: u64,
}

impl BufferRef {
    /// The dwords to write at `at` when the buffer lives at `base`.
    pub const fn words(self, base: u64) -> [u32; 2] {
        addr_words(base.wrapping_add(self.addend))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcq::reloc::{Addr, ValueSym, Word};

    #[test]
    fn blocks_go_back_to_back_and_the_allocation_covers_every_footprint() {
        let ext = |stride, footprint| BlockExtent { stride, footprint };
        let a = ArgsArena::new([ext(0x900, 0x1000), ext(0x900, 0x1000)]);
        assert_eq!((a.offsets(), a.size()), (&[0, 0x900][..], 0x1900));
        assert_eq!((a.addr(0x10_0000, 1), a.addr(0x10_0000, 2)), (Some(0x10_0900), None));
        let big = ArgsArena::new([ext(0x2000, 0x2000), ext(0x100, 0x1000)]);
        assert_eq!(big.size(), 0x3000);
        assert!(ArgsArena::new([]).is_empty());
        assert_eq!(ArgsArena::new([]).size(), 0);
    }

    #[test]
    fn buffer_refs_name_every_buffer_address_in_arena_bytes() {
        let mut b0: RelocBuf = RelocBuf::zeroed(4);
        b0.set(0, Addr::new(Sym::Buffer(3), 16));
        b0.set(2, Addr::base(Sym::Timeline));
        let mut b1: RelocBuf = RelocBuf::zeroed(4);
        b1.set(1, Word::Value(ValueSym::Timeline, 0));
        b1.set(2, Addr::base(Sym::Buffer(5)));
        let arena = ArgsArena::new([BlockExtent { stride: 0x100, footprint: 0x100 }; 2]);
        let refs = arena.buffer_refs([&b0, &b1]);
        let r = |buffer, at, addend| BufferRef { buffer, at, addend };
        assert_eq!(refs, [r(3, 0, 16), r(5, 0x108, 0)]);
        assert_eq!(refs[0].words(0x7f_ffff_fff0), [0, 0x80]);
    }
}
