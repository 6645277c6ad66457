//! Bit flips across every region of compiled cpu, cl and qcom artifacts never crash `pilot`: `load` and
//! `run` (subprocesses, each with a timeout) exit 0, 1 or 2 with one line on stderr — never a signal, a
//! panic or a hang. qcom runs on the fake KGSL (`--device fake-kgsl`).
//!
//! Flipped as they are, bits anywhere (pickle, length fields, padding, weights, code, the integrity
//! record) must be caught on load. Resealed (the integrity record recomputed, as someone who knows the
//! format would), flips of the pickle, the weights and the padding must be refused by verification or
//! be harmless. Code is only flipped unsealed: changed code that is resealed is what a signature is for.
//! `PILOT_MUTATIONS=N` multiplies the number of flips (default 1).

use std::io::Read;
use std::ops::Range;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pilot_core::artifact::container;
use pilot_core::artifact::pickle::{self, Value};
use pilot_core::Artifact;

/// Longest a `load` or `run` of these tiny artifacts may take before it counts as a hang.
const TIMEOUT: Duration = Duration::from_secs(120);

/// A small convolutional model: Conv (4 -> 8 channels, stride 2), Relu, Flatten, MatMul.
const MODEL_PY: &str = r#"
import sys, numpy as np
from onnx import helper, numpy_helper, TensorProto, save
rng = np.random.default_rng(0)
w = numpy_helper.from_array((rng.standard_normal((8, 4, 3, 3)) * 0.2).astype(np.float32), "w")
b = numpy_helper.from_array(np.linspace(-0.1, 0.1, 8).astype(np.float32), "b")
f = numpy_helper.from_array((rng.standard_normal((128, 8)) * 0.1).astype(np.float32), "f")
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Flatten", ["r"], ["flat"]),
         helper.make_node("MatMul", ["flat", "f"], ["y"])]
g = helper.make_graph(nodes, "mutation", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [w, b, f])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
"#;

struct Outcome {
    /// The exit code, or `Err` with what went wrong instead (a signal, a hang).
    code: Result<i32, String>,
    stderr: String,
}

/// Runs `pilot args` with a timeout.
fn pilot(args: &[&str]) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pilot"))
        .args(args)
        .env_remove("ASSERT_MIN_STEP_TIME")
        .env_remove("ASSERT_MIN_LOAD_TIME")
        .env_remove("BENCHMARK_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pilot starts");
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = reader.join().unwrap();
    let code = match status {
        None => Err(format!("no exit after {TIMEOUT:?}")),
        Some(s) => s.code().ok_or_else(|| format!("killed by signal {}", s.signal().unwrap_or(0))),
    };
    Outcome { code, stderr }
}

/// Compiles the model for `target` with `flags`.
fn compile(dir: &Path, target: &str, flags: &[&str]) -> PathBuf {
    let model = dir.join("model.onnx");
    if !model.exists() {
        let python = pilot_test_support::venv_python_or_fail();
        let o = Command::new(python).arg("-c").arg(MODEL_PY).arg(&model).output().unwrap();
        assert!(o.status.success(), "making the model: {}", String::from_utf8_lossy(&o.stderr));
    }
    let out = dir.join(format!("{target}.pkl"));
    let mut args = vec!["compile", model.to_str().unwrap(), "-o", out.to_str().unwrap(), "--target", target];
    args.extend_from_slice(flags);
    let o = pilot(&args);
    assert_eq!(o.code, Ok(0), "compile {target}: {}", o.stderr);
    out
}

/// Named byte ranges of an artifact: the pickle, the record length fields, padding, weights, code, and
/// the integrity record.
fn regions(path: &Path) -> Vec<(&'static str, Range<usize>)> {
    let bytes = std::fs::read(path).unwrap();
    let c = container::parse(&bytes).unwrap();
    let m = Artifact::open(path).unwrap().manifest;
    let mut out = vec![("pickle", c.pickle.clone()), ("pickle length", 0..8)];
    for (i, r) in c.records.iter().enumerate() {
        out.push(("record length", r.start - 8..r.start));
        let kind = if i + 1 == c.records.len() {
            "integrity"
        } else if m.pads.contains(&i) {
            "padding"
        } else if m.programs.iter().any(|p| p.blob == i) {
            "code"
        } else {
            "weights"
        };
        if !r.is_empty() {
            out.push((kind, r.clone()));
        }
    }
    out
}

/// xorshift64: reproducible flips.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn scale() -> usize {
    std::env::var("PILOT_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Whether the pristine artifact runs on `device`; `false` (skip) when this machine has no OpenCL, a failure
/// under `PILOT_REQUIRE=1`.
fn runs(path: &Path, device: &str) -> bool {
    let o = pilot(&["run", path.to_str().unwrap(), "--steps", "1", "--device", device]);
    if o.code != Ok(0) && o.stderr.contains("OpenCL") {
        pilot_test_support::opencl_missing(format!("--device {device}: {}", o.stderr.trim()));
        return false;
    }
    assert_eq!(o.code, Ok(0), "the pristine artifact must run on {device}: {}", o.stderr);
    true
}

/// `bytes` with the payload edited by `edit` (given the first dispatch), re-framed and resealed.
fn edit_first_dispatch(bytes: &[u8], edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let c = container::parse(bytes).unwrap();
    let mut payload = pickle::read(&bytes[c.pickle.clone()]).unwrap().value;
    let Value::Dict(top) = &mut payload else { panic!("the payload is a dict") };
    let step = &mut top.iter_mut().find(|(k, _)| *k == Value::str("step")).expect("a step").1;
    let Value::List(ops) = step else { panic!("step is a list") };
    let op = ops.iter_mut().find_map(|op| match op {
        Value::Dict(d) if d.iter().any(|(k, v)| *k == Value::str("op") && *v == Value::str("dispatch")) => Some(d),
        _ => None,
    });
    edit(op.expect("a dispatch"));
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

/// The hand-made crashes of a hostile user on a compiled artifact (a dispatch's grid doubled, or its
/// `global[1]` tripled, which corrupted the heap of the fake KGSL): each `run` is one line, exit 2.
fn hand_edits(path: &Path, device: &str) {
    let good = std::fs::read(path).unwrap();
    let ints = |v: &mut Value| -> Vec<i64> {
        let (Value::List(items) | Value::Tuple(items)) = v else { panic!("a list") };
        items.iter().map(|x| if let Value::Int(i) = x { *i } else { panic!("an int") }).collect()
    };
    let get = |d: &mut Vec<(Value, Value)>, key: &str| -> usize {
        d.iter().position(|(k, _)| *k == Value::str(key)).unwrap()
    };
    type Edit = Box<dyn Fn(&mut Vec<(Value, Value)>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "doubled global size",
            Box::new(move |d| {
                let g = get(d, "global");
                let mut dims = ints(&mut d[g].1);
                dims[0] *= 2;
                d[g].1 = Value::List(dims.into_iter().map(Value::Int).collect());
            }),
            "was compiled for",
        ),
        (
            "global[1] tripled",
            Box::new(move |d| {
                let g = get(d, "global");
                let mut dims = ints(&mut d[g].1);
                dims[1] *= 3;
                d[g].1 = Value::List(dims.into_iter().map(Value::Int).collect());
            }),
            "was compiled for",
        ),
    ];
    for (name, edit, needle) in cases {
        let bad = path.with_extension("edited.pkl");
        std::fs::write(&bad, edit_first_dispatch(&good, edit)).unwrap();
        let o = pilot(&["run", bad.to_str().unwrap(), "--steps", "1", "--device", device]);
        assert_eq!(o.code, Ok(2), "{device} / {name}: {}", o.stderr);
        assert!(
            o.stderr.contains(needle) && o.stderr.trim_end().lines().count() == 1,
            "{device} / {name}: {}",
            o.stderr
        );
    }
}

/// Flips bits in every region of `path` and checks `load` and `run` on `device` each time.
fn mutate(path: &Path, device: &str, seed: u64) {
    if !runs(path, device) {
        return;
    }
    hand_edits(path, device);
    let good = std::fs::read(path).unwrap();
    let bad_path = path.with_extension("bad.pkl");
    let bad = bad_path.to_str().unwrap();
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for (region, range) in regions(path) {
        let resealed_flips = match region {
            "pickle" => 16,
            "weights" => 3,
            "padding" => 1,
            _ => 0,
        };
        for (reseal, flips) in [(false, 1), (true, resealed_flips)] {
            for _ in 0..flips * scale() {
                let mut bytes = good.clone();
                let at = range.start + rng.below(range.len());
                bytes[at] ^= 1 << rng.below(8);
                if reseal && !pilot_tests::reseal(&mut bytes) {
                    continue;
                }
                std::fs::write(&bad_path, &bytes).unwrap();
                for cmd in [
                    &["load", bad, "--times", "1", "--verify", "--device", device][..],
                    &["run", bad, "--steps", "2", "--device", device],
                ] {
                    let o = pilot(cmd);
                    let what =
                        format!("{region} byte {at} ({}) / {}", if reseal { "resealed" } else { "as flipped" }, cmd[0]);
                    let one_line = o.stderr.trim_end().lines().count() <= 1;
                    match o.code {
                        Ok(0 | 1) if reseal => {}
                        Ok(2) if one_line && !o.stderr.contains("panicked") => {}
                        _ => failures.push(format!("{what}: {:?}: {}", o.code, o.stderr.trim_end())),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{device}: {} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn flipped_cpu_artifacts_never_crash() {
    let dir = tempfile::tempdir().unwrap();
    mutate(&compile(dir.path(), "cpu", &[]), "cpu", 0x9e37_79b9_7f4a_7c15);
}

#[test]
fn flipped_cl_artifacts_never_crash() {
    let dir = tempfile::tempdir().unwrap();
    mutate(&compile(dir.path(), "cl", &["--image"]), "cl", 0x2545_f491_4f6c_dd1d);
}

#[test]
fn flipped_qcom_artifacts_never_crash_the_fake_kgsl() {
    let dir = tempfile::tempdir().unwrap();
    let art = compile(dir.path(), "qcom", &["--qcom-compiler", "fake", "--image", "--float16"]);
    mutate(&art, "fake-kgsl", 0x6a09_e667_f3bc_c908);
}
