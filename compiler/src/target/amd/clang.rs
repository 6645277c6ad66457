//! Compiling OpenCL C for `amdgcn-amd-amdhsa` with clang into one code object; the clang driver links
//! it with its own `ld.lld --no-undefined -shared`.

use std::path::{Path, PathBuf};
use std::process::Command;

use pilot_core::Arch;

use crate::error::{CompileError, Result};
use crate::target::scratch::Scratch;

/// The clang to use: an explicit one (`--cc`), `$PILOT_CC`, then `clang-19`, `clang`. It must be
/// able to target AMD GPUs, which only clang can.
pub fn find_clang(explicit: Option<&Path>) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_path_buf()],
        None => std::env::var_os("PILOT_CC")
            .map(PathBuf::from)
            .into_iter()
            .chain(["clang-19", "clang"].map(PathBuf::from))
            .collect(),
    };
    let mut tried = Vec::new();
    for c in candidates {
        let out = Command::new(&c).arg("--version").output();
        if out.is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("clang")) {
            return Ok(c);
        }
        tried.push(c.display().to_string());
    }
    Err(CompileError::Tool(format!(
        "--target usb+amd needs clang with the AMDGPU target and lld (tried {}): apt-get install clang-19 lld-19",
        tried.join(", ")
    )))
}

/// Compiles `source` (every kernel of the model) for `arch` into one linked code object. One
/// translation unit: lld does not merge the metadata notes of several objects into one.
pub fn build(clang: &Path, arch: Arch, source: &str) -> Result<Vec<u8>> {
    let dir = Scratch::new("amd")?;
    let (cl, co) = (dir.dir.join("model.cl"), dir.dir.join("model.co"));
    std::fs::write(&cl, source).map_err(|source| CompileError::Io { path: cl.display().to_string(), source })?;
    let mut cmd = Command::new(clang);
    // OpenCL lets `/` and `sqrt` be off by 2.5 ULP; the CPU target and onnxruntime round them exactly, and a
    // quantizer's round-half-to-even flips on that difference.
    cmd.args(["-x", "cl", "-cl-std=CL1.2", "-O3", "-cl-fp32-correctly-rounded-divide-sqrt"])
        .args(["-target", "amdgcn-amd-amdhsa", "-nogpulib"])
        .arg(format!("-mcpu={arch}"))
        .arg(&cl)
        .arg("-o")
        .arg(&co);
    run(cmd, clang)?;
    std::fs::read(&co).map_err(|source| CompileError::Io { path: co.display().to_string(), source })
}

fn run(mut cmd: Command, clang: &Path) -> Result<()> {
    let out = cmd.output().map_err(|e| CompileError::Tool(format!("running {}: {e}", clang.display())))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first: Vec<&str> = err.lines().take(3).collect();
    Err(CompileError::Tool(format!("{} failed: {}", clang.display(), first.join(" | "))))
}
