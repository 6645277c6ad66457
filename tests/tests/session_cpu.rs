//! A hand-built artifact (C kernel compiled by the test) loaded and stepped on the CPU backend, checked
//! against a Rust reference, including the features queue carried across steps on the device.

use pilot_core::cpu::CpuDevice;
use pilot_core::null::NullDevice;
use pilot_core::{Artifact, Session, SessionError};
use pilot_tests::demo;

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn build(backend: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), backend).unwrap();
    (dir, path)
}

fn desire(step: usize) -> Vec<f32> {
    (0..demo::WIDTH).map(|j| ((step * 7 + j) as f32 * 0.37).cos()).collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    for (g, r) in got.iter().zip(want) {
        assert!((g - r).abs() <= 1e-5 * r.abs().max(1.0), "{what}: got {got:?}, want {want:?}");
    }
}

fn run_and_check(threads: usize) {
    let (_dir, path) = build("cpu");
    let artifact = Artifact::open(&path).unwrap();
    assert_eq!(artifact.verify_checksums().unwrap(), 2);
    let mut session = Session::new(artifact, Box::new(CpuDevice::new(threads))).unwrap();
    let (w, b) = demo::weights();
    let mut features = vec![0f32; demo::QUEUE * demo::WIDTH];
    let mut previous = Vec::new();
    for step in 0..6 {
        let x = bytes(&desire(step));
        session.step(&[&x]).unwrap();
        let got = f32s(&session.outputs()[0]);
        let want = demo::reference_step(&desire(step), &mut features, &w, &b);
        assert_close(&got, &want, &format!("step {step}"));
        assert!(got.iter().any(|&v| v != 0.0), "step {step}: all-zero output proves nothing");
        assert_ne!(got, previous, "step {step}: output did not change");
        previous = got;
    }
    // The same input twice gives different outputs only because the state moved: reset brings it back.
    session.reset_state().unwrap();
    let x = bytes(&desire(0));
    session.step(&[&x]).unwrap();
    let mut fresh = vec![0f32; demo::QUEUE * demo::WIDTH];
    assert_close(&f32s(&session.outputs()[0]), &demo::reference_step(&desire(0), &mut fresh, &w, &b), "after reset");
}

#[test]
fn policy_matches_reference_single_thread() {
    run_and_check(1);
}

#[test]
fn policy_matches_reference_four_threads() {
    run_and_check(4);
}

#[test]
fn wrong_inputs_are_errors() {
    let (_dir, path) = build("cpu");
    let mut session = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(1))).unwrap();
    assert!(matches!(session.step(&[]), Err(SessionError::InputCount { expected: 1, found: 0 })));
    assert!(matches!(session.step(&[&[0u8; 3]]), Err(SessionError::InputSize { index: 0, expected: 32, found: 3 })));
}

#[test]
fn null_backend_loads_and_runs_nothing() {
    let (_dir, path) = build("cpu");
    let mut session = Session::new(Artifact::open(&path).unwrap(), Box::new(NullDevice::new("x86_64"))).unwrap();
    session.step(&[&bytes(&desire(0))]).unwrap();
    assert_eq!(session.outputs()[0], vec![0u8; 32]);
}

#[test]
fn target_mismatch_is_refused() {
    let (_dir, path) = build("null");
    let err = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(1))).err().unwrap();
    assert!(err.to_string().contains("targets `null:"), "{err}");
}

/// The contract for the artifact file after load: the model holds its own copy of everything a step reads, so a
/// file rewritten in place or truncated while the model is loaded changes nothing (it used to change the outputs
/// silently, or kill the process with SIGBUS).
#[test]
fn a_loaded_model_never_reads_the_artifact_file_again() {
    use std::io::{Seek, Write};
    let (_dir, path) = build("cpu");
    let mut session = Session::new(Artifact::open(&path).unwrap(), Box::new(CpuDevice::new(2))).unwrap();
    let (w, b) = demo::weights();
    let mut features = vec![0f32; demo::QUEUE * demo::WIDTH];
    let mut check = |session: &mut Session, step: usize, what: &str| {
        session.step(&[&bytes(&desire(step))]).unwrap();
        let want = demo::reference_step(&desire(step), &mut features, &w, &b);
        assert_close(&f32s(&session.outputs()[0]), &want, what);
    };
    check(&mut session, 0, "before any change");
    let len = std::fs::metadata(&path).unwrap().len();
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all(&vec![0x5a; len as usize]).unwrap();
    file.sync_all().unwrap();
    check(&mut session, 1, "after the file was rewritten in place");
    file.set_len(0).unwrap();
    file.rewind().unwrap();
    check(&mut session, 2, "after the file was truncated");
}
