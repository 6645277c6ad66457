//! `pilot run --rd-capture FILE` end to end: the fake KGSL's first submission as Mesa's `.rd` file, which Mesa's
//! `cffdump` decodes; bad requests are one-line errors (exit 2) that write nothing.

use std::process::{Command, Output};

use pilot_tests::cffdump::decode;
use pilot_tests::models::test_models;

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot"))
        .args(args)
        .env_remove("ASSERT_MIN_STEP_TIME")
        .output()
        .expect("pilot runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_step_is_captured_and_decodes_in_cffdump() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join("dmonitoring.onnx");
    let art = dir.path().join("dm.pkl");
    let o = pilot(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "qcom",
        "--qcom-compiler",
        "fake",
        "-o",
        art.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rd = dir.path().join("dm.rd");
    let o = pilot(&["run", art.to_str().unwrap(), "--steps", "2", "--rd-capture", rd.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("the first step's submission"), "{}", stderr(&o));
    let bytes = std::fs::read(&rd).unwrap();
    let first: Vec<u32> = bytes[..12].chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(first, [13, 4, 630], "the file opens with RD_GPU_ID 630");
    let d = decode(&rd);
    d.assert_clean("dmonitoring");
    assert!(d.dispatches > 0 && d.load_state6 >= d.dispatches, "{} dispatches, {} loads", d.dispatches, d.load_state6);
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.starts_with('.')), "no temporary file is left: {names:?}");
}

/// An ir3 artifact on the fake KGSL: the runtime lays out and launches it, the capture decodes in cffdump with every
/// shader disassembled inline, and the step runs on the a6xx emulator (the default executor for ir3 programs). Asked
/// to run it on OpenCL instead (`PILOT_FAKE_EXEC=cl`), the fake refuses in one line (exit 2): a6xx code is never
/// handed to PoCL.
#[test]
fn an_ir3_step_is_captured_and_runs_on_the_a6xx_emulator() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join("dmonitoring.onnx");
    let art = dir.path().join("dm-ir3.pkl");
    let (art_s, rd) = (art.to_str().unwrap(), dir.path().join("dm-ir3.rd"));
    let o = pilot(&["compile", model.to_str().unwrap(), "--target", "qcom", "--qcom-compiler", "ir3", "-o", art_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = pilot(&["run", art_s, "--rd-capture", rd.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("the first step's submission"), "{}", stderr(&o));
    let d = decode(&rd);
    d.assert_clean("dmonitoring ir3");
    d.assert_shaders_decode("dmonitoring ir3");
    assert!(d.packets.iter().any(|p| p == "CP_EXEC_CS"), "{:?}", d.packets);
    let o = Command::new(env!("CARGO_BIN_EXE_pilot"))
        .args(["run", art_s, "--device", "fake-kgsl"])
        .env_remove("ASSERT_MIN_STEP_TIME")
        .env("PILOT_FAKE_EXEC", "cl")
        .output()
        .expect("pilot runs");
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.trim().lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("PILOT_FAKE_EXEC=cl, but the program is a6xx machine code"), "{err}");
}

#[test]
fn bad_capture_requests_are_one_line_errors_that_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join("policy.onnx");
    let art = dir.path().join("p.pkl");
    let o = pilot(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "qcom",
        "--qcom-compiler",
        "fake",
        "-o",
        art.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cpu_art = dir.path().join("cpu.pkl");
    let o = pilot(&["compile", model.to_str().unwrap(), "-o", cpu_art.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rd = dir.path().join("x.rd");
    let (art, cpu_art, rd_s, dir_s) =
        (art.to_str().unwrap(), cpu_art.to_str().unwrap(), rd.to_str().unwrap(), dir.path().to_str().unwrap());
    for (args, expected) in [
        (vec!["run", art, "--rd-capture", rd_s, "--device", "cpu"], "needs --device fake-kgsl, not `cpu`"),
        (vec!["run", art, "--rd-capture", dir_s], "is a directory"),
        (vec!["run", art, "--rd-capture", art], "is the input"),
        (vec!["run", cpu_art, "--rd-capture", rd_s], "fake-kgsl"),
    ] {
        let o = pilot(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!rd.exists(), "{args:?}: nothing is written");
    }
}
