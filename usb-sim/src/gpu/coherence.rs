//! The GPU caches between dispatches, as far as a later dispatch reading an earlier one's results is concerned.
//!
//! A shader's vector stores go through the CU's L0 and the shader array's GL1 to L2, its loads hit L0/GL1 first,
//! and the engine starts the next dispatch while the last one's waves may still be storing. A dispatch therefore sees
//! an earlier dispatch's stores only after an `EVENT_WRITE CS_PARTIAL_FLUSH` (the CP waits for the dispatches before
//! it to finish) followed by an `ACQUIRE_MEM` whose `GCR_CNTL` invalidates GLV (L0) and GL1 (Linux `gfx_v11_0.c`
//! `gfx_v11_0_emit_mem_sync`; bit positions from tinygrad `runtime/autogen/am/pm4_nv.py`
//! `PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV` (bit 8) and `_GL1_INV` (bit 9)). A `RELEASE_MEM` at the end of a
//! submission also waits for every dispatch before it.
//!
//! The model numbers dispatches and remembers, per 4 KB of VRAM, which dispatch stored there last. A load from a page
//! that a dispatch stored to after the last flush-and-invalidate, by another dispatch, is a hazard: the simulated
//! engine stops the queue with a fault naming both dispatches (real hardware would return stale data, or not,
//! depending on timing). Atomics act at L2 and are not checked. The granule is a page because pilot's buffers are
//! page-aligned; two dispatches sharing a page without a barrier between them count as dependent.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// VRAM bytes per tracked granule.
pub const GRANULE: usize = 4096;
/// `ACQUIRE_MEM` `GCR_CNTL` bits that make other CUs' stores visible to vector loads (GLV_INV | GL1_INV).
pub const GCR_VECTOR_INV: u32 = 1 << 8 | 1 << 9;

/// Which dispatch stored where, and how far the barriers have made stores visible.
#[derive(Debug, Default)]
pub struct Coherence {
    /// Per granule: the number (from 1) of the dispatch that stored there last; 0 for none.
    writer: Vec<AtomicU32>,
    /// Dispatches started so far.
    dispatches: u32,
    /// Dispatches the CP has waited for (CS_PARTIAL_FLUSH, RELEASE_MEM).
    finished: u32,
    /// Dispatches whose stores every later load sees (finished, then invalidated).
    visible: u32,
}

impl Coherence {
    /// Starts the next dispatch over `vram_bytes` of VRAM; its view checks and records accesses.
    pub fn begin(&mut self, vram_bytes: usize) -> DispatchView<'_> {
        let granules = vram_bytes.div_ceil(GRANULE);
        if self.writer.len() != granules {
            self.writer = (0..granules).map(|_| AtomicU32::new(0)).collect();
        }
        self.dispatches += 1;
        DispatchView { c: self, hazard: Mutex::new(None) }
    }

    /// `EVENT_WRITE CS_PARTIAL_FLUSH` or an end-of-pipe `RELEASE_MEM`: every dispatch so far has finished.
    pub fn wait_idle(&mut self) {
        self.finished = self.dispatches;
    }

    /// `ACQUIRE_MEM` with `gcr_cntl`: invalidating GLV and GL1 makes the finished dispatches' stores visible.
    pub fn acquire(&mut self, gcr_cntl: u32) {
        if gcr_cntl & GCR_VECTOR_INV == GCR_VECTOR_INV {
            self.visible = self.finished;
        }
    }
}

/// One dispatch's accesses, checked against the others'. Shared by the workgroups' host threads.
pub struct DispatchView<'a> {
    c: &'a Coherence,
    /// The first hazard: (VRAM offset, the dispatch that stored there).
    hazard: Mutex<Option<(usize, u32)>>,
}

impl DispatchView<'_> {
    /// A load of VRAM offsets `range`.
    pub fn load(&self, range: std::ops::Range<usize>) {
        for g in range.start / GRANULE..range.end.div_ceil(GRANULE) {
            let w = self.c.writer.get(g).map_or(0, |w| w.load(Ordering::Relaxed));
            if w > self.c.visible && w != self.c.dispatches {
                let mut h = self.hazard.lock().unwrap_or_else(|e| e.into_inner());
                h.get_or_insert((range.start.max(g * GRANULE), w));
                return;
            }
        }
    }

    /// A store to VRAM offsets `range`.
    pub fn store(&self, range: std::ops::Range<usize>) {
        for g in range.start / GRANULE..range.end.div_ceil(GRANULE) {
            if let Some(w) = self.c.writer.get(g) {
                w.store(self.c.dispatches, Ordering::Relaxed);
            }
        }
    }

    /// The first hazard as a fault reason naming both dispatches, if there was one.
    pub fn finish(self) -> Option<String> {
        let n = self.c.dispatches;
        let h = self.hazard.into_inner().unwrap_or_else(|e| e.into_inner());
        h.map(|(at, w)| {
            format!(
                "dispatch {n} loads VRAM {at:#x}, which dispatch {w} stored to with no CS_PARTIAL_FLUSH and \
                 ACQUIRE_MEM (GLV/GL1 invalidate) between them"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_after_another_dispatchs_store_needs_a_flush_and_an_invalidate() {
        let mut c = Coherence::default();
        let d1 = c.begin(1 << 20);
        d1.store(0x1000..0x1004);
        d1.load(0x1000..0x1004);
        assert_eq!(d1.finish(), None, "a dispatch sees its own stores");
        let d2 = c.begin(1 << 20);
        d2.load(0x2000..0x2004);
        d2.load(0x1ffc..0x2000);
        assert!(d2.finish().unwrap().starts_with("dispatch 2 loads VRAM 0x1ffc, which dispatch 1 stored"));
        // An invalidate alone is not enough: the CP must have waited for dispatch 1 first.
        c.acquire(GCR_VECTOR_INV);
        let d3 = c.begin(1 << 20);
        d3.load(0x1000..0x1004);
        assert!(d3.finish().is_some());
        c.wait_idle();
        c.acquire(1 << 8);
        let d4 = c.begin(1 << 20);
        d4.load(0x1000..0x1004);
        assert!(d4.finish().is_some(), "GLV without GL1 leaves GL1 stale");
        c.wait_idle();
        c.acquire(0x3F0);
        let d5 = c.begin(1 << 20);
        d5.load(0x1000..0x1004);
        assert_eq!(d5.finish(), None);
    }
}
