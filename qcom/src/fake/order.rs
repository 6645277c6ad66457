//! Memory ordering between dispatches of one context.
//!
//! An Adreno runs consecutive dispatches concurrently and serves reads from its caches, so a dispatch that reads (or
//! writes) memory an earlier dispatch wrote must be separated from it by a CACHE_INVALIDATE event and a
//! CP_WAIT_FOR_IDLE (tinygrad's `memory_barrier`; in either order). The fake executes dispatches one after the other
//! and would hide a missing barrier, so it tracks the ranges each dispatch writes and faults the context, naming
//! both dispatches, when a later one touches them before both have been seen.

/// A byte range of GPU memory and what it is (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub va: u64,
    pub len: u64,
    pub what: String,
}

impl Access {
    fn overlaps(&self, other: &Access) -> bool {
        self.va < other.va + other.len && other.va < self.va + self.len
    }
}

/// What a dispatch touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    pub reads: Vec<Access>,
    pub writes: Vec<Access>,
}

#[derive(Clone, Debug)]
struct Writer {
    who: String,
    writes: Vec<Access>,
    invalidated: bool,
    idle: bool,
}

/// The dispatches whose writes are not yet ordered before later work, per context.
#[derive(Clone, Debug, Default)]
pub(super) struct Ordering {
    pending: Vec<Writer>,
}

impl Ordering {
    /// A CACHE_INVALIDATE event: later reads miss the caches.
    pub(super) fn invalidate(&mut self) {
        self.pending.iter_mut().for_each(|w| w.invalidated = true);
        self.retire();
    }

    /// A CP_WAIT_FOR_IDLE: every earlier dispatch has finished.
    pub(super) fn wait_for_idle(&mut self) {
        self.pending.iter_mut().for_each(|w| w.idle = true);
        self.retire();
    }

    fn retire(&mut self) {
        self.pending.retain(|w| !(w.invalidated && w.idle));
    }

    /// Checks `footprint` of the dispatch `who` against the unordered writes of earlier ones, then records its
    /// writes.
    pub(super) fn launch(&mut self, who: String, footprint: Footprint) -> Result<(), String> {
        let touches =
            footprint.reads.iter().map(|a| ("reads", a)).chain(footprint.writes.iter().map(|a| ("writes", a)));
        for (verb, a) in touches {
            for w in &self.pending {
                if let Some(b) = w.writes.iter().find(|b| b.overlaps(a)) {
                    let missing = match (w.invalidated, w.idle) {
                        (false, false) => "CACHE_INVALIDATE and CP_WAIT_FOR_IDLE",
                        (false, true) => "CACHE_INVALIDATE",
                        _ => "CP_WAIT_FOR_IDLE",
                    };
                    return Err(format!(
                        "{who} {verb} {} {:#x}+{:#x}, which {} wrote ({} {:#x}+{:#x}), with no {missing} between them",
                        a.what, a.va, a.len, w.who, b.what, b.va, b.len
                    ));
                }
            }
        }
        if !footprint.writes.is_empty() {
            self.pending.push(Writer { who, writes: footprint.writes, invalidated: false, idle: false });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(va: u64, len: u64, what: &str) -> Access {
        Access { va, len, what: what.into() }
    }

    #[test]
    fn unordered_reads_of_earlier_writes_name_both_dispatches() {
        let mut o = Ordering::default();
        let writes = Footprint { reads: vec![], writes: vec![at(0x1000, 0x100, "IBO 0")] };
        o.launch("dispatch 0".into(), writes.clone()).unwrap();
        // Disjoint memory needs no barrier.
        o.launch("dispatch 1".into(), Footprint { reads: vec![at(0x1100, 4, "buffer 0")], writes: vec![] }).unwrap();
        o.invalidate();
        let reader = Footprint { reads: vec![at(0x10f0, 0x20, "texture 0")], writes: vec![] };
        assert_eq!(
            o.launch("dispatch 2".into(), reader.clone()).unwrap_err(),
            "dispatch 2 reads texture 0 0x10f0+0x20, which dispatch 0 wrote (IBO 0 0x1000+0x100), with no \
             CP_WAIT_FOR_IDLE between them"
        );
        o.wait_for_idle();
        o.launch("dispatch 2".into(), reader).unwrap();
        o.launch("dispatch 3".into(), writes.clone()).unwrap();
        let e = o.launch("dispatch 4".into(), writes).unwrap_err();
        assert!(e.ends_with("with no CACHE_INVALIDATE and CP_WAIT_FOR_IDLE between them"), "{e}");
    }
}
