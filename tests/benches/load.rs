//! Load time of a 100 MB artifact: mmap, container, the integrity check (xxh3 of every record, always
//! on), pickle, schema, verification, and a session on the CPU backend (weights imported zero-copy);
//! the last case adds the deep check of `pilot load --verify` (every buffer's own checksum).

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use pilot_core::artifact::{
    ArtifactWriter, BufferSpec, Manifest, Metadata, ParamKind, ParamSpec, Placement, ProgramEntry, Target, TensorSpec,
};
use pilot_core::cpu::CpuDevice;
use pilot_core::device::{Arg, BufferId, BufferUse, ProgramFormat, ProgramId, StepOp};
use pilot_core::{Artifact, DType, Session};

const KERNEL: &str =
    "void touch(void *const *a, unsigned p, unsigned n) { ((float *)a[1])[0] = ((const float *)a[0])[0]; }";

/// 100 weight buffers of 1 MB each (≈100 MB, like a mid-size driving model) plus one tiny kernel.
fn write_big(path: &Path) {
    let weights: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 1 << 20]).collect();
    let code = pilot_tests::cc_object(KERNEL);
    let mut w = ArtifactWriter::new();
    let mut buffers = vec![
        BufferSpec {
            size: 4,
            dtype: DType::F32,
            kind: BufferUse::Input,
            placement: Placement::Device,
            blob: None,
            checksum: None,
            image: None,
        },
        BufferSpec {
            size: 4,
            dtype: DType::F32,
            kind: BufferUse::Output,
            placement: Placement::Device,
            blob: None,
            checksum: None,
            image: None,
        },
    ];
    for data in &weights {
        let blob = w.add_blob(data);
        buffers.push(BufferSpec {
            size: data.len(),
            dtype: DType::F32,
            kind: BufferUse::Weight,
            placement: Placement::Device,
            blob: Some(blob),
            checksum: Some(pilot_core::artifact::checksum(data)),
            image: None,
        });
    }
    let code_blob = w.add_blob(&code);
    let t = |name: &str, buffer| TensorSpec {
        name: name.into(),
        shape: vec![1],
        dtype: DType::F32,
        buffer,
        slices: vec![],
    };
    let mut m = Manifest {
        target: Target::default_for(pilot_core::Backend::Cpu).expect("a CPU pilot compiles for"),
        inputs: vec![t("x", 0)],
        outputs: vec![t("y", 1)],
        buffers,
        programs: vec![ProgramEntry {
            name: "touch".into(),
            format: ProgramFormat::Elf,
            blob: code_blob,
            args: 2,
            amdgpu: None,
            ir3: None,
            params: [false, true]
                .map(|writes| ParamSpec { dtype: DType::F32, writes, kind: ParamKind::Buffer { bytes: 4 } })
                .to_vec(),
            global: [1, 1, 1],
            local: [1, 1, 1],
        }],
        step: vec![StepOp::Dispatch {
            program: ProgramId(0),
            args: vec![Arg { buffer: BufferId(0), offset: 0 }, Arg { buffer: BufferId(1), offset: 0 }],
            global: [1, 1, 1],
            local: [1, 1, 1],
        }],
        metadata: Metadata::default(),
        blob_count: 0,
        pads: vec![],
    };
    w.write(path, &mut m).unwrap();
}

fn load(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.pkl");
    write_big(&path);
    assert!(std::fs::metadata(&path).unwrap().len() > 100_000_000);
    let mut g = c.benchmark_group("load_100MB");
    g.sample_size(20);
    g.bench_function("open_verify_structure", |b| b.iter(|| Artifact::open(&path).unwrap()));
    g.bench_function("open_and_session_cpu", |b| {
        b.iter(|| Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(1))).unwrap())
    });
    g.bench_function("open_checksums_session_cpu", |b| {
        b.iter(|| {
            let a = Artifact::open(&path).unwrap();
            a.verify_checksums().unwrap();
            Session::new(a, Box::new(CpuDevice::new(1))).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
