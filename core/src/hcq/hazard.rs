//! The barrier policy of every command-queue backend: where a step waits for earlier dispatches.
//!
//! A GPU runs consecutive dispatches of a queue concurrently and serves reads from caches an earlier dispatch may
//! not have written back, so a dispatch that touches memory an earlier one touched must come after a barrier (a
//! wait for idle plus a cache flush/invalidate: a6xx `CP_WAIT_FOR_IDLE` + `CACHE_INVALIDATE`, AMD
//! `CS_PARTIAL_FLUSH` + `ACQUIRE_MEM`). A step's argument list does not say which arguments a kernel writes, so
//! reads and writes count alike; independent dispatches between two barriers overlap.

/// The resources (buffer ids, or a backend's pseudo-ids for memory every dispatch shares) touched since the last
/// barrier.
#[derive(Clone, Debug, Default)]
pub struct Hazards {
    touched: Vec<u32>,
}

impl Hazards {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a barrier must go before a dispatch that touches `resources`: one of them was touched since the
    /// last barrier. Records them as touched after that barrier.
    pub fn before(&mut self, resources: impl IntoIterator<Item = u32> + Clone) -> bool {
        let barrier = resources.clone().into_iter().any(|r| self.touched.contains(&r));
        if barrier {
            self.touched.clear();
        }
        self.touched.extend(resources);
        barrier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_goes_only_before_a_dispatch_that_shares_a_resource() {
        let mut h = Hazards::new();
        assert!(!h.before([1, 2]));
        assert!(!h.before([3]), "disjoint: overlaps the first");
        assert!(h.before([4, 2]), "reads what the first touched");
        // After the barrier only the last dispatch's resources are pending.
        assert!(!h.before([1, 3]));
        assert!(h.before([4]));
        assert!(!h.before(std::iter::empty()));
    }
}
