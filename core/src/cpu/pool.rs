//! A persistent thread pool that runs one kernel dispatch at a time, without heap allocation or
//! locks on the dispatch path.
//!
//! `threads - 1` workers are started once; the calling thread takes part in every dispatch.
//! A dispatch writes the kernel and its argument array into a job slot, then publishes it by
//! storing one 64-bit claim word `nparts << 32 | next` (release). Every participant, the caller
//! included, claims parts with `fetch_add(1)` on that word until `next >= nparts`, runs each part it
//! claimed and counts it in `finished`; the caller returns once `finished == nparts`. Claiming is
//! dynamic: a worker that is late (asleep, descheduled, busy with a slow part) leaves its parts to
//! whoever is free, so the caller never waits for a part nobody has started.
//!
//! A claim is valid only if the value it returned had `next < nparts`; that value names its own
//! job, so a worker whose `fetch_add` lands after the next job was published claims a part of that
//! job, correctly. A valid claim keeps the slot stable: the caller publishes the next job only
//! after every part of this one finished. Failed claims push `next` past `nparts` by at most one
//! per participant and job, which [`MAX_PARTS`] and [`MAX_THREADS`] keep below bit 32.
//!
//! Waiting: between dispatches of one step ([`Pool::begin_step`] .. [`Pool::end_step`]) workers
//! spin on the claim word; outside a step they spin for [`SPIN_TIME`] and then park. A worker
//! announces itself in its `asleep` flag before its last look at the claim word, and a publisher
//! unparks every announced worker after publishing (a Dekker-style handshake with sequentially
//! consistent atomics), so no wake-up is lost. The caller waits for unfinished parts by spinning,
//! then yielding. `Thread::unpark` on Linux is a futex word: nothing allocates or locks.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::elf::KernelFn;

/// How long an idle worker spins outside a step before it parks. Steps that follow each other
/// closely (a benchmark loop) keep the workers hot; a model stepped at 20 Hz lets them sleep.
const SPIN_TIME: Duration = Duration::from_micros(100);

/// After this long, a spinning waiter yields the CPU between checks, so that with more threads than
/// free cores the thread it waits for gets to run.
const YIELD_AFTER: Duration = Duration::from_micros(20);

/// Parts a dispatch is cut into per thread, at most (when the kernel has that many). More parts
/// than threads would let the claiming even out parts of unequal cost, but shorter parts stream
/// shorter runs of memory: `policy_full`'s weight-streaming matrix-vector products took 25% longer
/// on 2 threads at 2 or 4 parts per thread than at 1 (and no model measured gained). Balance
/// comes from the compiler's even split instead; a late worker's part is still taken by the caller.
pub const PARTS_PER_THREAD: u32 = 1;

/// Most parts of one dispatch; with at most [`MAX_THREADS`] failed claims per job, `next` stays
/// below bit 32 of the claim word.
pub const MAX_PARTS: u32 = 1 << 24;

/// Most threads of one pool.
pub const MAX_THREADS: usize = 1 << 12;

/// Spins while `busy()` until `ready()`; once `busy()` is false, gives up after [`SPIN_TIME`].
/// Returns whether `ready()` became true.
fn spin_until(mut ready: impl FnMut() -> bool, busy: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            spin_loop();
        }
        let waited = start.elapsed();
        if waited > SPIN_TIME && !busy() {
            return ready();
        }
        if waited > YIELD_AFTER {
            std::thread::yield_now();
        }
    }
}

/// A kernel that does nothing, stored in the slot before the first dispatch.
unsafe extern "C" fn no_kernel(_: *const *mut u8, _: u32, _: u32) {}

/// The part a claim word's old value hands out, if any: `(part, nparts)`.
fn claimed(word: u64) -> Option<(u32, u32)> {
    let (nparts, next) = ((word >> 32) as u32, word as u32);
    (next < nparts).then_some((next, nparts))
}

struct Shared {
    /// `nparts << 32 | next` of the current job: `next` is the first part nobody has claimed.
    claim: AtomicU64,
    kernel: AtomicPtr<()>,
    args: AtomicPtr<*mut u8>,
    /// Parts of the current job that have finished.
    finished: AtomicU32,
    /// True between `begin_step` and `end_step`: idle workers spin instead of parking.
    in_step: AtomicBool,
    /// `asleep[w - 1]`: worker `w` parks (or is about to) and must be unparked for new work.
    asleep: Box<[AtomicBool]>,
    shutdown: AtomicBool,
    /// Workers that have started running (`Pool::new` waits for all of them).
    started: AtomicU32,
    /// Workers unparked by publishers, for tests.
    #[cfg(test)]
    unparks: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn has_work(&self) -> bool {
        claimed(self.claim.load(Relaxed)).is_some()
    }

    /// Claims and runs parts of the current job until none is left; returns how many it ran.
    /// Claims only after seeing an unclaimed part, so a participant makes at most one failed claim
    /// per job.
    fn run_parts(&self) -> u32 {
        let mut ran = 0;
        while self.has_work() {
            // Acquire: a valid claim reads the publishing store (or an RMW in its release
            // sequence), so the slot written before it is visible.
            let Some((part, nparts)) = claimed(self.claim.fetch_add(1, Acquire)) else { break };
            let kernel_ptr = self.kernel.load(Relaxed);
            let args = self.args.load(Relaxed);
            // SAFETY: `kernel_ptr` was stored from a `KernelFn` by `Pool::run` (or is `no_kernel`);
            // a function pointer round-trips through a data pointer on every platform we support.
            let kernel = unsafe { std::mem::transmute::<*mut (), KernelFn>(kernel_ptr) };
            // SAFETY: `Pool::run`'s caller guaranteed this kernel may run any part of `nparts` on
            // any thread with `args`, which stay valid until every part finished (this one has not).
            unsafe { kernel(args, part, nparts) };
            ran += 1;
            // Release: the part's writes are visible to the caller once it sees the count.
            self.finished.fetch_add(1, Release);
        }
        ran
    }
}

/// The pool. Dispatching takes `&mut self`, so only one dispatch is ever in flight.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
}

impl Pool {
    /// Starts a pool of `threads` workers in all (the caller counts as one; `0` means
    /// `std::thread::available_parallelism()`; at most [`MAX_THREADS`]). Fails if the OS refuses to
    /// start a thread.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let threads = threads.min(MAX_THREADS);
        let shared = Arc::new(Shared {
            claim: AtomicU64::new(0),
            kernel: AtomicPtr::new(no_kernel as KernelFn as *mut ()),
            args: AtomicPtr::new(std::ptr::null_mut()),
            finished: AtomicU32::new(0),
            in_step: AtomicBool::new(false),
            asleep: (1..threads).map(|_| AtomicBool::new(false)).collect(),
            shutdown: AtomicBool::new(false),
            started: AtomicU32::new(0),
            #[cfg(test)]
            unparks: Default::default(),
        });
        let mut pool = Pool { shared, workers: Vec::with_capacity(threads - 1), threads };
        for index in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let handle =
                std::thread::Builder::new().name(format!("pilot-cpu-{index}")).spawn(move || worker(&shared, index))?;
            pool.workers.push(handle); // on error, Drop stops the workers started so far
        }
        // A thread's start allocates (its name, thread-locals): done before the pool is used, so
        // that no step overlaps a worker still starting.
        while pool.shared.started.load(Acquire) < (threads - 1) as u32 {
            std::thread::yield_now();
        }
        Ok(pool)
    }

    /// Number of threads, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The number of parts a dispatch of a kernel with `parts` independent parts is cut into:
    /// up to [`PARTS_PER_THREAD`] per thread.
    pub fn nparts_for(&self, parts: u32) -> u32 {
        parts.clamp(1, (self.threads as u32).saturating_mul(PARTS_PER_THREAD).min(MAX_PARTS))
    }

    /// Marks the start of a step: workers are woken now and spin between its dispatches (until
    /// [`Pool::end_step`]) instead of parking. Does not allocate.
    pub fn begin_step(&mut self) {
        if self.threads > 1 {
            self.shared.in_step.store(true, SeqCst);
            self.wake_sleepers();
        }
    }

    /// Marks the end of a step: idle workers park after [`SPIN_TIME`].
    pub fn end_step(&mut self) {
        self.shared.in_step.store(false, Relaxed);
    }

    /// Runs `kernel(args, part, nparts)` for every `part in 0..nparts`, each exactly once, on the
    /// calling thread and whichever workers are free, and returns when all have finished. `nparts`
    /// is clamped to `1..=MAX_PARTS`; with one part (or one thread) the kernel runs inline. Does
    /// not allocate or lock.
    ///
    /// # Safety
    /// `kernel` must be safe to call with `args` from any thread, concurrently for distinct parts
    /// (the kernel ABI: parts touch disjoint outputs), and `args` must stay valid until this returns.
    pub unsafe fn run(&mut self, kernel: KernelFn, args: *const *mut u8, nparts: u32) {
        let nparts = nparts.clamp(1, MAX_PARTS);
        if nparts == 1 || self.threads == 1 {
            for part in 0..nparts {
                // SAFETY: the caller guarantees `kernel` may be called with `args` for every part.
                unsafe { kernel(args, part, nparts) };
            }
            return;
        }
        let s = &*self.shared;
        s.kernel.store(kernel as *mut (), Relaxed);
        s.args.store(args.cast_mut(), Relaxed);
        s.finished.store(0, Relaxed);
        // Publishes the slot (release) and orders against the `asleep` loads (SeqCst).
        s.claim.store(u64::from(nparts) << 32, SeqCst);
        self.wake_sleepers();
        s.run_parts();
        // Acquire: every part's writes are visible once its count is. Never gives up (always busy).
        spin_until(|| s.finished.load(Acquire) == nparts, || true);
    }

    /// Workers parked (or about to park), for tests.
    #[cfg(test)]
    pub(crate) fn workers_asleep(&self) -> usize {
        self.shared.asleep.iter().filter(|a| a.load(SeqCst)).count()
    }

    /// Times a publisher unparked a worker so far, for tests.
    #[cfg(test)]
    pub(crate) fn unparks(&self) -> usize {
        self.shared.unparks.load(SeqCst)
    }

    /// Unparks every worker that announced it is parking, once.
    fn wake_sleepers(&self) {
        for (flag, handle) in self.shared.asleep.iter().zip(&self.workers) {
            // Cleared here so that later dispatches of a step skip a worker woken but not yet
            // running (it sets the flag again before it next parks).
            if flag.swap(false, SeqCst) {
                #[cfg(test)]
                self.shared.unparks.fetch_add(1, SeqCst);
                handle.thread().unpark();
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        for handle in self.workers.drain(..) {
            handle.thread().unpark();
            // Workers run only C kernels and this module's code; a join error (a panic) leaves
            // nothing to clean up.
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Set on pool worker threads, so tests can check that workers never allocate.
    pub(crate) static IS_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn worker(s: &Shared, index: usize) {
    #[cfg(test)]
    IS_WORKER.with(|w| w.set(true));
    let asleep = &s.asleep[index - 1];
    s.started.fetch_add(1, Release);
    loop {
        s.run_parts();
        // Wait for work or shutdown: spin, then park.
        let ready = || s.has_work() || s.shutdown.load(Relaxed);
        if !spin_until(ready, || s.in_step.load(Relaxed)) {
            asleep.store(true, SeqCst);
            // SeqCst: either this load sees a job published after the store above, or its
            // publisher sees `asleep` and unparks us (a token `park` consumes at once).
            let ready = claimed(s.claim.load(SeqCst)).is_some() || s.shutdown.load(SeqCst) || s.in_step.load(SeqCst);
            if !ready {
                std::thread::park();
            }
            asleep.store(false, Relaxed);
        }
        if s.shutdown.load(Acquire) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOST: usize = 64;

    /// args[0]: `[AtomicU32; MOST]` per-part run counts; args[1]: `AtomicU32` nparts seen (all equal).
    unsafe extern "C" fn count_parts(args: *const *mut u8, part: u32, nparts: u32) {
        // SAFETY: the tests below pass two pointers: to MOST counters and to one counter.
        let (counts, seen) = unsafe { (&*(*args).cast::<[AtomicU32; MOST]>(), &*(*args.add(1)).cast::<AtomicU32>()) };
        counts[part as usize].fetch_add(1, Relaxed);
        seen.store(nparts, Relaxed);
    }

    /// Per-part run counts after `rounds` dispatches of `nparts` parts on `threads` threads.
    fn run_counted(threads: usize, nparts: u32, rounds: u32, in_step: bool) -> (Vec<u32>, u32) {
        let counts: [AtomicU32; MOST] = std::array::from_fn(|_| AtomicU32::new(0));
        let seen = AtomicU32::new(0);
        let args = [counts.as_ptr().cast_mut().cast::<u8>(), (&raw const seen).cast_mut().cast::<u8>()];
        let mut pool = Pool::new(threads).unwrap();
        if in_step {
            pool.begin_step();
        }
        for _ in 0..rounds {
            // SAFETY: count_parts only does atomic updates through `args`, which outlive the call.
            unsafe { pool.run(count_parts, args.as_ptr(), nparts) };
        }
        pool.end_step();
        let counts: Vec<u32> = counts.iter().map(|c| c.load(Relaxed)).collect();
        (counts[..nparts as usize].to_vec(), seen.into_inner())
    }

    #[test]
    fn every_part_runs_exactly_once_per_dispatch() {
        for in_step in [false, true] {
            assert_eq!(run_counted(4, 4, 500, in_step), (vec![500; 4], 4));
            // More parts than threads: claimed dynamically, each still exactly once.
            assert_eq!(run_counted(3, 7, 300, in_step), (vec![300; 7], 7));
            assert_eq!(run_counted(2, 64, 200, in_step), (vec![200; 64], 64));
            // Fewer parts than threads: idle workers find nothing to claim.
            assert_eq!(run_counted(4, 2, 300, in_step), (vec![300; 2], 2));
            // One thread runs every part inline.
            assert_eq!(run_counted(1, 8, 10, in_step), (vec![10; 8], 8));
        }
    }

    #[test]
    fn claim_word_hands_out_parts_below_nparts_only() {
        assert_eq!(claimed(3 << 32), Some((0, 3)));
        assert_eq!(claimed((3 << 32) | 2), Some((2, 3)));
        assert_eq!(claimed((3 << 32) | 3), None);
        assert_eq!(claimed((3 << 32) | 5), None); // failed claims overshoot
        assert_eq!(claimed(0), None); // before the first dispatch
    }

    #[test]
    fn parts_per_dispatch_are_clamped() {
        let three = Pool::new(3).unwrap();
        assert_eq!(three.nparts_for(0), 1);
        assert_eq!(three.nparts_for(2), 2);
        assert_eq!(three.nparts_for(1000), 3 * PARTS_PER_THREAD);
        assert_eq!(Pool::new(1).unwrap().nparts_for(1000), 1);
    }

    #[test]
    fn workers_sleep_and_wake_and_shut_down() {
        let counts: [AtomicU32; MOST] = std::array::from_fn(|_| AtomicU32::new(0));
        let seen = AtomicU32::new(0);
        let args = [counts.as_ptr().cast_mut().cast::<u8>(), (&raw const seen).cast_mut().cast::<u8>()];
        let mut pool = Pool::new(4).unwrap();
        assert_eq!(pool.threads(), 4);
        for round in 0..4 {
            // Every worker gives up spinning and parks soon after a dispatch outside a step.
            let start = Instant::now();
            while pool.workers_asleep() < 3 {
                assert!(start.elapsed() < Duration::from_secs(5), "round {round}: workers still spinning");
                std::thread::sleep(Duration::from_millis(1));
            }
            if round % 2 == 1 {
                pool.begin_step(); // wakes them
            }
            // SAFETY: as in `run_counted`.
            unsafe { pool.run(count_parts, args.as_ptr(), 16) };
            pool.end_step();
        }
        drop(pool); // joins the workers; hangs (test timeout) if shutdown were lost
        assert_eq!(counts.map(|c| c.into_inner())[..16], [4; 16]);
        assert!(Pool::new(0).unwrap().threads() >= 1);
    }
}
