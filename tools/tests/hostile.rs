//! `pilot` against hostile files and arguments: device nodes, FIFOs and sockets as inputs and outputs,
//! symlinks, an output that is the input, signals during a compile, and usage errors. Each case must
//! end in one line on stderr and exit 2 (or a correct run), never a hang, and leave nothing behind.
//! Device nodes are made inside a temporary folder (never the machine's own).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use pilot_compiler::onnx::proto as pb;
use prost::Message;

/// Runs pilot with a deadline: a hang (the bug these tests guard against) fails the test instead of
/// blocking it.
fn pilot_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pilot"));
    cmd.args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    for v in ["ASSERT_MIN_STEP_TIME", "ASSERT_MIN_LOAD_TIME", "BENCHMARK_LOG", "SELFTEST", "PILOT_MAX_MEMORY"] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("pilot starts");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("pilot {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn pilot(args: &[&str]) -> Output {
    pilot_in(Path::new("."), args, &[])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2 with exactly one line on stderr; returns the line.
fn refused(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "not one line: {e:?}");
    assert!(e.starts_with("pilot: error: "), "{e}");
    e
}

/// A model computing `y = x + x` for `x` of shape [1, 4], with the given input name.
pub fn add_model(input: &str) -> Vec<u8> {
    let value = |name: &str| pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto {
                    dim: [1, 4]
                        .map(|d| pb::tensor_shape_proto::Dimension {
                            value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .to_vec(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let node = pb::NodeProto {
        op_type: Some("Add".into()),
        name: Some("add".into()),
        input: vec![input.into(), input.into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let graph =
        pb::GraphProto { node: vec![node], input: vec![value(input)], output: vec![value("y")], ..Default::default() };
    pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A FIFO, a socket and (as root) a character device with /dev/null's numbers, all in `dir`.
fn specials(dir: &Path) -> Vec<PathBuf> {
    let fifo = dir.join("fifo");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
    let sock = dir.join("sock");
    // The socket file stays after the listener closes: a socket on disk is all these tests need.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let mut out = vec![fifo, sock];
    let node = dir.join("null");
    if mknod(&node, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), makedev(1, 3)).is_ok() {
        out.push(node);
    }
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn special_files_are_refused_as_every_kind_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, add_model("x")).unwrap();
    let art = dir.path().join("m.pkl");
    assert_eq!(pilot(&["compile", s(&model), "-o", s(&art), "--target", "null"]).status.code(), Some(0));
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, "{\"wall_ms\": 1}\n").unwrap();
    for p in specials(dir.path()) {
        let p = s(&p);
        let input = format!("x={p}");
        let cases: Vec<Vec<&str>> = vec![
            vec!["inspect", p],
            vec!["run", p],
            vec!["load", p],
            vec!["compile", p, "-o", "out.pkl"],
            vec!["run", s(&art), "--input", &input],
            vec!["gate", "--baseline", p, "--current", s(&log)],
        ];
        for args in cases {
            let e = refused(&pilot_in(dir.path(), &args, &[]));
            assert!(e.contains("not a regular file"), "{args:?}: {e}");
        }
    }
    assert!(!dir.path().join("out.pkl").exists());
}

#[test]
fn outputs_are_regular_files_written_through_links_never_replacing_them() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, add_model("x")).unwrap();
    for p in specials(dir.path()) {
        let kind = std::fs::symlink_metadata(&p).unwrap().file_type();
        let e = refused(&pilot(&["compile", s(&model), "-o", s(&p), "--target", "null"]));
        assert!(e.contains("not a regular file"), "{e}");
        assert_eq!(std::fs::symlink_metadata(&p).unwrap().file_type(), kind, "{} was replaced", p.display());
        let log = dir.path().join("log-link");
        let _ = std::fs::remove_file(&log);
        std::os::unix::fs::symlink(&p, &log).unwrap();
        let e = refused(&pilot(&["compile", s(&model), "-o", s(&log), "--target", "null"]));
        assert!(e.contains("not a regular file"), "{e}");
        if kind.is_char_device() {
            assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_char_device());
        }
    }
    let real = dir.path().join("real.pkl");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("link.pkl");
    std::os::unix::fs::symlink("real.pkl", &link).unwrap();
    let o = pilot(&["compile", s(&model), "-o", s(&link), "--target", "null"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::read(&real).unwrap().len() > 100, "the link's target holds the artifact");
    let o = pilot(&["run", s(&link), "--steps", "1", "--benchmark-log", s(&dir.path().join("fifo"))]);
    assert!(refused(&o).contains("not a regular file"));
}

#[test]
fn an_output_that_is_the_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.pkl");
    let bytes = add_model("x");
    std::fs::write(&model, &bytes).unwrap();
    // No -o: the default output is MODEL with the extension .pkl, the model itself here.
    let e = refused(&pilot(&["compile", s(&model), "--target", "null"]));
    assert!(e.contains("is the input"), "{e}");
    let hard = dir.path().join("hard.pkl");
    std::fs::hard_link(&model, &hard).unwrap();
    let e = refused(&pilot(&["compile", s(&model), "-o", s(&hard), "--target", "null"]));
    assert!(e.contains("is the input"), "{e}");
    assert_eq!(std::fs::read(&model).unwrap(), bytes);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "temporary files left behind");
}

/// A "C compiler" that answers `--version`, records its pid, and then sleeps: the compile is stuck in
/// codegen with its scratch directory made, ready to be interrupted.
fn sleeping_cc(dir: &Path) -> PathBuf {
    let cc = dir.join("slow-cc");
    let marker = dir.join("cc-started");
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo slow-cc; exit 0; }}\necho $$ > {}\nexec sleep 60\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    cc
}

#[test]
fn signals_during_a_compile_remove_its_scratch() {
    for signal in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let model = dir.path().join("m.onnx");
        std::fs::write(&model, add_model("x")).unwrap();
        let cc = sleeping_cc(dir.path());
        let mut child = Command::new(env!("CARGO_BIN_EXE_pilot"))
            .args(["compile", s(&model), "-o", s(&dir.path().join("m.pkl")), "--cc", s(&cc)])
            .env("TMPDIR", &tmp)
            .stderr(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let marker = dir.path().join("cc-started");
        let start = Instant::now();
        while std::fs::read_to_string(&marker).map_or(true, |t| !t.ends_with('\n')) {
            assert!(start.elapsed() < Duration::from_secs(60), "the compile never reached the C compiler");
            std::thread::sleep(Duration::from_millis(20));
        }
        let cc_pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 1, "the scratch directory exists");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = child.wait().unwrap();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(cc_pid), nix::sys::signal::Signal::SIGKILL);
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(signal as i32), "{status:?}");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "{signal}: scratch left behind: {left:?}");
        assert!(!dir.path().join("m.pkl").exists());
    }
}

#[test]
fn usage_errors_are_one_line() {
    for args in [
        vec![],
        vec!["compile"],
        vec!["frobnicate"],
        vec!["run", "x.pkl", "--steps", "many"],
        vec!["run", "x.pkl", "--bogus"],
        vec!["gate", "--baseline", "a"],
        vec!["smi"],
        vec!["run", "x.pkl", "--assert-min-step-time", "nan"],
        vec!["load", "x.pkl", "--assert-min-load-time", "NaN"],
        vec!["load", "x.pkl", "--assert-min-load-time", "-1"],
        vec!["gate", "--baseline", "a", "--current", "b", "--max-regression", "nan"],
        vec!["compile", "m.onnx", "--max-memory", "lots"],
    ] {
        refused(&pilot(&args));
    }
    let o = pilot_in(Path::new("."), &["run", "x.pkl"], &[("ASSERT_MIN_STEP_TIME", "nan")]);
    assert!(refused(&o).contains("positive number"));
    let help = pilot(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage"));
}

#[test]
fn errors_do_not_repeat_and_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pkl");
    std::fs::write(&empty, b"").unwrap();
    let e = refused(&pilot(&["inspect", s(&empty)]));
    assert_eq!(e.matches("the file is empty").count(), 1, "{e}");
    let e = refused(&pilot(&["inspect", s(&dir.path().join("missing.pkl"))]));
    assert_eq!(e.matches("No such file").count(), 1, "{e}");

    let model = dir.path().join("m.onnx");
    std::fs::write(&model, add_model("x\u{1b}[2J\nfake line")).unwrap();
    let art = dir.path().join("m.pkl");
    let o = pilot(&["compile", s(&model), "-o", s(&art), "--target", "null"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = pilot(&["inspect", s(&art)]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains('\u{1b}') && !text.contains("\nfake line"), "{text}");
    assert!(text.contains("x\\u{1b}[2J\\nfake line"), "{text}");
}

#[test]
fn opencl_compiler_chatter_stays_off_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, add_model("x")).unwrap();
    let art = dir.path().join("m.pkl");
    let o = pilot(&["compile", s(&model), "-o", s(&art), "--target", "cl"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let good = pilot(&["run", s(&art), "--steps", "1"]);
    if good.status.code() != Some(0) {
        pilot_test_support::opencl_missing(stderr(&good).trim());
        return;
    }
    // Break the kernel source in place (same length): the driver's compiler rejects it.
    let mut bytes = std::fs::read(&art).unwrap();
    let at = pilot_test_support::find_bytes(&bytes, b"__kernel").expect("OpenCL source in the artifact");
    bytes[at..at + 8].copy_from_slice(b"__kernal");
    std::fs::write(&art, &bytes).unwrap();
    let e = refused(&pilot(&["run", s(&art), "--steps", "1"]));
    assert!(!e.contains("generated"), "{e}");
}

#[test]
fn the_memory_limit_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, add_model("x")).unwrap();
    let out = dir.path().join("m.pkl");
    let args = ["compile", s(&model), "-o", s(&out), "--target", "null"];
    let e = refused(&pilot_in(dir.path(), &args, &[("PILOT_MAX_MEMORY", "24")]));
    assert!(e.contains("needs 32 bytes at run time") && e.contains("the limit is 24 bytes"), "{e}");
    let e = refused(&pilot(&[&args[..], &["--max-memory", "8"]].concat()));
    assert!(e.contains("input `x` of shape [1, 4] needs 16 bytes, the limit is 8 bytes"), "{e}");
    assert!(!out.exists());
    assert_eq!(pilot(&[&args[..], &["--max-memory", "1K"]].concat()).status.code(), Some(0));
}
