//! End-to-end tests of the CPU device: C kernels compiled at test time with the system C compiler,
//! loaded by our ELF loader and run on the pool. The loader's failure modes are in `tests_elf.rs`.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use super::*;
use crate::device::{Arg, BufferId, BufferUse, Device, HostBytes, ProgramFormat, ProgramSpec, StepOp};
use pilot_test_support::{tagged_allocs, thread_allocs};

#[path = "tests_elf_hostile.rs"]
mod elf_hostile_tests;
#[path = "tests_elf.rs"]
mod elf_tests;

// ---- allocation counting: the step path must not touch the heap ----

/// Pool workers' allocations are tagged, so `tagged_allocs` counts them.
fn on_pool_worker() -> bool {
    super::pool::IS_WORKER.try_with(Cell::get).unwrap_or(false)
}

pilot_test_support::counting_allocator!(tagging on_pool_worker);

// ---- compiling kernels ----

pub(super) const BASE_FLAGS: [&str; 5] =
    ["-c", "-O2", "-ffreestanding", "-fno-stack-protector", "-fno-asynchronous-unwind-tables"];
/// The two code models the loader must handle.
pub(super) const MODELS: [&[&str]; 2] = [&["-fPIC"], &["-fno-pic", "-mcmodel=small"]];

/// Compiles C `source` with `compiler` and `flags`; `None` if the compiler is not installed.
/// Panics with the compiler's output if compilation fails.
pub(super) fn compile_with(compiler: &str, source: &str, flags: &[&str]) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.c");
    let obj: PathBuf = dir.path().join("k.o");
    std::fs::write(&src, source).unwrap();
    let out = match Command::new(compiler).args(BASE_FLAGS).args(flags).arg(&src).arg("-o").arg(&obj).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("running {compiler}: {e}"),
    };
    assert!(out.status.success(), "{compiler} {flags:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Some(std::fs::read(obj).unwrap())
}

/// Compiles with the system `cc`, which every test machine has (gcc tests never skip).
pub(super) fn cc(source: &str, flags: &[&str]) -> Vec<u8> {
    compile_with("cc", source, flags).expect("the system C compiler `cc` is required for these tests")
}

fn spec<'a>(name: &'a str, code: &'a [u8], arg_count: usize) -> ProgramSpec<'a> {
    ProgramSpec { name, format: ProgramFormat::Elf, code, arg_count, amdgpu: None, ir3: None }
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn from_bytes<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).collect()
}

fn to_bytes<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

fn dispatch(program: ProgramId, buffers: &[BufferId], parts: u32) -> StepOp {
    StepOp::Dispatch {
        program,
        args: buffers.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect(),
        global: [parts, 1, 1],
        local: [1, 1, 1],
    }
}

fn read(dev: &mut CpuDevice, id: BufferId, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    dev.copy_out(id, 0, &mut out).unwrap();
    out
}

pub(super) const VADD: &str = r#"
#include <stdint.h>
/* args: a, b, c (float[n]), n (uint32) */
void vadd(void *const *args, uint32_t part, uint32_t nparts) {
    const float *a = args[0], *b = args[1];
    float *c = args[2];
    uint32_t n = *(const uint32_t *)args[3];
    uint32_t lo = (uint64_t)n * part / nparts, hi = (uint64_t)n * (part + 1) / nparts;
    for (uint32_t i = lo; i < hi; i++) c[i] = a[i] + b[i];
}
"#;

#[test]
fn vector_add_split_into_parts() {
    let n = 1003usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32).collect();
    for model in MODELS {
        let code = cc(VADD, model);
        for threads in [1, 4] {
            for parts in [1, 3, 4, 16] {
                let mut dev = CpuDevice::new(threads);
                let p = dev.load_program(&spec("vadd", &code, 4)).unwrap();
                let ids: Vec<BufferId> =
                    [4 * n, 4 * n, 4 * n, 4].iter().map(|&size| dev.alloc(size, BufferUse::Scratch).unwrap()).collect();
                dev.copy_in(ids[0], 0, &to_bytes(&a)).unwrap();
                dev.copy_in(ids[1], 0, &to_bytes(&b)).unwrap();
                dev.copy_in(ids[3], 0, &(n as u32).to_le_bytes()).unwrap();
                let step = dev.link_step(&[dispatch(p, &ids, parts)]).unwrap();
                let value = dev.submit(step).unwrap();
                dev.wait(value).unwrap();
                let c = f32s(&read(&mut dev, ids[2], 4 * n));
                let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                assert_eq!(c, want, "{model:?} threads {threads} parts {parts}");
            }
        }
    }
}

const LUT: &str = r#"
#include <stdint.h>
static const float table[8] = {0.5f, 1.25f, -2.0f, 3.75f, 100.0f, -0.125f, 7.0f, 1e-3f};
static int calls;           /* .bss */
static int base = 100;      /* .data */
int total = 7;              /* global: reached through the GOT with -fPIC */
/* args: idx (uint32[16]), out (float[16]), state (int32[3]) */
void lut(void *const *args, uint32_t part, uint32_t nparts) {
    const uint32_t *idx = args[0];
    float *out = args[1];
    int *state = args[2];
    for (int i = 0; i < 16; i++) out[i] = table[idx[i] & 7] * 3.5f + 0.25f;
    calls++;
    base += 2;
    total += calls;
    state[0] = calls; state[1] = base; state[2] = total;
}
"#;

#[test]
fn rodata_constants_and_mutable_globals() {
    let table = [0.5f32, 1.25, -2.0, 3.75, 100.0, -0.125, 7.0, 1e-3];
    let idx: Vec<u32> = (0..16).map(|i| (i * 5 + 3) as u32).collect();
    for model in MODELS {
        let code = cc(LUT, model);
        let mut dev = CpuDevice::new(2);
        let p = dev.load_program(&spec("lut", &code, 3)).unwrap();
        let i = dev.alloc(64, BufferUse::Input).unwrap();
        let o = dev.alloc(64, BufferUse::Output).unwrap();
        let s = dev.alloc(12, BufferUse::State).unwrap();
        dev.copy_in(i, 0, &to_bytes(&idx)).unwrap();
        let step = dev.link_step(&[dispatch(p, &[i, o, s], 1)]).unwrap();
        assert_eq!(dev.submit(step).unwrap(), 1);
        assert_eq!(dev.submit(step).unwrap(), 2);
        let out = f32s(&read(&mut dev, o, 64));
        let want: Vec<f32> = idx.iter().map(|&k| table[k as usize & 7] * 3.5 + 0.25).collect();
        assert_eq!(out, want, "{model:?}");
        let state: Vec<i32> = from_bytes(&read(&mut dev, s, 12));
        assert_eq!(state, [2, 104, 7 + 1 + 2], "{model:?}");
    }
}

const MEMFNS: &str = r#"
#include <stdint.h>
struct big { uint32_t words[64]; };
/* args: src (bytes), dst (bytes), sizes (uint32[2]), bigs (struct big[2]) */
void memfns(void *const *args, uint32_t part, uint32_t nparts) {
    const uint32_t *n = args[2];
    __builtin_memcpy(args[1], args[0], n[0]);
    __builtin_memset((char *)args[1] + n[0], 0x5a, n[1]);
    __builtin_memmove((char *)args[1] + 1, args[1], n[1]);
    struct big *bigs = args[3];
    bigs[1] = bigs[0];
}
"#;

#[test]
fn kernels_calling_memcpy_memset_memmove() {
    for model in MODELS {
        let code = cc(MEMFNS, model);
        let undefined = elf_tests::undefined_symbols(&code);
        assert!(undefined.contains(&"memcpy".to_string()), "{model:?}: {undefined:?}");
        assert!(undefined.contains(&"memset".to_string()), "{model:?}: {undefined:?}");
        let mut dev = CpuDevice::new(1);
        let p = dev.load_program(&spec("memfns", &code, 4)).unwrap();
        let src: Vec<u8> = (0..100u8).collect();
        let ids: Vec<BufferId> =
            [100, 200, 8, 512].iter().map(|&size| dev.alloc(size, BufferUse::Scratch).unwrap()).collect();
        dev.copy_in(ids[0], 0, &src).unwrap();
        dev.copy_in(ids[2], 0, &to_bytes(&[37u32, 20])).unwrap();
        let words: Vec<u32> = (0..64).map(|i| i * 7 + 1).collect();
        dev.copy_in(ids[3], 0, &to_bytes(&words)).unwrap();
        let step = dev.link_step(&[dispatch(p, &ids, 1)]).unwrap();
        dev.submit(step).unwrap();
        let mut want = vec![0u8; 200];
        want[..37].copy_from_slice(&src[..37]);
        want[37..57].fill(0x5a);
        want.copy_within(0..20, 1);
        assert_eq!(read(&mut dev, ids[1], 200), want, "{model:?}");
        let bigs: Vec<u32> = from_bytes(&read(&mut dev, ids[3], 512));
        assert_eq!(bigs[64..], words[..], "{model:?}");
    }
}

const PARITY: &str = r#"
#include <stdint.h>
__attribute__((noinline)) int is_odd(uint32_t n);
__attribute__((noinline)) int is_even(uint32_t n) { return n == 0 ? 1 : is_odd(n - 1) + 0 * n; }
__attribute__((noinline)) int is_odd(uint32_t n) { return n == 0 ? 0 : is_even(n - 1) + 0 * n; }
void parity(void *const *args, uint32_t part, uint32_t nparts) {
    const uint32_t *in = args[0];
    int32_t *out = args[1];
    for (int i = 0; i < 8; i++) out[i] = is_even(in[i]);
}
"#;

#[test]
fn functions_calling_each_other() {
    for model in MODELS {
        let code = cc(PARITY, &[model, &["-fno-optimize-sibling-calls"]].concat());
        let mut dev = CpuDevice::new(1);
        let p = dev.load_program(&spec("parity", &code, 2)).unwrap();
        let i = dev.alloc(32, BufferUse::Input).unwrap();
        let o = dev.alloc(32, BufferUse::Output).unwrap();
        let input = [0u32, 1, 2, 7, 10, 33, 100, 255];
        dev.copy_in(i, 0, &to_bytes(&input)).unwrap();
        let step = dev.link_step(&[dispatch(p, &[i, o], 1)]).unwrap();
        dev.submit(step).unwrap();
        let out: Vec<i32> = from_bytes(&read(&mut dev, o, 32));
        let want: Vec<i32> = input.iter().map(|&n| i32::from(n % 2 == 0)).collect();
        assert_eq!(out, want, "{model:?}");
        // The entry may be any function of the object, not just the first.
        let odd = dev.load_program(&spec("is_odd", &code, 0));
        assert!(odd.is_ok(), "{odd:?}");
    }
}

const STATEFUL: &str = r#"
#include <stdint.h>
#define N 64
/* args: in, state, tmp */
void accumulate(void *const *args, uint32_t part, uint32_t nparts) {
    const float *in = args[0], *state = args[1];
    float *tmp = args[2];
    for (uint32_t i = N * part / nparts; i < N * (part + 1) / nparts; i++) tmp[i] = state[i] + in[i];
}
/* args: state, out */
void twice(void *const *args, uint32_t part, uint32_t nparts) {
    const float *state = args[0];
    float *out = args[1];
    for (uint32_t i = N * part / nparts; i < N * (part + 1) / nparts; i++) out[i] = 2.0f * state[i];
}
"#;

#[test]
fn linked_step_with_copy_carries_state_across_submits() {
    let code = cc(STATEFUL, MODELS[0]);
    let mut dev = CpuDevice::new(4);
    let acc = dev.load_program(&spec("accumulate", &code, 3)).unwrap();
    let twice = dev.load_program(&spec("twice", &code, 2)).unwrap();
    let input: Vec<f32> = (0..64).map(|i| i as f32 + 0.5).collect();
    let inp = dev.alloc(256, BufferUse::Input).unwrap();
    let state = dev.alloc(256, BufferUse::State).unwrap();
    let tmp = dev.alloc(256, BufferUse::Scratch).unwrap();
    // The output lives 16 bytes into a larger buffer, to exercise argument offsets.
    let out = dev.alloc(16 + 256, BufferUse::Output).unwrap();
    dev.copy_in(inp, 0, &to_bytes(&input)).unwrap();
    let at = |buffer, offset| Arg { buffer, offset };
    let ops = [
        dispatch(acc, &[inp, state, tmp], 4),
        StepOp::Copy { src: at(tmp, 0), dst: at(state, 0), len: 256 },
        StepOp::Dispatch { program: twice, args: vec![at(state, 0), at(out, 16)], global: [3, 1, 1], local: [1, 1, 1] },
    ];
    let step = dev.link_step(&ops).unwrap();
    for round in 1..=2 {
        let value = dev.submit(step).unwrap();
        assert_eq!(value, round);
        dev.synchronize().unwrap();
        let mut got = vec![0u8; 256];
        dev.copy_out(out, 16, &mut got).unwrap();
        let want: Vec<f32> = input.iter().map(|x| 2.0 * x * round as f32).collect();
        assert_eq!(f32s(&got), want, "round {round}");
    }
    // Linked buffers are pinned; everything else can be freed.
    assert!(dev.free(state).is_err());
    let spare = dev.alloc(8, BufferUse::Scratch).unwrap();
    dev.free(spare).unwrap();
    assert!(dev.free(spare).is_err());
}

/// A 3-thread device with `vadd` loaded over three 100-element vectors and the length 100.
fn vadd_on_3_threads() -> (CpuDevice, ProgramId, Vec<BufferId>) {
    let code = cc(VADD, MODELS[0]);
    let mut dev = CpuDevice::new(3);
    let p = dev.load_program(&spec("vadd", &code, 4)).unwrap();
    let ids: Vec<BufferId> =
        [400, 400, 400, 4].iter().map(|&size| dev.alloc(size, BufferUse::Scratch).unwrap()).collect();
    dev.copy_in(ids[3], 0, &100u32.to_le_bytes()).unwrap();
    (dev, p, ids)
}

#[test]
fn submit_does_not_allocate() {
    let (mut dev, p, ids) = vadd_on_3_threads();
    let copy =
        StepOp::Copy { src: Arg { buffer: ids[2], offset: 0 }, dst: Arg { buffer: ids[0], offset: 0 }, len: 400 };
    let step = dev.link_step(&[dispatch(p, &ids, 3), copy, dispatch(p, &ids, 1)]).unwrap();
    dev.submit(step).unwrap(); // warm-up
    let mut out = [0u8; 400];
    let before = thread_allocs();
    for _ in 0..200 {
        let value = dev.submit(step).unwrap();
        dev.wait(value).unwrap();
        dev.copy_in(ids[1], 0, &out[..4]).unwrap();
        dev.copy_out(ids[2], 0, &mut out).unwrap();
    }
    assert_eq!(thread_allocs() - before, 0, "allocations on the submitting thread");
    assert_eq!(tagged_allocs(), 0, "allocations on pool workers");
}

/// Waits (up to 5 s) until every worker of `dev` has parked.
fn wait_workers_parked(dev: &CpuDevice) {
    let start = std::time::Instant::now();
    while dev.pool.workers_asleep() < dev.threads() - 1 {
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "workers never parked");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn only_steps_with_split_dispatches_wake_the_workers() {
    let (mut dev, p, ids) = vadd_on_3_threads();
    let serial = dev.link_step(&[dispatch(p, &ids, 1), dispatch(p, &ids, 1)]).unwrap();
    let split = dev.link_step(&[dispatch(p, &ids, 1), dispatch(p, &ids, 3)]).unwrap();
    dev.submit(split).unwrap();
    wait_workers_parked(&dev);
    let before = dev.pool.unparks();
    for _ in 0..20 {
        dev.submit(serial).unwrap();
    }
    assert_eq!(dev.pool.unparks(), before, "a step of one-part dispatches woke the workers");
    dev.submit(split).unwrap();
    assert_eq!(dev.pool.unparks(), before + 2, "a step with a split dispatch wakes both workers");
}

#[test]
fn buffers_are_aligned_zeroed_and_bounds_checked() {
    let mut dev = CpuDevice::new(1);
    assert_eq!(dev.info().backend, "cpu");
    assert_eq!(dev.info().arch, std::env::consts::ARCH);
    let empty = dev.alloc(0, BufferUse::Scratch).unwrap();
    dev.copy_in(empty, 0, &[]).unwrap();
    assert!(dev.copy_in(empty, 0, &[1]).is_err());
    for size in [1, 3, 64, 1000] {
        let id = dev.alloc(size, BufferUse::Scratch).unwrap();
        assert_eq!(dev.buffer_ptr(id).unwrap().as_ptr() as usize % BUFFER_ALIGN, 0);
        assert!(read(&mut dev, id, size).iter().all(|&b| b == 0));
        assert!(matches!(dev.copy_in(id, size as u64, &[1]), Err(DeviceError::OutOfBounds { .. })));
        assert!(dev.copy_out(id, u64::MAX, &mut [0]).is_err());
        dev.copy_in(id, size as u64 - 1, &[9]).unwrap();
        assert_eq!(read(&mut dev, id, size)[size - 1], 9);
    }
    assert!(matches!(dev.copy_in(BufferId(999), 0, &[]), Err(DeviceError::InvalidHandle { .. })));
    assert!(matches!(dev.submit(StepId(5)), Err(DeviceError::InvalidHandle { .. })));
    dev.wait(0).unwrap();
    assert!(dev.wait(1).is_err(), "waiting on a value never submitted");
}

#[test]
fn import_copies_and_is_read_only() {
    let owner: Arc<Vec<u8>> = Arc::new((0..=255u8).collect());
    let bytes = HostBytes::new(owner.clone(), 16..80).unwrap();
    let mut dev = CpuDevice::new(1);
    let id = dev.import(bytes, BufferUse::Weight).unwrap();
    assert_ne!(dev.buffer_ptr(id).unwrap().as_ptr().cast_const(), owner[16..].as_ptr(), "a copy, not the map");
    assert_eq!(read(&mut dev, id, 64), owner[16..80].to_vec());
    assert!(dev.copy_in(id, 0, &[1]).is_err(), "imported buffers are read-only");
    let dst = dev.alloc(64, BufferUse::Scratch).unwrap();
    let copy =
        |src, dst| StepOp::Copy { src: Arg { buffer: src, offset: 0 }, dst: Arg { buffer: dst, offset: 0 }, len: 64 };
    assert!(dev.link_step(&[copy(dst, id)]).is_err());
    let step = dev.link_step(&[copy(id, dst)]).unwrap();
    dev.submit(step).unwrap();
    assert_eq!(read(&mut dev, dst, 64), owner[16..80].to_vec());
}

#[test]
fn link_step_validates_dispatches() {
    let code = cc(VADD, MODELS[0]);
    let mut dev = CpuDevice::new(2);
    let p = dev.load_program(&spec("vadd", &code, 4)).unwrap();
    let b = dev.alloc(16, BufferUse::Scratch).unwrap();
    assert!(matches!(dev.link_step(&[dispatch(p, &[b, b, b], 1)]), Err(DeviceError::Program { .. })));
    assert!(dev.link_step(&[dispatch(p, &[b; 4], 0)]).is_err(), "zero parts");
    assert!(dev.link_step(&[dispatch(ProgramId(7), &[b; 4], 1)]).is_err());
    let mut op = dispatch(p, &[b; 4], 1);
    if let StepOp::Dispatch { args, .. } = &mut op {
        args[1].offset = 17;
    }
    assert!(matches!(dev.link_step(&[op]), Err(DeviceError::OutOfBounds { .. })));
    let oversized = StepOp::Copy { src: Arg { buffer: b, offset: 8 }, dst: Arg { buffer: b, offset: 0 }, len: 9 };
    assert!(dev.link_step(&[oversized]).is_err());
    // A failed link pins nothing.
    dev.free(b).unwrap();
    let wrong_format = ProgramSpec { format: ProgramFormat::OpenClSource, ..spec("vadd", &code, 4) };
    assert!(matches!(dev.load_program(&wrong_format), Err(DeviceError::Program { .. })));
}

#[test]
fn device_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<CpuDevice>();
    let dev = CpuDevice::new(2);
    std::thread::spawn(move || drop(dev)).join().unwrap();
}
