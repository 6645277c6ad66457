//! pilot-regen: every generated file the repository commits, with the generator that writes it. One command
//! regenerates them all (`cargo run -p pilot-regen`); the test `regen/tests/fresh.rs` fails when a committed file
//! differs from a fresh generation.
//!
//! Register tables are not here: `pilot-regs-gen` renders them at build time and nothing of them is committed.
//!
//! | output | from | generator |
//! |---|---|---|
//! | `rdna3/src/tables.rs` | tinygrad 0.14.0's RDNA3 ISA tables (the venv's) | `scripts/rdna3_tables.py` |
//! | `rdna3/src/tables_gfx12.rs` | tinygrad 0.14.0's RDNA4 ISA tables (the venv's) | `scripts/rdna3_tables.py rdna4` |
//! | `compiler/src/onnx/proto.rs` | `compiler/src/onnx/onnx.proto` | protox + prost-build, then rustfmt |
//! | `capi/include/pilot.h` | `capi/src/ffi.rs`, `capi/src/error.rs` | cbindgen with `capi/cbindgen.toml` |

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One committed generated file: its path from the workspace root and the function that generates its text.
pub struct Output {
    pub path: &'static str,
    pub generate: fn(&Path) -> Result<String, String>,
}

/// Every committed generated file.
pub const OUTPUTS: &[Output] = &[
    Output { path: "rdna3/src/tables.rs", generate: rdna3_tables },
    Output { path: "rdna3/src/tables_gfx12.rs", generate: rdna4_tables },
    Output { path: "compiler/src/onnx/proto.rs", generate: onnx_proto },
    Output { path: "capi/include/pilot.h", generate: c_header },
];

/// The workspace root (this crate's parent folder).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("regen/ has a parent").to_path_buf()
}

/// The RDNA3 opcode tables: `scripts/rdna3_tables.py` run by the venv's Python, which has tinygrad 0.14.0.
fn rdna3_tables(root: &Path) -> Result<String, String> {
    isa_tables(root, &[])
}

/// The RDNA4 (gfx12) opcode tables: the same script with the argument `rdna4`.
fn rdna4_tables(root: &Path) -> Result<String, String> {
    isa_tables(root, &["rdna4"])
}

fn isa_tables(root: &Path, args: &[&str]) -> Result<String, String> {
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return Err(format!("{} is missing: run scripts/setup.sh to create the venv", python.display()));
    }
    let out = Command::new(&python)
        .arg(root.join("scripts/rdna3_tables.py"))
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!("scripts/rdna3_tables.py failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("scripts/rdna3_tables.py: {e}"))
}

const PROTO_HEADER: &str = "\
// @generated from onnx.proto (onnx 1.23.2, Apache-2.0; see onnx.proto next to this file) by
// protox 0.10 + prost-build 0.14. Do not edit by hand. Generated code is exempt from the project's
// lint and comment rules; the allows below cover this file only.
//
// Regenerate: cargo run -p pilot-regen (regen/src/lib.rs)
#![allow(clippy::all, clippy::pedantic, clippy::nursery, rustdoc::all, missing_docs)]

";

/// The ONNX protobuf types: `onnx.proto` compiled by protox (no system protoc), Rust from prost-build, formatted
/// with the workspace's rustfmt settings.
fn onnx_proto(root: &Path) -> Result<String, String> {
    let dir = root.join("compiler/src/onnx");
    let fds = protox::compile(["onnx.proto"], [&dir]).map_err(|e| format!("onnx.proto: {e}"))?;
    let tmp = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    prost_build::Config::new().out_dir(tmp.path()).compile_fds(fds).map_err(|e| format!("prost-build: {e}"))?;
    let code = std::fs::read_to_string(tmp.path().join("onnx.rs")).map_err(|e| format!("prost-build output: {e}"))?;
    rustfmt(root, &format!("{PROTO_HEADER}{code}"))
}

/// `text` through rustfmt with the workspace's `rustfmt.toml`.
fn rustfmt(root: &Path, text: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2021", "--config-path"])
        .arg(root.join("rustfmt.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("rustfmt (rustup component add rustfmt): {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().map_err(|e| format!("rustfmt: {e}"))?;
    writer.join().expect("rustfmt writer").map_err(|e| format!("rustfmt: {e}"))?;
    if !out.status.success() {
        return Err(format!("rustfmt failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("rustfmt: {e}"))
}

/// The C header of pilot's C ABI: cbindgen over the ABI's two source files, configured by `capi/cbindgen.toml`.
fn c_header(root: &Path) -> Result<String, String> {
    let capi = root.join("capi");
    let config = cbindgen::Config::from_file(capi.join("cbindgen.toml")).map_err(|e| format!("cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(capi.join("src/error.rs"))
        .with_src(capi.join("src/ffi.rs"))
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| format!("cbindgen: {e}"))
}
