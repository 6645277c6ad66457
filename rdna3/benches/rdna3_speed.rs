//! Emulation speed of the RDNA3 emulator on a typical kernel (a 256x256 f32 matmul built by clang-19), on one
//! thread and on all of them, in wave instructions per second. A bench binary, not a test: it only measures (the
//! result is still checked against Rust, so a fast wrong answer cannot report a speed). Run it optimized:
//! `cargo bench -p pilot-rdna3 --bench rdna3_speed`.

#[path = "../tests/rdna3_support/mod.rs"]
mod rdna3_support;

use std::time::Instant;

use rdna3_support::{f32_bytes, lcg, Arg, Device};

const N: usize = 256;

fn floats(seed: u32, n: usize) -> Vec<f32> {
    lcg(seed, n).into_iter().map(|x| -1.0 + 2.0 * (x >> 8) as f32 / (1u32 << 24) as f32).collect()
}

/// The `matmul` kernel of `rdna3_support::MATH`: C = leaky_relu(A B).
fn reference(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; N * N];
    for r in 0..N {
        for col in 0..N {
            let acc = (0..N).fold(0.0f32, |acc, k| a[r * N + k].mul_add(b[k * N + col], acc));
            c[r * N + col] = if acc > 0.0 { acc } else { 0.1 * acc };
        }
    }
    c
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench` absent: nothing to measure there.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let (_, src, flags) = rdna3_support::SOURCES.iter().find(|(stem, _, _)| *stem == "math").expect("math kernels");
    let co = rdna3_support::build_with("math", src, flags)
        .expect("clang-19 is needed to build the kernel: run scripts/setup.sh");
    let (a, b) = (floats(16, N * N), floats(17, N * N));
    let want = reference(&a, &b);
    let grid = [(N / 16) as u32, (N / 16) as u32, 1];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, threads] {
        let mut dev = Device::new();
        let (pa, pb, pc) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)), dev.zeros(N * N * 4));
        let args = [Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::U32(N as u32)];
        let start = Instant::now();
        let stats = if threads == 1 {
            dev.run(&co, "matmul", grid, [16, 16, 1], &args)
        } else {
            dev.run_parallel(&co, "matmul", grid, [16, 16, 1], &args, threads)
        };
        let secs = start.elapsed().as_secs_f64();
        assert!(dev.f32s(pc, N * N) == want, "the emulated matmul differs from Rust's");
        println!(
            "matmul {N}x{N}, {threads} thread(s): {} wave instructions in {secs:.3} s: {:.1} M wave-instructions/s",
            stats.instructions,
            stats.instructions as f64 / secs / 1e6
        );
    }
}
