//! `pilot run --profile` / `--profile-trace` and `pilot compile --cpu` end to end on a test model.

use std::process::{Command, Output};

use pilot_tests::models::test_models;

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot"))
        .args(args)
        .env_remove("ASSERT_MIN_STEP_TIME")
        .output()
        .expect("pilot runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn profile_reports_rates_and_bytes_and_writes_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join("dmonitoring.onnx");
    let art = dir.path().join("dm.pkl");
    let o = pilot(&["compile", model.to_str().unwrap(), "-o", art.to_str().unwrap(), "--cpu", "x86-64-v3"]);
    assert!(o.status.success(), "{}", text(&o));
    let trace = dir.path().join("trace.json");
    let o = pilot(&[
        "run",
        art.to_str().unwrap(),
        "--steps",
        "3",
        "--threads",
        "1",
        "--profile",
        "--profile-trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let table: Vec<&str> = out.lines().skip_while(|l| !l.contains("GFLOP/s")).collect();
    assert!(table[0].contains("ms/step") && table[0].contains("MB"), "{out}");
    let kernels: Vec<&str> = table[1..].iter().copied().filter(|l| !l.ends_with("total")).collect();
    assert!(kernels.len() >= 3, "{out}");
    // Every kernel with floating-point work shows a rate: the compiler recorded its FLOPs.
    let rated =
        kernels.iter().filter(|l| l.split_whitespace().nth(2).is_some_and(|g| g.parse::<f64>().is_ok())).count();
    assert!(rated >= 3, "{out}");
    assert!(table.last().unwrap().ends_with("total"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert_eq!(events.len(), kernels.len(), "one event per step operation");
    assert!(events.iter().all(|e| e["ph"] == "X" && e["dur"].as_f64().unwrap() >= 0.0));
    assert!(events.iter().any(|e| e["args"]["flops"].as_u64().unwrap_or(0) > 0));
}

#[test]
fn bad_cpu_names_and_targets_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join("dmonitoring.onnx");
    let art = dir.path().join("dm.pkl");
    for args in [vec!["--cpu", "x86-64 -O0"], vec!["--cpu", "cortex-a75", "--target", "cl"]] {
        let mut all = vec!["compile", model.to_str().unwrap(), "-o", art.to_str().unwrap()];
        all.extend(args.iter().copied());
        let o = pilot(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stderr).trim_end().lines().count(), 1, "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("--cpu"), "{}", text(&o));
        assert!(!art.exists());
    }
    let o = pilot(&["run", art.to_str().unwrap(), "--profile-trace", "t.json"]);
    assert_eq!(o.status.code(), Some(2), "--profile-trace needs --profile: {}", text(&o));
}
