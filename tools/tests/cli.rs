//! The `pilot` command end to end: run, load, inspect, gate and the exit-code contract, including a
//! corpus of malformed artifacts that must each be refused with exit 2 and one line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pilot_core::artifact::pickle::{self, Value};
use pilot_tests::demo;

fn pilot(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pilot"));
    cmd.args(args).env_remove("ASSERT_MIN_STEP_TIME").env_remove("ASSERT_MIN_LOAD_TIME").env_remove("BENCHMARK_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("pilot runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn demo_artifact(dir: &Path) -> PathBuf {
    let path = dir.join("policy.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    path
}

#[test]
fn run_prints_steps_and_writes_log_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    let log = dir.path().join("log.jsonl");
    let outs = dir.path().join("outs");
    let o = pilot(
        &[
            "run",
            art.to_str().unwrap(),
            "--steps",
            "3",
            "--benchmark-log",
            log.to_str().unwrap(),
            "--save-outputs",
            outs.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("enqueue") && l.contains("ms -- total run")).count(),
        3,
        "{stdout}"
    );
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["step"], i);
        assert!(l["wall_ms"].as_f64().unwrap() >= l["enqueue_ms"].as_f64().unwrap());
    }
    // The output name has a '/', which becomes '_'.
    let saved = pilot_tools::npy::read(outs.join("outputs_hidden.npy")).unwrap();
    assert_eq!(saved.shape, vec![1, demo::WIDTH]);
    assert_eq!(saved.dtype, pilot_core::DType::F32);
}

#[test]
fn run_with_input_file_matches_reference() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    let x: Vec<f32> = (0..demo::WIDTH).map(|i| i as f32 * 0.25 - 1.0).collect();
    let input = dir.path().join("desire.npy");
    let arr = pilot_tools::npy::Array {
        dtype: pilot_core::DType::F32,
        shape: vec![1, demo::WIDTH],
        data: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    pilot_tools::npy::write(&input, &arr).unwrap();
    let outs = dir.path().join("o");
    let arg = format!("desire={}", input.display());
    let o = pilot(
        &[
            "run",
            art.to_str().unwrap(),
            "--steps",
            "2",
            "--input",
            &arg,
            "--save-outputs",
            outs.to_str().unwrap(),
            "--threads",
            "2",
        ],
        &[],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (w, b) = demo::weights();
    let mut features = vec![0f32; demo::QUEUE * demo::WIDTH];
    demo::reference_step(&x, &mut features, &w, &b);
    let want = demo::reference_step(&x, &mut features, &w, &b);
    let got: Vec<f32> = pilot_tools::npy::read(outs.join("outputs_hidden.npy"))
        .unwrap()
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (g, r) in got.iter().zip(&want) {
        assert!((g - r).abs() <= 1e-5 * r.abs().max(1.0), "got {got:?}, want {want:?}");
    }

    // Wrong shape, unknown name, missing file: exit 2 with one line.
    let bad = pilot_tools::npy::Array { dtype: pilot_core::DType::F32, shape: vec![8], data: arr.data.clone() };
    pilot_tools::npy::write(&input, &bad).unwrap();
    for arg in
        [format!("desire={}", input.display()), format!("nope={}", input.display()), "desire=/nonexistent.npy".into()]
    {
        let o = pilot(&["run", art.to_str().unwrap(), "--input", &arg], &[]);
        assert_eq!(code(&o), 2, "{arg}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    }
}

#[test]
fn step_and_load_gates() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    let a = art.to_str().unwrap();
    assert_eq!(code(&pilot(&["run", a, "--steps", "2"], &[("ASSERT_MIN_STEP_TIME", "100000")])), 0);
    let o = pilot(&["run", a, "--steps", "2"], &[("ASSERT_MIN_STEP_TIME", "0.000001")]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("ASSERT_MIN_STEP_TIME"));
    assert_eq!(code(&pilot(&["run", a, "--steps", "2", "--assert-min-step-time", "0.000001"], &[])), 1);
    let o = pilot(&["load", a, "--times", "3", "--verify"], &[("ASSERT_MIN_LOAD_TIME", "100")]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap().lines().filter(|l| l.starts_with("load ")).count(), 3);
    assert_eq!(code(&pilot(&["load", a, "--times", "2"], &[("ASSERT_MIN_LOAD_TIME", "0.0000001")])), 1);
    // BENCHMARK_LOG=NAME writes NAME.jsonl.
    let name = dir.path().join("bench");
    let o = pilot(&["run", a, "--steps", "4"], &[("BENCHMARK_LOG", name.to_str().unwrap())]);
    assert_eq!(code(&o), 0);
    assert_eq!(std::fs::read_to_string(dir.path().join("bench.jsonl")).unwrap().lines().count(), 4);
}

#[test]
fn inspect_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    let o = pilot(&["inspect", art.to_str().unwrap(), "--json"], &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["target"]["backend"], "cpu");
    assert_eq!(j["kernel_count"], 1);
    assert_eq!(j["copies"], 3);
    assert_eq!(j["inputs"][0]["name"], "desire");
    assert_eq!(j["outputs"][0]["slices"]["hidden_state"], serde_json::json!([0, 8]));
    assert_eq!(j["buffers"]["weight"]["count"], 2);
    assert_eq!(j["checksums"], 2);
    let o = pilot(&["inspect", art.to_str().unwrap()], &[]);
    assert_eq!(code(&o), 0);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("1 kernels, 3 copies"), "{text}");
}

#[test]
fn unavailable_capabilities_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let art = demo_artifact(dir.path());
    for args in [
        vec!["compile", "model.onnx"],
        vec!["usb", "list"],
        vec!["run", art.to_str().unwrap(), "--device", "qcom"],
        vec!["run", art.to_str().unwrap(), "--device", "warp-drive"],
        vec!["run", art.to_str().unwrap(), "--steps", "0"],
        vec!["gate", "--baseline", "/nonexistent", "--current", "/nonexistent"],
        vec!["frobnicate"],
    ] {
        let o = pilot(&args, &[]);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn gate_flags_a_real_regression_only() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, f: &dyn Fn(usize) -> f64| {
        let p = dir.path().join(name);
        let text: String =
            (0..40).map(|i| format!("{{\"step\": {i}, \"wall_ms\": {}, \"enqueue_ms\": 0.1}}\n", f(i))).collect();
        std::fs::write(&p, text).unwrap();
        p
    };
    let base = write("a.jsonl", &|i| 10.0 + (i % 5) as f64 * 0.05);
    let same = write("b.jsonl", &|i| 10.0 + ((i + 2) % 5) as f64 * 0.05);
    let slow = write("c.jsonl", &|i| 13.0 + (i % 5) as f64 * 0.05);
    let gate = |cur: &Path| {
        pilot(
            &[
                "gate",
                "--baseline",
                base.to_str().unwrap(),
                "--current",
                cur.to_str().unwrap(),
                "--max-regression",
                "5%",
            ],
            &[],
        )
    };
    assert_eq!(code(&gate(&same)), 0);
    let o = gate(&slow);
    assert_eq!(code(&o), 1, "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!o.stdout.is_empty(), "the table is printed either way");
}

/// Writes a container around `payload` with the given records.
fn container(payload: &[u8], records: &[&[u8]]) -> Vec<u8> {
    let mut out = (payload.len() as i64).to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    for r in records {
        out.extend_from_slice(&(r.len() as i64).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

fn malformed_corpus(valid: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut random = Vec::with_capacity(4096);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        random.push(x as u8);
    }
    let n = i64::from_le_bytes(valid[..8].try_into().unwrap()) as usize;
    let payload = &valid[8..8 + n];
    let global = b"\x80\x05\x95\x15\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x8c\x04eval\x93\x8c\x01x\x85R.";
    let mut wrong_version = pickle::read(payload).unwrap().value;
    if let Value::Dict(e) = &mut wrong_version {
        e.iter_mut().find(|(k, _)| *k == Value::str("version")).unwrap().1 = Value::Int(99);
    }
    let mut bad_index = pickle::read(payload).unwrap().value;
    if let Value::Dict(e) = &mut bad_index {
        let inputs = &mut e.iter_mut().find(|(k, _)| *k == Value::str("inputs")).unwrap().1;
        if let Value::List(l) = inputs {
            if let Value::Dict(t) = &mut l[0] {
                t.iter_mut().find(|(k, _)| *k == Value::str("buffer")).unwrap().1 = Value::Int(1000);
            }
        }
    }
    let records_of = |bytes: &[u8]| -> Vec<Vec<u8>> {
        let mut recs = Vec::new();
        let mut at = 8 + n;
        while at < bytes.len() {
            let len = i64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            recs.push(bytes[at + 8..at + 8 + len].to_vec());
            at += 8 + len;
        }
        recs
    };
    let recs = records_of(valid);
    let rec_refs: Vec<&[u8]> = recs.iter().map(Vec::as_slice).collect();
    let mut negative_record = valid.to_vec();
    negative_record[8 + n..8 + n + 8].copy_from_slice(&(-5i64).to_le_bytes());
    vec![
        ("empty", vec![]),
        ("truncated header", vec![1, 0, 0]),
        ("huge pickle length", i64::MAX.to_le_bytes().to_vec()),
        ("negative pickle length", (-1i64).to_le_bytes().to_vec()),
        ("random bytes", random),
        ("GLOBAL opcode", container(global, &[])),
        (
            "pickle of a plain dict",
            container(&pickle::write(&Value::Dict(vec![(Value::str("a"), Value::Int(1))])).unwrap(), &[]),
        ),
        ("missing buffers", container(payload, &rec_refs[..rec_refs.len() - 1])),
        ("truncated buffer", valid[..valid.len() - 10].to_vec()),
        ("negative record length", negative_record),
        ("huge record length", {
            let mut v = container(payload, &[]);
            v.extend_from_slice(&(1i64 << 62).to_le_bytes());
            v
        }),
        ("extra record", {
            let mut v = valid.to_vec();
            v.extend_from_slice(&4i64.to_le_bytes());
            v.extend_from_slice(b"junk");
            v
        }),
        ("wrong version", container(&pickle::write(&wrong_version).unwrap(), &rec_refs)),
        ("input buffer out of range", container(&pickle::write(&bad_index).unwrap(), &rec_refs)),
        ("truncated pickle", container(&payload[..payload.len() / 2], &rec_refs)),
    ]
}

#[test]
fn malformed_artifacts_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let valid = std::fs::read(demo_artifact(dir.path())).unwrap();
    for (name, bytes) in malformed_corpus(&valid) {
        let path = dir.path().join("bad.pkl");
        std::fs::write(&path, &bytes).unwrap();
        for cmd in ["inspect", "load"] {
            let p = path.to_str().unwrap();
            let o =
                if cmd == "inspect" { pilot(&["inspect", p], &[]) } else { pilot(&["load", p, "--times", "1"], &[]) };
            let err = stderr(&o);
            assert_eq!(code(&o), 2, "{name} / {cmd}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{name} / {cmd}: {err}");
            assert!(err.starts_with("pilot: error: ") && !err.contains("panicked"), "{name} / {cmd}: {err}");
            // No part of the message is said twice (an error chain printing a cause its parent already shows).
            let parts: Vec<&str> = err.trim_end().split(": ").filter(|p| p.len() > 8).collect();
            for (i, part) in parts.iter().enumerate() {
                assert!(!parts[i + 1..].contains(part), "{name} / {cmd}: `{part}` repeats in {err}");
            }
        }
    }
    // A missing file and a directory are bad input too.
    for p in ["/nonexistent/x.pkl", "/"] {
        assert_eq!(code(&pilot(&["inspect", p], &[])), 2);
    }
}

#[test]
fn compile_refuses_bad_models_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pkl");
    let valid_prefix = b"\x08\x07\x12\x0cpilot-tests\x3a\x40\x0a\x10";
    for (name, bytes) in [
        ("empty.onnx", &b""[..]),
        ("random.onnx", &b"\x9c\xff\x01garbage that is not protobuf\x00\x00"[..]),
        ("truncated.onnx", &valid_prefix[..]),
    ] {
        let model = dir.path().join(name);
        std::fs::write(&model, bytes).unwrap();
        let o = pilot(&["compile", model.to_str().unwrap(), "-o", out.to_str().unwrap()], &[]);
        assert_eq!(code(&o), 2, "{name}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{name}: {}", stderr(&o));
        assert!(!out.exists(), "{name}: nothing is written on error");
    }
    let o = pilot(&["compile", "/nonexistent/model.onnx"], &[]);
    assert_eq!(code(&o), 2);
    let o = pilot(&["compile", "x.onnx", "--target", "usb+amd"], &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("needs --arch"), "{}", stderr(&o));
    let o = pilot(&["compile", "x.onnx", "--target", "qcom", "--qcom-compiler", "magic"], &[]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--qcom-compiler"), "{}", stderr(&o));
}
