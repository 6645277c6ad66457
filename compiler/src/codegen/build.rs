//! Compiling rendered kernels into relocatable ELF objects with the system's C compiler: one
//! translation unit and one object per kernel (the artifact gives every program its own record),
//! built in parallel on all cores.
//!
//! Compiler choice: an explicit path (`--cc`), else `$PILOT_CC`, else the first of `clang-19`,
//! `clang`, `cc` that runs. Cross-compiling (aarch64 on x86_64, say) needs clang.
//!
//! Flags: `-std=c11 -c -O3 -ffreestanding -fno-builtin -fno-stack-protector
//! -fno-asynchronous-unwind-tables -fno-math-errno -fno-trapping-math -ffp-contract=fast -fPIC`, no
//! global reassociation (the renderer enables it per reduction loop), and a conservative CPU:
//! x86_64 defaults to `-march=x86-64-v2` (SSE4.2, every x86_64 CPU since about 2009; `x86-64-v3`
//! or `native` only on request, since the artifact must run on the machine that loads it), aarch64
//! to `-mcpu=cortex-a75` (the comma three's Snapdragon 845: Kryo 385 ≈ Cortex-A75/A55).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::c::CKernel;
use crate::error::{CompileError, Result};

/// A CPU architecture the runtime's ELF loader executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The machine this process runs on, if it is one of ours.
    pub fn host() -> Option<Arch> {
        Arch::parse(std::env::consts::ARCH)
    }

    /// Parses the artifact's name of an architecture (`x86_64`, `aarch64`).
    pub fn parse(name: &str) -> Option<Arch> {
        match name {
            "x86_64" => Some(Arch::X86_64),
            "aarch64" | "arm64" => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The artifact's name (`target.arch`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The CPU flag used unless overridden.
    pub fn default_cpu(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86-64-v2",
            Arch::Aarch64 => "cortex-a75",
        }
    }
}

/// A C compiler ready to build for one architecture.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub cc: PathBuf,
    pub arch: Arch,
    /// Every flag but the input and output files.
    pub flags: Vec<String>,
}

const BASE_FLAGS: &[&str] = &[
    "-std=c11",
    "-c",
    "-O3",
    "-ffreestanding",
    "-fno-builtin",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=fast",
    "-fPIC",
    "-fno-ident",
    "-w",
];

fn runs(cc: &Path) -> Option<String> {
    let out = Command::new(cc).arg("--version").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Toolchain {
    /// Finds a compiler (see the module docs) for `arch`; `cpu` overrides the `-march` (x86_64) or
    /// `-mcpu` (aarch64) value.
    pub fn find(explicit: Option<&Path>, arch: Arch, cpu: Option<&str>) -> Result<Toolchain> {
        let candidates: Vec<PathBuf> = match explicit {
            Some(p) => vec![p.to_path_buf()],
            None => std::env::var_os("PILOT_CC")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .into_iter()
                .chain(["clang-19", "clang", "cc"].map(PathBuf::from))
                .collect(),
        };
        let mut tried = Vec::new();
        for cc in candidates {
            let Some(version) = runs(&cc) else {
                tried.push(cc.display().to_string());
                continue;
            };
            let clang = version.contains("clang");
            let mut flags: Vec<String> = BASE_FLAGS.iter().map(|s| s.to_string()).collect();
            if clang {
                flags.push(format!("--target={}-linux-gnu", arch.name()));
            } else if Arch::host() != Some(arch) {
                return Err(CompileError::Target {
                    cc: cc.display().to_string(),
                    arch: arch.name().to_string(),
                    reason: "cross-compiling needs clang (`apt-get install clang-19`)".to_string(),
                });
            }
            let cpu = cpu.unwrap_or(arch.default_cpu());
            flags.push(match arch {
                Arch::X86_64 => format!("-march={cpu}"),
                Arch::Aarch64 => format!("-mcpu={cpu}"),
            });
            return Ok(Toolchain { cc, arch, flags });
        }
        Err(CompileError::NoCompiler { tried: tried.join(", ") })
    }

    /// Compiles one translation unit in `dir` (a fresh directory) into an object.
    fn compile_one(&self, dir: &Path, k: &CKernel) -> Result<Vec<u8>> {
        let c = dir.join(format!("{}.c", k.name));
        let o = dir.join(format!("{}.o", k.name));
        std::fs::write(&c, &k.source).map_err(|e| CompileError::Io { path: c.display().to_string(), source: e })?;
        let out = Command::new(&self.cc).args(&self.flags).arg(&c).arg("-o").arg(&o).output().map_err(|e| {
            CompileError::Cc { kernel: k.name.clone(), cc: self.cc.display().to_string(), stderr: e.to_string() }
        })?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr);
            let mut first: String =
                text.lines().filter(|l| !l.trim().is_empty()).take(8).collect::<Vec<_>>().join(" | ");
            if first.len() > 800 {
                let cut = (0..=800).rev().find(|&i| first.is_char_boundary(i)).unwrap_or(0);
                first.truncate(cut);
                first.push_str(" ...");
            }
            return Err(CompileError::Cc {
                kernel: k.name.clone(),
                cc: self.cc.display().to_string(),
                stderr: format!("{} ({first})", out.status),
            });
        }
        std::fs::read(&o).map_err(|e| CompileError::Io { path: o.display().to_string(), source: e })
    }

    /// Compiles every kernel into an object, in parallel, in a temporary directory that is removed
    /// afterwards. On failure, the error of the first failing kernel (in order) is returned.
    pub fn compile_all(&self, kernels: &[CKernel]) -> Result<Vec<Vec<u8>>> {
        let dir = TempDir::new()?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(kernels.len()).max(1);
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let results: Mutex<Vec<Option<Result<Vec<u8>>>>> = Mutex::new((0..kernels.len()).map(|_| None).collect());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= kernels.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = self.compile_one(&dir.0, &kernels[i]);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                });
            }
        });
        let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = results.iter().position(|r| matches!(r, Some(Err(_)))) {
            return Err(results.into_iter().nth(e).flatten().expect("an error").expect_err("an error"));
        }
        Ok(results.into_iter().map(|r| r.expect("every kernel compiled").expect("no error")).collect())
    }
}

/// A fresh directory under the system's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("pilot-cc-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| CompileError::Io { path: path.display().to_string(), source: e })?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
