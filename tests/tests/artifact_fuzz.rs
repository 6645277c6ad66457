//! Random mutations of a valid artifact never panic: the loader returns an error or a verified
//! artifact, and a verified artifact loads and steps on the NULL backend without panicking.
//! `PROPTEST_CASES` sets the number of cases (CI runs thousands).

use std::sync::Arc;

use pilot_core::null::NullDevice;
use pilot_core::{Artifact, Session};
use proptest::prelude::*;

fn valid() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pkl");
        // The object need not be valid code: the NULL backend never runs it.
        pilot_tests::demo::write(&path, b"\x7fELF not really", "cpu").unwrap();
        std::fs::read(path).unwrap()
    })
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
    fn mutated_artifacts_never_panic(mutations in proptest::collection::vec(mutation(), 1..4)) {
        let mut bytes = valid().to_vec();
        for m in &mutations {
            if bytes.is_empty() { break; }
            apply(&mut bytes, m);
        }
        if let Ok(a) = Artifact::from_bytes(Arc::new(bytes)) {
            let _ = a.verify_checksums();
            let inputs: Vec<Vec<u8>> = a.manifest.inputs.iter().map(|i| vec![0; i.nbytes()]).collect();
            if let Ok(mut s) = Session::new(a, Box::new(NullDevice::new(std::env::consts::ARCH))) {
                let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
                let _ = s.step(&refs);
            }
        }
    }
}

#[test]
fn the_unmutated_artifact_loads() {
    assert!(Artifact::from_bytes(Arc::new(valid().to_vec())).is_ok());
}
