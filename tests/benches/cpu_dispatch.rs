//! The CPU device's own costs: one `submit` of a single empty dispatch (1, 2 and 4 worker threads), and 1- against
//! 2-thread time of a compute-bound kernel (`busy`) and a memory-bound one (`vadd`) at several sizes, which is
//! where splitting a dispatch over threads starts to pay.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pilot_core::cpu::CpuDevice;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};

const NOP: &str = "#include <stdint.h>\nvoid nop(void *const *a, uint32_t p, uint32_t n) {}\n";

/// args: iterations in all (uint32), out (float[64]).
const BUSY: &str = r#"
#include <stdint.h>
void busy(void *const *args, uint32_t part, uint32_t nparts) {
    uint32_t n = *(const uint32_t *)args[0];
    float *out = args[1];
    float x = part + 1, y = 1.0f;
    for (uint32_t i = (uint64_t)n * part / nparts; i < (uint64_t)n * (part + 1) / nparts; i++) {
        __asm__ volatile("" : "+x"(x));
        y = y * 0.999f + x;
    }
    out[part % 64] = y;
}
"#;

/// args: a, b, c (float[n]), n (uint32).
const VADD: &str = r#"
#include <stdint.h>
void vadd(void *const *args, uint32_t part, uint32_t nparts) {
    const float *a = args[0], *b = args[1];
    float *c = args[2];
    uint32_t n = *(const uint32_t *)args[3];
    for (uint32_t i = (uint64_t)n * part / nparts; i < (uint64_t)n * (part + 1) / nparts; i++) c[i] = a[i] + b[i];
}
"#;

fn spec<'a>(name: &'a str, code: &'a [u8], arg_count: usize) -> ProgramSpec<'a> {
    ProgramSpec { name, format: ProgramFormat::Elf, code, arg_count, amdgpu: None, ir3: None }
}

fn dispatch(program: pilot_core::device::ProgramId, buffers: &[BufferId], parts: u32) -> StepOp {
    StepOp::Dispatch {
        program,
        args: buffers.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect(),
        global: [parts, 1, 1],
        local: [1, 1, 1],
    }
}

fn submit_overhead(c: &mut Criterion) {
    let code = pilot_tests::cc_object(NOP);
    let mut g = c.benchmark_group("cpu_submit_one_empty_dispatch");
    for threads in [1usize, 2, 4] {
        let mut dev = CpuDevice::new(threads);
        let p = dev.load_program(&spec("nop", &code, 0)).unwrap();
        let step = dev.link_step(&[dispatch(p, &[], threads as u32)]).unwrap();
        g.bench_function(BenchmarkId::from_parameter(format!("{threads}_threads")), |b| {
            b.iter(|| dev.submit(step).unwrap())
        });
        dev.synchronize().unwrap();
    }
    g.finish();
}

fn parallel_speedup(c: &mut Criterion) {
    let (busy, vadd) = (pilot_tests::cc_object(BUSY), pilot_tests::cc_object(VADD));
    let kernels: [(&str, &[u8], usize, [u32; 4]); 2] =
        [("busy", &busy, 2, [2_000, 10_000, 40_000, 200_000]), ("vadd", &vadd, 4, [4_000, 16_000, 64_000, 256_000])];
    for (name, code, args, sizes) in kernels {
        let mut g = c.benchmark_group(format!("cpu_parallel_{name}"));
        for n in sizes {
            for threads in [1usize, 2] {
                let mut dev = CpuDevice::new(threads);
                let p = dev.load_program(&spec(name, code, args)).unwrap();
                let ids: Vec<BufferId> = if args == 2 {
                    vec![dev.alloc(4, BufferUse::Scratch).unwrap(), dev.alloc(256, BufferUse::Scratch).unwrap()]
                } else {
                    let size = n as usize * 4;
                    [size, size, size, 4].iter().map(|&s| dev.alloc(s, BufferUse::Scratch).unwrap()).collect()
                };
                dev.copy_in(ids[if args == 2 { 0 } else { 3 }], 0, &n.to_le_bytes()).unwrap();
                let step = dev.link_step(&[dispatch(p, &ids, 1 << 20)]).unwrap();
                g.bench_function(BenchmarkId::new(format!("{threads}_threads"), n), |b| {
                    b.iter(|| {
                        let done = dev.submit(step).unwrap();
                        dev.wait(done).unwrap();
                    })
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, submit_overhead, parallel_speedup);
criterion_main!(benches);
