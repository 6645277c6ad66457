#![cfg(feature = "fake")]
//! `QcomDevice::submit` and `wait` make no heap allocation outside the kernel (here: outside the fake
//! KGSL's ioctl, which decodes the stream and may allocate): a counting global allocator that pauses
//! while the ioctl runs.

use std::io;
use std::ptr::NonNull;

use pilot_core::device::{Arg, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::fake::FakeKgsl;
use pilot_qcom::fake_shader::write_blob as write_fake;
use pilot_qcom::fake_shader::{FakeShader, ShaderArg};
use pilot_qcom::ioctl::KgslFile;
use pilot_test_support::{paused, thread_allocs};

pilot_test_support::counting_allocator!();

/// The fake, with counting paused while it runs: what it allocates is the kernel's business.
struct Paused(FakeKgsl);

impl KgslFile for Paused {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        // SAFETY: forwarded unchanged; the caller upholds the contract.
        paused(|| unsafe { self.0.ioctl(request, arg) })
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
        .load_program(&ProgramSpec {
            name: "k",
            format: ProgramFormat::AdrenoBlob,
            code: &code,
            arg_count: 2,
            amdgpu: None,
            ir3: None,
        })
        .unwrap();
    let (a, b) = (dev.alloc(256, BufferUse::Output).unwrap(), dev.alloc(256, BufferUse::Input).unwrap());
    let op = |buffer| Arg { buffer, offset: 0 };
    let ops: Vec<StepOp> = (0..8)
        .map(|_| StepOp::Dispatch { program, args: vec![op(a), op(b)], global: [64, 1, 1], local: [64, 1, 1] })
        .collect();
    let step = dev.link_step(&ops).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    // The counter sees allocations on this thread.
    let before = thread_allocs();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(thread_allocs() - before, 1, "the counting allocator counts");
    let before = thread_allocs();
    for _ in 0..50 {
        let v = dev.submit(step).unwrap();
        dev.wait(v).unwrap();
    }
    assert_eq!(thread_allocs() - before, 0, "heap allocations in submit/wait outside the ioctl");
}
