//! The runtime's guards from the command line: signed artifacts with a trusted key, and bounds on what
//! a command line can ask of the machine. Each refusal is one line and exit 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pilot_tests::demo;

fn pilot(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pilot"));
    cmd.args(args)
        .env_remove("PILOT_TRUSTED_KEY")
        .env_remove("ASSERT_MIN_STEP_TIME")
        .env_remove("ASSERT_MIN_LOAD_TIME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("pilot runs")
}

/// Exit code and stderr, asserting that an exit 2 came with exactly one line.
fn outcome(o: &Output) -> (i32, String) {
    let code = o.status.code().expect("exited, not killed");
    let err = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    if code == 2 {
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    (code, err)
}

fn demo_artifact(dir: &Path) -> PathBuf {
    let path = dir.join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_trusted_key_admits_only_artifacts_its_owner_signed() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    let (secret, public) = (dir.path().join("owner.key"), dir.path().join("owner.pub"));
    assert_eq!(outcome(&pilot(&["keygen", "--secret", s(&secret), "--public", s(&public)], &[])).0, 0);
    let (code, err) = outcome(&pilot(&["keygen", "--secret", s(&secret), "--public", s(&public)], &[]));
    assert_eq!(code, 2, "an existing secret key is never overwritten: {err}");
    let (other_secret, other_public) = (dir.path().join("other.key"), dir.path().join("other.pub"));
    assert_eq!(outcome(&pilot(&["keygen", "--secret", s(&other_secret), "--public", s(&other_public)], &[])).0, 0);

    // Unsigned: loads without a key, refused with one.
    assert_eq!(outcome(&pilot(&["run", s(&art), "--steps", "1"], &[])).0, 0);
    for cmd in ["run", "load"] {
        let (code, err) = outcome(&pilot(&[cmd, s(&art), "--trusted-key", s(&public)], &[]));
        assert_eq!(
            (code, err.as_str()),
            (2, "pilot: error: signature: the artifact is not signed, and a trusted key is set")
        );
    }

    let signed = dir.path().join("signed.pkl");
    assert_eq!(outcome(&pilot(&["sign", s(&art), "--key", s(&secret), "-o", s(&signed)], &[])).0, 0);
    let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions());
    assert_eq!(mode(&signed), mode(&art), "the signed artifact keeps the artifact's permissions");
    assert_eq!(mode(&secret) & 0o777, 0o600, "the secret key is private");
    let (code, err) = outcome(&pilot(&["sign", s(&signed), "--key", s(&secret)], &[]));
    assert_eq!((code, err.as_str()), (2, &*format!("pilot: error: {}: already signed", signed.display())));
    for cmd in ["run", "load"] {
        assert_eq!(outcome(&pilot(&[cmd, s(&signed), "--trusted-key", s(&public)], &[])).0, 0, "{cmd}");
        let (code, err) = outcome(&pilot(&[cmd, s(&signed)], &[("PILOT_TRUSTED_KEY", s(&other_public))]));
        assert_eq!(
            (code, err.as_str()),
            (2, "pilot: error: signature: the artifact's signature does not match the trusted key"),
            "{cmd}"
        );
    }
    // A signed artifact still loads where no key is set.
    assert_eq!(outcome(&pilot(&["load", s(&signed), "--times", "1", "--verify"], &[])).0, 0);
    // Not a key file.
    let (code, err) = outcome(&pilot(&["run", s(&signed), "--trusted-key", s(&art)], &[]));
    assert_eq!(code, 2, "{err}");
    assert!(err.ends_with("a public key file holds 64 hex digits"), "{err}");
}

#[test]
fn thread_counts_beyond_reason_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    for n in ["0", "5000"] {
        let (code, err) = outcome(&pilot(&["run", s(&art), "--steps", "1", "--threads", n], &[]));
        assert_eq!((code, err.as_str()), (2, &*format!("pilot: error: --threads must be 1 .. 1024, got {n}")));
    }
    assert_eq!(outcome(&pilot(&["run", s(&art), "--steps", "1", "--threads", "64"], &[])).0, 0);
}
