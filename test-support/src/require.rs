//! What a test needs from outside the repository (clang-19, llvm-objdump-19, the venv, an OpenCL platform, the AMD
//! firmware, qemu) and what happens when it is missing: one switch, `PILOT_REQUIRE=1` (scripts/test.sh sets it), makes
//! a missing tool a test failure naming it and the setup step; without it the test skips, saying so on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The switch: with `PILOT_REQUIRE=1` a missing tool fails the test instead of skipping it.
pub const SWITCH: &str = "PILOT_REQUIRE";

/// Whether [`SWITCH`] is set to `1`.
pub fn required() -> bool {
    std::env::var(SWITCH).as_deref() == Ok("1")
}

/// The repository's root (the folder above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("test-support lives in the repository").to_path_buf()
}

/// `what` is missing and `setup` gets it: panics with both under `PILOT_REQUIRE=1`, else prints a skip note.
/// The caller returns (skips) after this call.
#[track_caller]
pub fn missing(what: &str, setup: &str) {
    if required() {
        panic!("{what} is missing ({SWITCH}=1 makes this a failure): {setup}");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of a passing test, and a skip must
    // show in the plain `cargo test` output.
    use std::io::Write;
    let note = format!("skipping: {what} is missing ({setup}; {SWITCH}=1 makes this a failure)\n");
    let _ = std::io::stderr().lock().write_all(note.as_bytes());
}

/// `found`; when it is `None`, `what` is [`missing`] first.
#[track_caller]
pub fn or_missing<T>(found: Option<T>, what: &str, setup: &str) -> Option<T> {
    if found.is_none() {
        missing(what, setup);
    }
    found
}

/// The setup step for tools `scripts/setup.sh` installs.
pub const SETUP: &str = "run scripts/setup.sh";

/// Whether `program --version` runs and succeeds.
pub fn runs(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The first of `candidates` that runs (`--version`), else [`missing`] and `None`.
#[track_caller]
pub fn tool(candidates: &[&'static str]) -> Option<&'static str> {
    or_missing(candidates.iter().copied().find(|p| runs(p)), &candidates.join(" or "), SETUP)
}

/// clang-19 (the compiler of the usb+amd and CPU code the tests build), else [`missing`] and `None`.
#[track_caller]
pub fn clang_19() -> Option<&'static str> {
    tool(&["clang-19"])
}

/// The Python of the repository's venv (numpy, onnx, onnxruntime, tinygrad 0.14.0): `$PILOT_PYTHON`, else
/// `.venv/bin/python` in the repository; when that file does not exist, [`missing`] and `None`.
#[track_caller]
pub fn venv_python() -> Option<PathBuf> {
    let python = match std::env::var_os("PILOT_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join(".venv/bin/python"),
    };
    let what = format!("the venv's python ({})", python.display());
    or_missing(python.is_file().then_some(python), &what, "run scripts/setup.sh or set PILOT_PYTHON")
}

/// [`venv_python`] for a test with nothing to run without it (the model generators): missing is a failure, switch
/// or not.
#[track_caller]
pub fn venv_python_or_fail() -> PathBuf {
    let python = match std::env::var_os("PILOT_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join(".venv/bin/python"),
    };
    assert!(
        python.is_file(),
        "the venv's python ({}) is missing: run scripts/setup.sh or set PILOT_PYTHON",
        python.display()
    );
    python
}

/// The OpenCL platform (PoCL in CI) could not be opened for `reason`: [`missing`].
#[track_caller]
pub fn opencl_missing(reason: impl std::fmt::Display) {
    missing(
        &format!("an OpenCL platform ({reason})"),
        "run scripts/setup.sh (it installs pocl-opencl-icd and ocl-icd-libopencl1)",
    );
}

/// The AMD firmware folder the tests boot the simulated GPU from: `PILOT_AMD_FIRMWARE`, else the one
/// `scripts/setup.sh` fetches (`target/amd-firmware/root/usr/lib/firmware/amdgpu`); when it is absent,
/// [`missing`] and `None`.
#[track_caller]
pub fn amd_firmware_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("PILOT_AMD_FIRMWARE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/amd-firmware/root/usr/lib/firmware/amdgpu"));
    let what = format!("the AMD firmware ({})", dir.display());
    or_missing(
        dir.join("psp_13_0_0_sos.bin").is_file().then_some(dir),
        &what,
        "run scripts/setup.sh or set PILOT_AMD_FIRMWARE",
    )
}

#[cfg(test)]
mod tests {
    // One test, since it sets the process's environment.
    #[test]
    fn the_switch_turns_a_skip_into_a_failure() {
        std::env::remove_var(super::SWITCH);
        assert!(super::tool(&["pilot-no-such-tool"]).is_none(), "skips without the switch");
        std::env::set_var(super::SWITCH, "1");
        let failed = std::panic::catch_unwind(|| super::tool(&["pilot-no-such-tool"])).unwrap_err();
        let msg = failed.downcast_ref::<String>().expect("a formatted panic message");
        assert!(msg.contains("pilot-no-such-tool is missing") && msg.contains("scripts/setup.sh"), "{msg}");
        std::env::set_var("PILOT_PYTHON", "/nonexistent/python");
        assert!(std::panic::catch_unwind(super::venv_python).is_err(), "PILOT_PYTHON naming no file fails");
        std::env::remove_var(super::SWITCH);
        std::env::remove_var("PILOT_PYTHON");
    }
}
