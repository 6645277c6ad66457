//! Mutated artifacts never crash the runtime: loading returns an error or a verified artifact, and a
//! verified artifact loads and steps on the NULL and CPU backends without a panic or a signal.
//!
//! Most mutations are resealed (the integrity record recomputed, as a hostile user who knows the format
//! would), so that they reach the pickle reader, the schema, verification, the ELF loader and the
//! devices; the rest must be caught by the integrity check. A resealed artifact steps on the CPU only
//! while its code is the compiler's own: code changed and resealed is what a signature is for, not
//! verification. `PROPTEST_CASES` sets the number of cases (CI runs thousands). The crashes a hostile
//! user found by hand are the seeds below.

use std::sync::Arc;

use pilot_core::artifact::pickle::{self, Value};
use pilot_core::artifact::{container, ArtifactError};
use pilot_core::cpu::CpuDevice;
use pilot_core::null::NullDevice;
use pilot_core::{Artifact, Device, Session};
use proptest::prelude::*;

/// The demo artifact with real code for this machine, and that code.
fn valid() -> &'static (Vec<u8>, Vec<u8>) {
    static BYTES: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        let code = pilot_tests::cc_object(pilot_tests::demo::KERNEL);
        pilot_tests::demo::write(&path, &code, "cpu").unwrap();
        (std::fs::read(path).unwrap(), code)
    })
}

/// Zeroed inputs, or `None` when they would not fit in memory (a mutated shape).
fn inputs(a: &Artifact) -> Option<Vec<Vec<u8>>> {
    a.manifest
        .inputs
        .iter()
        .map(|i| {
            let mut v = Vec::new();
            v.try_reserve_exact(i.nbytes()).ok()?;
            v.resize(i.nbytes(), 0);
            Some(v)
        })
        .collect()
}

/// Loads `bytes`; if they verify, builds a session on the NULL device and steps it, then on the CPU
/// device (which loads and links the code) and steps it when the code is the compiler's own.
fn load_and_step(bytes: Vec<u8>) -> Result<(), ArtifactError> {
    let (_, code) = valid();
    let a = Artifact::from_bytes(Arc::new(bytes.clone()))?;
    let _ = a.verify_checksums();
    let Some(inputs) = inputs(&a) else { return Ok(()) };
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let own_code = a.manifest.programs.iter().all(|p| a.blob(p.blob) == &code[..]);
    let devices: [Box<dyn Device>; 2] =
        [Box::new(NullDevice::new(std::env::consts::ARCH)), Box::new(CpuDevice::new(2))];
    for (i, device) in devices.into_iter().enumerate() {
        let a = Artifact::from_bytes(Arc::new(bytes.clone()))?;
        if let Ok(mut s) = Session::new(a, device) {
            if i == 0 || own_code {
                let _ = s.step(&refs);
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    /// Overwrite 8 bytes with an extreme int64 (lengths are int64).
    Int64(usize, i64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..32).prop_map(|(i, n)| Mutation::Remove(i, n)),
        (any::<usize>(), prop_oneof![Just(i64::MIN), Just(-1), Just(i64::MAX), Just(1 << 40), any::<i64>()])
            .prop_map(|(i, v)| Mutation::Int64(i, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match m {
        Mutation::Set(i, b) => bytes[i % n] = *b,
        Mutation::Flip(i, bit) => bytes[i % n] ^= 1 << bit,
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::Insert(i, v) => {
            let at = i % (n + 1);
            bytes.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(i, len) => {
            let at = i % n;
            bytes.drain(at..(at + len).min(n));
        }
        Mutation::Int64(i, v) if n >= 8 => {
            let at = i % (n - 7);
            bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        Mutation::Int64(..) => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_artifacts_never_crash(mutations in proptest::collection::vec(mutation(), 1..4), reseal in 0u8..4) {
        let mut bytes = valid().0.clone();
        for m in &mutations {
            if bytes.is_empty() { break; }
            apply(&mut bytes, m);
        }
        let resealed = reseal != 0 && pilot_tests::reseal(&mut bytes);
        let changed = bytes != valid().0;
        let result = load_and_step(bytes);
        if !resealed && changed {
            prop_assert!(result.is_err(), "an unsealed change was accepted: {mutations:?}");
        }
    }
}

/// The demo artifact with its payload edited by `edit`, re-framed around the same records and resealed.
fn edited(edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let bytes = &valid().0;
    let c = container::parse(bytes).unwrap();
    let mut payload = pickle::read(&bytes[c.pickle.clone()]).unwrap().value;
    let Value::Dict(entries) = &mut payload else { panic!("the payload is a dict") };
    edit(entries);
    let pickle = pickle::write(&payload).unwrap();
    let mut out = (pickle.len() as i64).to_le_bytes().to_vec();
    out.extend_from_slice(&pickle);
    for r in &c.records {
        out.extend_from_slice(&(r.len() as i64).to_le_bytes());
        out.extend_from_slice(&bytes[r.clone()]);
    }
    assert!(pilot_tests::reseal(&mut out));
    out
}

fn get<'a>(entries: &'a mut [(Value, Value)], key: &str) -> &'a mut Value {
    &mut entries.iter_mut().find(|(k, _)| *k == Value::str(key)).unwrap_or_else(|| panic!("no `{key}`")).1
}

fn list(v: &mut Value) -> &mut Vec<Value> {
    match v {
        Value::List(items) | Value::Tuple(items) => items,
        other => panic!("expected a list, found {}", other.type_name()),
    }
}

fn dict(v: &mut Value) -> &mut Vec<(Value, Value)> {
    match v {
        Value::Dict(entries) => entries,
        other => panic!("expected a dict, found {}", other.type_name()),
    }
}

/// Edits the demo's only dispatch (args: desire, features, W, b, hidden).
fn dispatch(edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    edited(|e| edit(dict(&mut list(get(e, "step"))[0])))
}

fn set_arg(k: usize, buffer: i64, offset: i64) -> impl FnOnce(&mut Vec<(Value, Value)>) {
    move |d| list(get(d, "args"))[k] = Value::Tuple(vec![Value::Int(buffer), Value::Int(offset)])
}

#[test]
fn the_unmutated_and_resealed_artifacts_load_and_step() {
    load_and_step(valid().0.clone()).unwrap();
    load_and_step(edited(|_| {})).unwrap();
}

#[test]
fn hand_made_crashes_are_refused() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("offset exactly at the end of a buffer", dispatch(set_arg(0, 0, 32)), "past the end of buffer 0"),
        ("the 512-byte W pointed at the 32-byte weight b", dispatch(set_arg(2, 3, 0)), "past the end of buffer 3"),
        (
            "the output pointed at the 32-byte weight b",
            dispatch(set_arg(4, 3, 0)),
            "step[0].args[4]: `policy` writes here, buffer 3 is a weight buffer",
        ),
        (
            "two arguments swapped",
            dispatch(|d| list(get(d, "args")).swap(1, 2)),
            "step[0].args[2]: `policy` reaches 512 bytes from offset 0, past the end of buffer 1 (128 bytes)",
        ),
        (
            "doubled global size",
            dispatch(|d| *get(d, "global") = Value::List(vec![Value::Int(16), Value::Int(1), Value::Int(1)])),
            "step[0].global: [16, 1, 1], but program `policy` was compiled for [8, 1, 1]",
        ),
        ("global[1] 1 -> 6", dispatch(|d| list(get(d, "global"))[1] = Value::Int(6)), "was compiled for [8, 1, 1]"),
        (
            "one argument more",
            dispatch(|d| list(get(d, "args")).push(Value::Tuple(vec![Value::Int(0), Value::Int(0)]))),
            "6 arguments, program `policy` takes 5",
        ),
    ];
    for (name, bytes, needle) in cases {
        let err = Artifact::from_bytes(Arc::new(bytes)).expect_err(name).to_string();
        assert!(err.contains(needle), "{name}: expected `{needle}` in: {err}");
        assert!(!err.contains('\n'), "{name}: {err}");
    }
}
