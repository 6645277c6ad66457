//! Per-step runtime overhead of a trivial artifact (one 4-byte input, one tiny kernel, one output):
//! copy in, submit, wait, copy out. On the NULL backend this is the session's own cost.

use criterion::{criterion_group, criterion_main, Criterion};
use pilot_core::cpu::CpuDevice;
use pilot_core::null::NullDevice;
use pilot_core::{Artifact, Device, Session};
use pilot_tests::demo;

fn step(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    let input = vec![0u8; demo::WIDTH * 4];
    let mut g = c.benchmark_group("step_overhead");
    type MakeDevice = fn() -> Box<dyn Device>;
    let devices: [(&str, MakeDevice); 3] = [
        ("null", || Box::new(NullDevice::new(std::env::consts::ARCH))),
        ("cpu_1_thread", || Box::new(CpuDevice::new(1))),
        ("cpu_2_threads", || Box::new(CpuDevice::new(2))),
    ];
    for (name, make) in devices {
        let mut s = Session::new(Artifact::open(&path).unwrap(), make()).unwrap();
        g.bench_function(name, |b| b.iter(|| s.step(&[&input]).unwrap()));
    }
    g.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
