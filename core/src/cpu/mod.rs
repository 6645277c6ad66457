//! The CPU backend: programs are freestanding ELF objects loaded by our own loader, run on a
//! persistent thread pool.
//!
//! # Kernel ABI
//!
//! Every program is a C-ABI function
//!
//! ```c
//! void NAME(void *const *args, uint32_t part, uint32_t nparts);
//! ```
//!
//! - `args[i]` is the base pointer of buffer argument `i`: the buffer's base plus the [`Arg`]'s byte
//!   offset, resolved once at [`Device::link_step`]. Buffers are 64-byte aligned (before the offset).
//! - For `StepOp::Dispatch { global, .. }`, `global[0] >= 1` is the number of independent parts the
//!   kernel's outer loop can be split into. With one thread the kernel is called once with
//!   `nparts = 1`; otherwise `nparts = min(global[0], threads * pool::PARTS_PER_THREAD)` and the pool
//!   calls the kernel exactly once for every `part in 0..nparts`, concurrently, on whichever threads
//!   claim them first; the kernel partitions its own outer loop (for example
//!   `lo = extent * part / nparts`, `hi = extent * (part + 1) / nparts`) and parts must write disjoint
//!   memory. `global[1..]` and `local` are ignored on the CPU.
//! - Objects are relocatable ELF64 (`ET_REL`) for the host machine, compiled freestanding, e.g.
//!   `cc -c -O2 -ffreestanding -fno-stack-protector -fno-asynchronous-unwind-tables` with either
//!   `-fPIC` or `-fno-pic -mcmodel=small`. The only external symbols available are `memcpy`, `memset`
//!   and `memmove`. No TLS, no constructors, no common symbols. See [`elf`] for the loader.
//! - Imported buffers ([`Device::import`]) are read-only copies of the caller's bytes made at import: kernels
//!   must not write to them, and the model never reads the artifact file after its load.
//!
//! # Execution model
//!
//! `submit` runs the linked step synchronously on the calling thread plus the pool's workers and
//! returns the next timeline value, which is then already complete; `wait` and `synchronize` only check.
//! During a step the workers spin between dispatches; between steps they park soon after (see
//! [`pool`]).
//! Linked steps hold raw pointers into buffers, so a buffer referenced by any linked step cannot be
//! freed (there is no way to unlink a step; everything is released when the device is dropped).

pub mod elf;
mod host;
mod mem;
pub mod pool;
mod reloc;

use crate::bounds::check_range;
use crate::device::{
    Arg, BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, HostBytes, ProgramFormat, ProgramId,
    ProgramSpec, StepId, StepOp,
};

pub use mem::BUFFER_ALIGN;

use elf::{KernelFn, LoadedImage};
use mem::Storage;
use pool::Pool;

struct Buffer {
    storage: Storage,
    /// Referenced by a linked step: freeing it would leave that step dangling.
    linked: bool,
}

struct Program {
    name: String,
    image: LoadedImage,
    arg_count: usize,
}

enum LinkedOp {
    Dispatch {
        kernel: KernelFn,
        /// Index of the first argument pointer in [`LinkedStep::args`].
        args: usize,
        nparts: u32,
    },
    Copy {
        src: *const u8,
        dst: *mut u8,
        len: usize,
    },
}

struct LinkedStep {
    ops: Vec<LinkedOp>,
    /// Every dispatch's argument pointers, back to back.
    args: Vec<*mut u8>,
    /// Accumulated time per op while profiling is on (allocated at link time).
    times: Vec<std::time::Duration>,
    /// Some dispatch runs in more than one part: workers are kept spinning through the step.
    parallel: bool,
}

// SAFETY: the raw pointers point into buffers and images owned by the same `CpuDevice` (which keeps
// them alive and refuses to free linked buffers), not into thread-local or thread-affine memory; a
// step is only executed through `&mut CpuDevice`, so moving it to another thread with the device
// is sound.
unsafe impl Send for LinkedStep {}

/// The CPU device. See the module docs for the kernel ABI and execution model.
pub struct CpuDevice {
    pool: Pool,
    /// Slab indexed by `BufferId`; ids are never reused, freed slots stay `None`.
    buffers: Vec<Option<Buffer>>,
    programs: Vec<Program>,
    steps: Vec<LinkedStep>,
    /// Values handed out by `submit`, each complete when handed out (submission is synchronous).
    timeline: crate::timeline::Timeline,
    profiling: bool,
}

impl CpuDevice {
    /// A CPU device running dispatches on `threads` threads, the caller included (`0` means
    /// `std::thread::available_parallelism()`).
    ///
    /// # Panics
    /// If the OS cannot start the worker threads; see [`CpuDevice::try_new`].
    pub fn new(threads: usize) -> CpuDevice {
        CpuDevice::try_new(threads).expect("cannot start the CPU device's worker threads")
    }

    /// Like [`CpuDevice::new`], but reports a failure to start threads as an error.
    pub fn try_new(threads: usize) -> DeviceResult<CpuDevice> {
        let pool =
            Pool::new(threads).map_err(|e| DeviceError::Failed { op: "start thread pool", reason: e.to_string() })?;
        Ok(CpuDevice {
            pool,
            buffers: Vec::new(),
            programs: Vec::new(),
            steps: Vec::new(),
            timeline: Default::default(),
            profiling: false,
        })
    }

    /// Times every op of every submitted step (see [`Device::profile`]); off by default.
    pub fn with_profiling(mut self, on: bool) -> CpuDevice {
        self.profiling = on;
        self
    }

    /// Threads used per dispatch, the caller included.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    fn buffer(&self, id: BufferId) -> DeviceResult<&Buffer> {
        self.buffers
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(DeviceError::InvalidHandle { kind: "buffer", id: id.0 })
    }

    /// Checks `offset + len <= size` of `buffer` and returns the address of byte `offset`.
    fn address(&self, op: &'static str, arg: Arg, len: u64) -> DeviceResult<*mut u8> {
        let storage = &self.buffer(arg.buffer)?.storage;
        let size = storage.len() as u64;
        check_range(op, arg.offset, len, size)?;
        // `offset <= size`, so this stays inside (or one past the end of) the allocation.
        Ok(storage.base().wrapping_add(arg.offset as usize))
    }

    #[cfg(test)]
    fn program_range(&self, id: ProgramId) -> std::ops::Range<u64> {
        self.programs[id.0 as usize].image.address_range()
    }

    fn push_buffer(&mut self, storage: Storage) -> DeviceResult<BufferId> {
        let id = u32::try_from(self.buffers.len())
            .map_err(|_| DeviceError::Failed { op: "alloc", reason: "too many buffers".to_string() })?;
        self.buffers.push(Some(Buffer { storage, linked: false }));
        Ok(BufferId(id))
    }

    fn link_op(&self, op: &StepOp, args: &mut Vec<*mut u8>) -> DeviceResult<LinkedOp> {
        match op {
            StepOp::Dispatch { program, args: op_args, global, local: _ } => {
                let p = self
                    .programs
                    .get(program.0 as usize)
                    .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
                let bad = |reason: String| DeviceError::Program { name: p.name.clone(), reason };
                if op_args.len() != p.arg_count {
                    return Err(bad(format!(
                        "dispatch passes {} arguments, the kernel takes {}",
                        op_args.len(),
                        p.arg_count
                    )));
                }
                if global[0] == 0 {
                    return Err(bad("dispatch with global[0] = 0 parts".to_string()));
                }
                let first = args.len();
                for &arg in op_args {
                    args.push(self.address("link dispatch argument", arg, 0)?);
                }
                Ok(LinkedOp::Dispatch { kernel: p.image.entry(), args: first, nparts: self.pool.nparts_for(global[0]) })
            }
            StepOp::Copy { src, dst, len } => {
                let src_ptr = self.address("link copy source", *src, *len)?;
                let dst_ptr = self.address("link copy destination", *dst, *len)?;
                if self.buffer(dst.buffer)?.storage.is_read_only() {
                    return Err(DeviceError::Failed {
                        op: "link copy",
                        reason: format!("destination buffer {} is imported (read-only)", dst.buffer.0),
                    });
                }
                Ok(LinkedOp::Copy {
                    src: src_ptr,
                    dst: dst_ptr,
                    // In bounds of an allocation, so it fits in usize.
                    len: *len as usize,
                })
            }
        }
    }
}

impl Device for CpuDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: "cpu".to_string(), arch: std::env::consts::ARCH.to_string() }
    }

    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        let storage = Storage::alloc_zeroed(size).ok_or(DeviceError::OutOfMemory { size })?;
        self.push_buffer(storage)
    }

    /// Copies `bytes` into a read-only buffer of the device's own. Imports are weights, and `bytes` are a map of
    /// the artifact: reading them in place at every step would let a change to the file after load (truncated:
    /// SIGBUS; rewritten: other outputs, past the integrity check made at load) reach a running model.
    fn import(&mut self, bytes: HostBytes, _usage: BufferUse) -> DeviceResult<BufferId> {
        let size = bytes.len();
        let storage = Storage::read_only_copy(bytes.as_slice()).ok_or(DeviceError::OutOfMemory { size })?;
        self.push_buffer(storage)
    }

    /// Frees `buffer`. Fails if a linked step references it.
    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        if self.buffer(buffer)?.linked {
            return Err(DeviceError::Failed {
                op: "free",
                reason: format!("buffer {} is referenced by a linked step", buffer.0),
            });
        }
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        let arg = Arg { buffer: dst, offset };
        let ptr = self.address("copy_in", arg, src.len() as u64)?;
        if self.buffer(dst)?.storage.is_read_only() {
            return Err(DeviceError::Failed {
                op: "copy_in",
                reason: format!("buffer {} is imported (read-only)", dst.0),
            });
        }
        // SAFETY: `ptr..ptr + src.len()` is inside an owned, writable allocation of this device
        // (bounds checked by `address`, imported storage rejected above); `src` is a distinct Rust
        // slice, so they do not overlap; no kernel runs concurrently (submit is synchronous).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, src.len()) };
        Ok(())
    }

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        let arg = Arg { buffer: src, offset };
        let ptr = self.address("copy_out", arg, dst.len() as u64)?;
        // SAFETY: `ptr..ptr + dst.len()` is inside a live buffer of this device (bounds checked),
        // readable, and not written concurrently; `dst` is an exclusive Rust slice elsewhere.
        unsafe { std::ptr::copy_nonoverlapping(ptr, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        let bad = |reason: String| DeviceError::Program { name: spec.name.to_string(), reason };
        if spec.format != ProgramFormat::Elf {
            return Err(bad(format!("format {:?} cannot run on the CPU", spec.format)));
        }
        let id = u32::try_from(self.programs.len()).map_err(|_| bad("too many programs".to_string()))?;
        let image = elf::load(spec.code, spec.name).map_err(bad)?;
        self.programs.push(Program { name: spec.name.to_string(), image, arg_count: spec.arg_count });
        Ok(ProgramId(id))
    }

    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        let id = u32::try_from(self.steps.len())
            .map_err(|_| DeviceError::Failed { op: "link_step", reason: "too many steps".to_string() })?;
        let mut args = Vec::new();
        let mut linked = Vec::with_capacity(ops.len());
        for op in ops {
            linked.push(self.link_op(op, &mut args)?);
        }
        // Only now that every op linked: pin the buffers the step points into.
        for buffer in ops.iter().flat_map(StepOp::buffers) {
            if let Some(Some(b)) = self.buffers.get_mut(buffer.0 as usize) {
                b.linked = true;
            }
        }
        let times = vec![std::time::Duration::ZERO; linked.len()];
        let parallel = linked.iter().any(|op| matches!(op, LinkedOp::Dispatch { nparts, .. } if *nparts > 1));
        self.steps.push(LinkedStep { ops: linked, args, times, parallel });
        Ok(StepId(id))
    }

    /// Runs the step to completion on the pool (no heap allocation) and returns its timeline value.
    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        let profiling = self.profiling;
        let linked =
            self.steps.get_mut(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?;
        if linked.parallel {
            self.pool.begin_step();
        }
        for (i, op) in linked.ops.iter().enumerate() {
            let st = profiling.then(std::time::Instant::now);
            match *op {
                LinkedOp::Dispatch { kernel, args, nparts } => {
                    let args = linked.args[args..].as_ptr();
                    // SAFETY: `kernel` is the entry of a program image owned by this device (alive
                    // as long as the device); `args` are pointers into live buffers that cannot be
                    // freed while linked, bounds-checked at link time, and stay valid for the call
                    // (the step is not mutated during submit). Parts writing disjoint memory is the
                    // kernel ABI the compiler generates to.
                    unsafe { self.pool.run(kernel, args, nparts) };
                }
                LinkedOp::Copy { src, dst, len } => {
                    // SAFETY: both ranges were bounds-checked against live, pinned buffers at link
                    // time, and `dst` is owned writable memory; `copy` tolerates overlap (a copy
                    // within one buffer, such as shifting a queue).
                    unsafe { std::ptr::copy(src, dst, len) };
                }
            }
            if let Some(st) = st {
                linked.times[i] += st.elapsed();
            }
        }
        self.pool.end_step();
        Ok(self.timeline.record_complete())
    }

    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        self.timeline.check(value).map(drop)
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        Ok(())
    }

    fn profile(&self, step: StepId) -> Option<Vec<std::time::Duration>> {
        let linked = self.steps.get(step.0 as usize)?;
        self.profiling.then(|| linked.times.clone())
    }
}

/// The address of a live buffer, for tests that check zero-copy import.
#[cfg(test)]
impl CpuDevice {
    fn buffer_ptr(&self, id: BufferId) -> Option<std::ptr::NonNull<u8>> {
        self.buffer(id).ok().and_then(|b| std::ptr::NonNull::new(b.storage.base()))
    }
}

#[cfg(test)]
mod tests;
