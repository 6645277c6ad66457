//! A persistent thread pool that runs one kernel dispatch at a time, without heap allocation.
//!
//! `threads - 1` workers are started once; the calling thread is worker 0 and runs part 0 itself.
//! A dispatch writes the kernel and its argument array into a preallocated job slot, then publishes
//! it by storing one 64-bit word `generation << 32 | nparts` (release). Worker `w` runs part `w` of
//! every generation it observes with `w < nparts`, then decrements the outstanding count; the caller
//! returns once that count reaches zero. Because a participant's decrement is what lets the caller
//! publish the next job, a participant always reads a stable slot; non-participants never read it.
//!
//! Waiting is spin-then-sleep on both sides: workers spin briefly on the job word (dispatches of one
//! step come back to back), then sleep on a condvar; the caller likewise spins on the count, then
//! sleeps. Sleepers announce themselves in an atomic counter so the waker only takes the mutex and
//! notifies when someone is asleep (a Dekker-style handshake with sequentially consistent atomics).
//! Nothing on the dispatch path allocates: `Mutex`/`Condvar` on Linux are futex words.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::elf::KernelFn;

/// How long a waiter spins before it sleeps. Dispatches of one step follow each other within
/// microseconds, so workers stay hot through a step and go to sleep soon after it.
const SPIN_TIME: Duration = Duration::from_micros(50);

/// After this long, a spinning waiter yields the CPU between checks, so that with more threads than
/// free cores the thread it waits for gets to run.
const YIELD_AFTER: Duration = Duration::from_micros(2);

/// Spins until `ready()` or [`SPIN_TIME`] has passed; returns whether `ready()` became true.
fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            spin_loop();
        }
        let waited = start.elapsed();
        if waited > SPIN_TIME {
            return ready();
        }
        if waited > YIELD_AFTER {
            std::thread::yield_now();
        }
    }
}

/// A kernel that does nothing, stored in the slot before the first dispatch.
unsafe extern "C" fn no_kernel(_: *const *mut u8, _: u32, _: u32) {}

struct Shared {
    /// `generation << 32 | nparts` of the current job.
    job: AtomicU64,
    kernel: AtomicPtr<()>,
    args: AtomicPtr<*mut u8>,
    /// Parts handed to workers that have not finished yet.
    outstanding: AtomicU32,
    /// Workers asleep (or about to sleep) waiting for a job.
    sleeping_workers: AtomicUsize,
    /// True while the caller sleeps waiting for `outstanding` to reach zero.
    caller_sleeping: AtomicBool,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    work: Condvar,
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ()> {
        // The mutex guards no data, so a poisoned lock is still usable.
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pool. Dispatching takes `&mut self`, so only one dispatch is ever in flight.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
    generation: u32,
}

impl Pool {
    /// Starts a pool of `threads` workers in all (the caller counts as one; `0` means
    /// `std::thread::available_parallelism()`). Fails if the OS refuses to start a thread.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
        let shared = Arc::new(Shared {
            job: AtomicU64::new(0),
            kernel: AtomicPtr::new(no_kernel as KernelFn as *mut ()),
            args: AtomicPtr::new(std::ptr::null_mut()),
            outstanding: AtomicU32::new(0),
            sleeping_workers: AtomicUsize::new(0),
            caller_sleeping: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let mut pool = Pool { shared, workers: Vec::with_capacity(threads - 1), threads, generation: 0 };
        for index in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("pilot-cpu-{index}"))
                .spawn(move || worker(&shared, index as u32))?;
            pool.workers.push(handle); // on error, Drop stops the workers started so far
        }
        Ok(pool)
    }

    /// Number of threads, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `kernel(args, part, nparts)` for every `part in 0..nparts`, part 0 on the calling thread
    /// and part `w` on worker `w`, and returns when all have finished. `nparts` is clamped to
    /// `1..=threads`. Does not allocate.
    ///
    /// # Safety
    /// `kernel` must be safe to call with `args` from any thread, concurrently for distinct parts
    /// (the kernel ABI: parts touch disjoint outputs), and `args` must stay valid until this returns.
    pub unsafe fn run(&mut self, kernel: KernelFn, args: *const *mut u8, nparts: u32) {
        let nparts = nparts.clamp(1, self.threads as u32);
        if nparts > 1 {
            self.generation = self.generation.wrapping_add(1);
            let s = &*self.shared;
            s.kernel.store(kernel as *mut (), Relaxed);
            s.args.store(args.cast_mut(), Relaxed);
            s.outstanding.store(nparts - 1, Relaxed);
            // Publishes the slot (release) and orders against the `sleeping_workers` load (SeqCst).
            s.job.store((u64::from(self.generation) << 32) | u64::from(nparts), SeqCst);
            if s.sleeping_workers.load(SeqCst) > 0 {
                drop(s.lock());
                s.work.notify_all();
            }
        }
        // SAFETY: the caller guarantees `kernel` may be called with `args` for part 0 of `nparts`.
        unsafe { kernel(args, 0, nparts) };
        if nparts > 1 {
            self.wait_done();
        }
    }

    fn wait_done(&self) {
        let s = &*self.shared;
        if spin_until(|| s.outstanding.load(Acquire) == 0) {
            return;
        }
        let mut guard = s.lock();
        s.caller_sleeping.store(true, SeqCst);
        while s.outstanding.load(SeqCst) != 0 {
            guard = s.done.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        s.caller_sleeping.store(false, Relaxed);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.shutdown.store(true, SeqCst);
        drop(s.lock());
        s.work.notify_all();
        for handle in self.workers.drain(..) {
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

fn worker(s: &Shared, index: u32) {
    #[cfg(test)]
    IS_WORKER.with(|w| w.set(true));
    let mut seen = 0u64;
    loop {
        // Wait for a new job word or shutdown: spin, then sleep.
        let ready = || s.job.load(Acquire) != seen || s.shutdown.load(Relaxed);
        if !spin_until(ready) {
            let mut guard = s.lock();
            s.sleeping_workers.fetch_add(1, SeqCst);
            while s.job.load(SeqCst) == seen && !s.shutdown.load(SeqCst) {
                guard = s.work.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            s.sleeping_workers.fetch_sub(1, SeqCst);
        }
        let job = s.job.load(Acquire);
        if s.shutdown.load(Acquire) {
            return;
        }
        seen = job;
        let nparts = job as u32;
        if index >= nparts {
            continue;
        }
        // This worker participates, so the caller cannot publish another job until our decrement
        // below: the slot is stable and was published before `job` (acquire above).
        let kernel_ptr = s.kernel.load(Relaxed);
        let args = s.args.load(Relaxed);
        // SAFETY: `kernel_ptr` was stored from a `KernelFn` by `Pool::run` (or is `no_kernel`); a
        // function pointer round-trips through a data pointer on every platform we support.
        let kernel = unsafe { std::mem::transmute::<*mut (), KernelFn>(kernel_ptr) };
        // SAFETY: `Pool::run`'s caller guaranteed this kernel may run part `index` of `nparts` on any
        // thread with `args`, which stay valid until `outstanding` reaches zero.
        unsafe { kernel(args, index, nparts) };
        if s.outstanding.fetch_sub(1, SeqCst) == 1 && s.caller_sleeping.load(SeqCst) {
            drop(s.lock());
            s.done.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// args[0]: `[AtomicU32; 8]` per-part run counts; args[1]: `AtomicU32` last nparts seen.
    unsafe extern "C" fn count_parts(args: *const *mut u8, part: u32, nparts: u32) {
        // SAFETY: the tests below pass two pointers: to 8 counters and to one counter.
        let (counts, seen) = unsafe { (&*(*args).cast::<[AtomicU32; 8]>(), &*(*args.add(1)).cast::<AtomicU32>()) };
        counts[part as usize].fetch_add(1, Relaxed);
        seen.store(nparts, Relaxed);
    }

    fn run_counted(threads: usize, nparts: u32, rounds: u32) -> ([u32; 8], u32) {
        let counts: [AtomicU32; 8] = Default::default();
        let seen = AtomicU32::new(0);
        let args = [counts.as_ptr().cast_mut().cast::<u8>(), (&raw const seen).cast_mut().cast::<u8>()];
        let mut pool = Pool::new(threads).unwrap();
        for _ in 0..rounds {
            // SAFETY: count_parts only does atomic updates through `args`, which outlive the call.
            unsafe { pool.run(count_parts, args.as_ptr(), nparts) };
        }
        (counts.map(|c| c.into_inner()), seen.into_inner())
    }

    #[test]
    fn every_part_runs_exactly_once_per_dispatch() {
        assert_eq!(run_counted(4, 4, 500), ([500, 500, 500, 500, 0, 0, 0, 0], 4));
        // More parts than threads: clamped to the thread count.
        assert_eq!(run_counted(3, 7, 100), ([100, 100, 100, 0, 0, 0, 0, 0], 3));
        // Fewer parts than threads: idle workers skip.
        assert_eq!(run_counted(4, 2, 100), ([100, 100, 0, 0, 0, 0, 0, 0], 2));
        assert_eq!(run_counted(1, 8, 10), ([10, 0, 0, 0, 0, 0, 0, 0], 1));
    }

    #[test]
    fn workers_sleep_and_wake_and_shut_down() {
        let counts: [AtomicU32; 8] = Default::default();
        let seen = AtomicU32::new(0);
        let args = [counts.as_ptr().cast_mut().cast::<u8>(), (&raw const seen).cast_mut().cast::<u8>()];
        let mut pool = Pool::new(4).unwrap();
        assert_eq!(pool.threads(), 4);
        for _ in 0..3 {
            // Long enough for every worker to give up spinning and sleep on the condvar.
            std::thread::sleep(std::time::Duration::from_millis(30));
            // SAFETY: as in `run_counted`.
            unsafe { pool.run(count_parts, args.as_ptr(), 4) };
        }
        drop(pool); // joins the workers; hangs (test timeout) if shutdown were lost
        assert_eq!(counts.map(|c| c.into_inner())[..4], [3, 3, 3, 3]);
        assert!(Pool::new(0).unwrap().threads() >= 1);
    }
}
