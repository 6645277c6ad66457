//! The timeline signal: GPU memory that the last packets of every submission write with the submission's value,
//! and the host side that hands values out and waits for them (tinygrad's `HCQSignal`).
//!
//! The host compares the signal's low 32 bits in wrapping order, so the memory is exact for 2^31 submissions
//! around any value. When the memory has not reached a value yet, the host sleeps on the backend's own fence of
//! the submission (a KGSL timestamp, an AMD fence), remembered for the last `N` submissions.

use std::fmt::Display;

use crate::device::{check_submitted, DeviceError, DeviceResult};

/// Byte offset of the signal's value (u32 compared; the GPU writes 32 bits).
pub const SIGNAL_VALUE: u64 = 0;
/// Byte offset of the 64-bit GPU timestamp next to the value.
pub const SIGNAL_TIMESTAMP: u64 = 8;

/// The signal memory's low 32 bits `memory` have reached `value`, in wrapping order.
pub fn reached(memory: u32, value: u64) -> bool {
    (memory.wrapping_sub(value as u32) as i32) >= 0
}

/// The host side of a timeline: the last value handed out, the last known complete, and the fence `F` of each of
/// the last `N` submissions. Values start at 1; 0 is "nothing submitted".
#[derive(Clone, Debug)]
pub struct Timeline<F, const N: usize> {
    submitted: u64,
    completed: u64,
    fences: [F; N],
}

impl<F: Copy + Default + Display, const N: usize> Default for Timeline<F, N> {
    fn default() -> Self {
        Timeline { submitted: 0, completed: 0, fences: [F::default(); N] }
    }
}

impl<F: Copy + Default + Display, const N: usize> Timeline<F, N> {
    pub fn new() -> Self {
        Self::default()
    }

    /// The last value handed out.
    pub fn submitted(&self) -> u64 {
        self.submitted
    }

    /// The last value known complete.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Work was submitted that is not known complete.
    pub fn busy(&self) -> bool {
        self.submitted > self.completed
    }

    /// The value the next submission signals.
    pub fn next_value(&self) -> u64 {
        self.submitted + 1
    }

    /// Records that the submission signalling [`Self::next_value`] went out with `fence`, and returns that value.
    pub fn record(&mut self, fence: F) -> u64 {
        self.submitted += 1;
        self.fences[self.submitted as usize % N] = fence;
        self.submitted
    }

    /// Returns once the signal holds `value` or more: at once if `read_signal` (the memory's low 32 bits) shows it,
    /// otherwise after `sleep` on the submission's fence. Values older than the last `N` sleep on the oldest fence
    /// remembered, which retires after them. Fails (op `wait`) for a value never submitted, when `sleep` fails, and
    /// when the fence retired without the signal reaching the value. Allocates only to report a failure.
    pub fn wait<E: Display>(
        &mut self,
        value: u64,
        mut read_signal: impl FnMut() -> DeviceResult<u32>,
        sleep: impl FnOnce(F) -> Result<(), E>,
    ) -> DeviceResult<()> {
        check_submitted(value, self.submitted)?;
        if value <= self.completed {
            return Ok(());
        }
        if reached(read_signal()?, value) {
            self.completed = value;
            return Ok(());
        }
        let v = value.max(self.submitted.saturating_sub(N as u64 - 1));
        let fence = self.fences[v as usize % N];
        sleep(fence).map_err(|e| failed(format!("timeline value {value} ({fence}): {e}")))?;
        let now = read_signal()?;
        if !reached(now, value) {
            return Err(failed(format!("{fence} retired but the timeline signal holds {now}, not {value}")));
        }
        self.completed = value;
        Ok(())
    }
}

fn failed(reason: String) -> DeviceError {
    DeviceError::Failed { op: "wait", reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn reached_compares_in_wrapping_order() {
        assert!(reached(5, 5) && reached(6, 5) && !reached(4, 5));
        assert!(reached(2, 0xffff_fffe) && !reached(0xffff_fffd, 0xffff_fffe));
        assert!(reached(1, 0x1_0000_0001));
    }

    type T = Timeline<u32, 4>;

    #[test]
    fn waits_on_memory_first_then_on_the_fence() {
        let mut t = T::new();
        assert_eq!((t.next_value(), t.record(100), t.record(101)), (1, 1, 2));
        assert!(t.busy());
        // The memory already shows 1: no sleep.
        t.wait(1, || Ok(1), |_| -> Result<(), String> { panic!("slept") }).unwrap();
        assert_eq!(t.completed(), 1);
        // Value 2 sleeps on its own fence, then the memory shows it.
        let mem = Cell::new(1);
        let sleep = |f| -> Result<(), String> {
            mem.set(if f == 101 { 2 } else { 0 });
            Ok(())
        };
        t.wait(2, || Ok(mem.get()), sleep).unwrap();
        assert!(!t.busy());
        // Waiting on a completed value touches nothing.
        t.wait(2, || panic!("read"), |_| -> Result<(), String> { panic!("slept") }).unwrap();
    }

    #[test]
    fn old_values_sleep_on_the_oldest_fence_remembered() {
        let mut t = T::new();
        for f in 0..10 {
            t.record(100 + f);
        }
        // 10 submitted, a ring of 4: the oldest value remembered is 7, with fence 106.
        let (mem, slept) = (Cell::new(0), Cell::new(0));
        let sleep = |f| -> Result<(), String> {
            slept.set(f);
            mem.set(7);
            Ok(())
        };
        t.wait(2, || Ok(mem.get()), sleep).unwrap();
        assert_eq!((slept.get(), t.completed()), (106, 2));
    }

    #[test]
    fn failures_name_the_value_and_the_fence() {
        let mut t = T::new();
        t.record(100);
        let e = t.wait(2, || Ok(0), |_| Ok::<(), String>(())).unwrap_err();
        assert_eq!(e.to_string(), "wait failed: timeline value 2 was never submitted (last is 1)");
        let e = t.wait(1, || Ok(0), |_| Err("timed out")).unwrap_err();
        assert_eq!(e.to_string(), "wait failed: timeline value 1 (100): timed out");
        let e = t.wait(1, || Ok(0), |_| Ok::<(), String>(())).unwrap_err();
        assert_eq!(e.to_string(), "wait failed: 100 retired but the timeline signal holds 0, not 1");
        assert_eq!(t.completed(), 0);
    }
}
