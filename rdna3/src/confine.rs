//! What `--device amd-emu`'s kernels may reach, as on a card behind pilot's `usb+amd` driver (which maps each
//! allocation while it lives, in whole 4 KB pages, with an unmapped page after it): the live allocations,
//! rounded up to whole pages, and nothing else. An access that is not wholly inside one of them is refused, so
//! a kernel that runs past its buffer, or reads a freed one, stops with an error instead of reading a
//! neighbour's bytes.

use crate::memory::{OutOfBounds, SharedMemory};

/// The granule of a mapping.
pub const PAGE: u64 = 0x1000;

/// Live allocations: disjoint `[start, end)` GPU address ranges, sorted.
#[derive(Debug, Default)]
pub struct Live {
    spans: Vec<(u64, u64)>,
}

impl Live {
    /// Adds `len` bytes at `start` (page aligned), rounded up to whole pages; `start` must lie past every span.
    pub fn insert(&mut self, start: u64, len: u64) {
        debug_assert!(self.spans.last().is_none_or(|s| s.1 <= start) && start.is_multiple_of(PAGE));
        self.spans.push((start, start + len.max(1).next_multiple_of(PAGE)));
    }

    /// Removes the span that starts at `start`, if any.
    pub fn remove(&mut self, start: u64) {
        if let Ok(i) = self.spans.binary_search_by_key(&start, |s| s.0) {
            self.spans.remove(i);
        }
    }

    /// Whether `addr..addr + len` lies inside one span.
    pub fn contains(&self, addr: u64, len: usize) -> bool {
        let i = self.spans.partition_point(|s| s.0 <= addr);
        let end = addr.checked_add(len as u64);
        i > 0 && end.is_some_and(|end| end <= self.spans[i - 1].1)
    }
}

/// `mem` as a kernel sees it: only what `live` holds.
pub struct Confined<'a, M: SharedMemory> {
    pub mem: &'a M,
    pub live: &'a Live,
}

impl<M: SharedMemory> Confined<'_, M> {
    fn check(&self, addr: u64, len: usize) -> Result<(), OutOfBounds> {
        if self.live.contains(addr, len) {
            Ok(())
        } else {
            Err(OutOfBounds)
        }
    }
}

impl<M: SharedMemory> SharedMemory for Confined<'_, M> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(addr, out.len())?;
        self.mem.read(addr, out)
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        self.check(addr, data.len())?;
        self.mem.write(addr, data)
    }

    fn rmw32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, OutOfBounds> {
        self.check(addr, 4)?;
        self.mem.rmw32(addr, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_whole_pages_and_nothing_between() {
        let mut live = Live::default();
        live.insert(0x1_0000, 100);
        live.insert(0x1_2000, 0x1001);
        assert!(live.contains(0x1_0000, 4) && live.contains(0x1_0ffc, 4), "the page rounds up");
        assert!(!live.contains(0x1_0ffe, 4) && !live.contains(0x1_1000, 1), "the gap");
        assert!(live.contains(0x1_2000, 0x2000) && !live.contains(0x1_2000, 0x2001));
        assert!(!live.contains(0xffff, 1) && !live.contains(u64::MAX, 2));
        live.remove(0x1_0000);
        assert!(!live.contains(0x1_0000, 4) && live.contains(0x1_3000, 4));
    }
}
