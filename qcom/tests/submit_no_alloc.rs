#![cfg(feature = "fake")]
//! `QcomDevice::submit` and `wait` make no heap allocation outside the kernel (here: outside the fake
//! KGSL's ioctl, which decodes the stream and may allocate): a counting global allocator that pauses
//! while the ioctl runs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use pilot_core::device::{Arg, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::fake::FakeKgsl;
use pilot_qcom::fake_shader::write_blob as write_fake;
use pilot_qcom::fake_shader::{FakeShader, ShaderArg};
use pilot_qcom::ioctl::KgslFile;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The fake, with counting paused while it runs: what it allocates is the kernel's business.
struct Paused(FakeKgsl);

impl KgslFile for Paused {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        let was = COUNTING.with(|c| c.replace(false));
        // SAFETY: forwarded unchanged; the caller upholds the contract.
        let r = unsafe { self.0.ioctl(request, arg) };
        COUNTING.with(|c| c.set(was));
        r
    }
    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>> {
        self.0.mmap(len, offset)
    }
    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()> {
        // SAFETY: forwarded unchanged; the caller upholds the contract.
        unsafe { self.0.munmap(addr, len) }
    }
}

#[test]
fn submit_and_wait_do_not_allocate() {
    let mut dev = QcomDevice::with_file(Box::new(Paused(FakeKgsl::new())), "fake-kgsl").unwrap();
    let shader = FakeShader {
        name: "k".into(),
        args: vec![
            ShaderArg::Buffer { offset_words: 0, bytes: 256, written: true },
            ShaderArg::Buffer { offset_words: 2, bytes: 256, written: false },
        ],
        source: "__kernel void k() {}".into(),
    };
    let code = write_fake(&shader);
    let program = dev
        .load_program(&ProgramSpec { name: "k", format: ProgramFormat::AdrenoBlob, code: &code, arg_count: 2 })
        .unwrap();
    let (a, b) = (dev.alloc(256, BufferUse::Output).unwrap(), dev.alloc(256, BufferUse::Input).unwrap());
    let op = |buffer| Arg { buffer, offset: 0 };
    let ops: Vec<StepOp> = (0..8)
        .map(|_| StepOp::Dispatch { program, args: vec![op(a), op(b)], global: [64, 1, 1], local: [64, 1, 1] })
        .collect();
    let step = dev.link_step(&ops).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    COUNTING.with(|c| c.set(true));
    // The counter sees allocations on this thread.
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(ALLOCS.swap(0, Ordering::Relaxed), 1, "the counting allocator counts");
    for _ in 0..50 {
        let v = dev.submit(step).unwrap();
        dev.wait(v).unwrap();
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCS.load(Ordering::Relaxed), 0, "heap allocations in submit/wait outside the ioctl");
}
