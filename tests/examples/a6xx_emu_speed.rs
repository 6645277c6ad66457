//! The a6xx emulator's load per model: compiles each model test with `--target qcom --qcom-compiler ir3` (plain, and
//! `--image --float16 --nolocals`), steps it on the fake KGSL whose dispatches run on the emulator, and prints the
//! emulated a6xx instructions per step (summed over fibers) and the emulator's speed in instructions per second.
//!
//! `cargo run -p pilot-tests --example a6xx_emu_speed [-- STEPS [THREADS]]` (BENCHMARKS.md; the dev profile builds
//! the emulator at opt-level 2).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::{Artifact, Backend, Session, Target};
use pilot_qcom::fake::FakeKgsl;
use pilot_qcom::fake_emu::EmuExecutor;
use pilot_tests::models::{seeded_inputs, test_models};

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args().nth(i).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("usage: a6xx_emu_speed [STEPS [THREADS]]");
                std::process::exit(2)
            })
        })
    };
    let (steps, threads) = (arg(1, 3), arg(2, 1));
    println!("| model | mode | kernels | a6xx instructions per step | instructions/s ({threads} thread(s)) |");
    println!("|---|---|---:|---:|---:|");
    for (model, shapes) in [
        ("vision", &[][..]),
        ("policy", &[][..]),
        ("dmonitoring", &[][..]),
        ("exporter", &[("x", &[2usize, 3, 8, 12][..])][..]),
    ] {
        for ihn in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
            (o.target.image, o.target.float16, o.target.nolocals) = (ihn, ihn, ihn);
            o.cl.qcom_compiler = QcomCompiler::Ir3;
            o.shapes = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>();
            let art = dir.path().join("m.pkl");
            let report = pilot_compiler::compile(&test_models().join(format!("{model}.onnx")), &art, &o, &|_| {})
                .unwrap_or_else(|e| panic!("{model}: {e}"));
            let emu = EmuExecutor::new().with_threads(threads);
            let counters = emu.counters();
            let fake = FakeKgsl::new().with_executor(Box::new(emu));
            let device = pilot_qcom::device::QcomDevice::with_file(Box::new(fake), "fake-kgsl").unwrap();
            let mut session = Session::new(Artifact::open(&art).unwrap(), Box::new(device)).unwrap();
            let (arrays, _) = seeded_inputs(&session, dir.path());
            let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
            session.step(&refs).unwrap();
            let before = counters.instructions.load(Ordering::Relaxed);
            let t = Instant::now();
            for _ in 0..steps {
                session.step(&refs).unwrap();
            }
            let secs = t.elapsed().as_secs_f64();
            let per_step = (counters.instructions.load(Ordering::Relaxed) - before) / steps as u64;
            let mode = if ihn { "--image --float16 --nolocals" } else { "plain" };
            println!(
                "| {model} | {mode} | {} | {per_step} | {:.2} M |",
                report.kernels,
                per_step as f64 * steps as f64 / secs / 1e6
            );
        }
    }
}
