//! `--selftest`: run the artifact and onnxruntime on the same seeded inputs and compare
//! (scaled error `|got - ref| / max(1, |ref|)` ≤ 1e-4, the seed's tolerance; ≤ 1e-2 for artifacts that store images as half).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use pilot_compiler::lower::pin::Pins;
use pilot_core::npy;
use pilot_core::{Artifact, Session};

use crate::devices;
use crate::run::random_input;

/// Tolerance on the scaled error.
pub const TOLERANCE: f64 = 1e-4;
/// The tolerance where activations and weights are stored as half (`--float16`).
pub const TOLERANCE_FLOAT16: f64 = 1e-2;

const ORT_SCRIPT: &str = include_str!("../../scripts/ort_run.py");

/// The Python that has onnxruntime: `$PILOT_PYTHON`, then `.venv/bin/python` here or next to the
/// pilot checkout, then `python3`.
fn python() -> anyhow::Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("PILOT_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push(".venv/bin/python".into());
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"));
    candidates.push("python3".into());
    for c in candidates {
        let ok = Command::new(&c).args(["-c", "import onnxruntime, numpy"]).output().is_ok_and(|o| o.status.success());
        if ok {
            return Ok(c);
        }
    }
    bail!("--selftest needs Python with onnxruntime and numpy: run scripts/setup.sh or set PILOT_PYTHON")
}

/// Runs the selftest; Ok(false) when outputs differ. onnxruntime is given the inputs pinned at
/// compile time (`pinned`) with their pinned values.
pub fn selftest(model: &Path, artifact: &Path, null_target: bool, pinned: &Pins) -> anyhow::Result<bool> {
    if null_target {
        bail!("--selftest needs an artifact that runs: the null target runs nothing");
    }
    let python = python()?;
    let art = Artifact::open(artifact)?;
    let tolerance = if art.manifest.target.float16 { TOLERANCE_FLOAT16 } else { TOLERANCE };
    let device = devices::open(None, &art.manifest.target, Default::default())?;
    let mut session = Session::new(art, device)?;
    let dir = tempfile_dir()?;
    let mut feeds = Vec::new();
    let mut inputs = Vec::new();
    for (i, spec) in session.inputs().to_vec().iter().enumerate() {
        let data = random_input(spec, i as u64)?;
        let path = dir.join(format!("in{i}.npy"));
        npy::write(&path, &npy::Array { dtype: spec.dtype, shape: spec.shape.clone(), data: data.clone() })?;
        feeds.push(format!("{}={}", spec.name, path.display()));
        inputs.push(data);
    }
    for (i, (name, t)) in pinned.iter().enumerate() {
        let path = dir.join(format!("pinned{i}.npy"));
        npy::write(&path, &npy::Array { dtype: t.dtype, shape: t.shape.clone(), data: t.data.clone() })?;
        feeds.push(format!("{name}={}", path.display()));
    }
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    session.step(&refs)?;
    let out_dir = dir.join("ort");
    let st = Command::new(&python)
        .arg("-c")
        .arg(ORT_SCRIPT)
        .arg(model)
        .arg(&out_dir)
        .args(&feeds)
        .output()
        .context("running onnxruntime")?;
    if !st.status.success() {
        let err = String::from_utf8_lossy(&st.stderr);
        bail!("onnxruntime failed: {}", err.lines().last().unwrap_or("no output"));
    }
    let mut ok = true;
    for (k, (spec, got)) in session.output_specs().iter().zip(session.outputs()).enumerate() {
        let want = npy::read(out_dir.join(format!("{k}.npy")))?;
        let got = npy::Array { dtype: spec.dtype, shape: spec.shape.clone(), data: got.clone() };
        let (g, w) = (got.to_f64(), want.to_f64());
        if g.len() != w.len() {
            println!("selftest {}: {} elements, onnxruntime gives {}", spec.name, g.len(), w.len());
            ok = false;
            continue;
        }
        if spec.dtype.is_float() && !w.is_empty() && !w.iter().any(|v| v.is_finite()) {
            println!("selftest {}: onnxruntime's output holds no finite value, which proves nothing", spec.name);
            ok = false;
            continue;
        }
        let worst = g
            .iter()
            .zip(&w)
            .map(|(a, b)| if a.is_nan() && b.is_nan() { 0.0 } else { (a - b).abs() / b.abs().max(1.0) })
            .fold(0.0f64, |m, e| if e.is_nan() { f64::INFINITY } else { m.max(e) });
        let pass = worst <= tolerance;
        ok &= pass;
        println!("selftest {}: max scaled error {worst:.3e} {}", spec.name, if pass { "ok" } else { "FAILED" });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ok)
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("pilot-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
