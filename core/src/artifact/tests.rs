//! Artifact round trips and the meaning checks of verification.

use std::sync::Arc;

use super::pickle::{self, Value};
use super::schema::{Manifest, Metadata, ParamKind, ParamSpec, Placement, ProgramEntry, Target, TensorSpec};
use super::{Artifact, ArtifactError, ArtifactWriter, BufferSpec};
use crate::device::{Arg, BufferId, BufferUse, ImageChannel, ImageDesc, ProgramFormat, ProgramId, StepOp};
use crate::target::{Arch, Backend};
use crate::DType;

pub(super) fn buf(size: usize, kind: BufferUse, blob: Option<usize>) -> BufferSpec {
    BufferSpec { size, dtype: DType::F32, kind, placement: Placement::Device, blob, checksum: None, image: None }
}

pub(super) fn arg(buffer: u32, offset: u64) -> Arg {
    Arg { buffer: BufferId(buffer), offset }
}

fn plain(bytes: u64) -> ParamSpec {
    ParamSpec { dtype: DType::F32, writes: false, kind: ParamKind::Buffer { bytes } }
}

fn written(bytes: u64) -> ParamSpec {
    ParamSpec { writes: true, ..plain(bytes) }
}

/// A manifest using records 1 (weights, 64 bytes) and 3 (code, two kernels).
///
/// Buffers: 0 input (16 bytes), 1 weight (64), 2 output (16), 3 scratch (4), 4 a 2x2 float image,
/// 5 a byte arena (1024). Kernel `k` (dispatched on [4, 1, 1]) reads 16, 64 and writes 16 bytes;
/// kernel `img` (dispatched on [2, 2, 1] like an image kernel) reads the image and writes 16 bytes.
pub(super) fn manifest() -> Manifest {
    let mut image = buf(64, BufferUse::Scratch, None);
    image.image = Some(ImageDesc { width: 2, height: 2, pitch: 32, channel: ImageChannel::F32 });
    let mut arena = buf(1024, BufferUse::Scratch, None);
    arena.dtype = DType::U8;
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
            buf(4, BufferUse::Scratch, None),
            image,
            arena,
        ],
        programs: vec![
            ProgramEntry {
                name: "k".into(),
                format: ProgramFormat::Elf,
                blob: 3,
                args: 3,
                params: vec![plain(16), plain(64), written(16)],
                global: [4, 1, 1],
                local: [1, 1, 1],
                amdgpu: None,
                ir3: None,
            },
            ProgramEntry {
                name: "img".into(),
                format: ProgramFormat::Elf,
                blob: 3,
                args: 2,
                params: vec![
                    ParamSpec { dtype: DType::F32, writes: false, kind: ParamKind::Image { width: 2, height: 2 } },
                    written(16),
                ],
                global: [2, 2, 1],
                local: [0, 0, 0],
                amdgpu: None,
                ir3: None,
            },
        ],
        step: vec![
            StepOp::Dispatch {
                program: ProgramId(0),
                args: vec![arg(0, 0), arg(1, 0), arg(2, 0)],
                global: [4, 1, 1],
                local: [1, 1, 1],
            },
            StepOp::Copy { src: arg(1, 0), dst: arg(2, 0), len: 16 },
            StepOp::Dispatch {
                program: ProgramId(1),
                args: vec![arg(4, 0), arg(5, 512)],
                global: [2, 2, 1],
                local: [0, 0, 0],
            },
        ],
        metadata: Metadata {
            compiler: "test".into(),
            model_hash: "h".into(),
            props: vec![("k".into(), "v".into())],
            pinned: vec![],
        },
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
fn pinned_inputs_round_trip_and_are_absent_when_none() {
    let mut m = manifest();
    let plain = write(&mut m, &[0; 64], b"code").unwrap();
    assert!(!plain.windows(6).any(|w| w == b"pinned"), "no `pinned` key without pinned inputs");
    m.metadata.pinned = vec![super::PinnedInput {
        name: "shape".into(),
        shape: vec![2],
        dtype: crate::DType::I64,
        hash: "xxh3:0123456789abcdef".into(),
    }];
    let a = open(write(&mut m, &[0; 64], b"code").unwrap()).unwrap();
    assert_eq!(a.manifest.metadata.pinned, m.metadata.pinned);
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
fn buffer_checksum_mismatch_is_reported_by_the_deep_check() {
    // The compiler hashed other bytes than the writer streamed: the file is intact, the deep check
    // (`pilot load --verify`) is what notices.
    let weights = vec![3u8; 64];
    let mut m = manifest();
    m.buffers[1].checksum = Some(super::checksum(&[4u8; 64]));
    let a = open(write(&mut m, &weights, b"code").unwrap()).unwrap();
    let err = a.verify_checksums().unwrap_err();
    assert!(matches!(err, ArtifactError::Checksum { buffer: 1, .. }), "{err}");
}

#[test]
fn every_flipped_byte_is_refused_on_load() {
    let weights: Vec<u8> = (0..64).collect();
    let bytes = write(&mut manifest(), &weights, b"\x7fELF code").unwrap();
    let c = super::container::parse(&bytes).unwrap();
    assert_eq!(c.records.len(), 5);
    assert!(bytes[c.records[4].clone()].starts_with(&super::integrity::MAGIC));
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        let err = open(bad).expect_err(&format!("byte {at} flipped was accepted")).to_string();
        assert!(!err.contains('\n'), "{err}");
        // Damage inside the pickle or a record is named as such; a damaged length field may also
        // surface as a framing error.
        if c.pickle.contains(&at) {
            assert!(err.contains("checksum mismatch in the pickle"), "byte {at}: {err}");
        }
        for (k, r) in c.records[..4].iter().enumerate() {
            if r.contains(&at) {
                assert!(err.contains(&format!("checksum mismatch in record {k} ")), "byte {at}: {err}");
            }
        }
    }
}

#[test]
fn older_and_unsealed_payloads_are_refused() {
    let bytes = write(&mut manifest(), &[0u8; 64], b"code").unwrap();
    let c = super::container::parse(&bytes).unwrap();
    let records: Vec<&[u8]> = c.records.iter().map(|r| &bytes[r.clone()]).collect();
    let reframe = |payload: &Value, records: &[&[u8]]| {
        let pickle = pickle::write(payload).unwrap();
        let mut out = (pickle.len() as i64).to_le_bytes().to_vec();
        out.extend_from_slice(&pickle);
        for r in records {
            out.extend_from_slice(&(r.len() as i64).to_le_bytes());
            out.extend_from_slice(r);
        }
        out
    };
    let edit = |key: &str, value: Value| {
        let mut v = pickle::read(&bytes[c.pickle.clone()]).unwrap().value;
        let Value::Dict(entries) = &mut v else { unreachable!() };
        entries.iter_mut().find(|(k, _)| *k == Value::str(key)).unwrap().1 = value;
        v
    };
    // A version-1 payload (no integrity record) is named by its version.
    let err = open(reframe(&edit("version", Value::Int(1)), &records[..4])).unwrap_err().to_string();
    assert!(err.contains("version 1 is not supported (this build reads 2)"), "{err}");
    // A current payload whose integrity record was dropped or replaced.
    let mut junk = records.clone();
    junk[4] = &[b'x'; 56]; // the size of the table it replaces
    let err = open(reframe(&edit("version", Value::Int(2)), &junk)).unwrap_err().to_string();
    assert!(err.contains("no `pilotxx3` header"), "{err}");
    let err = open(reframe(&edit("integrity", Value::Int(3)), &records)).unwrap_err().to_string();
    assert!(err.contains("checksum mismatch in the pickle"), "{err}");
}

/// The artifact of [`manifest`] with the pickle's string `from` replaced by `to` (same length).
/// Resealed, so that the edit reaches the schema instead of failing the integrity check.
fn with_string_replaced(from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut bytes = write(&mut manifest(), &[0u8; 64], b"code").unwrap();
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    bytes[at..at + to.len()].copy_from_slice(to);
    reseal(&mut bytes);
    bytes
}

/// Recomputes the integrity record of `bytes` after an edit of the same length.
fn reseal(bytes: &mut [u8]) {
    let c = super::container::parse(bytes).unwrap();
    let (last, covered) = c.records.split_last().unwrap();
    let hashes: Vec<u64> = covered.iter().map(|r| super::integrity::hash(&bytes[r.clone()])).collect();
    let table = super::integrity::encode(super::integrity::hash(&bytes[c.pickle.clone()]), &hashes);
    bytes[last.clone()].copy_from_slice(&table);
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

#[test]
fn keys_the_schema_does_not_define_are_refused() {
    // A renamed key used to drop its value silently: `cjecksum` hid the buffer from `load --verify`.
    let err = open(with_string_replaced(b"checksum", b"cjecksum")).unwrap_err().to_string();
    assert!(err.contains("buffers[0].cjecksum: unknown key"), "{err}");
    let err = open(with_string_replaced(b"nolocals", b"nolocalz")).unwrap_err().to_string();
    assert!(err.contains("target.nolocalz: unknown key"), "{err}");
    let err = open(with_string_replaced(b"model_hash", b"model_hasp")).unwrap_err().to_string();
    assert!(err.contains("metadata.model_hasp: unknown key"), "{err}");
    let err = open(with_string_replaced(b"slices", b"slicez")).unwrap_err().to_string();
    assert!(err.contains("outputs[0].slicez: unknown key"), "{err}");
}

pub(super) fn refused(change: impl FnOnce(&mut Manifest), needle: &str) {
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
fn grids_that_wrap_in_32_bits_are_refused() {
    // 2^16 x 2^16 x 1 wraps a u32 product to zero: the dispatch used to run nothing and exit 0.
    let wraps = |m: &mut Manifest| {
        m.programs[0].global = [1 << 16, 1 << 16, 1];
        if let StepOp::Dispatch { global, .. } = &mut m.step[0] {
            *global = [1 << 16, 1 << 16, 1];
        }
    };
    refused(wraps, "programs[0].global: [65536, 65536, 1] is over 4294967295 work-items");
    refused(|m| m.programs[0].global = [u32::MAX; 3], "is over 4294967295 work-items");
    refused(
        |m| m.programs[0].local = [1024, 2, 1],
        "programs[0].local: [1024, 2, 1] is over 1024 work-items per group",
    );
    refused(|m| m.programs[0].local = [0, 1, 1], "zero-sized grid");
    refused(|m| m.programs[0].global = [4, 0, 1], "zero-sized grid");
}

#[test]
fn unreferenced_records_and_foreign_payloads_are_refused() {
    let bytes = write(&mut manifest(), &[0u8; 64], b"code").unwrap();
    // One more record than the payload lists.
    let mut extra = bytes.clone();
    extra.extend_from_slice(&3i64.to_le_bytes());
    extra.extend_from_slice(b"abc");
    assert!(open(extra).unwrap_err().to_string().contains("holds 6"), "extra record");
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
        // The programs share one code object, so they share its format.
        for p in &mut m.programs {
            p.format = ProgramFormat::AmdCodeObject;
        }
    };
    let mut m = manifest();
    amd(&mut m);
    m.programs[0].amdgpu = Some(dispatch.clone());
    m.programs[1].amdgpu = Some(super::AmdDispatch { arg_offsets: vec![0, 8], ..dispatch.clone() });
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

#[path = "tests_step.rs"]
mod step;
