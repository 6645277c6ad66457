//! Artifact round trips and the meaning checks of verification.

use std::sync::Arc;

use super::pickle::{self, Value};
use super::schema::{Manifest, Metadata, Placement, ProgramEntry, Target, TensorSpec};
use super::{Artifact, ArtifactError, ArtifactWriter, BufferSpec};
use crate::device::{Arg, BufferId, BufferUse, ProgramFormat, ProgramId, StepOp};
use crate::target::{Arch, Backend};
use crate::DType;

fn buf(size: usize, kind: BufferUse, blob: Option<usize>) -> BufferSpec {
    BufferSpec { size, dtype: DType::F32, kind, placement: Placement::Device, blob, checksum: None, image: None }
}

fn arg(buffer: u32, offset: u64) -> Arg {
    Arg { buffer: BufferId(buffer), offset }
}

/// A manifest using records 1 (weights, 64 bytes) and 3 (code).
fn manifest() -> Manifest {
    Manifest {
        target: Target { backend: Backend::Cpu, arch: Arch::X86_64, image: false, float16: false, nolocals: false },
        inputs: vec![TensorSpec { name: "x".into(), shape: vec![1, 4], dtype: DType::F32, buffer: 0, slices: vec![] }],
        outputs: vec![TensorSpec {
            name: "y".into(),
            shape: vec![4],
            dtype: DType::F32,
            buffer: 2,
            slices: vec![("all".into(), 0, 4)],
        }],
        buffers: vec![
            buf(16, BufferUse::Input, None),
            buf(64, BufferUse::Weight, Some(1)),
            buf(16, BufferUse::Output, None),
        ],
        programs: vec![ProgramEntry { name: "k".into(), format: ProgramFormat::Elf, blob: 3, args: 3, amdgpu: None }],
        step: vec![
            StepOp::Dispatch {
                program: ProgramId(0),
                args: vec![arg(0, 0), arg(1, 0), arg(2, 0)],
                global: [4, 1, 1],
                local: [1, 1, 1],
            },
            StepOp::Copy { src: arg(1, 0), dst: arg(2, 0), len: 16 },
        ],
        metadata: Metadata { compiler: "test".into(), model_hash: "h".into(), props: vec![("k".into(), "v".into())] },
        blob_count: 0,
        pads: vec![],
    }
}

fn write(m: &mut Manifest, weights: &[u8], code: &[u8]) -> Result<Vec<u8>, ArtifactError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.pkl");
    let mut w = ArtifactWriter::new();
    assert_eq!(w.add_blob(&weights), 1);
    assert_eq!(w.add_blob(&code), 3);
    w.write(&path, m)?;
    Ok(std::fs::read(path).unwrap())
}

fn open(bytes: Vec<u8>) -> Result<Artifact, ArtifactError> {
    Artifact::from_bytes(Arc::new(bytes))
}

#[test]
fn round_trip_keeps_the_manifest_and_aligns_blobs() {
    let weights: Vec<u8> = (0..64).collect();
    let mut m = manifest();
    m.buffers[1].checksum = Some(super::checksum(&weights));
    let a = open(write(&mut m, &weights, b"\x7fELF...").unwrap()).unwrap();
    assert_eq!(a.manifest, m);
    assert_eq!(a.manifest.pads, vec![0, 2]);
    assert_eq!(a.blob(1), &weights[..]);
    assert_eq!(a.blob(3), b"\x7fELF...");
    assert_eq!(a.verify_checksums().unwrap(), 1);
}

#[test]
fn data_records_start_64_byte_aligned_in_the_file() {
    let mut m = manifest();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.pkl");
    let (weights, code) = (vec![7u8; 64], vec![1u8; 13]);
    let mut w = ArtifactWriter::new();
    w.add_blob(&weights);
    w.add_blob(&code);
    w.write(&path, &mut m).unwrap();
    let a = Artifact::open(&path).unwrap();
    for r in [1, 3] {
        assert_eq!(a.blob(r).as_ptr() as usize % 64, 0, "record {r}");
    }
}

#[test]
fn checksum_mismatch_is_reported() {
    let weights = vec![3u8; 64];
    let mut m = manifest();
    m.buffers[1].checksum = Some(super::checksum(&weights));
    let mut bytes = write(&mut m, &weights, b"code").unwrap();
    let at = bytes.iter().rposition(|&b| b == 3).unwrap();
    bytes[at] = 4;
    let err = open(bytes).unwrap().verify_checksums().unwrap_err();
    assert!(matches!(err, ArtifactError::Checksum { buffer: 1, .. }), "{err}");
}

/// The artifact of [`manifest`] with the pickle's string `from` replaced by `to` (same length).
fn with_string_replaced(from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut bytes = write(&mut manifest(), &[0u8; 64], b"code").unwrap();
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    bytes[at..at + to.len()].copy_from_slice(to);
    bytes
}

#[test]
fn unknown_backends_and_archs_are_refused_with_the_known_names() {
    let err = open(with_string_replaced(b"cpu", b"tpu")).unwrap_err().to_string();
    assert!(err.contains("target.backend: unknown backend `tpu` (known: cpu, null, cl, qcom, usb+amd)"), "{err}");
    let err = open(with_string_replaced(b"x86_64", b"x86_65")).unwrap_err().to_string();
    assert!(
        err.contains("target.arch: unknown arch `x86_65` (known: x86_64, aarch64, a630, gfx1100, gfx1201)"),
        "{err}"
    );
}

fn refused(change: impl FnOnce(&mut Manifest), needle: &str) {
    let mut m = manifest();
    change(&mut m);
    let err = write(&mut m, &[0u8; 64], b"code").unwrap_err().to_string();
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

#[test]
fn verification_refuses_inconsistent_manifests() {
    refused(|m| m.target.arch = Arch::A630, "target: unknown CPU architecture `a630` (x86_64, aarch64)");
    refused(|m| m.target.image = true, "target: --image, --float16 and --nolocals apply to the OpenCL target");
    refused(|m| m.buffers[1].size = 60, "record 1 holds 64 bytes, buffer size is 60");
    refused(|m| m.buffers[0].size = 12, "needs 16 bytes");
    refused(|m| m.inputs[0].buffer = 9, "buffer 9 out of range");
    refused(|m| m.inputs[0].buffer = 2, "is a output buffer");
    refused(|m| m.outputs[0].slices[0].2 = 5, "outside 4 elements");
    refused(|m| m.programs[0].blob = 1, "record 1 is already used by buffers[1].blob");
    refused(|m| m.programs[0].blob = 7, "record 7 out of range");
    refused(|m| m.buffers[1].blob = None, "weight without contents");
    refused(|m| m.buffers[0].blob = Some(3), "a input buffer has no initial contents");
    refused(|m| m.buffers[2].size = 18, "not a multiple of 4");
    refused(
        |m| {
            if let StepOp::Dispatch { args, .. } = &mut m.step[0] {
                args.pop();
            }
        },
        "2 arguments, program `k` takes 3",
    );
    refused(|m| m.step[1] = StepOp::Copy { src: arg(1, 56), dst: arg(2, 0), len: 16 }, "range 56+16 outside buffer 1");
    refused(|m| m.step[1] = StepOp::Copy { src: arg(2, 0), dst: arg(2, 4), len: 8 }, "overlap");
    refused(|m| m.step[1] = StepOp::Copy { src: arg(2, 0), dst: arg(1, 0), len: 8 }, "copy into a weight buffer");
    refused(|m| m.outputs.push(m.outputs[0].clone()), "duplicate name `y`");
    refused(
        |m| {
            if let StepOp::Dispatch { global, .. } = &mut m.step[0] {
                global[1] = 0;
            }
        },
        "zero-sized dispatch",
    );
}

#[test]
fn unreferenced_records_and_foreign_payloads_are_refused() {
    let bytes = write(&mut manifest(), &[0u8; 64], b"code").unwrap();
    // One more record than the payload lists.
    let mut extra = bytes.clone();
    extra.extend_from_slice(&3i64.to_le_bytes());
    extra.extend_from_slice(b"abc");
    assert!(open(extra).unwrap_err().to_string().contains("holds 5"), "extra record");
    // A valid pickle that is not a pilot artifact.
    let payload = pickle::write(&Value::List(vec![Value::Int(1)])).unwrap();
    let mut foreign = (payload.len() as i64).to_le_bytes().to_vec();
    foreign.extend_from_slice(&payload);
    let err = open(foreign).unwrap_err().to_string();
    assert!(err.contains("expected dict"), "{err}");
}

#[test]
fn amdgpu_programs_and_only_they_carry_a_dispatch_record() {
    let dispatch = super::AmdDispatch {
        descriptor: 0x800,
        code: 0x1900,
        rsrc: [0x60AF_0080, 0x9E, 0],
        kernarg_size: 24,
        kernarg_align: 8,
        arg_offsets: vec![0, 8, 16],
        user_sgprs: 15,
        vgprs: 5,
        sgprs: 18,
        lds: 0,
        scratch: 0,
        wave32: true,
    };
    let amd = |m: &mut Manifest| {
        m.target =
            Target { backend: Backend::UsbAmd, arch: Arch::Gfx1100, image: false, float16: false, nolocals: false };
        m.programs[0].format = ProgramFormat::AmdCodeObject;
    };
    let mut m = manifest();
    amd(&mut m);
    m.programs[0].amdgpu = Some(dispatch.clone());
    let a = open(write(&mut m, &[0u8; 64], b"\x7fELF").unwrap()).unwrap();
    assert_eq!(a.manifest.programs[0].amdgpu.as_ref(), Some(&dispatch));
    refused(amd, "programs[0].amdgpu: missing");
    refused(|m| m.programs[0].amdgpu = Some(dispatch.clone()), "programs[0].amdgpu: only amdgpu programs have one");
    refused(
        |m| {
            amd(m);
            m.programs[0].amdgpu = Some(super::AmdDispatch { arg_offsets: vec![0, 8], ..dispatch.clone() });
        },
        "programs[0].amdgpu.arg_offsets: 2 offsets for 3 arguments",
    );
}
