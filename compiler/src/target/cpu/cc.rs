//! Compiling rendered C into relocatable objects with the system's C compiler, in parallel.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::isa::CpuTarget;
use crate::error::{CompileError, Result};
use crate::target::scratch::Scratch;

/// The compiler to use: an explicit one, `$PILOT_CC`, then `clang-19`, `clang`, `cc`.
pub fn find_cc(explicit: Option<&Path>, arch: &str) -> Result<PathBuf> {
    let cross = arch != std::env::consts::ARCH;
    let mut tried = Vec::new();
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_path_buf()],
        None => std::env::var_os("PILOT_CC")
            .map(PathBuf::from)
            .into_iter()
            .chain(["clang-19", "clang"].map(PathBuf::from))
            .chain((!cross).then(|| PathBuf::from("cc")))
            .collect(),
    };
    for c in candidates {
        if Command::new(&c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(c);
        }
        tried.push(c.display().to_string());
    }
    Err(CompileError::Tool(format!(
        "no C compiler found for {arch} (tried {}): install one with `apt-get install clang-19`{}",
        tried.join(", "),
        if cross { " (cross-compiling needs clang)" } else { "" }
    )))
}

/// Flags for `cpu`. Host builds use `-march=native` unless `--cpu` names a baseline: the artifact is
/// for the machine that compiled it (as tinygrad's CPU backend does); aarch64 cross builds target
/// the comma device's Kryo 385 ([`CpuTarget::flags`]).
pub(super) fn flags(cc: &Path, cpu: &CpuTarget) -> Vec<String> {
    let arch = cpu.arch.as_str();
    let mut f: Vec<String> = [
        "-c",
        "-O3",
        "-ffreestanding",
        "-fno-builtin",
        "-fno-stack-protector",
        "-fno-asynchronous-unwind-tables",
        "-fno-math-errno",
        "-fno-trapping-math",
        "-ffp-contract=fast",
        "-fPIC",
        "-std=gnu11",
        "-w",
    ]
    .map(String::from)
    .to_vec();
    let is_clang = cc.file_name().is_some_and(|n| n.to_string_lossy().contains("clang"));
    if arch != std::env::consts::ARCH && is_clang {
        f.push(format!("--target={arch}-linux-gnu"));
    }
    f.extend(cpu.flags());
    f
}

/// Compiles each `(name, source)` into an object; returns the objects in order.
pub fn compile_all(sources: &[(String, String)], cc: &Path, cpu: &CpuTarget) -> Result<Vec<Vec<u8>>> {
    let scratch = Scratch::new("cc")?;
    let dir = &scratch.dir;
    let flags = flags(cc, cpu);
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(sources.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Vec<u8>>>>> = sources.iter().map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= sources.len() {
                    break;
                }
                let r = compile_one(dir, &sources[i].0, &sources[i].1, cc, &flags);
                *results[i].lock().expect("no poisoning: compile_one does not panic") = Some(r);
            });
        }
    });
    results.into_iter().map(|m| m.into_inner().expect("no poisoning").expect("every index ran")).collect()
}

fn compile_one(dir: &Path, name: &str, source: &str, cc: &Path, flags: &[String]) -> Result<Vec<u8>> {
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    std::fs::write(&c, source).map_err(|source| CompileError::Io { path: c.display().to_string(), source })?;
    let out = Command::new(cc)
        .args(flags)
        .arg(&c)
        .arg("-o")
        .arg(&o)
        .output()
        .map_err(|e| CompileError::Tool(format!("running {}: {e}", cc.display())))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first: Vec<&str> = err.lines().take(3).collect();
        return Err(CompileError::Tool(format!("{} failed on kernel {name}: {}", cc.display(), first.join(" | "))));
    }
    std::fs::read(&o).map_err(|source| CompileError::Io { path: o.display().to_string(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_registered_while_alive_and_removed_when_dropped() {
        let s = Scratch::new("cc").unwrap();
        std::fs::write(s.dir.join("k0.c"), "int x;").unwrap();
        assert!(pilot_core::fsio::registered().contains(&s.dir));
        let dir = s.dir.clone();
        drop(s);
        assert!(!dir.exists());
        assert!(!pilot_core::fsio::registered().contains(&dir));
    }
}
