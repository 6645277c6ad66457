//! `pilot` with `--target usb+amd` end to end: compile (the `amd` alias too), inspect shows the AMD
//! programs, run on the default device (the first USB bridge) says in one line that there is none (exit 2),
//! and bad requests (no --arch, an unknown GPU, no clang) are one line with exit 2 and write nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot")).args(args).output().expect("pilot runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn one_line_exit_2(o: &Output, what: &str) {
    assert_eq!(code(o), 2, "{what}: {}", stderr(o));
    assert_eq!(stderr(o).trim_end().lines().count(), 1, "{what}: {}", stderr(o));
}

/// The vision test model, generated once per test binary (both tests ask for it concurrently).
fn vision() -> PathBuf {
    static MODEL: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
            let dir = root.join("target/test-models");
            if !dir.join("vision.onnx").exists() {
                let st = Command::new(pilot_test_support::venv_python_or_fail())
                    .arg(root.join("scripts/make_models.py"))
                    .arg(&dir)
                    .output()
                    .unwrap();
                assert!(st.status.success(), "make_models.py: {}", String::from_utf8_lossy(&st.stderr));
            }
            dir.join("vision.onnx")
        })
        .clone()
}

#[test]
fn compile_inspect_and_run_an_amd_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let model = vision();
    let model = model.to_str().unwrap();
    for (target, arch) in [("usb+amd", "gfx1100"), ("amd", "gfx1201")] {
        let art = dir.path().join(format!("vision-{arch}.pkl"));
        let art = art.to_str().unwrap();
        let o = pilot(&["compile", model, "--target", target, "--arch", arch, "-o", art]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));

        let o = pilot(&["inspect", art]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let out = String::from_utf8(o.stdout).unwrap();
        assert!(out.contains(&format!("target    usb+amd:{arch}")), "{out}");
        assert!(out.contains(" kernels in 1 code object(s), wave32; at most "), "{out}");

        let o = pilot(&["run", art]);
        one_line_exit_2(&o, "run");
        assert!(stderr(&o).contains("no USB GPU bridge found"), "{}", stderr(&o));
        let o = pilot(&["load", "--device", "null", art]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
}

#[test]
fn bad_amd_requests_are_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pkl");
    let model = vision();
    let (model, o_arg) = (model.to_str().unwrap(), out.to_str().unwrap());
    let o = pilot(&["compile", model, "--target", "usb+amd", "-o", o_arg]);
    one_line_exit_2(&o, "no arch");
    assert!(stderr(&o).contains("--target usb+amd needs --arch (gfx1100, gfx1201)"), "{}", stderr(&o));
    let o = pilot(&["compile", model, "--target", "amd", "--arch", "gfx90a", "-o", o_arg]);
    one_line_exit_2(&o, "unknown GPU");
    assert!(stderr(&o).contains("unknown AMD architecture `gfx90a` (gfx1100, gfx1201)"), "{}", stderr(&o));
    let o =
        pilot(&["compile", model, "--target", "amd", "--arch", "gfx1100", "--cc", "/nonexistent/clang", "-o", o_arg]);
    one_line_exit_2(&o, "no clang");
    assert!(stderr(&o).contains("needs clang with the AMDGPU target"), "{}", stderr(&o));
    assert!(!out.exists(), "nothing is written on error");
}
