//! Shared helpers for pilot's integration tests and the demo: compiling C kernels with the system
//! C compiler into the freestanding objects the CPU backend loads, building small artifacts by hand, and
//! decoding a QCOM step's capture with Mesa's `cffdump` ([`cffdump`]).

pub mod cffdump;
pub mod demo;
pub mod models;

use std::path::Path;
use std::process::Command;

use pilot_core::artifact::{container, integrity};

/// Compiles freestanding C `source` into a relocatable object for the host with `cc`
/// (or `$CC`). Panics with the compiler's output on failure: this is test scaffolding.
pub fn cc_object(source: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = dir.path().join("k.c");
    let o = dir.path().join("k.o");
    std::fs::write(&c, source).expect("write C source");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-c", "-O2", "-ffreestanding", "-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fPIC"])
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(out.status.success(), "{cc} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&o).expect("read object")
}

/// Runs `pilot`-independent Python (standard library only) and returns its stdout.
pub fn python(script: &str, args: &[&Path]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "python failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Recomputes the integrity record of artifact bytes in place, as someone who edits an artifact and
/// knows the format would, so that the edit reaches verification and the devices. Returns false (and
/// changes nothing) when the bytes do not frame as a container ending in an integrity record of the
/// right size.
pub fn reseal(bytes: &mut [u8]) -> bool {
    let Ok(c) = container::parse(bytes) else { return false };
    let Some((last, covered)) = c.records.split_last() else { return false };
    if !integrity::present(bytes, &c.records) || last.len() != 24 + 8 * covered.len() {
        return false;
    }
    let hashes: Vec<u64> = covered.iter().map(|r| integrity::hash(&bytes[r.clone()])).collect();
    let table = integrity::encode(integrity::hash(&bytes[c.pickle.clone()]), &hashes);
    bytes[last.clone()].copy_from_slice(&table);
    true
}
