//! The timeline every device hands out (tinygrad's `HCQSignal` values): each submission gets the next value,
//! starting at 1 (0 is "nothing submitted"), and `wait(value)` returns once that submission is complete.
//!
//! [`Timeline`] is the host's account of it, the same type on every device:
//! - devices that finish the work inside `submit` (CPU, NULL, the emulators) record each value complete at once
//!   ([`Timeline::record_complete`]);
//! - a queue the host drains (OpenCL's `clFinish`) marks everything complete after draining it
//!   ([`Timeline::complete_all`]);
//! - command-queue GPUs write a signal in GPU memory at the end of each submission. The host compares the signal's
//!   low 32 bits in wrapping order ([`reached`]), so the memory is exact for 2^31 submissions around any value.
//!   A GPU without interrupts (AMD over USB) polls it ([`Timeline::observe`]); one with a kernel fence (KGSL)
//!   sleeps on the fence of the submission, remembered for the last `N` submissions, when the memory has not
//!   reached the value yet ([`Timeline::wait`]).

use std::fmt::Display;

use crate::device::{DeviceError, DeviceResult};

/// The signal memory's low 32 bits `memory` have reached `value`, in wrapping order.
pub fn reached(memory: u32, value: u64) -> bool {
    (memory.wrapping_sub(value as u32) as i32) >= 0
}

/// The last value handed out, the last known complete, and the fence `F` of each of the last `N` submissions
/// (`()` and 1 for devices without fences).
#[derive(Clone, Debug)]
pub struct Timeline<F = (), const N: usize = 1> {
    submitted: u64,
    completed: u64,
    fences: [F; N],
}

impl<F: Copy + Default, const N: usize> Default for Timeline<F, N> {
    fn default() -> Self {
        Timeline { submitted: 0, completed: 0, fences: [F::default(); N] }
    }
}

impl<F: Copy + Default, const N: usize> Timeline<F, N> {
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

    /// Records a submission that is already complete, and returns its value.
    pub fn record_complete(&mut self) -> u64 {
        let value = self.record(F::default());
        self.completed = value;
        value
    }

    /// Every value handed out is complete (the host drained the queue).
    pub fn complete_all(&mut self) {
        self.completed = self.submitted;
    }

    /// Whether `value` is known complete; fails (op `wait`) for a value never handed out.
    pub fn check(&self, value: u64) -> DeviceResult<bool> {
        if value > self.submitted {
            return Err(failed(format!("timeline value {value} was never submitted (last is {})", self.submitted)));
        }
        Ok(value <= self.completed)
    }

    /// Whether the signal memory's low 32 bits `memory` show `value` (which must have been handed out); records it
    /// complete when they do.
    pub fn observe(&mut self, value: u64, memory: u32) -> bool {
        debug_assert!(value <= self.submitted, "observing {value}, {} submitted", self.submitted);
        let done = reached(memory, value);
        if done {
            self.completed = self.completed.max(value);
        }
        done
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
    ) -> DeviceResult<()>
    where
        F: Display,
    {
        if self.check(value)? || self.observe(value, read_signal()?) {
            return Ok(());
        }
        let v = value.max(self.submitted.saturating_sub(N as u64 - 1));
        let fence = self.fences[v as usize % N];
        sleep(fence).map_err(|e| failed(format!("timeline value {value} ({fence}): {e}")))?;
        let now = read_signal()?;
        if !self.observe(value, now) {
            return Err(failed(format!("{fence} retired but the timeline signal holds {now}, not {value}")));
        }
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

    #[test]
    fn devices_without_fences_complete_at_submission_or_when_drained() {
        let mut t = Timeline::<()>::new();
        assert_eq!((t.record_complete(), t.record_complete()), (1, 2));
        assert!(!t.busy() && t.check(2).unwrap());
        assert!(t.check(3).is_err());
        t.record(());
        assert!(t.busy() && !t.check(3).unwrap());
        t.complete_all();
        assert!(!t.busy() && t.check(3).unwrap());
    }

    #[test]
    fn observing_the_memory_never_moves_completion_back() {
        let mut t = Timeline::<()>::new();
        t.record(());
        t.record(());
        assert!(!t.observe(2, 1));
        assert!(t.observe(2, 2) && t.completed() == 2);
        assert!(t.observe(1, 2) && t.completed() == 2);
    }
}
