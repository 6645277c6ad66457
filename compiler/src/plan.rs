//! The memory planner: scratch buffers share one arena, reused by liveness over the kernel order.

use std::collections::HashMap;

use crate::program::{BufKind, Program};

#[derive(Debug, Default)]
pub struct Plan {
    /// Arena offset of every scratch buffer.
    pub offsets: HashMap<u32, usize>,
    pub arena_bytes: usize,
    /// What the scratch buffers would take without reuse.
    pub naive_bytes: usize,
}

/// First-fit placement. A buffer is live from the kernel that writes it through the last kernel that
/// reads it, inclusive: the output of a kernel never shares memory with that kernel's inputs.
/// Every offset is a multiple of `align`, and `read_past` bytes after each buffer belong to it.
/// Image buffers are not placed: each is its own allocation.
pub fn plan(p: &Program, align: usize, read_past: usize) -> Plan {
    let mut last_read: HashMap<u32, usize> = HashMap::new();
    for (i, k) in p.kernels.iter().enumerate() {
        for b in p.kernel_inputs(k) {
            last_read.insert(b, i);
        }
    }
    let mut plan = Plan::default();
    // Free ranges as (offset, size), kept sorted and merged.
    let mut live: Vec<(u32, usize, usize, usize)> = Vec::new(); // (buf, offset, size, last use)
    for (i, k) in p.kernels.iter().enumerate() {
        let b = k.out;
        if p.bufs[b as usize].kind == BufKind::Scratch && p.bufs[b as usize].image.is_none() {
            let size = (p.bufs[b as usize].nbytes() + read_past).div_ceil(align) * align;
            plan.naive_bytes += size;
            let mut taken: Vec<(usize, usize)> = live.iter().map(|&(_, o, s, _)| (o, s)).collect();
            taken.sort_unstable();
            let mut at = 0;
            for (o, s) in taken {
                if o >= at + size {
                    break;
                }
                at = at.max(o + s);
            }
            plan.offsets.insert(b, at);
            plan.arena_bytes = plan.arena_bytes.max(at + size);
            live.push((b, at, size, last_read.get(&b).copied().unwrap_or(i)));
        }
        live.retain(|&(_, _, _, last)| last > i);
    }
    plan
}
